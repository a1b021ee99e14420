#!/usr/bin/env bash
# The benchmark suite, one command, on this machine: a private durable mesh
# (scripts/run-local.sh: PostgreSQL fsync + synchronous commit on, Redis AOF)
# and, in the same run and on the same PostgreSQL, the reference: pgbench
# running the same business transaction shape (bench/reference_*.sql).
# The phases (bench/suite.py): reference, closed loop (the maximum, CPU,
# commits/WAL per event, index entries per scan), open loop at 25..100 % of
# the maximum (lag curves), backlog drain after Admin was frozen, and the
# original system's settings side by side. Prints a summary and writes
# bench/results/<run>.json with PNG plots beside it.
#
# Usage: scripts/bench.sh [SECONDS]        (default 20 s per phase)
# Environment: ULTICODE_BENCH_CLIENTS (32), ULTICODE_BENCH_DRAIN_EVENTS (100000),
#              ULTICODE_BENCH_SOAK_SECONDS (0: no soak; the issue's soak is 1800),
#              ULTICODE_BENCH_PHASES (all; "soak": the closed loop and the soak only;
#              "replication": the closed loop with no, an asynchronous and a synchronous standby;
#              "sequence": the closed loop and what event numbering costs;
#              "model": the reference, the closed loop and the cost model;
#              "calibrate": the closed loop with fewer connections and threads, and
#              the cost model's batched stages at batches of 1, 3 and 256;
#              "log", "proofs": what the transparency log costs;
#              "growth": the closed loop and reads with 5 million more rows
#              (ULTICODE_BENCH_GROWTH_ROWS); "watch": WatchAuditLogs latency and
#              idle cost; "forward": the closed loop and the forwarder per sink),
#              ULTICODE_BENCH_OUT (bench/results), ULTICODE_SKIP_DEPS and
#              ULTICODE_NO_BUILD as for scripts/test.sh.
# shellcheck source-path=SCRIPTDIR
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
cd "${repo}"
ULTICODE_REPO_ROOT="${repo}"
# shellcheck source=lib/deps.sh
source "${repo}/scripts/lib/deps.sh"

seconds="${1:-20}"
[[ "${seconds}" =~ ^[1-9][0-9]*$ ]] || { echo "usage: scripts/bench.sh [SECONDS]" >&2; exit 2; }

ulticode_install_deps
if [[ "${ULTICODE_NO_BUILD:-0}" != 1 ]]; then ulticode_build Release; fi
build_dir="$(ulticode_build_dir)"

export ULTICODE_BENCH_BUILD_DIR="${build_dir}"
exec /usr/bin/python3 "${repo}/bench/suite.py" "${seconds}"
