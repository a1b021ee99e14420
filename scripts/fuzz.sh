#!/usr/bin/env bash
# Builds the libFuzzer targets of fuzz/ with clang-14, ASan and UBSan (the
# whole tree instrumented, in a build directory of its own) and runs each
# target for a while from a copy of its seed corpus (fuzz/corpus/<target>/).
# Fails naming the target, its crash artifact and the sanitizer report on any
# crash, leak, timeout, out-of-memory or sanitizer report, or when a target
# does not build.
#
# Usage: scripts/fuzz.sh [SECONDS_PER_TARGET]     e.g. nice -n 10 scripts/fuzz.sh 600
#
# Environment:
#   ULTICODE_FUZZ_SECONDS    seconds per target without an argument (default: 20)
#   ULTICODE_FUZZ_BUILD_DIR  build directory (default: <repo>/build-fuzz)
#   ULTICODE_FUZZ_TARGETS    space-separated subset of the targets (default: all)
#   ULTICODE_JOBS            parallel build jobs (default: 2)
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
build_dir="${ULTICODE_FUZZ_BUILD_DIR:-${repo}/build-fuzz}"
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
  cache="${build_dir}/CMakeCache.txt"
  if [[ -f "${cache}" ]] && ! grep -q '^CMAKE_CXX_COMPILER:[A-Z]*=.*clang++-14$' "${cache}"; then
    log "${build_dir} was configured with another compiler; remove it or set ULTICODE_FUZZ_BUILD_DIR"
    exit 1
  fi
  launcher=()
  if command -v ccache >/dev/null 2>&1; then
    launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  fi
  log "configuring ${build_dir} (clang-14, ULTICODE_FUZZ=ON)"
  CC=clang-14 CXX=clang++-14 cmake -S "${repo}" -B "${build_dir}" -G Ninja \
    -DCMAKE_BUILD_TYPE=Debug -DULTICODE_FUZZ=ON "${launcher[@]}" >"${tmp}/configure.log" 2>&1 || {
    tail -n 30 "${tmp}/configure.log" >&2
    log "cmake configure failed"
    failed_any=1
    exit 1
  }
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

for target in "${targets[@]}"; do
  work="${tmp}/${target}"
  mkdir -p "${work}/corpus" "${work}/artifacts"
  bin="${build_dir}/fuzz/${target}"

  if [[ "${ULTICODE_NO_BUILD:-0}" != 1 ]]; then
    log "building ${target}"
    # One target at a time, so one that does not build leaves the others
    # running, and a stale binary never runs for a target that failed to build.
    if ! ninja -C "${build_dir}" -j "${jobs}" "${target}" >"${work}/build.log" 2>&1; then
      grep -E '(error|FAILED)' "${work}/build.log" | head -n 20 >&2 || true
      tail -n 5 "${work}/build.log" >&2
      fail "${target}" "build failed; log ${work}/build.log"
      continue
    fi
  fi
  if [[ ! -x "${bin}" ]]; then
    fail "${target}" "no binary ${bin}"
    continue
  fi
  corpus_src="${repo}/fuzz/corpus/${target}"
  if [[ ! -d "${corpus_src}" ]] || [[ -z "$(ls -A "${corpus_src}")" ]]; then
    fail "${target}" "no seed corpus in ${corpus_src}"
    continue
  fi
  cp -- "${corpus_src}"/* "${work}/corpus/"

  log "running ${target} for ${seconds}s"
  rc=0
  # A hard stop well past -max_total_time, in case the fuzzer itself wedges.
  ASAN_OPTIONS="${ASAN_OPTIONS:+${ASAN_OPTIONS}:}detect_leaks=1" \
    UBSAN_OPTIONS="${UBSAN_OPTIONS:+${UBSAN_OPTIONS}:}print_stacktrace=1:halt_on_error=1" \
    timeout -k 10 "$((seconds + 120))" "${bin}" \
    -max_total_time="${seconds}" -timeout=10 -rss_limit_mb=2048 -detect_leaks=1 \
    -print_final_stats=1 -artifact_prefix="${work}/artifacts/" \
    "${work}/corpus" >"${work}/fuzz.log" 2>&1 || rc=$?

  # libFuzzer's final status line ("#N DONE cov: ... exec/s: ..."), or the last "#N" one.
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
  report=0
  if grep -qE '(ERROR: (AddressSanitizer|LeakSanitizer|UndefinedBehaviorSanitizer|libFuzzer)|runtime error:|SUMMARY: [A-Za-z]+Sanitizer|FUZZ_CHECK failed|deadly signal)' \
    "${work}/fuzz.log"; then
    report=1
  fi
  if ((rc == 0 && report == 0)) && [[ -z "${artifacts}" && -n "${runs}" ]]; then
    passed=$((passed + 1))
    summaries+=("${target}: ok ${stats}")
    log "${target}: ok ${stats}"
    rm -rf -- "${work}"
    continue
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
      tail -n "+${first}" "${work}/fuzz.log" | head -n 60
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
  } >&2
  fail "${target}" "${why}; ${stats}; artifacts: ${artifacts:-none}"
done

echo
for line in "${summaries[@]}"; do
  echo "${line}"
done
echo "fuzz: ${passed} passed, ${failed} failed"
if ((failed > 0)); then
  exit 1
fi
