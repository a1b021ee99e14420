#!/usr/bin/env bash
# Runs the whole mesh locally: a private PostgreSQL 15 and Redis 7 kept in
# <repo>/.state between runs, plus the auth, app and admin servers.
#
# Usage: scripts/run-local.sh [--demo] [--no-build] [--tls] [--help]
# shellcheck source-path=SCRIPTDIR
set -euo pipefail

usage() {
  cat <<'USAGE'
Usage: scripts/run-local.sh [--demo] [--no-build] [--tls] [--help]

Starts, on 127.0.0.1:
  PostgreSQL 15  port 55432 (fsync on)  data  .state/pg     log .state/postgres.log
  Redis 7        port 56379 (AOF on)    data  .state/redis  log .state/redis/redis.log
  ulticode-auth   gRPC 50051  metrics 9101  log .state/logs/auth.log
  ulticode-app    gRPC 50052  metrics 9102  log .state/logs/app.log
  ulticode-admin  gRPC 50053  metrics 9103  log .state/logs/admin.log
  Prometheus      http://127.0.0.1:9090 with deploy/prometheus/ulticode-rules.yml
                  (when installed; ULTICODE_LOCAL_PROMETHEUS=0 to skip)
waits until every server answers grpc.health.v1.Health/Check, prints the
endpoints, and keeps running until Ctrl-C / SIGTERM; then it stops the servers
(SIGTERM, SIGKILL after 15 s), Redis and PostgreSQL. Data in .state is kept.
PostgreSQL and Redis are reused if they are already running from .state.

Options:
  --demo      after start-up run scripts/demo.sh, stop everything, and exit
              with the demo's status
  --no-build  do not run the (incremental) Release build first
  --tls       serve gRPC over TLS with a CA made in .state/tls (health stays
              plaintext on ports 50061..50063); default: plaintext on loopback
  --help      this text

Environment:
  ULTICODE_STATE_DIR       state directory (default: <repo>/.state)
  ULTICODE_BUILD_DIR       build directory (default: <repo>/build)
  ULTICODE_SKIP_DEPS=1     skip the apt package check
  ULTICODE_HEALTH_TIMEOUT  seconds to wait for each server's health (default 120)
  ULTICODE_LOCAL_PORT_OFFSET  add N to every port above (default 0), e.g. to run a
                           second copy next to the first with another ULTICODE_STATE_DIR
  Any server flag can also be set as ULTICODE_<FLAG> (e.g. ULTICODE_LOG_LEVEL=debug);
  the flags this script passes explicitly win over the environment.
USAGE
}

demo=0
build=1
tls=0
for arg in "$@"; do
  case "${arg}" in
    --demo) demo=1 ;;
    --tls) tls=1 ;;
    --no-build) build=0 ;;
    -h | --help)
      usage
      exit 0
      ;;
    *)
      echo "run-local.sh: unknown argument: ${arg}" >&2
      usage >&2
      exit 2
      ;;
  esac
done

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
cd "${repo}"
ULTICODE_REPO_ROOT="${repo}"
# shellcheck source=lib/deps.sh
source "${repo}/scripts/lib/deps.sh"
# shellcheck source=lib/servers.sh
source "${repo}/scripts/lib/servers.sh"

BUF="${repo}/node_modules/.bin/buf" # buf curl: gRPC by reflection (npm, package-lock.json)
DEMO="${repo}/scripts/demo.sh"
state="$(realpath -m -- "${ULTICODE_STATE_DIR:-${repo}/.state}")"
logs="${state}/logs"
rundir="${state}/run"
off="${ULTICODE_LOCAL_PORT_OFFSET:-0}"
if [[ ! "${off}" =~ ^[0-9]+$ ]] || ((off > 5000)); then
  echo "run-local.sh: ULTICODE_LOCAL_PORT_OFFSET must be a number 0..5000" >&2
  exit 2
fi
PG_PORT=$((55432 + off))
REDIS_PORT=$((56379 + off))
DATABASES=(ulticode_auth ulticode_app ulticode_admin)
SERVICES=(auth app admin)
declare -A GRPC=([auth]=127.0.0.1:$((50051 + off)) [app]=127.0.0.1:$((50052 + off)) [admin]=127.0.0.1:$((50053 + off)))
declare -A METRICS=([auth]=127.0.0.1:$((9101 + off)) [app]=127.0.0.1:$((9102 + off)) [admin]=127.0.0.1:$((9103 + off)))
# With --tls: plaintext grpc.health.v1.Health alone (what probes speak).
declare -A HEALTH=([auth]=127.0.0.1:$((50061 + off)) [app]=127.0.0.1:$((50062 + off)) [admin]=127.0.0.1:$((50063 + off)))
declare -A PIDS=()
# Only the repository and our own state dir may be chmod o+x'ed for user postgres.
ULTICODE_PG_CHMOD_WITHIN="${repo}:${state}"

log() { printf '[run-local] %s\n' "$*" >&2; }

mkdir -p -- "${state}" "${logs}" "${rundir}"
# One run-local.sh per state directory.
exec 9>"${state}/run-local.lock"
if ! flock -n 9; then
  log "another scripts/run-local.sh is already using ${state}"
  exit 1
fi

# ---------------------------------------------------------------- helpers

# Stops pid $2 (service $1): SIGTERM, up to 15 s, then SIGKILL.
stop_pid() {
  local svc="$1" pid="$2" deadline
  ulticode_pid_alive "${pid}" || return 0
  kill -TERM "${pid}" 2>/dev/null || true
  deadline=$((SECONDS + 15))
  while ulticode_pid_alive "${pid}"; do
    if ((SECONDS >= deadline)); then
      log "${svc} (pid ${pid}) did not stop within 15s; sending SIGKILL"
      kill -KILL "${pid}" 2>/dev/null || true
      break
    fi
    sleep 0.2
  done
  while ulticode_pid_alive "${pid}"; do sleep 0.1; done
}

# Stops a server left over by an earlier run that did not clean up (pidfile).
stop_stale() {
  local svc="$1" pidfile="${rundir}/$1.pid" pid comm
  [[ -f "${pidfile}" ]] || return 0
  pid="$(tr -dc '0-9' <"${pidfile}")"
  comm="$(cat "/proc/${pid:-0}/comm" 2>/dev/null || true)"
  if [[ -n "${pid}" && "${comm}" == "ulticode-${svc}" ]] && ulticode_pid_alive "${pid}"; then
    log "stopping ${svc} left over from an earlier run (pid ${pid})"
    stop_pid "${svc}" "${pid}"
  fi
  rm -f -- "${pidfile}"
}

# shellcheck disable=SC2317  # only called from cleanup (trap)
stop_services() {
  local svc pid rc
  # SIGTERM all first so that they shut down in parallel.
  for svc in "${!PIDS[@]}"; do
    kill -TERM "${PIDS[${svc}]}" 2>/dev/null || true
  done
  for svc in "${!PIDS[@]}"; do
    pid="${PIDS[${svc}]}"
    log "stopping ${svc} (pid ${pid})"
    stop_pid "${svc}" "${pid}"
    rc=0
    wait "${pid}" 2>/dev/null || rc=$?
    log "${svc} exited with status ${rc}"
    rm -f -- "${rundir}/${svc}.pid"
    unset "PIDS[${svc}]"
  done
}

# shellcheck disable=SC2317  # invoked via trap
cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  trap '' INT TERM # finish the clean shutdown even on a second Ctrl-C
  stop_services
  ulticode_redis_stop "${state}/redis" || rc=1
  ulticode_pg_stop "${state}/pg" || rc=1
  log "stopped (state kept in ${state})"
  exit "${rc}"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

port_in_use() {
  (exec 3<>"/dev/tcp/${1%:*}/${1##*:}") 2>/dev/null
}

# Waits until server $1 answers its health check (or dies, or times out).
wait_healthy() {
  local svc="$1" addr="${GRPC[$1]}" pid="${PIDS[$1]}" out=""
  local deadline=$((SECONDS + ${ULTICODE_HEALTH_TIMEOUT:-120}))
  while :; do
    if ! ulticode_pid_alive "${pid}"; then
      log "${svc} exited during start-up; last lines of ${logs}/${svc}.log:"
      tail -n 40 -- "${logs}/${svc}.log" >&2 || true
      return 1
    fi
    if out="$("${BUF}" curl --protocol grpc "${BUF_TLS[@]}" --connect-timeout 2 \
      "${SCHEME}://${addr}/grpc.health.v1.Health/Check" 2>&1)" &&
      [[ "${out}" == *'"SERVING"'* ]]; then
      return 0
    fi
    if ((SECONDS >= deadline)); then
      log "${svc} not healthy on ${addr} after ${ULTICODE_HEALTH_TIMEOUT:-120}s${out:+ (last answer: ${out})}"
      tail -n 40 -- "${logs}/${svc}.log" >&2 || true
      return 1
    fi
    sleep 0.5
  done
}

# ---------------------------------------------------------------- start-up

ulticode_install_deps
ulticode_node_tools
if ((build)); then
  ulticode_build Release
fi
build_dir="$(ulticode_build_dir)"

# Least privilege (docs/security.md): passwords made once under
# .state/secrets (0600); the superuser only bootstraps; each service migrates
# as <svc>_migrator and runs as <svc>_runtime (SCRAM), and talks to Redis as
# its own ACL user; the Redis default user is off.
secrets="${state}/secrets"
(umask 077 && mkdir -p -- "${secrets}")
chmod 700 "${secrets}"
if [[ ! -s "${secrets}/pg-postgres.password" ]]; then
  (umask 077 && openssl rand -hex 16 >"${secrets}/pg-postgres.password")
fi
(umask 077 && printf '127.0.0.1:%s:*:postgres:%s\n' "${PG_PORT}" \
  "$(cat "${secrets}/pg-postgres.password")" >"${secrets}/pgpass")
export PGPASSFILE="${secrets}/pgpass"
bootstrap="${build_dir}/tools/bootstrap/ulticode-bootstrap"
[[ -x "${bootstrap}" ]] || { log "${bootstrap} is missing; build first (drop --no-build)"; exit 1; }
"${bootstrap}" --secrets-dir="${secrets}" --redis-acl-file="${secrets}/redis-users.acl"

# 9>&-: daemons must not inherit the lock descriptor.
ulticode_pg_start "${state}/pg" "${PG_PORT}" on 9>&-
"${bootstrap}" --secrets-dir="${secrets}" \
  --pg-dsn="host=127.0.0.1 port=${PG_PORT} user=postgres dbname=postgres" \
  --pg-password-file="${secrets}/pg-postgres.password"
ulticode_pg_hba "${state}/pg" scram-sha-256
ulticode_redis_start "${state}/redis" "${REDIS_PORT}" yes "${secrets}/redis-users.acl" 9>&-

# Dev keys (audit events) and the key directory public-keys.txt.
ulticode_dev_signing_keys "${secrets}" scripts/run-local.sh
public_keys="${secrets}/public-keys.txt"
# The transparency log's key, and its verifier key for auditors
# (docs/transparency-log.md): public, but kept beside the other keys.
LOG_ORIGIN=ulticode.local/audit
log_vkey="${secrets}/log.vkey"
ulticode_log_key "${secrets}" "${LOG_ORIGIN}" "${build_dir}/tools/verify/ulticode-verify"
# The dev token issuer: scripts/dev-token.sh signs with its key; every
# service verifies callers against jwks.json (re-read when it changes).
ulticode_dev_jwt_issuer "${secrets}"

# Transport: plaintext on loopback unless --tls (a CA and one server
# certificate for 127.0.0.1/localhost under .state/tls, re-read on change).
TRANSPORT=(--grpc-plaintext)
SCHEME=http
BUF_TLS=()
if ((tls)); then
  ulticode_tls_ca "${state}/tls"
  [[ -s "${state}/tls/server.pem" ]] ||
    ulticode_tls_cert "${state}/tls" server IP:127.0.0.1,DNS:localhost
  TRANSPORT=(--tls-cert-file="${state}/tls/server.pem" --tls-key-file="${state}/tls/server.key")
  SCHEME=https
  BUF_TLS=(--cacert "${state}/tls/ca.pem")
  export ULTICODE_LOCAL_CACERT="${state}/tls/ca.pem"  # for demo.sh
fi

declare -A KEY_FLAG=(
  [auth]="--audit-signing-key-file=${secrets}/auth-ed25519.key"
  [app]="--audit-signing-key-file=${secrets}/app-ed25519.key"
  [admin]="--audit-signing-key-file=${secrets}/admin-ed25519.key"
)

started=()
for svc in "${SERVICES[@]}"; do
  bin="${build_dir}/${svc}/ulticode-${svc}"
  stop_stale "${svc}"
  if [[ ! -x "${bin}" ]]; then
    log "WARNING: ${bin} does not exist (yet); skipping ${svc}"
    continue
  fi
  for addr in "${GRPC[${svc}]}" "${METRICS[${svc}]}"; do
    if port_in_use "${addr}"; then
      log "${addr} (for ${svc}) is already in use:"
      ss -Htlnp "sport = :${addr##*:}" >&2 || true
      exit 1
    fi
  done
  logfile="${logs}/${svc}.log"
  [[ -f "${logfile}" ]] && mv -f -- "${logfile}" "${logfile}.prev"
  # setsid: Ctrl-C in the terminal reaches only this script, which then stops
  # the servers in order. The pid of `setsid prog &` is the server's own pid.
  svc_transport=("${TRANSPORT[@]}")
  if ((tls)); then svc_transport+=(--health-listen="${HEALTH[${svc}]}"); fi
  # Admin signs the log; the owners witness it.
  svc_log=(--log-keys-file="${log_vkey}")
  if [[ "${svc}" == admin ]]; then
    svc_log=(--log-signing-key-file="${secrets}/log-ed25519.key" --log-origin="${LOG_ORIGIN}")
    # ErasePersonalData reaches the owners as a privacy officer
    # (docs/personal-data.md): a token of that role only, valid 30 days,
    # made again at each start.
    (umask 077 && ULTICODE_STATE_DIR="${state}" ULTICODE_DEV_TOKEN_TTL=2592000 \
      "${repo}/scripts/dev-token.sh" admin privacy.officer >"${secrets}/admin-owner.token.new")
    mv -f -- "${secrets}/admin-owner.token.new" "${secrets}/admin-owner.token"
    svc_log+=(--owner-operations="auth=${GRPC[auth]},app=${GRPC[app]}"
      --owner-token-file="${secrets}/admin-owner.token")
    if ((tls)); then svc_log+=(--owner-cacert="${state}/tls/ca.pem"); fi
  fi
  setsid "${bin}" \
    --grpc-listen="${GRPC[${svc}]}" \
    --metrics-listen="${METRICS[${svc}]}" \
    --pg-dsn="host=127.0.0.1 port=${PG_PORT} user=${svc}_runtime dbname=ulticode_${svc}" \
    --pg-password-file="${secrets}/pg-${svc}_runtime.password" \
    --pg-migrate-user="${svc}_migrator" \
    --pg-migrate-password-file="${secrets}/pg-${svc}_migrator.password" \
    --redis-addr="127.0.0.1:${REDIS_PORT}" \
    --redis-user="${svc}" \
    --redis-password-file="${secrets}/redis-${svc}.password" \
    --public-keys-file="${public_keys}" \
    --jwks-file="${secrets}/jwks.json" \
    "${svc_transport[@]}" \
    --jwt-issuer=ulticode-dev \
    "${KEY_FLAG[${svc}]}" \
    "${svc_log[@]}" \
    </dev/null >"${logfile}" 2>&1 9>&- &
  PIDS[${svc}]=$!
  printf '%s\n' "${PIDS[${svc}]}" >"${rundir}/${svc}.pid"
  started+=("${svc}")
  log "started ${svc} (pid ${PIDS[${svc}]}, log ${logfile})"
done

if ((${#started[@]} == 0)); then
  log "no server binaries found under ${build_dir}; build first (drop --no-build)"
  exit 1
fi

for svc in "${started[@]}"; do
  wait_healthy "${svc}"
  log "${svc} is healthy on ${GRPC[${svc}]}"
done

# Prometheus (Debian's package) on 127.0.0.1:9090 with the mesh's rules, so
# the graphs and alerts are a browser away. Data in .state/prometheus.
prom_addr="127.0.0.1:$((9090 + off))"
if [[ "${ULTICODE_LOCAL_PROMETHEUS:-1}" == 1 ]] && command -v prometheus >/dev/null 2>&1 &&
  ! port_in_use "${prom_addr}"; then
  mkdir -p -- "${state}/prometheus"
  {
    printf 'global:\n  scrape_interval: 5s\n  evaluation_interval: 5s\n'
    printf 'rule_files:\n  - %s\n' "${repo}/deploy/prometheus/ulticode-rules.yml"
    printf 'scrape_configs:\n'
    for svc in "${started[@]}"; do
      printf '  - job_name: ulticode-%s\n    static_configs:\n      - targets: [%s]\n' \
        "${svc}" "'${METRICS[${svc}]}'"
    done
  } >"${state}/prometheus/prometheus.yml"
  setsid prometheus --config.file="${state}/prometheus/prometheus.yml" \
    --storage.tsdb.path="${state}/prometheus/data" --web.listen-address="${prom_addr}" \
    </dev/null >"${logs}/prometheus.log" 2>&1 9>&- &
  PIDS[prometheus]=$!
  log "started prometheus (pid ${PIDS[prometheus]}, http://${prom_addr}, log ${logs}/prometheus.log)"
else
  log "prometheus not started (not installed, or ${prom_addr} in use)"
fi

rel() { printf '%s\n' "${1#"${repo}/"}"; }
{
  echo
  echo "UltiCode Audit Mesh is up (state: $(rel "${state}"))"
  for svc in "${SERVICES[@]}"; do
    if [[ -n "${PIDS[${svc}]:-}" ]]; then
      printf '  %-6s gRPC %-16s metrics http://%s/metrics  log %s  pid %s\n' "${svc}" \
        "${GRPC[${svc}]}" "${METRICS[${svc}]}" "$(rel "${logs}/${svc}.log")" "${PIDS[${svc}]}"
    else
      printf '  %-6s (not running: binary missing)\n' "${svc}"
    fi
  done
  printf '  PostgreSQL 127.0.0.1:%s user postgres, databases %s; log %s\n' \
    "${PG_PORT}" "${DATABASES[*]}" "$(rel "${state}/postgres.log")"
  printf '  Redis      127.0.0.1:%s (AOF); log %s\n' "${REDIS_PORT}" "$(rel "${state}/redis/redis.log")"
  if [[ -n "${PIDS[prometheus]:-}" ]]; then
    printf '  Prometheus http://%s (graphs, alerts: deploy/prometheus/ulticode-rules.yml)\n' "${prom_addr}"
  fi
  echo
  echo "Try (tokens from scripts/dev-token.sh SUBJECT [ROLE...], valid 1 h, kept off the command line):"
  echo "  export TOKEN=\$(scripts/dev-token.sh alice auth.admin auth.reader)"
  bc="npx buf curl --protocol grpc${BUF_TLS[*]:+ ${BUF_TLS[*]}}"
  echo "  ${bc} -H @<(echo \"authorization: Bearer \${TOKEN}\") -d '{\"username\":\"bob\",\"email\":\"bob@example.com\"}' ${SCHEME}://${GRPC[auth]}/ulticode.auth.v1.AuthService/CreateUser"
  echo "  export AUDITOR=\$(scripts/dev-token.sh auditor audit.reader audit.operator)"
  echo "  ${bc} -H @<(echo \"authorization: Bearer \${AUDITOR}\") -d '{\"pageSize\":5}' ${SCHEME}://${GRPC[admin]}/ulticode.admin.v1.AdminService/QueryAuditLogs"
  echo "  ${bc} --list-methods ${SCHEME}://${GRPC[admin]}"
  echo "  ${bc} ${SCHEME}://${GRPC[auth]}/grpc.health.v1.Health/Check"
  ((tls)) && echo "  npx buf curl --protocol grpc http://${HEALTH[auth]}/grpc.health.v1.Health/Check   # the probe port"
  echo "  curl -s http://${METRICS[admin]}/metrics | grep ^ulticode_"
  echo "Operators (passwords in $(rel "${secrets}"), never on a command line):"
  echo "  PGPASSFILE=$(rel "${secrets}")/pgpass psql -h 127.0.0.1 -p ${PG_PORT} -U postgres ulticode_admin"
  echo "  REDISCLI_AUTH=\"\$(cat $(rel "${secrets}")/redis-ops.password)\" redis-cli -p ${REDIS_PORT} --user ops --scan"
  echo "Keys: $(rel "${secrets}")/{auth,app,admin,log}-ed25519.key, directory $(rel "${public_keys}")"
  echo "The log's verifier key (for ulticode-verify, docs/transparency-log.md): $(rel "${log_vkey}")"
  echo
} >&2

if ((demo)); then
  rc=0
  log "running scripts/demo.sh"
  env ULTICODE_LOCAL_AUTH_GRPC="${GRPC[auth]}" ULTICODE_LOCAL_APP_GRPC="${GRPC[app]}" \
    ULTICODE_LOCAL_ADMIN_GRPC="${GRPC[admin]}" ULTICODE_LOCAL_PG_PORT="${PG_PORT}" \
    ULTICODE_LOCAL_REDIS_PORT="${REDIS_PORT}" ULTICODE_LOCAL_STATE_DIR="${state}" \
    bash "${DEMO}" 9>&- || rc=$?
  log "demo finished with status ${rc}"
  exit "${rc}"
fi

log "running; press Ctrl-C (or send SIGTERM) to stop"
stop_requested=0
trap 'stop_requested=1' INT TERM
declare -A reported=()
while ((!stop_requested)); do
  sleep 1 &
  wait $! || true
  for svc in "${!PIDS[@]}"; do
    if [[ -z "${reported[${svc}]:-}" ]] && ! ulticode_pid_alive "${PIDS[${svc}]}"; then
      rc=0
      wait "${PIDS[${svc}]}" 2>/dev/null || rc=$?
      log "WARNING: ${svc} exited on its own (status ${rc}); see $(rel "${logs}/${svc}.log")"
      reported[${svc}]=1
      unset "PIDS[${svc}]"
      rm -f -- "${rundir}/${svc}.pid"
    fi
  done
done
log "stopping"
exit 0
