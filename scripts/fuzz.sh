#!/usr/bin/env bash
# Builds the libFuzzer targets of fuzz/ in the main build (clang-14; each
# target's code under test compiled again with libFuzzer's coverage, ASan and
# UBSan, the rest linked as built: fuzz/CMakeLists.txt) and runs each target
# for a while from a copy of its seed corpus (fuzz/corpus/<target>/), two at
# a time. Fails naming the target, its crash artifact and the sanitizer
# report on any crash, leak, timeout, out-of-memory or sanitizer report, or
# when a target does not build.
#
# Usage: scripts/fuzz.sh [SECONDS_PER_TARGET]     e.g. nice -n 10 scripts/fuzz.sh 600
#
# Environment:
#   ULTICODE_FUZZ_SECONDS    seconds per target without an argument (default: 20)
#   ULTICODE_BUILD_DIR       the main build directory (default: <repo>/build)
#   ULTICODE_FUZZ_TARGETS    space-separated subset of the targets (default: all)
#   ULTICODE_JOBS            parallel build jobs and fuzzers at once (default: 2)
#   ULTICODE_NO_BUILD=1      skip configure and build (use the existing binaries)
# Needs the Debian packages clang-14 and libclang-rt-14-dev (listed in
# scripts/lib/deps.sh; install them with ulticode_install_deps); installs nothing.
# Output: one summary line per target, then "fuzz: N passed, M failed".
# Exit status: 0 when every target passed, 1 otherwise, 2 for bad usage.
# Failing targets keep their work directory (corpus, artifacts, log) under
# ${TMPDIR:-/tmp}/ulticode-fuzz.*; passing ones are removed.
# shellcheck source-path=SCRIPTDIR
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
cd "${repo}"
ULTICODE_REPO_ROOT="${repo}"
# shellcheck source=lib/deps.sh
source "${repo}/scripts/lib/deps.sh"

all_targets=(fuzz_entry_validation fuzz_envelope fuzz_page_token fuzz_request_validation
  fuzz_bounded_replies fuzz_tlog)

seconds="${1:-${ULTICODE_FUZZ_SECONDS:-20}}"
if [[ $# -gt 1 || ! "${seconds}" =~ ^[1-9][0-9]*$ ]]; then
  echo "usage: scripts/fuzz.sh [SECONDS_PER_TARGET]" >&2
  exit 2
fi
read -r -a targets <<<"${ULTICODE_FUZZ_TARGETS:-${all_targets[*]}}"
build_dir="$(ulticode_build_dir)"
jobs="${ULTICODE_JOBS:-2}"

log() { printf '[fuzz] %s\n' "$*" >&2; }

tmp=""
failed_any=0
# shellcheck disable=SC2317  # invoked via trap
cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  if [[ -n "${tmp}" && -d "${tmp}" ]]; then
    if ((failed_any == 0)); then
      rm -rf -- "${tmp}"
    else
      log "work directories of failed targets kept in ${tmp}"
    fi
  fi
  exit "${rc}"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

tmp="$(mktemp -d "${TMPDIR:-/tmp}/ulticode-fuzz.XXXXXX")"

if [[ "${ULTICODE_NO_BUILD:-0}" != 1 ]]; then
  missing_pkgs="$(ulticode_missing_deps | grep -E '^(clang-14|libclang-rt-14-dev)$' | tr '\n' ' ' || true)"
  if [[ -n "${missing_pkgs}" ]] || ! command -v clang++-14 >/dev/null 2>&1; then
    log "missing Debian packages: ${missing_pkgs:-clang-14} (apt-get install -y clang-14 libclang-rt-14-dev)"
    exit 1
  fi
  # The main build as it is configured; a new one as scripts/test.sh makes it.
  compiler="$(sed -n 's/^CMAKE_CXX_COMPILER:[A-Z]*=//p' "${build_dir}/CMakeCache.txt" 2>/dev/null || true)"
  if [[ -z "${compiler}" ]]; then
    ulticode_configure Release >"${tmp}/configure.log" 2>&1 || {
      tail -n 30 "${tmp}/configure.log" >&2
      log "cmake configure of ${build_dir} failed"
      failed_any=1
      exit 1
    }
  elif [[ "${compiler##*/}" != "${ULTICODE_CXX}" ]]; then
    log "${build_dir} is compiled with ${compiler}: the fuzz targets need a ${ULTICODE_CXX} build (scripts/test.sh makes one)"
    exit 1
  fi
fi

passed=0
failed=0
summaries=()

# fail <target> <why>: records a failed target.
fail() {
  failed=$((failed + 1))
  failed_any=1
  summaries+=("$1: FAILED ($2)")
  log "$1: FAILED ($2)"
}

# build_target <target>: builds it (one target at a time, so one that does
# not build leaves the others running, and a stale binary never runs for a
# target that failed to build); true when it can run.
build_target() {
  local target="$1" work="${tmp}/$1"
  mkdir -p "${work}/corpus" "${work}/artifacts"
  if [[ "${ULTICODE_NO_BUILD:-0}" != 1 ]]; then
    log "building ${target}"
    if ! ninja -C "${build_dir}" -j "${jobs}" "${target}" >"${work}/build.log" 2>&1; then
      grep -E '(error|FAILED)' "${work}/build.log" | head -n 20 >&2 || true
      tail -n 5 "${work}/build.log" >&2
      fail "${target}" "build failed; log ${work}/build.log"
      return 1
    fi
  fi
  if [[ ! -x "${build_dir}/fuzz/${target}" ]]; then
    fail "${target}" "no binary ${build_dir}/fuzz/${target}"
    return 1
  fi
  local corpus_src="${repo}/fuzz/corpus/${target}"
  if [[ ! -d "${corpus_src}" ]] || [[ -z "$(ls -A "${corpus_src}")" ]]; then
    fail "${target}" "no seed corpus in ${corpus_src}"
    return 1
  fi
  cp -- "${corpus_src}"/* "${work}/corpus/"
}

# run_target <target>: runs it from its corpus copy; writes ${work}/result,
# "ok <stats>" or "FAILED <why>", and for a failure ${work}/report.
run_target() {
  local target="$1" work="${tmp}/$1" bin="${build_dir}/fuzz/$1" rc=0
  log "running ${target} for ${seconds}s"
  # A hard stop well past -max_total_time, in case the fuzzer itself wedges.
  ASAN_OPTIONS="${ASAN_OPTIONS:+${ASAN_OPTIONS}:}detect_leaks=1" \
    UBSAN_OPTIONS="${UBSAN_OPTIONS:+${UBSAN_OPTIONS}:}print_stacktrace=1:halt_on_error=1" \
    timeout -k 10 "$((seconds + 120))" "${bin}" \
    -max_total_time="${seconds}" -timeout=10 -rss_limit_mb=2048 -detect_leaks=1 \
    -print_final_stats=1 -artifact_prefix="${work}/artifacts/" \
    "${work}/corpus" >"${work}/fuzz.log" 2>&1 || rc=$?

  # libFuzzer's final status line ("#N DONE cov: ... exec/s: ..."), or the last "#N" one.
  local final runs execs cov ft corp stats artifacts report=0 why first
  final="$(grep -E '^#[0-9]+[[:space:]]+DONE' "${work}/fuzz.log" | tail -n 1 || true)"
  if [[ -z "${final}" ]]; then
    final="$(grep -E '^#[0-9]+[[:space:]]' "${work}/fuzz.log" | tail -n 1 || true)"
  fi
  runs="$(sed -nE 's/^#([0-9]+).*/\1/p' <<<"${final}")"
  execs="$(sed -nE 's/.*exec\/s: ([0-9]+).*/\1/p' <<<"${final}")"
  cov="$(sed -nE 's/.*cov: ([0-9]+).*/\1/p' <<<"${final}")"
  ft="$(sed -nE 's/.*ft: ([0-9]+).*/\1/p' <<<"${final}")"
  corp="$(sed -nE 's/.*corp: ([0-9]+\/[0-9]+[a-zA-Z]*).*/\1/p' <<<"${final}")"
  stats="runs=${runs:-?} exec/s=${execs:-?} cov=${cov:-?} ft=${ft:-?} corp=${corp:-?} time=${seconds}s"

  artifacts="$(find "${work}/artifacts" -type f | sort)"
  if grep -qE '(ERROR: (AddressSanitizer|LeakSanitizer|UndefinedBehaviorSanitizer|libFuzzer)|runtime error:|SUMMARY: [A-Za-z]+Sanitizer|FUZZ_CHECK failed|deadly signal)' \
    "${work}/fuzz.log"; then
    report=1
  fi
  if ((rc == 0 && report == 0)) && [[ -z "${artifacts}" && -n "${runs}" ]]; then
    echo "ok ${stats}" >"${work}/result"
    return 0
  fi

  why="exit ${rc}"
  if ((rc == 124 || rc == 137)); then
    why="hung: killed after $((seconds + 120))s"
  fi
  if ((report == 1)); then
    why="${why}, sanitizer or libFuzzer report"
  fi
  if [[ -z "${runs}" ]]; then
    why="${why}, no libFuzzer status line"
  fi
  {
    echo "---- ${target}: report tail (full log ${work}/fuzz.log) ----"
    # From the first report line on, else the end of the log.
    first="$(grep -nE '(==[0-9]+==ERROR|ERROR: libFuzzer|runtime error:|FUZZ_CHECK failed|deadly signal|ALARM:)' \
      "${work}/fuzz.log" | head -n 1 | cut -d: -f1 || true)"
    if [[ -n "${first}" ]]; then
      sed -n "${first},$((first + 59))p" "${work}/fuzz.log"
    else
      tail -n 40 "${work}/fuzz.log"
    fi
    echo "---- ${target}: artifacts ----"
    if [[ -n "${artifacts}" ]]; then
      printf '%s\n' "${artifacts}"
      echo "reproduce: ${bin} <artifact>"
    else
      echo "(none written)"
    fi
  } >"${work}/report"
  echo "FAILED ${why}; ${stats}; artifacts: ${artifacts:-none}" >"${work}/result"
}

build_start=${SECONDS}
runnable=()
for target in "${targets[@]}"; do
  if build_target "${target}"; then
    runnable+=("${target}")
  fi
done
log "built in $((SECONDS - build_start))s"

# The fuzzers, ULTICODE_JOBS at a time.
running=0
for target in "${runnable[@]}"; do
  if ((running >= jobs)); then
    wait -n || true
    running=$((running - 1))
  fi
  run_target "${target}" &
  running=$((running + 1))
done
wait

for target in "${runnable[@]}"; do
  result="$(cat "${tmp}/${target}/result" 2>/dev/null || echo "FAILED no result")"
  if [[ "${result}" == ok* ]]; then
    passed=$((passed + 1))
    summaries+=("${target}: ${result}")
    log "${target}: ${result}"
    rm -rf -- "${tmp:?}/${target}"
  else
    cat "${tmp}/${target}/report" >&2 2>/dev/null || true
    fail "${target}" "${result#FAILED }"
  fi
done

echo
for line in "${summaries[@]}"; do
  echo "${line}"
done
echo "fuzz: ${passed} passed, ${failed} failed"
if ((failed > 0)); then
  exit 1
fi
