#!/usr/bin/env python3
"""Whatever the scripts and tests run, the dependency step installs.

Finds the commands that the project's shell scripts (scripts/, tests/deploy/,
.ci/run) run and the command lines the C++ tests hand to RunCommand(), and
checks that each one is provided by a Debian package that every Debian 12 has
(Essential, or Priority required) or that scripts/lib/deps.sh may install
(ulticode_deps_plan --all, the step's one source of truth, and what those
packages depend on). A command no package
provides must be a named prerequisite (KNOWN_PREREQUISITES, said in the
README) or come from the pinned npm tooling (node_modules/.bin).

Its reach: a word that is no command on this machine cannot be told from a
word of prose or a variable's value, so it is not checked. The check finds
the tool the project forgot to list on a machine where that tool is present
by chance (a developer's, CI's), before a fresh Debian 12 fails on it.
The packages the step installs only where a command is missing (npm) are
checked on made-up PATHs, with and without that command, so the check gives
the same answer where an image brings the command and where Debian must.

Usage: tests/deploy/deps_test.py        (exit 1 naming each command that fails)
"""
import functools
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# Commands no Debian 12 package provides, each named in the README as a
# prerequisite: kubectl with kustomize 5 (Debian's kubernetes-client is 1.20).
KNOWN_PREREQUISITES = {"kubectl"}

SHELL_WORDS = {
    "if", "then", "else", "elif", "fi", "for", "while", "until", "do", "done", "case", "esac",
    "in", "function", "select", "time", "coproc", "{", "}", "!", "[[", "]]",
}


def run(*argv):
    return subprocess.run(argv, capture_output=True, text=True, check=False)


DEPS_SH = os.path.join(REPO, "scripts/lib/deps.sh")


def deps_plan(*args, path=None):
    """ulticode_deps_plan's packages (scripts/lib/deps.sh), under `path` if given."""
    env = dict(os.environ)
    if path is not None:
        env["PATH"] = path
    out = subprocess.run(["/bin/bash", "-c", 'source "$1"; shift; ulticode_deps_plan "$@"', "_",
                          DEPS_SH, *args], capture_output=True, text=True, check=False, env=env)
    if out.returncode != 0:
        sys.exit(f"deps_test: ulticode_deps_plan {' '.join(args)} failed: {out.stderr}")
    return out.stdout.split()


def conditional_commands():
    """command -> package: what the step installs only where the command is missing."""
    out = run("bash", "-c", 'source "$1"; printf "%s\\n" "${ULTICODE_DEB_PACKAGES_FOR_MISSING_COMMANDS[@]}"',
              "_", DEPS_SH)
    return dict(line.split("=", 1) for line in out.stdout.split())


def plan_failures():
    """The plan on a machine without each conditional command, and on one with it.

    Checked on made-up PATHs rather than on this machine, so that the suite
    sees a fresh Debian 12's plan (npm from Debian's package) on a machine
    whose image brings npm with its Node.js, and the other way round."""
    failures = []
    with tempfile.TemporaryDirectory() as without, tempfile.TemporaryDirectory() as with_all:
        for tool in ("dpkg-query", "grep"):
            for d in (without, with_all):
                os.symlink(shutil.which(tool), os.path.join(d, tool))
        for command in conditional_commands():
            fake = os.path.join(with_all, command)
            with open(fake, "w", encoding="utf-8") as f:
                f.write("#!/bin/sh\n")
            os.chmod(fake, 0o755)
        plan_without, plan_with = set(deps_plan(path=without)), set(deps_plan(path=with_all))
        everything = set(deps_plan("--all"))
        for command, package in conditional_commands().items():
            if package not in plan_without:
                failures.append(f"{command}: where it is missing, the plan does not install {package}")
            if package in plan_with:
                failures.append(f"{command}: where the image has it, the plan still installs {package}")
            if package not in everything:
                failures.append(f"{command}: ulticode_deps_plan --all lacks {package}")
            if "Candidate: (none)" in run("apt-cache", "policy", package).stdout or \
                    not run("apt-cache", "show", "--no-all-versions", package).stdout:
                failures.append(f"{command}: Debian 12 has no package {package} to install")
    return failures


def closure(packages):
    """The packages and everything they depend on (apt's view, offline)."""
    out = run("apt-cache", "depends", "--recurse", "--no-recommends", "--no-suggests",
              "--no-conflicts", "--no-breaks", "--no-replaces", "--no-enhances", *packages)
    names = set(packages)
    for line in out.stdout.splitlines():
        line = line.strip()
        if line.startswith(("Depends:", "PreDepends:", "|Depends:", "|PreDepends:")):
            line = line.split(":", 1)[1].strip()
        name = line.strip("<>").split(":")[0]
        if re.fullmatch(r"[a-z0-9][a-z0-9.+-]+", name):
            names.add(name)
    return names


def base_packages():
    out = run("dpkg-query", "-W", "-f", "${Package} ${Essential} ${Priority}\\n")
    base = set()
    for line in out.stdout.splitlines():
        name, essential, priority = (line.split() + ["", ""])[:3]
        if essential == "yes" or priority == "required":
            base.add(name.split(":")[0])
    return base


def functions_defined():
    names = set()
    for path in shell_files():
        with open(path, encoding="utf-8") as f:
            names.update(re.findall(r"^\s*(?:function\s+)?([A-Za-z_][\w-]*)\s*\(\)", f.read(), re.M))
    return names


def shell_files():
    files = glob.glob(os.path.join(REPO, "scripts", "**", "*.sh"), recursive=True)
    files += glob.glob(os.path.join(REPO, "tests", "deploy", "*.sh"))
    files.append(os.path.join(REPO, ".ci", "run"))
    return sorted(files)


def command_words(text):
    """First words of the simple commands in shell text (heredoc bodies skipped)."""
    words = []
    heredoc = None
    for line in text.splitlines():
        if heredoc is not None:
            if line.strip() == heredoc:
                heredoc = None
            continue
        m = re.search(r"<<-?\s*['\"]?([A-Za-z_]+)['\"]?", line)
        if m:
            heredoc = m.group(1)
        code = re.sub(r"(^|\s)#.*$", "", line)
        for part in re.split(r"\|\||&&|[|;(`]|\$\(|\bthen\b|\bdo\b|\belse\b", code):
            tokens = part.strip().split()
            while tokens and (re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=\S*", tokens[0])
                              or tokens[0] in ("sudo", "exec", "command", "env", "nice", "timeout",
                                               "!", "time")):
                tokens = tokens[1:]
                if tokens and re.fullmatch(r"-\S+|\d+[smh]?", tokens[0]):
                    tokens = tokens[1:]
            if tokens:
                words.append(tokens[0])
    return words


def cxx_command_words():
    words = []
    for path in glob.glob(os.path.join(REPO, "tests", "**", "*.cc"), recursive=True):
        with open(path, encoding="utf-8") as f:
            text = f.read()
        for m in re.finditer(r"RunCommand\(\s*(?:absl::StrCat\(\s*)?\"([^\"]*)\"", text):
            words += command_words(m.group(1))
    return words


def candidates(path):
    """The names dpkg may know `path` by (merged /usr: /usr/bin/x was /bin/x)."""
    names = {path, os.path.realpath(path)}
    for p in list(names):
        for usr, root in (("/usr/bin/", "/bin/"), ("/usr/sbin/", "/sbin/")):
            if p.startswith(usr):
                names.add(root + p[len(usr):])
    return names


def owners(paths):
    """path -> Debian package, in one dpkg call."""
    out = run("dpkg", "-S", *sorted(paths))
    found = {}
    for line in out.stdout.splitlines():
        package, _, path = line.partition(": ")
        found[path.strip()] = package.split(",")[0].split(":")[0].strip()
    return found


def debian_versions(packages):
    """package -> (installed version, [versions Debian's archives have]), one apt-cache call."""
    result, package, current = {}, None, None
    for line in run("apt-cache", "policy", *sorted(set(packages))).stdout.splitlines():
        if re.match(r"\S+:$", line):
            package, current = line[:-1].split(":")[0], None
            result[package] = (None, [])
            continue
        m = re.match(r"\s+(\*\*\*)?\s*(\S+) (-?\d+)$", line)
        if package is None:
            continue
        installed, versions = result[package]
        if m:
            current = m.group(2)
            if m.group(1):
                result[package] = (current, versions)
        elif current and re.match(r"\s+-?\d+ (https?|file|cdrom):", line) and current not in versions:
            versions.append(current)
    return result


@functools.lru_cache(maxsize=None)
def debian_package_files(package, version):
    """The paths in Debian's .deb of package=version (downloaded from Debian's archive)."""
    with tempfile.TemporaryDirectory() as d:
        got = subprocess.run(["apt-get", "download", "-q", f"{package}={version}"], cwd=d,
                             capture_output=True, text=True, check=False)
        debs = glob.glob(os.path.join(d, "*.deb"))
        if got.returncode != 0 or not debs:
            return None
        listing = run("dpkg-deb", "-c", debs[0]).stdout
    return {line.split()[5].lstrip(".") for line in listing.splitlines() if len(line.split()) > 5}


def foreign_owner_failures(commands, package_of):
    """Commands that this machine has from a package Debian did not build.

    The image's nodejs (not Debian's) brings npm; Debian's nodejs does not. For
    each command whose package here is no version of Debian's archive, the
    command must be in Debian's package of that name, or the plan must name
    the Debian package that brings it (ULTICODE_DEB_PACKAGES_FOR_MISSING_COMMANDS)
    and that package must hold it."""
    failures = []
    conditional = conditional_commands()
    owned = {}
    for word, (found, where) in sorted(commands.items()):
        package = next((package_of[c] for c in sorted(candidates(found)) if c in package_of), None)
        if package is not None and word not in KNOWN_PREREQUISITES and "/node_modules/" not in found:
            owned[word] = package
    policy = debian_versions(list(owned.values()) + list(conditional.values()))
    for word, package in sorted(owned.items()):
        found, where = commands[word]
        installed, versions = policy.get(package, (None, []))
        if installed is None or installed in versions:
            continue
        debian_package = conditional.get(word, package)
        _, debian_package_versions = policy.get(debian_package, (None, []))
        if not debian_package_versions:
            failures.append(f"{word} ({where}): Debian 12 has no package {debian_package}")
            continue
        files = debian_package_files(debian_package, debian_package_versions[0])
        if files is None:
            failures.append(f"{word} ({where}): cannot download Debian's {debian_package} "
                            "to see whether it holds the command")
        elif not candidates(found) & files and f"/usr/bin/{word}" not in files:
            hint = ("" if word in conditional else
                    "; name the Debian package that brings it in ULTICODE_DEB_PACKAGES_FOR_MISSING_COMMANDS")
            failures.append(f"{word} ({where}): here it comes from {package} {installed}, which is not "
                            f"Debian's, and Debian 12's {debian_package} does not hold it{hint}")
    return failures


def main():
    installed = closure(deps_plan("--all")) | base_packages()
    functions = functions_defined()
    seen = {}
    for path in shell_files():
        with open(path, encoding="utf-8") as f:
            for word in command_words(f.read()):
                seen.setdefault(word, os.path.relpath(path, REPO))
    for word in cxx_command_words():
        seen.setdefault(word, "tests/**/*.cc (RunCommand)")
    builtins = set(run("bash", "-c", "compgen -b; compgen -k").stdout.split())
    commands = {}
    for word, where in sorted(seen.items()):
        if (word in SHELL_WORDS or word in functions or word in builtins
                or not re.fullmatch(r"[a-z][a-z0-9_.+-]*", word)):
            continue
        found = shutil.which(word)
        if found is not None:  # else a variable's value, a path made at run time
            commands[word] = (found, where)
    package_of = owners({c for found, _ in commands.values() for c in candidates(found)})
    failures = plan_failures() + foreign_owner_failures(commands, package_of)
    for word, (found, where) in sorted(commands.items()):
        if word in KNOWN_PREREQUISITES or "/node_modules/" in found:
            continue
        package = next((package_of[c] for c in sorted(candidates(found)) if c in package_of), None)
        if package is None:
            failures.append(f"{word} ({where}): {found} belongs to no Debian package")
        elif package not in installed:
            failures.append(f"{word} ({where}): package {package} is neither in every Debian 12 "
                            "nor in scripts/lib/deps.sh's plan (add it to ULTICODE_DEB_PACKAGES)")
    checked = len(commands)
    for f in failures:
        print(f"deps_test: {f}", file=sys.stderr)
    print(f"deps_test: {checked} commands checked, {len(failures)} not installed by the dependency step")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
