#!/usr/bin/env python3
"""Whatever the scripts and tests run, the dependency step installs.

Finds the commands that the project's shell scripts (scripts/, tests/deploy/,
.ci/run) run and the command lines the C++ tests hand to RunCommand(), and
checks that each one is provided by a Debian package that every Debian 12 has
(Essential, or Priority required) or that scripts/lib/deps.sh installs
(ULTICODE_DEB_PACKAGES and what they depend on). A command no package
provides must be a named prerequisite (KNOWN_PREREQUISITES, said in the
README) or come from the pinned npm tooling (node_modules/.bin).

Its reach: a word that is no command on this machine cannot be told from a
word of prose or a variable's value, so it is not checked. The check finds
the tool the project forgot to list on a machine where that tool is present
by chance (a developer's, CI's), before a fresh Debian 12 fails on it.

Usage: tests/deploy/deps_test.py        (exit 1 naming each command that fails)
"""
import glob
import os
import re
import shutil
import subprocess
import sys

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


def deb_packages():
    """ULTICODE_DEB_PACKAGES as scripts/lib/deps.sh defines it."""
    out = run("bash", "-c", 'source "$1"; printf "%s\\n" "${ULTICODE_DEB_PACKAGES[@]}"', "_",
              os.path.join(REPO, "scripts/lib/deps.sh"))
    if out.returncode != 0 or not out.stdout.split():
        sys.exit(f"deps_test: cannot read ULTICODE_DEB_PACKAGES: {out.stderr}")
    return out.stdout.split()


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


def main():
    installed = closure(deb_packages()) | base_packages()
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
    failures = []
    for word, (found, where) in sorted(commands.items()):
        if word in KNOWN_PREREQUISITES or "/node_modules/" in found:
            continue
        package = next((package_of[c] for c in sorted(candidates(found)) if c in package_of), None)
        if package is None:
            failures.append(f"{word} ({where}): {found} belongs to no Debian package")
        elif package not in installed:
            failures.append(f"{word} ({where}): package {package} is neither in every Debian 12 "
                            "nor installed by scripts/lib/deps.sh (add it to ULTICODE_DEB_PACKAGES)")
    checked = len(commands)
    for f in failures:
        print(f"deps_test: {f}", file=sys.stderr)
    print(f"deps_test: {checked} commands checked, {len(failures)} not installed by the dependency step")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
