#!/usr/bin/env bash
# Builds the project and runs the whole CTest suite against a throw-away
# PostgreSQL 15 (fsync off) and Redis 7 (no persistence) on free loopback ports.
#
# Usage: scripts/test.sh [ctest args...]      e.g. scripts/test.sh -L unit
#
# Environment:
#   ULTICODE_BUILD_TYPE  Release (default) or Debug
#   ULTICODE_BUILD_DIR   build directory (default: <repo>/build)
#   ULTICODE_SKIP_DEPS=1 skip the apt package check
#   ULTICODE_NO_BUILD=1  skip the build step (use an existing build directory)
# Exported to the tests: ULTICODE_TEST_PG_HOST/PORT/USER,
#   ULTICODE_TEST_REDIS_HOST/PORT/USER/PASSWORD_FILE, ULTICODE_TEST_BIN_DIR.
# shellcheck source-path=SCRIPTDIR
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
cd "${repo}"
ULTICODE_REPO_ROOT="${repo}"
# shellcheck source=lib/deps.sh
source "${repo}/scripts/lib/deps.sh"
# shellcheck source=lib/servers.sh
source "${repo}/scripts/lib/servers.sh"

t_start=${SECONDS}
ulticode_install_deps
ulticode_node_tools
t_deps=${SECONDS}
if [[ "${ULTICODE_NO_BUILD:-0}" != 1 ]]; then
  # Everything, and the fuzz targets (outside `all`), in one build.
  ulticode_build "${ULTICODE_BUILD_TYPE:-Release}" all fuzz_all
fi
build_dir="$(ulticode_build_dir)"
t_built=${SECONDS}

tmp=""
# shellcheck disable=SC2317  # invoked via trap
cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  if [[ -n "${tmp}" ]]; then
    ulticode_redis_stop "${tmp}/redis" || true
    ulticode_pg_stop "${tmp}/pg" || true
    rm -rf -- "${tmp}"
  fi
  exit "${rc}"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

tmp="$(mktemp -d "${TMPDIR:-/tmp}/ulticode-test.XXXXXX")"
# The temp dir is ours: let ulticode_pg_start make it traversable for postgres.
ULTICODE_PG_CHMOD_WITHIN="${tmp}"

pg_port="$(ulticode_free_port)"
ulticode_pg_start "${tmp}/pg" "${pg_port}" off
# Service roles need their SCRAM password; the tests' superuser does not.
ulticode_pg_hba "${tmp}/pg" trust
# Redis with the default user off; the tests connect as an all-powerful user
# whose password is in a file, and give each service its own ACL user.
redis_port="$(ulticode_free_port)"
(umask 077 && openssl rand -hex 16 >"${tmp}/redis-test.password")
ulticode_redis_superuser_acl "${tmp}/redis-users.acl" ulticode-test "${tmp}/redis-test.password"
ulticode_redis_start "${tmp}/redis" "${redis_port}" no "${tmp}/redis-users.acl"

export ULTICODE_TEST_PG_HOST=127.0.0.1
export ULTICODE_TEST_PG_PORT="${pg_port}"
export ULTICODE_TEST_PG_USER=postgres
export ULTICODE_TEST_REDIS_HOST=127.0.0.1
export ULTICODE_TEST_REDIS_PORT="${redis_port}"
export ULTICODE_TEST_REDIS_USER=ulticode-test
export ULTICODE_TEST_REDIS_PASSWORD_FILE="${tmp}/redis-test.password"
export ULTICODE_TEST_BIN_DIR="${build_dir}"

echo "[ulticode] PostgreSQL 127.0.0.1:${pg_port}, Redis 127.0.0.1:${redis_port}, build ${build_dir}" >&2
t_tests=${SECONDS}
rc=0
ctest --test-dir "${build_dir}" --output-on-failure --output-junit "${tmp}/junit.xml" \
  -j "${ULTICODE_JOBS:-2}" "$@" || rc=$?
t_end=${SECONDS}
# The chaos test's one-line verdict and each fuzz target's summary, in every
# log (ctest shows output only on failure).
grep -h '\[chaos\] \(seed\|SUMMARY\)\|\[fuzz\] fuzz_[a-z_]*: ' \
  "${build_dir}/Testing/Temporary/LastTest.log" >&2 2>/dev/null || true

# Where the time went: each phase, then each label's tests (docs/testing.md,
# "Where the time goes", keeps the latest figures of a run on a new clone).
if [[ -f "${tmp}/junit.xml" ]]; then
  /usr/bin/python3 "${repo}/scripts/lib/test_report.py" "${build_dir}" "${tmp}/junit.xml" >&2 || true
fi
echo "[ulticode] test.sh: ctest exit ${rc}; total $((t_end - t_start))s: dependencies $((t_deps - t_start))s, build $((t_built - t_deps))s, servers $((t_tests - t_built))s, tests $((t_end - t_tests))s" >&2
exit "${rc}"
