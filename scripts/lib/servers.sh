#!/usr/bin/env bash
# shellcheck shell=bash
# Private PostgreSQL 15 and Redis 7 instances on 127.0.0.1 for tests and local runs.
# Source this file; it defines functions only and changes no shell options.
# It never touches a system-wide cluster: every instance lives in a directory
# the caller chooses and listens on a port the caller chooses.
#
#   ulticode_free_port                          print a free TCP port on 127.0.0.1
#   ulticode_pg_start <datadir> <port> <on|off|process>
#                                               initdb if needed, start (or reuse); arg 3 = durability:
#                                               on = fsync + synchronous_commit; off = neither (fast,
#                                               a crash loses recent commits); process = no fsync but
#                                               synchronous_commit on: survives kill -9 / immediate
#                                               shutdown of PostgreSQL (not of the machine)
#   ulticode_pg_stop <datadir>                  pg_ctl stop -m fast (no-op if not running)
#   ulticode_pg_crash <datadir>                 pg_ctl stop -m immediate: a crash, for fault tests
#   ulticode_pg_kill9 <datadir>                 SIGKILL the postmaster and every process of it
#   ulticode_pg_standby <primary datadir> <primary port> <datadir> <port>
#                                               pg_basebackup from the primary over its unix
#                                               socket (any old <datadir> is removed), then start
#                                               it as a streaming standby
#   ulticode_pg_promote <datadir>               pg_ctl promote, wait until it accepts writes
#   ulticode_pg_wait <port> [timeout_s]         wait until pg_isready succeeds
#   ulticode_pg_createdb <port> <name...>       create databases that do not exist yet
#   ulticode_pg_hba <datadir> <trust|scram-sha-256>
#                                               loopback TCP: every role but the superuser needs a
#                                               SCRAM password; arg 2 = the superuser's method
#                                               (trust only for throw-away test clusters)
#   ulticode_redis_start <dir> <port> <yes|no> [aclfile]
#                                               start daemonized redis-server (or reuse); arg 3 = AOF,
#                                               arg 4 = ACL file to load (default user off there)
#   ulticode_redis_maxmemory [owners] [proofs] [share] [clients] [headroom]
#                                               Redis's maxmemory (bytes) from the flags
#   ulticode_redis_superuser_acl <out> <user> <password file>
#                                               write an ACL file: default off, <user> all-powerful
#                                               (throw-away test servers only)
#   ulticode_redis_stop <dir>                   SIGTERM, wait (SIGKILL after 15 s)
#   ulticode_pid_alive <pid>                    process exists and is not a zombie
#   ulticode_pg_ssl <datadir> <tls dir>         ssl=on with <tls dir>/pg-server.pem/.key (made by
#                                               ulticode_tls_cert), then reload
#   ulticode_dev_jwt_issuer <secrets dir>       the dev token issuer of run-local: jwt-ed25519.key
#                                               (made once), jwt.kid and jwks.json (for dev-token.sh)
#   ulticode_tls_ca <dir>                       make <dir>/ca.pem + ca.key (a private CA) unless present
#   ulticode_tls_cert <dir> <name> <san>        make <dir>/<name>.pem + <name>.key signed by that CA,
#                                               e.g. ulticode_tls_cert d server IP:127.0.0.1,DNS:localhost
#
# Files: next to <datadir> go postgres.log and pg-socket/ (unix socket dir);
# in the redis <dir> go redis.pid, redis.log and the RDB/AOF files.
#
# Running as root: initdb/postgres refuse root, so PostgreSQL runs as the
# `postgres` user via runuser, and every directory above <datadir> must be
# traversable (o+x) by it. Directories inside ULTICODE_PG_CHMOD_WITHIN (a
# colon-separated list, default: the repository root) are chmod o+x'ed when
# needed; anything else (e.g. /root with mode 700) is never changed: the start
# fails with a message instead (fix: chmod o+x it yourself, or put the state
# somewhere else, e.g. ULTICODE_STATE_DIR for scripts/run-local.sh).
#
# Environment:
#   ULTICODE_PG_BIN          PostgreSQL binaries (default /usr/lib/postgresql/15/bin)
#   ULTICODE_PYTHON          python used for ulticode_free_port (default /usr/bin/python3)
#   ULTICODE_PG_CHMOD_WITHIN see above
#   ULTICODE_START_TIMEOUT   seconds to wait for PG/Redis start-up (default 60)
#   ULTICODE_PG_OPTIONS      extra PostgreSQL server options ("-c name=value ..."; the
#                            benchmark loads pg_stat_statements with it)

if [[ -n "${_ULTICODE_SERVERS_SH:-}" ]]; then
  return 0
fi
_ULTICODE_SERVERS_SH=1

ULTICODE_REPO_ROOT="${ULTICODE_REPO_ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd -P)}"
ULTICODE_PG_BIN="${ULTICODE_PG_BIN:-/usr/lib/postgresql/15/bin}"
ULTICODE_PYTHON="${ULTICODE_PYTHON:-/usr/bin/python3}"

_ulticode_log() { printf '[ulticode] %s\n' "$*" >&2; }

_ulticode_is_port() {
  [[ "${1:-}" =~ ^[0-9]+$ ]] && (($1 > 0 && $1 < 65536))
}

# True if pid $1 exists and is not a zombie (an orphaned daemon may stay a
# zombie for a while when PID 1 is slow to reap).
ulticode_pid_alive() {
  local state
  [[ "${1:-}" =~ ^[0-9]+$ ]] || return 1
  kill -0 "$1" 2>/dev/null || return 1
  state="$(sed -n 's/^State:[[:space:]]*\([A-Z]\).*/\1/p' "/proc/$1/status" 2>/dev/null || true)"
  [[ "${state}" != Z ]]
}

# ---------------------------------------------------------------- ports

ulticode_free_port() {
  if [[ -x "${ULTICODE_PYTHON}" ]]; then
    "${ULTICODE_PYTHON}" -c '
import socket
s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])
s.close()'
    return
  fi
  # Fallback: random port not listed by ss as listening.
  local port i
  for ((i = 0; i < 200; i++)); do
    port=$((20000 + RANDOM % 40000))
    if [[ -z "$(ss -Htln "sport = :${port}" 2>/dev/null)" ]]; then
      printf '%s\n' "${port}"
      return 0
    fi
  done
  _ulticode_log "could not find a free port"
  return 1
}

# ---------------------------------------------------------------- PostgreSQL

# Runs a PostgreSQL binary as the postgres user when we are root, from / so
# that an unreadable current directory does not produce warnings.
_ulticode_pg_run() {
  local bin="${ULTICODE_PG_BIN}/$1"
  shift
  if ((EUID == 0)); then
    (cd / && runuser -u postgres -- "${bin}" "$@")
  else
    "${bin}" "$@"
  fi
}

# True if $1 is one of the ULTICODE_PG_CHMOD_WITHIN directories or below one.
_ulticode_chmod_allowed() {
  local dir="$1" root
  local -a roots=()
  IFS=: read -r -a roots <<<"${ULTICODE_PG_CHMOD_WITHIN:-${ULTICODE_REPO_ROOT}}"
  for root in "${roots[@]}"; do
    [[ -n "${root}" ]] || continue
    root="$(realpath -m -- "${root}")"
    if [[ "${dir}" == "${root}" || "${dir}" == "${root}/"* ]]; then
      return 0
    fi
  done
  return 1
}

# Makes sure the postgres user can traverse every directory above $1 (root only).
_ulticode_pg_ensure_traversable() {
  local target="$1" d
  local -a chain=()
  d="$(dirname -- "${target}")"
  while [[ "${d}" != / ]]; do
    chain=("${d}" "${chain[@]}")
    d="$(dirname -- "${d}")"
  done
  # Top-down: the first directory postgres cannot reach is the culprit.
  for d in "${chain[@]}"; do
    if runuser -u postgres -- test -x "${d}" 2>/dev/null; then
      continue
    fi
    if _ulticode_chmod_allowed "${d}"; then
      _ulticode_log "chmod o+x ${d} (so that user postgres can reach its data directory)"
      chmod o+x -- "${d}" || return 1
    else
      _ulticode_log "user postgres cannot traverse ${d} (mode $(stat -c %a -- "${d}")), needed for ${target}."
      _ulticode_log "Not changing it (outside ULTICODE_PG_CHMOD_WITHIN). Either 'chmod o+x ${d}' or keep the state elsewhere (ULTICODE_STATE_DIR)."
      return 1
    fi
  done
}

# Prints the port recorded in <datadir>/postmaster.pid (line 4).
_ulticode_pg_running_port() {
  sed -n '4p' "$1/postmaster.pid" 2>/dev/null
}

# True if the postmaster recorded in <datadir>/postmaster.pid is alive (not a
# zombie: `pg_ctl status` would report a crashed, unreaped postmaster as running).
_ulticode_pg_is_running() {
  local pid comm
  pid="$(sed -n '1p' "$1/postmaster.pid" 2>/dev/null)"
  ulticode_pid_alive "${pid}" || return 1
  comm="$(cat "/proc/${pid}/comm" 2>/dev/null || true)"
  [[ "${comm}" == postgres || "${comm}" == postmaster ]]
}

# Prints live processes whose working directory is <datadir> (all PostgreSQL
# processes chdir there).
_ulticode_pg_procs_in() {
  local proc pid
  for proc in /proc/[0-9]*; do
    pid="${proc#/proc/}"
    if [[ "$(readlink "${proc}/cwd" 2>/dev/null)" == "$1" ]] && ulticode_pid_alive "${pid}"; then
      printf '%s\n' "${pid}"
    fi
  done
}

# After a crash: wait until the dead postmaster has been reaped and its
# children have exited, so that the postmaster.pid / shared-memory interlock
# lets the new postmaster start. Never deletes postmaster.pid itself.
_ulticode_pg_wait_for_crashed() {
  local datadir="$1" pid deadline=$((SECONDS + 30))
  [[ -f "${datadir}/postmaster.pid" ]] || return 0
  pid="$(sed -n '1p' "${datadir}/postmaster.pid" 2>/dev/null)"
  _ulticode_log "stale ${datadir}/postmaster.pid (pid ${pid:-?}); waiting for leftover processes to go away"
  while ulticode_pid_alive "${pid}" || [[ -n "$(_ulticode_pg_procs_in "${datadir}")" ]]; do
    if ((SECONDS >= deadline)); then
      _ulticode_log "leftover PostgreSQL processes for ${datadir} still present; trying to start anyway"
      return 0
    fi
    sleep 0.2
  done
}

ulticode_pg_wait() {
  local port="${1:?usage: ulticode_pg_wait <port> [timeout_s]}"
  local timeout="${2:-${ULTICODE_START_TIMEOUT:-60}}"
  local deadline=$((SECONDS + timeout))
  until "${ULTICODE_PG_BIN}/pg_isready" -q -h 127.0.0.1 -p "${port}" -t 2; do
    if ((SECONDS >= deadline)); then
      _ulticode_log "PostgreSQL on 127.0.0.1:${port} not ready after ${timeout}s"
      return 1
    fi
    sleep 0.2
  done
}

ulticode_pg_start() {
  local datadir="${1:?usage: ulticode_pg_start <datadir> <port> <fsync:on|off>}"
  local port="${2:?usage: ulticode_pg_start <datadir> <port> <fsync:on|off>}"
  local fsync="${3:?usage: ulticode_pg_start <datadir> <port> <fsync:on|off>}"
  local statedir sockdir logfile locale running_port durable sync_commit=""
  local -a initdb_extra=()
  _ulticode_is_port "${port}" || { _ulticode_log "bad port: ${port}"; return 2; }
  case "${fsync}" in
    on) durable=on ;;
    off) durable=off ;;
    process) fsync=off; durable=off; sync_commit=on ;;
    *) _ulticode_log "durability must be on, off or process, not ${fsync}"; return 2 ;;
  esac
  datadir="$(realpath -m -- "${datadir}")"
  if [[ "${datadir}" == *"'"* || "${datadir}" =~ [[:space:]] ]]; then
    _ulticode_log "PostgreSQL data directory path must not contain quotes or spaces: ${datadir}"
    return 2
  fi
  statedir="$(dirname -- "${datadir}")"
  sockdir="${statedir}/pg-socket"
  logfile="${statedir}/postgres.log"

  if _ulticode_pg_is_running "${datadir}"; then
    running_port="$(_ulticode_pg_running_port "${datadir}")"
    if [[ "${running_port}" == "${port}" ]]; then
      _ulticode_log "PostgreSQL already running on 127.0.0.1:${port} (${datadir}); reusing it"
      ulticode_pg_wait "${port}"
      return
    fi
    _ulticode_log "PostgreSQL for ${datadir} is already running on port ${running_port}, not ${port}; stop it first (ulticode_pg_stop ${datadir})"
    return 1
  fi

  _ulticode_pg_wait_for_crashed "${datadir}"
  mkdir -p -- "${datadir}" "${sockdir}" || return 1
  touch -- "${logfile}" || return 1
  if ((EUID == 0)); then
    if ! id -u postgres >/dev/null 2>&1; then
      _ulticode_log "running as root but there is no 'postgres' user to run PostgreSQL as"
      return 1
    fi
    chown postgres:postgres -- "${datadir}" "${sockdir}" "${logfile}" || return 1
    _ulticode_pg_ensure_traversable "${datadir}" || return 1
  fi
  chmod 700 -- "${datadir}" || return 1
  # The unix socket trusts whoever reaches it (pg_hba "local ... trust"):
  # only the server's own user may enter the socket directory.
  chmod 700 -- "${sockdir}" || return 1

  if [[ ! -f "${datadir}/PG_VERSION" ]]; then
    if [[ -n "$(ls -A -- "${datadir}")" ]]; then
      _ulticode_log "${datadir} is not empty but has no PG_VERSION; refusing to initdb over it"
      return 1
    fi
    if locale -a 2>/dev/null | grep -qiE '^c\.utf-?8$'; then
      locale=C.UTF-8
    else
      locale=C
    fi
    [[ "${fsync}" == off ]] && initdb_extra+=(--no-sync)
    _ulticode_log "initdb ${datadir}"
    if ! _ulticode_pg_run initdb -D "${datadir}" --auth=trust -U postgres \
      --encoding=UTF8 --locale="${locale}" "${initdb_extra[@]}" >"${statedir}/initdb.log" 2>&1; then
      cat -- "${statedir}/initdb.log" >&2
      return 1
    fi
  fi

  _ulticode_log "starting PostgreSQL on 127.0.0.1:${port} (fsync=${fsync}, data ${datadir}, log ${logfile})"
  if ! _ulticode_pg_run pg_ctl start -D "${datadir}" -w -t "${ULTICODE_START_TIMEOUT:-60}" \
    -l "${logfile}" -o "-p ${port} -k '${sockdir}' -c listen_addresses=127.0.0.1 \
-c fsync=${fsync} -c synchronous_commit=${sync_commit:-${durable}} -c full_page_writes=${durable} \
-c max_connections=300 -c shared_buffers=128MB ${ULTICODE_PG_OPTIONS:-}" >/dev/null; then
    _ulticode_log "PostgreSQL failed to start; last lines of ${logfile}:"
    tail -n 30 -- "${logfile}" >&2
    return 1
  fi
  ulticode_pg_wait "${port}"
}

ulticode_pg_stop() {
  local datadir="${1:?usage: ulticode_pg_stop <datadir>}"
  datadir="$(realpath -m -- "${datadir}")"
  if ! _ulticode_pg_is_running "${datadir}"; then
    return 0
  fi
  _ulticode_log "stopping PostgreSQL (${datadir})"
  if ! _ulticode_pg_run pg_ctl stop -D "${datadir}" -m fast -w -t 60 >/dev/null; then
    _ulticode_log "fast shutdown failed; trying immediate"
    _ulticode_pg_run pg_ctl stop -D "${datadir}" -m immediate -w -t 30 >/dev/null || return 1
  fi
}

ulticode_pg_kill9() {
  local datadir="${1:?usage: ulticode_pg_kill9 <datadir>}" postmaster children p
  local port sockdir
  local deadline=$((SECONDS + 30))
  datadir="$(realpath -m -- "${datadir}")"
  postmaster="$(sed -n '1p' "${datadir}/postmaster.pid" 2>/dev/null)"
  port="$(sed -n '4p' "${datadir}/postmaster.pid" 2>/dev/null)"
  sockdir="$(sed -n '5p' "${datadir}/postmaster.pid" 2>/dev/null)"
  [[ "${postmaster}" =~ ^[0-9]+$ ]] && ulticode_pid_alive "${postmaster}" || return 0
  # Every server process is a child of the postmaster.
  children="$(pgrep -P "${postmaster}" || true)"
  # shellcheck disable=SC2086 # a list of pids
  kill -KILL "${postmaster}" ${children} 2>/dev/null
  for p in ${postmaster} ${children}; do
    while ulticode_pid_alive "${p}"; do
      ((SECONDS < deadline)) || return 1
      sleep 0.05
    done
  done
  # A killed postmaster stays a zombie until init reaps it, which some inits
  # do late; PostgreSQL takes a lock file naming a pid that still exists for
  # a running server. Remove its lock files, as its own exit would have.
  rm -f -- "${datadir}/postmaster.pid"
  if [[ "${port}" =~ ^[0-9]+$ && -n "${sockdir}" && -d "${sockdir}" ]]; then
    rm -f -- "${sockdir}/.s.PGSQL.${port}" "${sockdir}/.s.PGSQL.${port}.lock"
  fi
}

ulticode_pg_standby() {
  local usage="usage: ulticode_pg_standby <primary datadir> <primary port> <datadir> <port>"
  local primary="${1:?${usage}}" primary_port="${2:?${usage}}" datadir="${3:?${usage}}"
  local port="${4:?${usage}}"
  primary="$(realpath -m -- "${primary}")"
  datadir="$(realpath -m -- "${datadir}")"
  ulticode_pg_kill9 "${datadir}"
  rm -rf -- "${datadir}" && mkdir -p -- "${datadir}" || return 1
  ((EUID == 0)) && chown postgres:postgres -- "${datadir}"
  chmod 700 -- "${datadir}" || return 1
  _ulticode_log "pg_basebackup from ${primary} into ${datadir}"
  # Over the primary's private unix socket (pg_hba: local replication trust).
  _ulticode_pg_run pg_basebackup -h "$(dirname -- "${primary}")/pg-socket" -p "${primary_port}" \
    -U postgres -D "${datadir}" --write-recovery-conf --wal-method=stream --checkpoint=fast ||
    return 1
  ulticode_pg_start "${datadir}" "${port}" process
}

ulticode_pg_promote() {
  local datadir="${1:?usage: ulticode_pg_promote <datadir>}"
  datadir="$(realpath -m -- "${datadir}")"
  _ulticode_pg_run pg_ctl promote -D "${datadir}" -w -t 60 >/dev/null
}

ulticode_pg_crash() {
  local datadir="${1:?usage: ulticode_pg_crash <datadir>}"
  datadir="$(realpath -m -- "${datadir}")"
  _ulticode_pg_is_running "${datadir}" || return 0
  _ulticode_pg_run pg_ctl stop -D "${datadir}" -m immediate -w -t 30 >/dev/null
}

ulticode_pg_createdb() {
  local port="${1:?usage: ulticode_pg_createdb <port> <name...>}"
  shift
  local name exists
  local -a psql=("${ULTICODE_PG_BIN}/psql" -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "${port}" -U postgres -d postgres)
  for name in "$@"; do
    if [[ ! "${name}" =~ ^[A-Za-z_][A-Za-z0-9_]*$ ]]; then
      _ulticode_log "refusing database name: ${name}"
      return 2
    fi
    exists="$("${psql[@]}" -tAc "SELECT 1 FROM pg_database WHERE datname = '${name}'")" || return 1
    if [[ "${exists}" != 1 ]]; then
      _ulticode_log "creating database ${name}"
      if ! "${psql[@]}" -c "CREATE DATABASE \"${name}\""; then
        # Lost a race with someone else creating it?
        exists="$("${psql[@]}" -tAc "SELECT 1 FROM pg_database WHERE datname = '${name}'")" || return 1
        [[ "${exists}" == 1 ]] || return 1
      fi
    fi
  done
}

ulticode_pg_hba() {
  local datadir="${1:?usage: ulticode_pg_hba <datadir> <trust|scram-sha-256>}"
  local superuser="${2:?usage: ulticode_pg_hba <datadir> <trust|scram-sha-256>}"
  case "${superuser}" in
    trust | scram-sha-256) ;;
    *) _ulticode_log "superuser method must be trust or scram-sha-256, not ${superuser}"; return 2 ;;
  esac
  datadir="$(realpath -m -- "${datadir}")"
  # The unix socket lives in a private directory next to the data directory.
  cat >"${datadir}/pg_hba.conf.new" <<HBA || return 1
# Written by ulticode_pg_hba (scripts/lib/servers.sh).
local all all trust
local replication postgres trust
host  all postgres 127.0.0.1/32 ${superuser}
host  all all      127.0.0.1/32 scram-sha-256
HBA
  if ((EUID == 0)); then chown postgres:postgres -- "${datadir}/pg_hba.conf.new" || return 1; fi
  mv -f -- "${datadir}/pg_hba.conf.new" "${datadir}/pg_hba.conf" || return 1
  _ulticode_pg_run pg_ctl reload -D "${datadir}" >/dev/null
}

# ---------------------------------------------------------------- keys

# Dev signing keys in <secrets dir>, made once (openssl, mode 0600): each
# owner signs its audit events, Admin its own records; public-keys.txt is the
# key directory every service verifies against (docs/security.md).
ulticode_dev_signing_keys() {
  local secrets="${1:?usage: ulticode_dev_signing_keys <secrets dir> <made by>}"
  local made_by="${2:?usage: ulticode_dev_signing_keys <secrets dir> <made by>}" party key
  for party in auth app admin; do
    key="${secrets}/${party}-ed25519.key"
    if [[ ! -s "${key}" ]]; then
      (umask 077 && openssl genpkey -algorithm ed25519 -out "${key}") || return 1
      _ulticode_log "created dev signing key ${key}"
    fi
  done
  {
    echo "# <party> <base64 Ed25519 public key>: made by ${made_by}"
    for party in auth app admin; do
      printf '%s %s\n' "${party}" "$(openssl pkey -in "${secrets}/${party}-ed25519.key" -pubout \
        -outform DER | tail -c 32 | base64)"
    done
  } >"${secrets}/public-keys.txt.tmp" || return 1
  mv -f -- "${secrets}/public-keys.txt.tmp" "${secrets}/public-keys.txt"
}

# The transparency log's signing key <secrets>/log-ed25519.key (made once)
# and its c2sp.org/signed-note verifier key <secrets>/log.vkey, named
# <origin>, as `ulticode-verify vkey` writes it; and the owners' witness
# keys (<secrets>/witnesses.vkey) from their signing keys, which must exist.
ulticode_log_key() {
  local secrets="${1:?usage: ulticode_log_key <secrets dir> <origin> <ulticode-verify>}"
  local origin="${2:?usage: ulticode_log_key <secrets dir> <origin> <ulticode-verify>}"
  local verify="${3:?usage: ulticode_log_key <secrets dir> <origin> <ulticode-verify>}"
  local key="${secrets}/log-ed25519.key" public
  if [[ ! -s "${key}" ]]; then
    (umask 077 && openssl genpkey -algorithm ed25519 -out "${key}") || return 1
    _ulticode_log "created dev log key ${key}"
  fi
  public="$(openssl pkey -in "${key}" -pubout -outform DER | tail -c 32 | base64)" || return 1
  "${verify}" vkey --name="${origin}" --public-key="${public}" >"${secrets}/log.vkey.tmp" || return 1
  mv -f -- "${secrets}/log.vkey.tmp" "${secrets}/log.vkey"
  # The owners witness the log with their own keys: their cosignature keys.
  local party
  for party in auth app; do
    public="$(openssl pkey -in "${secrets}/${party}-ed25519.key" -pubout -outform DER |
      tail -c 32 | base64)" || return 1
    "${verify}" vkey --witness --name="${party}" --public-key="${public}" || return 1
  done >"${secrets}/witnesses.vkey.tmp"
  mv -f -- "${secrets}/witnesses.vkey.tmp" "${secrets}/witnesses.vkey"
}

# ---------------------------------------------------------------- tokens

ulticode_dev_jwt_issuer() {
  local secrets="${1:?usage: ulticode_dev_jwt_issuer <secrets dir>}"
  local key="${secrets}/jwt-ed25519.key" x kid
  if [[ ! -s "${key}" ]]; then
    (umask 077 && openssl genpkey -algorithm ed25519 -out "${key}") || return 1
    _ulticode_log "created dev token key ${key}"
  fi
  x="$(openssl pkey -in "${key}" -pubout -outform DER | tail -c 32 | openssl base64 -A |
    tr '+/' '-_' | tr -d '=')" || return 1
  kid="dev-$(printf '%s' "${x}" | sha256sum | cut -c1-12)"
  printf '%s\n' "${kid}" >"${secrets}/jwt.kid"
  printf '{"keys":[{"kty":"OKP","crv":"Ed25519","alg":"EdDSA","kid":"%s","x":"%s"}]}\n' \
    "${kid}" "${x}" >"${secrets}/jwks.json.tmp"
  mv -f -- "${secrets}/jwks.json.tmp" "${secrets}/jwks.json"
}

# ---------------------------------------------------------------- TLS

ulticode_pg_ssl() {
  local datadir="${1:?usage: ulticode_pg_ssl <datadir> <tls dir>}"
  local tlsdir="${2:?usage: ulticode_pg_ssl <datadir> <tls dir>}"
  datadir="$(realpath -m -- "${datadir}")"
  tlsdir="$(realpath -m -- "${tlsdir}")"
  # PostgreSQL insists on a key it owns with mode 0600: keep copies in the data directory.
  cp -f -- "${tlsdir}/pg-server.pem" "${datadir}/server.crt" || return 1
  cp -f -- "${tlsdir}/pg-server.key" "${datadir}/server.key" || return 1
  chmod 600 -- "${datadir}/server.key" "${datadir}/server.crt"
  if ((EUID == 0)); then chown postgres:postgres -- "${datadir}/server.crt" "${datadir}/server.key"; fi
  printf "ssl = on\nssl_cert_file = 'server.crt'\nssl_key_file = 'server.key'\n" \
    >"${datadir}/conf.d-ulticode-ssl.conf"
  grep -q "conf.d-ulticode-ssl.conf" "${datadir}/postgresql.conf" ||
    echo "include_if_exists = 'conf.d-ulticode-ssl.conf'" >>"${datadir}/postgresql.conf"
  if ((EUID == 0)); then chown postgres:postgres -- "${datadir}/conf.d-ulticode-ssl.conf"; fi
  _ulticode_pg_run pg_ctl reload -D "${datadir}" >/dev/null
}

ulticode_tls_ca() {
  local dir="${1:?usage: ulticode_tls_ca <dir>}"
  mkdir -p -- "${dir}" || return 1
  [[ -s "${dir}/ca.pem" && -s "${dir}/ca.key" ]] && return 0
  (umask 077 && openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
    -keyout "${dir}/ca.key" -out "${dir}/ca.pem" -days 3650 -subj "/CN=ulticode dev CA" \
    -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign \
    >/dev/null 2>&1)
}

ulticode_tls_cert() {
  local dir="${1:?usage: ulticode_tls_cert <dir> <name> <san>}"
  local name="${2:?usage: ulticode_tls_cert <dir> <name> <san>}"
  local san="${3:?usage: ulticode_tls_cert <dir> <name> <san>}"
  (umask 077 && openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
    -keyout "${dir}/${name}.key.new" -out "${dir}/${name}.csr" -subj "/CN=${name}" \
    >/dev/null 2>&1) || return 1
  openssl x509 -req -in "${dir}/${name}.csr" -CA "${dir}/ca.pem" -CAkey "${dir}/ca.key" \
    -CAcreateserial -days 825 -out "${dir}/${name}.pem.new" \
    -extfile <(printf 'subjectAltName=%s\nextendedKeyUsage=serverAuth,clientAuth\n' "${san}") \
    >/dev/null 2>&1 || return 1
  rm -f -- "${dir}/${name}.csr"
  # Key first, then certificate: a watcher never pairs a new cert with an old key for long.
  mv -f -- "${dir}/${name}.key.new" "${dir}/${name}.key"
  mv -f -- "${dir}/${name}.pem.new" "${dir}/${name}.pem"
}

# ---------------------------------------------------------------- Redis

# Prints the pid from <dir>/redis.pid if that process is a live redis-server.
_ulticode_redis_pid() {
  local pidfile="$1/redis.pid" pid comm
  [[ -f "${pidfile}" ]] || return 1
  pid="$(tr -dc '0-9' <"${pidfile}")"
  [[ -n "${pid}" ]] || return 1
  ulticode_pid_alive "${pid}" || return 1
  comm="$(cat "/proc/${pid}/comm" 2>/dev/null || true)"
  [[ "${comm}" == redis-server* ]] || return 1
  printf '%s\n' "${pid}"
}

# Up: PONG, or NOAUTH when the default user is off.
_ulticode_redis_ping() {
  [[ "$(redis-cli -h 127.0.0.1 -p "$1" ping 2>&1)" =~ ^(PONG|NOAUTH) ]]
}

ulticode_redis_superuser_acl() {
  local out="${1:?usage: ulticode_redis_superuser_acl <out> <user> <password file>}"
  local user="${2:?usage: ulticode_redis_superuser_acl <out> <user> <password file>}"
  local pwfile="${3:?usage: ulticode_redis_superuser_acl <out> <user> <password file>}"
  local hash
  hash="$(tr -d '\n' <"${pwfile}" | sha256sum | cut -d' ' -f1)" || return 1
  (umask 077 && printf 'user default off resetkeys resetchannels -@all\nuser %s on #%s ~* &* +@all\n' \
    "${user}" "${hash}" >"${out}")
}

# Redis's memory bound, in bytes, from the mesh's flags (docs/operating.md,
# "Redis memory, from the flags"): per owner its proof stream's share
# (--proof-stream-max-bytes), its audit stream's share
# (--owner-stream-max-bytes) and its cosignature stream (1 MiB), plus the
# clients' buffers (maxmemory-clients) and headroom for what a writer adds
# between two runs of Admin's stream guard.
#   ulticode_redis_maxmemory [owners] [proof bytes] [share bytes] [clients bytes] [headroom bytes]
ulticode_redis_maxmemory() {
  local owners="${1:-2}" proofs="${2:-67108864}" share="${3:-201326592}"
  local clients="${4:-67108864}" headroom="${5:-67108864}"
  echo $((owners * (proofs + share + 1048576) + clients + headroom))
}

ulticode_redis_start() {
  local dir="${1:?usage: ulticode_redis_start <dir> <port> <aof:yes|no> [aclfile]}"
  local port="${2:?usage: ulticode_redis_start <dir> <port> <aof:yes|no> [aclfile]}"
  local aof="${3:?usage: ulticode_redis_start <dir> <port> <aof:yes|no> [aclfile]}"
  local aclfile="${4:-}"
  local pid served_pid deadline
  local -a args=()
  _ulticode_is_port "${port}" || { _ulticode_log "bad port: ${port}"; return 2; }
  case "${aof}" in
    yes | no) ;;
    *) _ulticode_log "aof must be yes or no, not ${aof}"; return 2 ;;
  esac
  dir="$(realpath -m -- "${dir}")"
  mkdir -p -- "${dir}" || return 1

  if pid="$(_ulticode_redis_pid "${dir}")"; then
    # Which process serves the port (INFO needs a user once the default is off).
    served_pid="$(ss -Htlnp "sport = :${port}" 2>/dev/null | sed -n 's/.*pid=\([0-9]*\).*/\1/p' | head -n1)"
    if [[ "${served_pid}" == "${pid}" ]]; then
      _ulticode_log "Redis already running on 127.0.0.1:${port} (pid ${pid}, ${dir}); reusing it"
      return 0
    fi
    _ulticode_log "Redis for ${dir} is running (pid ${pid}) but not on port ${port}; stop it first (ulticode_redis_stop ${dir})"
    return 1
  fi
  rm -f -- "${dir}/redis.pid"

  # No value over 1 MiB, and a memory bound with noeviction sized from the
  # mesh's flags, as deployed (deploy/k8s/redis/redis.conf).
  args=(--daemonize yes --bind 127.0.0.1 --port "${port}" --dir "${dir}"
    --pidfile "${dir}/redis.pid" --logfile "${dir}/redis.log" --appendonly "${aof}"
    --proto-max-bulk-len 1mb --maxmemory "${ULTICODE_REDIS_MAXMEMORY:-$(ulticode_redis_maxmemory)}"
    --maxmemory-policy noeviction --maxmemory-clients "${ULTICODE_REDIS_CLIENTS_MEMORY:-67108864}")
  if [[ "${aof}" == no ]]; then
    args+=(--save '')
  fi
  if [[ -n "${aclfile}" ]]; then
    args+=(--aclfile "$(realpath -- "${aclfile}")")
  fi
  _ulticode_log "starting Redis on 127.0.0.1:${port} (appendonly=${aof}, dir ${dir})"
  redis-server "${args[@]}" || return 1

  deadline=$((SECONDS + ${ULTICODE_START_TIMEOUT:-60}))
  until _ulticode_redis_ping "${port}" && _ulticode_redis_pid "${dir}" >/dev/null; do
    if ((SECONDS >= deadline)); then
      _ulticode_log "Redis on 127.0.0.1:${port} did not answer PING; last lines of ${dir}/redis.log:"
      tail -n 30 -- "${dir}/redis.log" >&2 || true
      return 1
    fi
    sleep 0.1
  done
}

ulticode_redis_stop() {
  local dir="${1:?usage: ulticode_redis_stop <dir>}"
  local pid deadline
  dir="$(realpath -m -- "${dir}")"
  if ! pid="$(_ulticode_redis_pid "${dir}")"; then
    return 0
  fi
  _ulticode_log "stopping Redis (pid ${pid}, ${dir})"
  # SIGTERM = orderly SHUTDOWN: flushes the AOF / writes the RDB if configured.
  kill -TERM "${pid}" 2>/dev/null || true
  deadline=$((SECONDS + 15))
  while ulticode_pid_alive "${pid}"; do
    if ((SECONDS >= deadline)); then
      _ulticode_log "Redis (pid ${pid}) still running after 15s; sending SIGKILL"
      kill -KILL "${pid}" 2>/dev/null || true
      break
    fi
    sleep 0.1
  done
  # Wait for the process to disappear (it is not our child, so poll).
  while ulticode_pid_alive "${pid}"; do sleep 0.1; done
  rm -f -- "${dir}/redis.pid"
}
