#!/usr/bin/env bash
# shellcheck shell=bash
# Dependency installation and build helpers for UltiCode Audit Mesh.
# Source this file; it defines functions only and changes no shell options.
#
#   ulticode_deps_plan [--all]     the Debian packages the dependency step
#                                  installs here (or, with --all, on any Debian 12)
#   ulticode_install_deps          install that plan (apt-get)
#   ulticode_node_tools            npm ci the pinned tooling (package-lock.json:
#                                  buf, Kubernetes schemas) when the lockfile changed
#   ulticode_configure [Release|Debug]
#                                  configure the build directory (if needed)
#   ulticode_build [Release|Debug [TARGET...]]
#                                  configure (if needed) and build with Ninja
#
# Environment:
#   ULTICODE_BUILD_DIR   build directory (default: <repo>/build)
#   ULTICODE_JOBS        parallel build jobs (default: 2)
#   ULTICODE_SKIP_DEPS   if 1, ulticode_install_deps does nothing

if [[ -n "${_ULTICODE_DEPS_SH:-}" ]]; then
  return 0
fi
_ULTICODE_DEPS_SH=1

ULTICODE_REPO_ROOT="${ULTICODE_REPO_ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd -P)}"

ULTICODE_DEB_PACKAGES=(
  build-essential cmake ninja-build ccache pkg-config
  libgrpc++-dev protobuf-compiler-grpc grpc-proto libprotobuf-dev protobuf-compiler
  libpq-dev libhiredis-dev libabsl-dev prometheus-cpp-dev libssl-dev openssl stunnel4
  libcurl4-openssl-dev
  libgtest-dev libgmock-dev googletest
  postgresql-15 postgresql-client-15 redis-server
  prometheus
  # A real syslog receiver (TCP and TLS) for the forwarder's tests.
  rsyslog rsyslog-openssl
  python3-matplotlib python3-yaml linux-perf
  procps iproute2 curl git clang-format-14
  nodejs
  # The compiler of every build (ULTICODE_CXX below), with its archiver
  # (CMake takes llvm-ar-14 where llvm-14 is installed: it must be, for the
  # image's build to run the same commands) and the fuzzers' runtime.
  clang-14 llvm-14 libclang-rt-14-dev
  golang-go golang-golang-x-mod-dev
  # Google's API protos (google.rpc error details, google.api.field_behavior)
  # for proto/: Debian ships them only inside these two packages.
  golang-github-gogo-googleapis-dev libgoogle-common-protos-java
)

# Where a machine image may bring a command by another route, the dependency
# step installs Debian's package for it only when the command is missing:
# "command=package". Debian's nodejs (18 on Debian 12) comes without npm, which
# Debian's npm package brings; an image's own nodejs may include npm, and
# Debian's npm would then conflict with it.
ULTICODE_DEB_PACKAGES_FOR_MISSING_COMMANDS=(
  npm=npm
)

_ulticode_log() { printf '[ulticode] %s\n' "$*" >&2; }

# Prints the packages of ULTICODE_DEB_PACKAGES that are not installed, one a line.
ulticode_missing_deps() {
  local status pkg
  # One dpkg-query call for all packages; unknown packages only print to stderr.
  status="$(dpkg-query -W -f='${Package} ${db:Status-Abbrev}\n' "${ULTICODE_DEB_PACKAGES[@]}" 2>/dev/null || true)"
  for pkg in "${ULTICODE_DEB_PACKAGES[@]}"; do
    if ! grep -Eq "^${pkg//+/\\+} ii" <<<"${status}"; then
      printf '%s\n' "${pkg}"
    fi
  done
}

# The one source of truth for what the dependency step installs, one package a
# line. Without arguments: what it installs on this machine (the missing
# packages, and the package of each missing command). With --all: every package
# it may install on some Debian 12, whatever this machine already has (what
# tests/deploy/deps_test.py checks the scripts' commands against).
ulticode_deps_plan() {
  local entry
  if [[ "${1:-}" == --all ]]; then
    printf '%s\n' "${ULTICODE_DEB_PACKAGES[@]}"
    for entry in "${ULTICODE_DEB_PACKAGES_FOR_MISSING_COMMANDS[@]}"; do
      printf '%s\n' "${entry#*=}"
    done
    return 0
  fi
  ulticode_missing_deps
  for entry in "${ULTICODE_DEB_PACKAGES_FOR_MISSING_COMMANDS[@]}"; do
    command -v "${entry%%=*}" >/dev/null 2>&1 || printf '%s\n' "${entry#*=}"
  done
}

ulticode_install_deps() {
  if [[ "${ULTICODE_SKIP_DEPS:-0}" == 1 ]]; then
    _ulticode_log "ULTICODE_SKIP_DEPS=1: not checking packages"
    return 0
  fi
  if ! command -v dpkg-query >/dev/null 2>&1; then
    _ulticode_log "dpkg-query not found (not Debian?): skipping package check"
    return 0
  fi
  local -a missing=() sudo_cmd=()
  mapfile -t missing < <(ulticode_deps_plan)
  if ((${#missing[@]} == 0)); then
    return 0
  fi
  if ((EUID != 0)); then
    if ! command -v sudo >/dev/null 2>&1; then
      _ulticode_log "missing packages (${missing[*]}) and not root and no sudo"
      return 1
    fi
    sudo_cmd=(sudo)
  fi
  _ulticode_log "installing missing packages: ${missing[*]}"
  "${sudo_cmd[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -q
  "${sudo_cmd[@]}" env DEBIAN_FRONTEND=noninteractive \
    apt-get install -y -q --no-install-recommends "${missing[@]}"
}

ulticode_node_tools() {
  local root="${ULTICODE_REPO_ROOT}" stamp want
  stamp="${root}/node_modules/.ulticode-lock.sha256"
  want="$(sha256sum "${root}/package-lock.json" | cut -d' ' -f1)"
  if [[ -x "${root}/node_modules/.bin/buf" && "$(cat "${stamp}" 2>/dev/null)" == "${want}" ]]; then
    return 0
  fi
  if ! command -v npm >/dev/null 2>&1; then
    _ulticode_log "npm is missing: run ulticode_install_deps (it installs Debian's npm where the image has none)"
    return 1
  fi
  _ulticode_log "installing the pinned npm tooling (npm ci, package-lock.json)"
  (cd "${root}" && npm ci --no-audit --no-fund --loglevel=error) || return 1
  printf '%s\n' "${want}" >"${stamp}"
}

ulticode_build_dir() {
  printf '%s\n' "${ULTICODE_BUILD_DIR:-${ULTICODE_REPO_ROOT}/build}"
}

# The compiler of every build: the services, the tests, the fuzz targets
# (libFuzzer is clang's) and the image (Containerfile) alike, so that the
# fuzz targets and the image's check reuse this build's objects.
ULTICODE_CXX=clang++-14

# ulticode_configure [Release|Debug]   (default: Release): configures the
# build directory when it is not, or not as asked.
ulticode_configure() {
  local type="${1:-Release}" dir cache current generator compiler
  case "${type}" in
    Release | Debug | RelWithDebInfo | MinSizeRel) ;;
    *)
      _ulticode_log "unknown build type: ${type}"
      return 2
      ;;
  esac
  dir="$(ulticode_build_dir)"
  cache="${dir}/CMakeCache.txt"
  current=""
  generator=""
  compiler=""
  if [[ -f "${cache}" ]]; then
    current="$(sed -n 's/^CMAKE_BUILD_TYPE:[A-Z]*=//p' "${cache}")"
    generator="$(sed -n 's/^CMAKE_GENERATOR:[A-Z]*=//p' "${cache}")"
    compiler="$(sed -n 's/^CMAKE_CXX_COMPILER:[A-Z]*=//p' "${cache}")"
    if [[ "${generator}" != "Ninja" ]]; then
      _ulticode_log "${dir} was configured with generator '${generator}', not Ninja; remove it or set ULTICODE_BUILD_DIR"
      return 1
    fi
    if [[ "${compiler##*/}" != "${ULTICODE_CXX}" ]]; then
      _ulticode_log "${dir} was configured with ${compiler:-another compiler}: configuring it anew with ${ULTICODE_CXX}"
      rm -rf -- "${cache}" "${dir}/CMakeFiles"
    fi
  fi
  if [[ ! -f "${cache}" || ! -f "${dir}/build.ninja" || "${current}" != "${type}" ]]; then
    _ulticode_log "configuring ${dir} (${type}, ${ULTICODE_CXX})"
    cmake -S "${ULTICODE_REPO_ROOT}" -B "${dir}" -G Ninja -DCMAKE_BUILD_TYPE="${type}" \
      -DCMAKE_CXX_COMPILER="${ULTICODE_CXX}"
  fi
}

# ulticode_build [Release|Debug [TARGET...]]   (default: Release, all)
ulticode_build() {
  local -a targets=()
  ((${#@} > 1)) && targets=(--target "${@:2}")
  ulticode_configure "${1:-Release}" || return
  cmake --build "$(ulticode_build_dir)" -j "${ULTICODE_JOBS:-2}" "${targets[@]}"
}
