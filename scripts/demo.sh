#!/usr/bin/env bash
# The scripted demo run by `scripts/run-local.sh --demo` against the running
# mesh. Exits 0 only if every step and every expected result holds.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
grpcurl() { /usr/bin/python3 "${repo}/scripts/grpcurl.py" -plaintext "$@"; }
auth="${ULTICODE_LOCAL_AUTH_GRPC:-127.0.0.1:50051}"
app="${ULTICODE_LOCAL_APP_GRPC:-127.0.0.1:50052}"
admin="${ULTICODE_LOCAL_ADMIN_GRPC:-127.0.0.1:50053}"

for target in "${auth}" "${app}" "${admin}"; do
  echo "== ${target}: services"
  grpcurl "${target}" list
  grpcurl "${target}" grpc.health.v1.Health/Check | grep -q '"SERVING"'
done
echo "demo: all three services serve health and reflection"
