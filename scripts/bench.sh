#!/usr/bin/env bash
# The benchmark suite, one command, on this machine: a private durable mesh
# (scripts/run-local.sh: PostgreSQL fsync + synchronous commit on, Redis AOF)
# and, in the same run and on the same PostgreSQL, the reference: pgbench
# running the same business transaction shape (bench/reference_*.sql).
# Prints and writes one JSON file with both and their ratios.
#
# Usage: scripts/bench.sh [SECONDS]        (default 20 s per phase)
# Environment: ULTICODE_BENCH_CLIENTS (32), ULTICODE_BENCH_OUT (bench/results),
#              ULTICODE_SKIP_DEPS, ULTICODE_NO_BUILD as for scripts/test.sh.
#
# Measured (see docs/performance.md): throughput (pgbench tps vs audited
# mutations/s), CPU per operation of the whole machine (/proc/stat), the RPC
# latency percentiles, and the commit -> audit row lag of this run's events.
# shellcheck source-path=SCRIPTDIR
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
cd "${repo}"
ULTICODE_REPO_ROOT="${repo}"
# shellcheck source=lib/deps.sh
source "${repo}/scripts/lib/deps.sh"

seconds="${1:-20}"
clients="${ULTICODE_BENCH_CLIENTS:-32}"
out_dir="${ULTICODE_BENCH_OUT:-${repo}/bench/results}"
[[ "${seconds}" =~ ^[1-9][0-9]*$ ]] || { echo "usage: scripts/bench.sh [SECONDS]" >&2; exit 2; }

ulticode_install_deps
if [[ "${ULTICODE_NO_BUILD:-0}" != 1 ]]; then ulticode_build Release; fi
build_dir="$(ulticode_build_dir)"

state="$(mktemp -d "${TMPDIR:-/tmp}/ulticode-bench.XXXXXX")"
off=300
pg_port=$((55432 + off))
mesh_pid=""
cleanup() {
  if [[ -n "${mesh_pid}" ]]; then kill -TERM "${mesh_pid}" 2>/dev/null || true; wait "${mesh_pid}" || true; fi
  rm -rf -- "${state}"
}
trap cleanup EXIT

log() { printf '[bench] %s\n' "$*" >&2; }
busy_jiffies() { awk '/^cpu /{print $2+$3+$4+$7+$8}' /proc/stat; }
# utime+stime jiffies per command name, summed over live processes.
cpu_by_comm() {
  cat /proc/[0-9]*/stat 2>/dev/null |
    awk '{ c = $0; sub(/^[0-9]+ \(/, "", c); name = substr(c, 1, index(c, ") ") - 1);
           rest = substr(c, index(c, ") ") + 2); split(rest, f, " ");
           cpu[name] += f[12] + f[13] } END { for (n in cpu) print n, cpu[n] }' | sort
}
hz="$(getconf CLK_TCK)"

log "starting a private durable mesh (${state})"
ULTICODE_STATE_DIR="${state}" ULTICODE_LOCAL_PORT_OFFSET="${off}" ULTICODE_SKIP_DEPS=1 \
  ULTICODE_LOG_LEVEL=warn ULTICODE_ACCESS_LOG=false \
  scripts/run-local.sh --no-build >"${state}/mesh.log" 2>&1 &
mesh_pid=$!
for _ in $(seq 1 240); do
  grep -q "is up" "${state}/mesh.log" && break
  kill -0 "${mesh_pid}" 2>/dev/null || { cat "${state}/mesh.log" >&2; exit 1; }
  sleep 0.5
done
grep -q "is up" "${state}/mesh.log" || { log "mesh did not come up"; exit 1; }
export PGPASSFILE="${state}/secrets/pgpass"
psql=("${ULTICODE_PG_BIN:-/usr/lib/postgresql/15/bin}/psql" -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "${pg_port}" -U postgres)

log "reference: pgbench, ${clients} clients, ${seconds}s"
"${psql[@]}" -d postgres -c "CREATE DATABASE bench_ref"
"${psql[@]}" -d bench_ref -f bench/reference_schema.sql
b0="$(busy_jiffies)"
pgbench_out="$("${ULTICODE_PG_BIN:-/usr/lib/postgresql/15/bin}/pgbench" -n -h 127.0.0.1 -p "${pg_port}" \
  -U postgres -c "${clients}" -j 2 -T "${seconds}" -f bench/reference_txn.sql bench_ref 2>&1)"
b1="$(busy_jiffies)"
ref_tps="$(sed -n 's/^tps = \([0-9.]*\) .*/\1/p' <<<"${pgbench_out}" | head -n1)"
ref_txns="$(sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' <<<"${pgbench_out}")"
ref_cpu_ms="$(awk -v j=$((b1 - b0)) -v hz="${hz}" -v n="${ref_txns}" 'BEGIN{printf "%.3f", j*1000/hz/n}')"

log "mesh: ulticode-loadgen closed loop, ${clients} in flight, ${seconds}s"
(umask 077 && ULTICODE_STATE_DIR="${state}" scripts/dev-token.sh bench auth.admin app.editor >"${state}/token")
run_id="bench-$(date +%s)"
cpu_by_comm >"${state}/cpu0"
b0="$(busy_jiffies)"
mesh_json="$("${build_dir}/bench/ulticode-loadgen" --auth=127.0.0.1:$((50051 + off)) \
  --app=127.0.0.1:$((50052 + off)) --token-file="${state}/token" --mode=closed \
  --clients="${clients}" --duration="${seconds}s" --run-id="${run_id}")"
# Until every event of the run is in audit_logs (or 120 s).
mesh_ok="$(sed -n 's/.*"ok":\([0-9]*\).*/\1/p' <<<"${mesh_json}")"
for _ in $(seq 1 240); do
  landed="$("${psql[@]}" -d ulticode_admin -tAc \
    "SELECT count(*) FROM audit_logs WHERE request_id LIKE '${run_id}-%'" || echo 0)"
  ((landed >= mesh_ok)) && break
  sleep 0.5
done
b1="$(busy_jiffies)"
cpu_by_comm >"${state}/cpu1"
# Peak RSS (VmHWM) of each service process, MiB.
rss="$(for f in /proc/[0-9]*/status; do
  awk '/^Name:/{n=$2} /^VmHWM:/{if (n ~ /^ulticode-(auth|app|admin)$/) printf "%s %.1f\n", n, $2/1024}' "${f}" 2>/dev/null
done | sort | awk '{ printf "%s\"%s\":%s", (NR > 1 ? "," : ""), $1, $2 }')"
# Where the mesh's CPU went: ms per mutation by process name (top 6).
breakdown="$(join -a2 -e 0 -o 0,1.2,2.2 "${state}/cpu0" "${state}/cpu1" |
  awk -v hz="${hz}" -v n="${mesh_ok}" '{ d = $3 - $2; if (d > 0) printf "%s %.3f\n", $1, d*1000/hz/n }' |
  sort -k2 -rn | head -n 6 | awk '{ printf "%s\"%s\":%s", (NR > 1 ? "," : ""), $1, $2 }')"
mesh_cpu_ms="$(awk -v j=$((b1 - b0)) -v hz="${hz}" -v n="${mesh_ok}" 'BEGIN{printf "%.3f", j*1000/hz/n}')"
lag="$("${psql[@]}" -d ulticode_admin -tAc "SELECT
  round(1000 * percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM ingested_at - occurred_at))::numeric, 1) || ',' ||
  round(1000 * percentile_cont(0.99) WITHIN GROUP (ORDER BY extract(epoch FROM ingested_at - occurred_at))::numeric, 1)
  FROM audit_logs WHERE request_id LIKE '${run_id}-%'")"
mesh_rate="$(sed -n 's/.*"ok_per_second":\([0-9.]*\).*/\1/p' <<<"${mesh_json}")"

mkdir -p -- "${out_dir}"
out="${out_dir}/${run_id}.json"
ratio_tps="$(awk -v a="${mesh_rate}" -v b="${ref_tps}" 'BEGIN{printf "%.3f", a/b}')"
ratio_cpu="$(awk -v a="${mesh_cpu_ms}" -v b="${ref_cpu_ms}" 'BEGIN{printf "%.2f", a/b}')"
cat >"${out}" <<JSON
{"run_id":"${run_id}","seconds":${seconds},"clients":${clients},
 "reference":{"tps":${ref_tps},"transactions":${ref_txns},"cpu_ms_per_txn":${ref_cpu_ms}},
 "mesh":${mesh_json},
 "mesh_cpu_ms_per_mutation":${mesh_cpu_ms},
 "mesh_cpu_ms_per_mutation_by_process":{${breakdown}},
 "mesh_audit_rows":${landed},
 "peak_rss_mib":{${rss}},
 "commit_to_audit_row_ms":{"p50":${lag%%,*},"p99":${lag##*,}},
 "ratios":{"throughput_vs_pgbench":${ratio_tps},"cpu_vs_pgbench":${ratio_cpu}}}
JSON
log "reference ${ref_tps} tps, ${ref_cpu_ms} ms CPU/txn; mesh ${mesh_rate} mutations/s, ${mesh_cpu_ms} ms CPU/mutation"
log "CPU ms per mutation by process: ${breakdown}; peak RSS MiB: ${rss}"
log "ratios: throughput ${ratio_tps} x pgbench, CPU ${ratio_cpu} x pgbench; lag p50/p99 ${lag} ms; audit rows ${landed}/${mesh_ok}"
cat "${out}"
