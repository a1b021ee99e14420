#!/usr/bin/env bash
# Smoke test of scripts/grpcurl.py (grpcurl-compatible, reflection only)
# against a running auth server.
#
# Usage: tests/reflection/grpcurl_smoke.sh HOST:PORT
#   e.g. build/auth/ulticode-auth --grpc-listen=127.0.0.1:50151 ... &
#        tests/reflection/grpcurl_smoke.sh 127.0.0.1:50151
# check() evals its condition, written in single quotes on purpose.
# shellcheck disable=SC2016
set -uo pipefail

addr="${1:?usage: $0 HOST:PORT}"
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd -P)"
g="${repo}/scripts/grpcurl.py"
failures=0
out="" err="" rc=0

run() {  # run ARGS...: sets out, err, rc
  local ef; ef="$(mktemp)"
  out="$("${g}" "$@" 2>"${ef}")"; rc=$?
  err="$(cat "${ef}")"; rm -f "${ef}"
}
check() {  # check NAME CONDITION...
  local name="$1"; shift
  if "$@"; then echo "ok   ${name}"; else
    echo "FAIL ${name} (rc=${rc})"; echo "  stdout: ${out}"; echo "  stderr: ${err}"
    failures=$((failures + 1)); fi
}
has() { grep -qxF -- "$1" <<<"$2"; }
contains() { grep -qF -- "$1" <<<"$2"; }

run -plaintext "${addr}" list
check "list services" eval '[[ ${rc} == 0 ]] && has grpc.health.v1.Health "${out}" &&
  has grpc.reflection.v1alpha.ServerReflection "${out}" && has ulticode.auth.v1.AuthService "${out}"'

run -plaintext "${addr}" list ulticode.auth.v1.AuthService
check "list methods" eval '[[ ${rc} == 0 ]] && has ulticode.auth.v1.AuthService.CreateUser "${out}" &&
  has ulticode.auth.v1.AuthService.GetLoginPolicy "${out}"'

run -plaintext "${addr}" describe ulticode.auth.v1.CreateUserRequest
check "describe message" eval '[[ ${rc} == 0 ]] && contains "message CreateUserRequest {" "${out}" &&
  contains "string username = 1;" "${out}"'

run -plaintext "${addr}" describe ulticode.auth.v1.AuthService
check "describe service" eval '[[ ${rc} == 0 ]] && contains "rpc GetUser ( .ulticode.auth.v1.GetUserRequest ) returns ( .ulticode.auth.v1.User );" "${out}"'

run -plaintext "${addr}" grpc.health.v1.Health/Check
check "health check" eval '[[ ${rc} == 0 ]] && contains "\"status\": \"SERVING\"" "${out}"'

run -plaintext -d '{"service":"ulticode.auth.v1.AuthService"}' "${addr}" grpc.health.v1.Health/Check
check "health check of AuthService" eval '[[ ${rc} == 0 ]] && contains "\"status\": \"SERVING\"" "${out}"'

run -plaintext -d '{"service":"no.such.Service"}' "${addr}" grpc.health.v1.Health/Check
check "health check of unknown service -> NotFound (69)" eval '[[ ${rc} == 69 ]] && contains "Code: NotFound" "${err}"'

run -plaintext "${addr}" ulticode.auth.v1.AuthService/GetLoginPolicy
check "rpc status -> 64+code" eval '[[ ${rc} -ge 64 ]] && contains "ERROR:" "${err}" && contains "  Code: " "${err}"'

run -plaintext -d '{"bogus": 1}' "${addr}" ulticode.auth.v1.AuthService/CreateUser
check "bad -d field -> exit 1" eval '[[ ${rc} == 1 ]] && contains "bogus" "${err}"'

run -plaintext -d '{"username": ' "${addr}" ulticode.auth.v1.AuthService/CreateUser
check "bad -d JSON -> exit 1" eval '[[ ${rc} == 1 ]] && contains "invalid JSON" "${err}"'

run -plaintext "${addr}" no.such.Service/Method
check "unknown service -> exit 1" eval '[[ ${rc} == 1 ]] && contains "does not expose service" "${err}"'

run "${addr}" list
check "no -plaintext -> exit 2" eval '[[ ${rc} == 2 ]]'

echo "${failures} failure(s)"
[[ ${failures} == 0 ]]
