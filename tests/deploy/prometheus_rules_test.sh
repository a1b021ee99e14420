#!/usr/bin/env bash
# The alerting and recording rules (deploy/prometheus/): promtool accepts
# them, every alert's unit tests pass (it fires when it should and stays quiet
# when it should), and every alert has a severity, a summary, a description,
# a runbook link to an existing section of docs/runbook.md, and a test.
# ctest label: deploy.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd -P)"
rules="${root}/deploy/prometheus/ulticode-rules.yml"
promtool check rules "${rules}"
(cd "${root}/deploy/prometheus/tests" && promtool test rules ulticode-rules.test.yml)
/usr/bin/python3 - "${root}" <<'PY'
import re, sys, yaml
root = sys.argv[1]
rules = yaml.safe_load(open(f"{root}/deploy/prometheus/ulticode-rules.yml"))
tests = open(f"{root}/deploy/prometheus/tests/ulticode-rules.test.yml").read()
book = open(f"{root}/docs/runbook.md").read()
sections = {h.lower() for h in re.findall(r"^## (\w+)$", book, re.M)}
problems = []
alerts = [r for g in rules["groups"] for r in g["rules"] if "alert" in r]
for r in alerts:
    name = r["alert"]
    if r.get("labels", {}).get("severity") not in ("critical", "warning"):
        problems.append(f"{name}: severity label missing or not critical/warning")
    ann = r.get("annotations", {})
    for key in ("summary", "description", "runbook_url"):
        if not ann.get(key):
            problems.append(f"{name}: annotation {key} missing")
    anchor = ann.get("runbook_url", "").partition("#")[2]
    if not ann.get("runbook_url", "").startswith("docs/runbook.md#") or anchor not in sections:
        problems.append(f"{name}: runbook_url does not point at a section of docs/runbook.md")
    if f"alertname: {name}\n" not in tests:
        problems.append(f"{name}: no promtool unit test")
    fires = re.search(rf"alertname: {name}\n\s+exp_alerts:\n\s+- exp_labels", tests)
    quiet = re.search(rf"alertname: {name}\n\s+exp_alerts: \[\]", tests)
    if not (fires and quiet):
        problems.append(f"{name}: tests must show it firing and staying quiet")
if problems:
    print("\n".join(problems))
    sys.exit(1)
print(f"{len(alerts)} alerts: each with severity, summary, description, runbook section, and tests")
PY
