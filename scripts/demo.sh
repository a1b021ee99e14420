#!/usr/bin/env bash
# The scripted demo run by `scripts/run-local.sh --demo` against the running
# mesh: drives real mutating RPCs of Auth and App through the reflection-only
# client, then checks that each left exactly one audit event that reached its
# owner's Redis stream. Exits 0 only if every step and check holds.
# (Admin's audit_logs and query API join the demo with the Admin issue.)
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
auth="${ULTICODE_LOCAL_AUTH_GRPC:-127.0.0.1:50051}"
app="${ULTICODE_LOCAL_APP_GRPC:-127.0.0.1:50052}"
pg_port="${ULTICODE_LOCAL_PG_PORT:-55432}"
redis_port="${ULTICODE_LOCAL_REDIS_PORT:-56379}"
run_id="demo$(date +%s)"

call() {  # call TARGET METHOD JSON -> prints the JSON response
  /usr/bin/python3 "${repo}/scripts/grpcurl.py" -plaintext -H "x-ulticode-principal: demo-admin" \
    -H "user-agent: ulticode-demo" -d "$3" "$1" "$2"
}
field() {  # field JSON PATH (dot-separated, camelCase as grpcurl prints)
  /usr/bin/python3 -c 'import json,sys
v=json.loads(sys.argv[1])
for k in sys.argv[2].split("."): v=v[k]
print(v)' "$1" "$2"
}
step() { printf '\n== %s\n' "$*"; }

declare -a events=()
remember() { events+=("$(field "$1" eventId)"); }

step "Auth: create user ${run_id}"
r=$(call "${auth}" ulticode.auth.v1.AuthService/CreateUser \
  "{\"username\":\"${run_id}\",\"email\":\"${run_id}@example.com\",\"requestId\":\"${run_id}-create\"}")
echo "${r}"; remember "${r}"; user_id=$(field "${r}" user.userId)

step "Auth: same request again (idempotent: same user, no new event)"
again=$(call "${auth}" ulticode.auth.v1.AuthService/CreateUser \
  "{\"username\":\"${run_id}\",\"email\":\"${run_id}@example.com\",\"requestId\":\"${run_id}-create\"}")
[[ "$(field "${again}" user.userId)" == "${user_id}" ]] || { echo "idempotent replay returned another user"; exit 1; }

step "Auth: assign role judge, assign again (no-op), revoke"
r=$(call "${auth}" ulticode.auth.v1.AuthService/AssignRole "{\"userId\":\"${user_id}\",\"role\":\"judge\"}")
echo "${r}"; remember "${r}"
r=$(call "${auth}" ulticode.auth.v1.AuthService/AssignRole "{\"userId\":\"${user_id}\",\"role\":\"judge\"}")
echo "${r}"
/usr/bin/python3 -c 'import json,sys; assert not json.loads(sys.argv[1]).get("changed", False)' "${r}"
r=$(call "${auth}" ulticode.auth.v1.AuthService/RevokeRole "{\"userId\":\"${user_id}\",\"role\":\"judge\"}")
echo "${r}"; remember "${r}"

step "Auth: update the login policy"
current=$(call "${auth}" ulticode.auth.v1.AuthService/GetLoginPolicy '{}')
len=$(( $(field "${current}" minPasswordLength) == 14 ? 15 : 14 ))
r=$(call "${auth}" ulticode.auth.v1.AuthService/UpdateLoginPolicy \
  "{\"policy\":{\"minPasswordLength\":${len},\"lockoutThreshold\":5,\"mfaRequired\":true,\"sessionLifetimeSeconds\":3600}}")
echo "${r}"; remember "${r}"

step "Auth: a bad request is rejected with INVALID_ARGUMENT"
if out=$(call "${auth}" ulticode.auth.v1.AuthService/CreateUser '{"username":"x","email":"bad"}' 2>&1); then
  echo "expected an error"; exit 1
fi
echo "${out}" | grep -q "InvalidArgument" || { echo "${out}"; exit 1; }
echo "${out}"

step "App: create problem, create contest, add problem"
r=$(call "${app}" ulticode.app.v1.AppService/CreateProblem \
  "{\"slug\":\"${run_id}-sum\",\"title\":\"A + B\",\"statement\":\"Add two numbers.\",\"timeLimitMs\":1000,\"memoryLimitMb\":256,\"difficulty\":1}")
echo "${r}"; remember "${r}"; problem_id=$(field "${r}" problem.problemId)
r=$(call "${app}" ulticode.app.v1.AppService/CreateContest \
  "{\"slug\":\"${run_id}-cup\",\"title\":\"Demo Cup\",\"startsAt\":\"2027-01-01T10:00:00Z\",\"endsAt\":\"2027-01-01T13:00:00Z\"}")
echo "${r}"; remember "${r}"; contest_id=$(field "${r}" contest.contestId)
r=$(call "${app}" ulticode.app.v1.AppService/AddProblemToContest \
  "{\"contestId\":\"${contest_id}\",\"problemId\":\"${problem_id}\",\"label\":\"A\"}")
echo "${r}"; remember "${r}"

step "Checking: ${#events[@]} events, each exactly once in its owner's outbox and stream"
want=${#events[@]}
deadline=$((SECONDS + 30))
while :; do
  published=0
  for id in "${events[@]}"; do
    for db in ulticode_auth ulticode_app; do
      n=$(psql -h 127.0.0.1 -p "${pg_port}" -U postgres -d "${db}" -tAc \
        "SELECT count(*) FROM audit_outbox WHERE event_id = '${id}' AND state = 'PUBLISHED'")
      published=$((published + n))
    done
  done
  [[ ${published} -eq ${want} ]] && break
  (( SECONDS < deadline )) || { echo "only ${published}/${want} events published"; exit 1; }
  sleep 0.2
done
for id in "${events[@]}"; do
  for db in ulticode_auth ulticode_app; do
    psql -h 127.0.0.1 -p "${pg_port}" -U postgres -d "${db}" -tAc \
      "SELECT '${db#ulticode_}', event_id, event_type, state, stream_entry_id FROM audit_outbox WHERE event_id = '${id}'"
  done
done
echo "stream lengths: audit:auth=$(redis-cli -p "${redis_port}" xlen audit:auth) audit:app=$(redis-cli -p "${redis_port}" xlen audit:app)"
echo
echo "demo: ${want} audited changes committed and published; Admin's side arrives with the Admin issue"
