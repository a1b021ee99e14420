#!/usr/bin/env bash
# The Containerfile, checked without a container engine (none runs here) and
# without compiling anything again: the main build (ULTICODE_BUILD_DIR) has
# built the image's targets with the same compiler and flags.
#   0. .dockerignore lets in exactly the COPY paths (no secrets, no build
#      trees in the context), and this host runs the Debian release the
#      image is built on (the package checks ask this host's dpkg);
#   1. the build stage builds its targets: configured from the COPY'd paths
#      alone with its cmake flags, it runs exactly the main build's commands
#      for them, on files that are COPY'd or come from its packages
#      (containerfile_build.py says how);
#   2. the build stage installs every -dev package the build needs (the
#      ones scripts/lib/deps.sh installs, less test and tool packages);
#   3. the runtime stage installs every library the built binaries load
#      (ldd -> dpkg -S), directly or through dependencies, or it is in every
#      Debian base (Priority: required);
#   4. it ends as a numeric non-root USER;
#   5. the binaries the runtime stage installs are the targets built.
# ctest label: deploy.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd -P)"
file="${root}/Containerfile"
build="${ULTICODE_BUILD_DIR:-${root}/build}"
work="${build}/containerfile-check"
rm -rf "${work}" && mkdir -p "${work}"

mapfile -t copies < <(awk '/^FROM /{stage++} stage==1 && /^COPY / && !/--from/ {print $2}' "${file}")
((${#copies[@]} > 0)) || { echo "no COPY lines in the build stage of ${file}"; exit 1; }
debian="$(sed -n 's/^ARG DEBIAN=debian:\([a-z]*\)-slim.*/\1/p' "${file}")"
if [[ "$(. /etc/os-release && echo "${VERSION_CODENAME}")" != "${debian}" ]]; then
  echo "this host is not Debian ${debian:-?} (the image's base): the package checks would not hold"
  exit 1
fi
allowed="$(sed -n 's/^!\(.*\)/\1/p' "${root}/.dockerignore" | sed 's:/$::' | sort | tr '\n' ' ')"
copied="$(printf '%s\n' "${copies[@]%/}" | sort | tr '\n' ' ')"
if [[ "$(sed -n '/^[^#!]/p' "${root}/.dockerignore")" != "*" || "${allowed}" != "${copied}" ]]; then
  echo ".dockerignore must ignore everything (*) but the COPY paths: lets in [${allowed}], COPY [${copied}]"
  exit 1
fi
echo "0. Debian ${debian} here as in the image; .dockerignore lets in the COPY paths alone"
targets="$(sed -n 's/.*cmake --build \/build --target \([a-z -]*\).*/\1/p' "${file}")"
[[ -n "${targets}" ]] || { echo "cannot read the targets of the build stage"; exit 1; }
"${root}/tests/deploy/containerfile_build.py" "${root}" "${build}" "${work}"
echo "1. the build stage builds ${targets} (the main build's commands, on COPY'd files)"

# shellcheck disable=SC2086  # word splitting intended
PYTHONPATH="${root}/tests/deploy" /usr/bin/python3 - "${file}" "${root}/scripts/lib/deps.sh" "${build}" ${targets} <<'PY'
import glob, os, re, subprocess, sys
containerfile, deps_sh, build, targets = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
import debian_packages  # tests/deploy, on PYTHONPATH
text = open(containerfile).read().replace("\\\n", " ")
stages = re.split(r"^FROM ", text, flags=re.M)[1:]
def installed(stage):
    m = re.search(r"apt-get install -y --no-install-recommends ([^&]*)", stage)
    return set(m.group(1).split()) if m else set()
build_pkgs, runtime_pkgs = installed(stages[0]), installed(stages[1])
problems = []

deps = subprocess.run(["bash", "-c", 'source "$1"; ulticode_deps_plan --all', "_", deps_sh],
                      capture_output=True, text=True, check=True).stdout.split()
# Test-only libraries: GoogleTest, the fuzzers' runtime, Go's sumdb (the interop test).
not_for_image = {"libgtest-dev", "libgmock-dev", "libclang-rt-14-dev", "golang-golang-x-mod-dev"}
for p in deps:
    if p.endswith("-dev") and p not in not_for_image and p not in build_pkgs:
        problems.append(f"build stage lacks {p} (scripts/lib/deps.sh builds with it)")
print(f"2. build stage: {len(build_pkgs)} packages")

closure = debian_packages.closure(runtime_pkgs, alternatives="apt")
q = debian_packages.query
if "systemd" in closure:
    problems.append("the runtime stage would install systemd (name the alternative to take)")
binaries = [b for t in targets for b in glob.glob(f"{build}/**/{t}", recursive=True)
            if os.access(b, os.X_OK) and os.path.isfile(b)]
if len(binaries) != len(targets):
    problems.append(f"found {binaries} for targets {targets}")
libs = set()
for b in binaries:
    for line in subprocess.run(["ldd", b], capture_output=True, text=True).stdout.splitlines():
        m = re.search(r"=> (/\S+)", line)
        if m:
            libs.add(os.path.realpath(m.group(1)))
for lib in sorted(libs):
    owner = subprocess.run(["dpkg", "-S", lib], capture_output=True, text=True).stdout
    if not owner:
        owner = subprocess.run(["dpkg", "-S", lib.replace("/usr/lib/", "/lib/")],
                               capture_output=True, text=True).stdout
    pkg = owner.split(":")[0].strip()
    if not pkg:
        problems.append(f"{lib}: no Debian package owns it")
    elif pkg not in closure and q("${Priority}", [pkg]).strip() != "required":
        problems.append(f"runtime stage lacks {pkg} (for {lib})")
print(f"3. runtime stage: {len(libs)} libraries, all from {len(runtime_pkgs)} packages and their "
      f"dependencies or the base")

installed = re.search(r"install -m 0755 -t /out ((?:/build/\S+\s*)+)", text).group(1).split()
for path in installed:
    if not os.access(f"{build}/{path[len('/build/'):]}", os.X_OK):
        problems.append(f"install: {path} is not one of the binaries built")
if sorted(os.path.basename(p) for p in installed) != sorted(targets):
    problems.append(f"install copies {installed}, the build makes {targets}")

user = re.findall(r"^USER (\S+)", text, flags=re.M)
if not user or not re.fullmatch(r"[1-9][0-9]*:[1-9][0-9]*", user[-1]):
    problems.append(f"the image must end as a numeric non-root USER uid:gid, not {user}")
else:
    print(f"4. USER {user[-1]}")
print(f"5. installs {' '.join(os.path.basename(p) for p in installed)}")
if problems:
    print("\n".join(problems))
    sys.exit(1)
PY
