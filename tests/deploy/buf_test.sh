#!/usr/bin/env bash
# The gRPC contract (proto/, buf.yaml): `buf lint` passes, and `buf breaking`
# finds no break against the protos of the previous commit (HEAD~1), or of
# ULTICODE_BUF_AGAINST (any git ref, e.g. origin/main for a branch).
# buf is npm @bufbuild/buf, pinned in package-lock.json. ctest label: deploy.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd -P)"
buf="${root}/node_modules/.bin/buf"
cd "${root}"
if [[ ! -x "${buf}" ]]; then
  echo "buf_test: ${buf} is missing: run 'npm ci' (scripts/test.sh does)" >&2
  exit 1
fi
against="${ULTICODE_BUF_AGAINST:-HEAD~1}"
if ! git rev-parse -q --verify "${against}^{commit}" >/dev/null; then
  echo "buf_test: no commit ${against} to compare the protos with" \
    "(a shallow clone? fetch more history, or set ULTICODE_BUF_AGAINST)" >&2
  exit 1
fi
"${buf}" lint
echo "buf lint: ok"
# subdir=proto: older commits have no buf.yaml; proto/ is the module root.
"${buf}" breaking --against ".git#ref=$(git rev-parse "${against}"),subdir=proto"
echo "buf breaking against ${against} ($(git rev-parse --short "${against}")): no breaking change"
