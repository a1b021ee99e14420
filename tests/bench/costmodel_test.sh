#!/usr/bin/env bash
# ulticode-costmodel against the test servers (scripts/test.sh starts them):
# every stage runs, and every business transaction it commits flows through
# every later stage (published, read, taken into the inbox, sequenced,
# proved, confirmed), so the model's stages stay connected. Without it a
# broken benchmark tool would only be found by the next benchmark.
set -euo pipefail
build="${1:?usage: costmodel_test.sh <build dir>}"
if [[ -z "${ULTICODE_TEST_PG_PORT:-}" || -z "${ULTICODE_TEST_REDIS_PORT:-}" ]]; then
  echo "costmodel_test: ULTICODE_TEST_PG_PORT / ULTICODE_TEST_REDIS_PORT not set (run scripts/test.sh)" >&2
  [[ "${CI:-}" == true ]] && exit 1
  exit 0
fi
port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
log="$(mktemp)"
trap 'rm -f -- "${log}"' EXIT
if ! out="$("${build}/bench/ulticode-costmodel" --pg-host="${ULTICODE_TEST_PG_HOST:-127.0.0.1}" \
  --pg-port="${ULTICODE_TEST_PG_PORT}" \
  --redis-addr="${ULTICODE_TEST_REDIS_HOST:-127.0.0.1}:${ULTICODE_TEST_REDIS_PORT}" \
  --redis-user="${ULTICODE_TEST_REDIS_USER:-}" \
  --redis-password-file="${ULTICODE_TEST_REDIS_PASSWORD_FILE:-}" \
  --grpc-port="${port}" --seconds=1s --txn-threads=2 2>"${log}")"; then
  echo "costmodel_test: ulticode-costmodel failed:" >&2
  tail -n 20 -- "${log}" >&2
  exit 1
fi
python3 - "${out}" <<'PY'
import json
import sys

r = json.loads(sys.argv[1])
flow = ["txn", "publish", "xadd", "xread", "inbox", "log", "prove", "confirm"]
errors = [f"stage {s} missing" for s in ["grpc", "crypto"] + flow if s not in r]
if not errors:
    if r["grpc"].get("failed", 1) != 0:
        errors.append(f"grpc: calls to the no-op server failed: {r['grpc']}")
    if r["grpc"]["ops"] <= 0 or r["grpc"]["cpu_us_per_op"].get("server", 0) <= 0:
        errors.append(f"grpc: no calls or no server CPU: {r['grpc']}")
    for k in ("sign_us", "verify_us", "sha256_us", "inclusion_verify_us"):
        if r["crypto"].get(k, 0) <= 0:
            errors.append(f"crypto: {k} not measured")
    txns = r["txn"]["ops"]
    if txns <= 0:
        errors.append("txn: no business transaction committed")
    for s in flow[1:]:
        if r[s]["ops"] != txns:
            errors.append(f"{s}: {r[s]['ops']} operations, but {txns} transactions committed")
    for s in flow:
        if r[s]["cpu_us_per_op"]["client"] <= 0:
            errors.append(f"{s}: no CPU measured")
if errors:
    sys.exit("costmodel_test: " + "; ".join(errors))
print(f"costmodel_test: ok, {r['txn']['ops']} transactions through every stage")
PY
