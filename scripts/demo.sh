#!/usr/bin/env bash
# The scripted demo run by `scripts/run-local.sh --demo` against the running
# mesh: drives real mutating RPCs of Auth and App with `buf curl` (npm
# @bufbuild/buf, pinned in package-lock.json; schema by reflection), then
# asks Admin for the audit row of every change and prints it (actor, action,
# entity, old -> new). Exits non-zero if any row is missing or wrong, or if a
# read or a rejected call left one.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
auth="${ULTICODE_LOCAL_AUTH_GRPC:-127.0.0.1:50051}"
app="${ULTICODE_LOCAL_APP_GRPC:-127.0.0.1:50052}"
admin="${ULTICODE_LOCAL_ADMIN_GRPC:-127.0.0.1:50053}"
run_id="demo$(date +%s)"
# run-local --tls exports the CA of its certificates.
if [[ -n "${ULTICODE_LOCAL_CACERT:-}" ]]; then
  scheme=https transport=(--cacert "${ULTICODE_LOCAL_CACERT}")
else
  scheme=http transport=()
fi
buf="${repo}/node_modules/.bin/buf"
[[ -x "${buf}" ]] || { echo "demo: ${buf} is missing: run 'npm ci' in ${repo}"; exit 1; }
# Verified callers: one token for the changes, one for reading the trail.
# (Never on a command line: buf curl reads the header from a /dev/fd pipe.)
ULTICODE_DEMO_TOKEN="$("${repo}/scripts/dev-token.sh" demo-admin auth.admin auth.reader app.editor app.reader)"
ULTICODE_DEMO_AUDITOR="$("${repo}/scripts/dev-token.sh" demo-auditor audit.reader audit.operator)"

rpc() {  # rpc TOKEN TARGET METHOD JSON -> prints the JSON response
  "${buf}" curl --protocol grpc "${transport[@]}" -H "user-agent: ulticode-demo" \
    -H @<(printf 'authorization: Bearer %s\n' "$1") -d "$4" "${scheme}://$2/$3"
}
call() { rpc "${ULTICODE_DEMO_TOKEN}" "$@"; }  # call TARGET METHOD JSON
field() {  # field JSON PATH (dot-separated, camelCase as buf curl prints)
  /usr/bin/python3 -c 'import json,sys
v=json.loads(sys.argv[1])
for k in sys.argv[2].split("."): v=v[k]
print(v)' "$1" "$2"
}
step() { printf '\n== %s\n' "$*"; }

declare -a events=() actions=() entity_types=()
remember() {  # remember RESPONSE ACTION ENTITY_TYPE: the audit row we expect
  events+=("$(field "$1" eventId)"); actions+=("$2"); entity_types+=("$3")
}

step "Auth: create user ${run_id}"
r=$(call "${auth}" ulticode.auth.v1.AuthService/CreateUser \
  "{\"username\":\"${run_id}\",\"email\":\"${run_id}@example.com\",\"requestId\":\"${run_id}-create\"}")
echo "${r}"; remember "${r}" create_user user; user_id=$(field "${r}" user.userId)

step "Auth: same request again (idempotent: same user, no new event)"
again=$(call "${auth}" ulticode.auth.v1.AuthService/CreateUser \
  "{\"username\":\"${run_id}\",\"email\":\"${run_id}@example.com\",\"requestId\":\"${run_id}-create\"}")
[[ "$(field "${again}" user.userId)" == "${user_id}" ]] || { echo "idempotent replay returned another user"; exit 1; }

step "Auth: assign role judge, assign again (no-op), revoke"
r=$(call "${auth}" ulticode.auth.v1.AuthService/AssignRole "{\"userId\":\"${user_id}\",\"role\":\"judge\"}")
echo "${r}"; remember "${r}" assign_role user_role
r=$(call "${auth}" ulticode.auth.v1.AuthService/AssignRole "{\"userId\":\"${user_id}\",\"role\":\"judge\"}")
echo "${r}"
/usr/bin/python3 -c 'import json,sys; assert not json.loads(sys.argv[1]).get("changed", False)' "${r}"
r=$(call "${auth}" ulticode.auth.v1.AuthService/RevokeRole "{\"userId\":\"${user_id}\",\"role\":\"judge\"}")
echo "${r}"; remember "${r}" revoke_role user_role

step "Auth: update the login policy (only the fields the update mask names)"
current=$(call "${auth}" ulticode.auth.v1.AuthService/GetLoginPolicy '{}')
len=$(( $(field "${current}" minPasswordLength) == 14 ? 15 : 14 ))
r=$(call "${auth}" ulticode.auth.v1.AuthService/UpdateLoginPolicy \
  "{\"loginPolicy\":{\"minPasswordLength\":${len},\"sessionLifetime\":\"3600s\"},\"updateMask\":\"minPasswordLength,sessionLifetime\"}")
echo "${r}"; remember "${r}" update_login_policy login_policy

step "Auth: a bad request is rejected with INVALID_ARGUMENT and a BadRequest naming the field"
if out=$(call "${auth}" ulticode.auth.v1.AuthService/CreateUser '{"username":"x","email":"bad"}' 2>&1); then
  echo "expected an error"; exit 1
fi
echo "${out}" | grep -q '"invalid_argument"' || { echo "${out}"; exit 1; }
# buf curl prints the google.rpc details by type (their values in base64).
echo "${out}" | grep -q '"google.rpc.BadRequest"' || { echo "${out}"; echo "no BadRequest detail"; exit 1; }
echo "${out}"

step "App: create problem, create contest, add problem"
r=$(call "${app}" ulticode.app.v1.AppService/CreateProblem \
  "{\"slug\":\"${run_id}-sum\",\"title\":\"A + B\",\"statement\":\"Add two numbers.\",\"timeLimit\":\"1s\",\"memoryLimitMb\":256,\"difficulty\":1}")
echo "${r}"; remember "${r}" create_problem problem; problem_id=$(field "${r}" problem.problemId)
r=$(call "${app}" ulticode.app.v1.AppService/CreateContest \
  "{\"slug\":\"${run_id}-cup\",\"title\":\"Demo Cup\",\"startsAt\":\"2027-01-01T10:00:00Z\",\"endsAt\":\"2027-01-01T13:00:00Z\"}")
echo "${r}"; remember "${r}" create_contest contest; contest_id=$(field "${r}" contest.contestId)
r=$(call "${app}" ulticode.app.v1.AppService/AddProblemToContest \
  "{\"contestId\":\"${contest_id}\",\"problemId\":\"${problem_id}\",\"label\":\"A\"}")
echo "${r}"; remember "${r}" add_contest_problem contest_problem

step "Reads leave no audit row"
call "${auth}" ulticode.auth.v1.AuthService/GetUser "{\"userId\":\"${user_id}\"}" >/dev/null
call "${app}" ulticode.app.v1.AppService/GetProblem "{\"problemId\":\"${problem_id}\"}" >/dev/null
echo "GetUser, GetProblem: ok"

want=${#events[@]}
step "Admin: the audit row of each of the ${want} changes (waiting up to 30 s for each)"
admin_call() {  # admin_call METHOD JSON
  rpc "${ULTICODE_DEMO_AUDITOR}" "${admin}" "ulticode.admin.v1.AdminService/$1" "$2"
}
# ENTITY shows each UUID as its last 12 hex digits: UUIDv7 ids made in the
# same millisecond share their leading time bits; the tail is random.
printf '%-8s %-10s %-20s %-36s %s\n' OWNER ACTOR ACTION ENTITY "OLD -> NEW"
for i in "${!events[@]}"; do
  id=${events[$i]}
  deadline=$((SECONDS + 30))
  until row=$(admin_call GetAuditLog "{\"eventId\":\"${id}\"}" 2>/dev/null); do
    (( SECONDS < deadline )) || { echo "MISSING: no audit row for event ${id} (${actions[$i]})"; exit 1; }
    sleep 0.2
  done
  /usr/bin/python3 - "${row}" "${actions[$i]}" "${entity_types[$i]}" "demo-admin" <<'PY'
import json, re, sys
row, action, entity_type, actor = json.loads(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
problems = [f"{k}={row.get(k)!r}, want {v!r}" for k, v in
            (("action", action), ("entityType", entity_type), ("actor", actor)) if row.get(k) != v]
if problems:
    print("WRONG audit row", row.get("eventId"), "; ".join(problems)); sys.exit(1)
compact = lambda v: json.dumps(v, separators=(",", ":"), sort_keys=True) if v is not None else "-"
uuid = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-([0-9a-f]{12})"
short_id = re.sub(uuid, r"…\1", row["entityId"])
print(f"{row['owner'][6:].lower():<8} {row['actor']:<10} {row['action']:<20} "
      f"{row['entityType'] + ':' + short_id:<36} "
      f"{compact(row.get('oldValue'))} -> {compact(row.get('newValue'))}")
PY
done

step "Admin: QueryAuditLogs, this run's rows only (newest first), and nothing else for them"
since=$(/usr/bin/python3 - "${events[0]}" <<'PY'
import sys, datetime
ms = int(sys.argv[1].replace("-", "")[:12], 16)  # UUIDv7: the first 48 bits are Unix ms
print(datetime.datetime.fromtimestamp(ms / 1000, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ"))
PY
)
page=$(admin_call QueryAuditLogs "{\"filter\":{\"actor\":\"demo-admin\",\"startTime\":\"${since}\"},\"pageSize\":100}")
/usr/bin/python3 - "${page}" "${events[@]}" <<'PY'
import json, sys
logs = json.loads(sys.argv[1]).get("auditLogs", [])
got, want = [l["eventId"] for l in logs], set(sys.argv[2:])
for l in logs:
    print(f"  {l['occurredAt']}  {l['eventType']:<28} {l['eventId']}")
if sorted(got) != sorted(want):
    print(f"query returned {len(got)} rows for this run, want exactly the {len(want)} changes"); sys.exit(1)
PY

step "Admin: pipeline status"
admin_call GetPipelineStatus '{}'
echo
echo "demo: ${want} audited changes, each exactly once in Admin's audit_logs"
