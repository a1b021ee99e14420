"""What Debian packages bring with them, as dpkg on this machine says
(containerfile_build.py and containerfile_test.sh)."""
import subprocess


def query(fmt, packages):
    """dpkg-query's `fmt` for each installed package of `packages`."""
    out = subprocess.run(["dpkg-query", "-W", "-f", fmt, *packages],
                         capture_output=True, text=True)
    return out.stdout


def closure(packages, alternatives):
    """`packages` and everything they depend on (Depends, Pre-Depends).

    Of "a | b", `alternatives` says which: "any" takes every one (a file
    owned by any of them is accounted for); "apt" the one apt would
    install: one already chosen, else the first.
    """
    chosen, todo = set(), list(packages)
    while todo:
        p = todo.pop()
        if p in chosen:
            continue
        chosen.add(p)
        for dep in query("${Depends},${Pre-Depends}", [p]).split(","):
            options = [a.strip().split(" ")[0].split(":")[0] for a in dep.split("|") if a.strip()]
            if not options:
                continue
            if alternatives == "any":
                todo.extend(o for o in options if o not in chosen)
            else:
                taken = [o for o in options if o in packages or o in chosen]
                todo.append(taken[0] if taken else options[0])
    return chosen
