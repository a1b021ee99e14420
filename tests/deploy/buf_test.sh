#!/usr/bin/env bash
# The gRPC contract (proto/, buf.yaml): `buf lint` passes, our own API style
# check (tests/deploy/api_style_check.py) passes, and `buf breaking` finds no
# break against the protos of the previous commit (HEAD~1), or of
# ULTICODE_BUF_AGAINST (any git ref, e.g. origin/main for a branch).
#
# The protos import Google's API types, which proto/CMakeLists.txt gathers
# from Debian packages into <build>/proto/googleapis: buf reads them from a
# workspace made here of proto/ and that directory (never linted).
#
# proto/api-epoch numbers the contract's deliberate breaks: a commit whose
# epoch differs from the one it is compared with is the new baseline, and
# is only linted (there is one such commit per epoch; docs/api.md).
# buf is npm @bufbuild/buf, pinned in package-lock.json. ctest label: deploy.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd -P)"
build="${1:-${root}/build}"
buf="${root}/node_modules/.bin/buf"
googleapis="${build}/proto/googleapis"
cd "${root}"
if [[ ! -x "${buf}" ]]; then
  echo "buf_test: ${buf} is missing: run 'npm ci' (scripts/test.sh does)" >&2
  exit 1
fi
if [[ ! -f "${googleapis}/google/rpc/error_details.proto" ]]; then
  echo "buf_test: ${googleapis} is missing: configure the build first (scripts/test.sh does)" >&2
  exit 1
fi
against="${ULTICODE_BUF_AGAINST:-HEAD~1}"
if ! git rev-parse -q --verify "${against}^{commit}" >/dev/null; then
  echo "buf_test: no commit ${against} to compare the protos with" \
    "(a shallow clone? fetch more history, or set ULTICODE_BUF_AGAINST)" >&2
  exit 1
fi
tmp="$(mktemp -d)"
trap 'rm -rf "${tmp}"' EXIT

# workspace <dir> <proto dir>: buf.yaml's rules over the protos and Google's.
workspace() {
  mkdir -p "$1"
  cp -r "$2" "$1/proto"
  cp -r "${googleapis}" "$1/googleapis"
  sed -e 's|^  - path: proto$|  - path: proto\n  - path: googleapis|' \
    -e 's|^lint:$|lint:\n  ignore:\n    - googleapis|' \
    -e 's|^breaking:$|breaking:\n  ignore:\n    - googleapis|' "${root}/buf.yaml" >"$1/buf.yaml"
}

workspace "${tmp}/new" "${root}/proto"
(cd "${tmp}/new" && "${buf}" lint)
echo "buf lint: ok"
(cd "${tmp}/new" && "${buf}" build --exclude-imports -o "${tmp}/image.json")
/usr/bin/python3 "${root}/tests/deploy/api_style_check.py" "${tmp}/image.json"

mkdir -p "${tmp}/old"
git archive "$(git rev-parse "${against}")" proto | tar -x -C "${tmp}/old"
epoch="$(cat proto/api-epoch)"
old_epoch="$(cat "${tmp}/old/proto/api-epoch" 2>/dev/null || echo 0)"
if [[ "${epoch}" != "${old_epoch}" ]]; then
  echo "buf breaking: ${against} is API epoch ${old_epoch}, this is ${epoch}: this commit is" \
    "the new baseline (proto/api-epoch); nothing to compare"
  exit 0
fi
workspace "${tmp}/against" "${tmp}/old/proto"
(cd "${tmp}/new" && "${buf}" breaking --against "${tmp}/against")
echo "buf breaking against ${against} ($(git rev-parse --short "${against}")): no breaking change"
