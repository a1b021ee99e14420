#!/usr/bin/python3
"""The Containerfile's build stage, proved against the main build without compiling.

What it proves: `cmake -S /src ... && cmake --build /build --target <image targets>`
in the build stage runs exactly the commands the main build ran for those targets,
and every file those commands read is in the build context (a COPY path) or comes
from a Debian package the build stage installs. The main build having built them,
the image build does too: same compiler, same packages (containerfile_test.sh
checks that this host runs the image's Debian release first).

  1. copy the COPY'd paths to WORK/src and configure them with the Containerfile's
     flags (a missing COPY of a CMake directory or source fails here)
  2. `ninja -t commands <targets>` of both trees, paths normalised, the launcher
     (ccache) stripped: the multisets must be equal (compiles, protoc, embeds,
     archives, links)
  3. every input of the main build's targets: `ninja -t inputs` (sources, .proto,
     .sql, CMake scripts), the deps log (`ninja -t deps`: every header each object
     read, from a snapshot: loading the log may rewrite it), protoc's imports
     (`protoc --dependency_out`); each must be generated, under a COPY path, or a
     system file
  4. every system file (headers, libraries on link lines, tools) belongs to a
     build-stage package, a package it depends on, or a required package

Usage: containerfile_build.py REPO_ROOT MAIN_BUILD_DIR WORK_DIR
Exit 0: proved. 1: a problem, named. 2: cannot decide (the main build has not built
every object of the targets, or its deps records are stale).
Env: ULTICODE_CONTAINERFILE (another Containerfile); ULTICODE_PRETEND_UNCOPIED="dir ..."
(treat these COPY paths as absent in step 3: how a header outside the COPY paths is
caught).
"""
import collections, os, re, shlex, shutil, subprocess, sys, time

import debian_packages  # beside this script

if len(sys.argv) != 4:
    sys.exit("usage: containerfile_build.py REPO_ROOT MAIN_BUILD_DIR WORK_DIR")
root, main = os.path.realpath(sys.argv[1]), os.path.realpath(sys.argv[2])
work = sys.argv[3]
cfile = os.environ.get("ULTICODE_CONTAINERFILE", f"{root}/Containerfile")
pretend = set(os.environ.get("ULTICODE_PRETEND_UNCOPIED", "").split())
src, scratch, snap = f"{work}/src", f"{work}/b", f"{work}/snap"
problems, undecided = [], []
t0 = time.monotonic()


def run(*cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


def stamp(what):
    print(f"[{time.monotonic() - t0:6.2f}s] {what}")


# -- the Containerfile's build stage ------------------------------------------------
text = open(cfile).read().replace("\\\n", " ")
stages = re.split(r"^FROM ", text, flags=re.M)[1:]
build_stage = stages[0]
copies = [m.group(1).rstrip("/") for m in
          re.finditer(r"^COPY (?!--from)(\S+) \S+\s*$", build_stage, flags=re.M)]
m = re.search(r"cmake -S \. -B /build ((?:-\S+\s+(?:Ninja\s+)?)+)", build_stage)
flags = shlex.split(m.group(1)) if m else []
m = re.search(r"cmake --build /build --target ([\w -]+?)\s*(?:&&|$)", build_stage, flags=re.M)
targets = m.group(1).split() if m else []
m = re.search(r"apt-get install -y --no-install-recommends ([^&]*)", build_stage)
apt = set(m.group(1).split()) if m else set()
if not (copies and flags and targets and apt):
    sys.exit(f"cannot read COPY lines / cmake flags / targets / apt packages from {cfile}")


def cached(name):
    m = re.search(rf"^{name}:[A-Z]*=(.*)$", open(f"{main}/CMakeCache.txt").read(), flags=re.M)
    return m.group(1) if m else ""


# The main build must be configured as the image's: otherwise every command differs.
wanted = dict(f[2:].split("=", 1) for f in flags if f.startswith("-D") and "=" in f)
for name in ("CMAKE_BUILD_TYPE", "CMAKE_CXX_COMPILER"):
    have, want = os.path.basename(cached(name)), wanted.get(name, "")
    if have != want:
        why = f"{main} has {name}={have or '(unset)'}, the image {want or '(unset)'}"
        if os.environ.get("CI") == "true":
            sys.exit(f"FAIL: {why}: CI's build must be the image's")
        print(f"SKIP: {why}: nothing to compare (scripts/test.sh builds as the image does)")
        sys.exit(77)
compiler = cached("CMAKE_CXX_COMPILER")

# -- 1. the COPY'd tree, configured as in the image ---------------------------------
shutil.rmtree(src, ignore_errors=True)
shutil.rmtree(scratch, ignore_errors=True)
os.makedirs(src)
for c in copies:
    if not os.path.exists(f"{root}/{c}"):
        problems.append(f"COPY {c}: no such path in the repository")
        continue
    os.makedirs(os.path.dirname(f"{src}/{c}"), exist_ok=True)
    subprocess.run(["cp", "-a", f"{root}/{c}", f"{src}/{c}"], check=True)
t1 = time.monotonic()
cfg = run("cmake", "-S", src, "-B", scratch, *flags)
stamp(f"1. configured COPY {' '.join(copies)} with {' '.join(flags)} "
      f"in {time.monotonic() - t1:.2f}s")
if cfg.returncode:
    errs = [l for l in (cfg.stderr or cfg.stdout).splitlines() if l.strip()]
    print("FAIL: the COPY'd tree does not configure with the image's flags:")
    print("\n".join("  " + l for l in errs[:25]))
    sys.exit(1)


# -- 2. same commands -----------------------------------------------------------------
def commands(build, source):
    r = run("ninja", "-C", build, "-t", "commands", *targets)
    if r.returncode:
        problems.append(f"ninja -t commands in {build}: {r.stderr.strip()}")
        return [], 0
    out, launched = [], 0
    for line in r.stdout.splitlines():
        line = line.replace(build, "@BUILD@").replace(source, "@SRC@")
        stripped = re.sub(r"^(\S*/)?ccache ", "", line)
        launched += stripped != line
        out.append(stripped)
    return out, launched


def key(cmd):  # what the command makes: -o X for compiles/links, else itself
    m = re.search(r" -o (\S+)", cmd) or re.search(r" (?:qc|cr) (\S+\.a)", cmd)
    return m.group(1) if m else cmd


mine, mine_l = commands(main, root)
theirs, theirs_l = commands(scratch, src)
kinds = collections.Counter("compile" if " -c " in c else "protoc" if "protoc" in c else
                            "link/ar" if c.startswith(": &&") else "other" for c in theirs)
stamp(f"2. {len(theirs)} commands for {' '.join(targets)} ({dict(kinds)}); "
      f"ccache launcher on {mine_l} main / {theirs_l} image-tree commands (stripped)")
if collections.Counter(mine) != collections.Counter(theirs):
    a, b = {key(c): c for c in mine}, {key(c): c for c in theirs}
    for k in sorted(set(a) | set(b)):
        if k not in a:
            problems.append(f"only in the image build: {b[k][:300]}")
        elif k not in b:
            problems.append(f"only in the main build: {a[k][:300]}")
        elif a[k] != b[k]:
            ta, tb = shlex.split(a[k]), shlex.split(b[k])
            problems.append(f"{k}: main has {[t for t in ta if t not in tb]}, "
                            f"image has {[t for t in tb if t not in ta]}")

# -- 3. every input: generated, COPY'd, or system ----------------------------------------
allowed = [c for c in copies if c not in pretend]
system = collections.defaultdict(set)  # system file -> why
outside = collections.defaultdict(set)  # repository file no COPY line copies -> why


def classify(path, why, base=main):
    if path.startswith("cmake_object_order_depends_target_"):
        return
    p = os.path.normpath(os.path.join(base, path))
    if p == main or p.startswith(main + "/"):
        return  # generated; its own inputs are checked where it is made
    if p.startswith(root + "/"):
        rel = p[len(root) + 1:]
        if not any(rel == c or rel.startswith(c + "/") for c in allowed):
            outside[rel].add(why)
        return
    system[p].add(why)


r = run("ninja", "-C", main, "-t", "inputs", *targets)
for p in r.stdout.split():
    classify(p, "build.ninja input")
# What CMake read to configure (CMakeLists.txt, package configuration files):
# the inputs of build.ninja's own regeneration rule.
r = run("ninja", "-C", scratch, "-t", "query", "build.ninja")
for line in r.stdout.splitlines()[1:]:
    if line.startswith("  outputs:"):
        break
    p = line.strip().lstrip("|").strip()
    if not p or p.startswith("input:") or p == scratch or p.startswith(scratch + "/"):
        continue
    classify(root + p[len(src):] if p.startswith(src + "/") else p, "read by cmake")
r = run("ninja", "-C", scratch, "-t", "inputs", *targets)  # and they exist in the copy
for p in r.stdout.split():
    if p.startswith(src + "/") and not os.path.exists(p):
        problems.append(f"{p[len(src) + 1:]} is an input but missing from the COPY'd tree")

# The deps log, from a snapshot: loading it can truncate or recompact it, which must
# not happen under a running ninja.
shutil.rmtree(snap, ignore_errors=True)
os.makedirs(f"{snap}/CMakeFiles")
for f in ("build.ninja", "CMakeFiles/rules.ninja", ".ninja_deps", ".ninja_log"):
    if os.path.exists(f"{main}/{f}"):
        shutil.copy2(f"{main}/{f}", f"{snap}/{f}")
objects = [key(c) for c in mine if " -c " in c]
objects = [o.replace("@BUILD@/", "") for o in objects]
r = run("ninja", "-C", snap, "-t", "deps", *objects)
current, deps, headers = None, {}, 0
for line in r.stdout.splitlines():
    m = re.match(r"(\S+): (?:#deps \d+, deps mtime (\d+)|deps not found)", line)
    if m:
        current = m.group(1)
        deps[current] = (int(m.group(2)) if m.group(2) else None, [])
    elif line.startswith("    ") and current:
        deps[current][1].append(line.strip())
for o in objects:
    mtime, files = deps.get(o, (None, []))
    obj = f"{main}/{o}"
    if mtime is None or not os.path.exists(obj):
        undecided.append(f"{o}: not built yet (no deps record)")
        continue
    omt = os.stat(obj).st_mtime_ns
    newer = [f for f in files if os.path.exists(os.path.join(main, f))
             and os.stat(os.path.join(main, f)).st_mtime_ns > omt]
    if mtime < omt or newer or any(not os.path.exists(os.path.join(main, f)) for f in files):
        undecided.append(f"{o}: deps record stale ({(newer or ['object rebuilt'])[0]})")
        continue
    for f in files:
        headers += 1
        classify(f, f"header of {o}")

protos = 0
for c in mine:
    if "protoc" not in c or "--proto_path" not in c:
        continue
    toks = shlex.split(c.split("&&", 1)[1].replace("@BUILD@", main).replace("@SRC@", root))
    paths = [t for t in toks if t.startswith("--proto_path=")]
    d = f"{work}/protoc.d"
    pr = run(toks[0], *paths, "--descriptor_set_out=/dev/null", f"--dependency_out={d}", toks[-1])
    if pr.returncode:
        problems.append(f"protoc {toks[-1]}: {pr.stderr.strip()}")
        continue
    for p in open(d).read().split(":", 1)[1].replace("\\\n", " ").split():
        protos += 1
        classify(p, f"import of {os.path.basename(toks[-1])}")

# Tools, libraries and other absolute files named on the image tree's command lines.
for c in theirs:
    for t in shlex.split(c.replace("@BUILD@", scratch).replace("@SRC@", src)):
        t = t.split("=", 1)[-1] if t.startswith("--plugin=") else t
        if t.startswith("-l"):
            for ext in (".so", ".a"):
                f = run(compiler, f"-print-file-name=lib{t[2:]}{ext}").stdout.strip()
                if f.startswith("/"):
                    system[os.path.realpath(f)].add(f"link flag {t}")
                    break
            else:
                problems.append(f"link flag {t}: no such library here")
        elif t.startswith("/") and not t.startswith((src, scratch)) and os.path.isfile(t):
            system[t].add("named on a command line")
for rel, why in outside.items():
    problems.append(f"{rel} is read by the image build but no COPY line copies it "
                    f"({sorted(why)[0]}{f' and {len(why) - 1} more' if len(why) > 1 else ''})")
stamp(f"3. {sum(v[0] is not None for v in deps.values())}/{len(objects)} objects' depfiles ({headers} header reads), "
      f"{protos} protoc imports, manifest inputs: checked against COPY {' '.join(allowed)}")

# -- 4. system files come from the build stage's packages ----------------------------
closure = debian_packages.closure(apt, alternatives="any")
owner, unowned = {}, []
files = sorted(system)
for i in range(0, len(files), 500):
    for line in run("dpkg", "-S", *files[i:i + 500]).stdout.splitlines():
        if line.startswith("diversion "):
            continue
        pkgs, path = line.split(": ", 1)
        owner[path] = [p.split(":")[0].strip() for p in pkgs.split(",")]
def dpkg_owner(f):
    for a in dict.fromkeys([f, os.path.realpath(f), f.replace("/usr/lib/", "/lib/"),
                            os.path.realpath(f).replace("/usr/lib/", "/lib/")]):
        if a not in owner and a != f:
            out = run("dpkg", "-S", a).stdout.splitlines()
            out = [l for l in out if not l.startswith("diversion ") and l.endswith(": " + a)]
            if out:
                owner[a] = [p.split(":")[0].strip() for p in out[0].split(": ")[0].split(",")]
        if owner.get(a):
            return owner[a]
    return []


for f in files:
    pk = dpkg_owner(f)
    if not pk:
        unowned.append(f)
    elif not any(p in closure or debian_packages.query("${Priority}", [p]) == "required" for p in pk):
        problems.append(f"{f} ({sorted(system[f])[0]}) is from {', '.join(pk)}, "
                        "which the build stage does not install")
for f in unowned:
    problems.append(f"{f} ({sorted(system[f])[0]}): no Debian package owns it")
stamp(f"4. {len(system)} system files, all from the {len(apt)} build-stage packages' "
      f"closure ({len(closure)} packages)" if not problems else f"4. {len(system)} system files")

if problems:
    print("FAIL:\n" + "\n".join(f"  {p}" for p in sorted(set(problems))))
    sys.exit(1)
if undecided:
    print(f"UNDECIDED: the main build ({main}) must finish building the image targets "
          f"first; {len(undecided)} objects:\n" + "\n".join(f"  {u}" for u in undecided[:10]))
    sys.exit(2)
print(f"OK: the image build = the main build's {len(theirs)} commands, on COPY'd files only")
