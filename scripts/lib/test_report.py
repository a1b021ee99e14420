#!/usr/bin/python3
"""The time of a ctest run, by label: what scripts/test.sh prints at its end.

Usage: test_report.py BUILD_DIR JUNIT_XML

Reads each test's labels (ctest --show-only=json-v1) and its time and result
(the JUnit file ctest --output-junit wrote), and prints one line per label
(tests, the seconds its tests took added up, the longest) and the slowest
tests. Tests run side by side, so a label's seconds add up to more than the
wall time it spanned.
"""
import collections
import json
import subprocess
import sys
import xml.etree.ElementTree as ElementTree


def labels_of(build_dir):
    shown = subprocess.run(["ctest", "--test-dir", build_dir, "--show-only=json-v1"],
                           capture_output=True, text=True, check=True).stdout
    labels = {}
    for test in json.loads(shown)["tests"]:
        props = {p["name"]: p["value"] for p in test.get("properties", [])}
        labels[test["name"]] = props.get("LABELS", ["(none)"])
    return labels


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: test_report.py BUILD_DIR JUNIT_XML")
    build_dir, junit = sys.argv[1:]
    labels = labels_of(build_dir)
    times, failed = {}, []
    for case in ElementTree.parse(junit).getroot().iter("testcase"):
        name = case.get("name")
        times[name] = float(case.get("time", "0"))
        if case.find("failure") is not None or case.get("status") == "fail":
            failed.append(name)
    by_label = collections.defaultdict(list)
    for name, seconds in times.items():
        for label in labels.get(name, ["(none)"]):
            by_label[label].append((seconds, name))
    for label in sorted(by_label, key=lambda l: -sum(s for s, _ in by_label[l])):
        runs = sorted(by_label[label], reverse=True)
        print(f"[ulticode] label {label}: {len(runs)} tests, {sum(s for s, _ in runs):.0f}s "
              f"of test time; longest {runs[0][1]} {runs[0][0]:.0f}s")
    slowest = sorted(((s, n) for n, s in times.items()), reverse=True)[:8]
    print("[ulticode] slowest: " + ", ".join(f"{n} {s:.0f}s" for s, n in slowest))
    if failed:
        print("[ulticode] failed: " + ", ".join(sorted(failed)))


if __name__ == "__main__":
    main()
