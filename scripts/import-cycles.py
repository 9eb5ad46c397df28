#!/usr/bin/env python3
"""Import circles between the modules of a crate: exits 1 naming each circle, 0 if none.

Usage: scripts/import-cycles.py [CRATE_SRC_DIR...]
With no argument: every crate of the workspace (crates/*/src, bench/*/src, examples/*/src).

A module is a top-level file or folder of the crate's src/ (edges from `use crate::x` and
paths `crate::x::...` in code, comments and doc links excluded), and within each folder
module, its files and subfolders (edges from `super::x`). Test modules and files are left out:
they may import anything. A circle is a strongly connected component of more than one module.

ALLOWED lists the circles present when every crate came under this check: each is printed as a
warning, not a failure, until the modules are reordered and its entry removed. A circle found
fails unless its modules all belong to one allowed entry of the same folder (a circle that shrinks
passes; one that grows or appears fails). The list only shrinks: an entry whose circle is gone is
reported, to be deleted.
"""
import glob
import os
import re
import sys

# folder (relative to the repository) -> circles tolerated there for now (see the docstring).
ALLOWED: dict = {}

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def workspace_crates():
    """Every crate's src/ folder, relative to the repository root."""
    found = []
    for pattern in ("crates/*/src", "bench/*/src", "examples/*/src"):
        found += sorted(glob.glob(os.path.join(ROOT, pattern)))
    return [os.path.relpath(p, ROOT) for p in found]


def modules(base):
    """name -> the .rs files of that module (a file, or every file under a folder)."""
    out = {}
    for f in sorted(os.listdir(base)):
        p = os.path.join(base, f)
        if f.endswith(".rs") and f not in ("lib.rs", "main.rs", "mod.rs"):
            out[f[:-3]] = [p]
        elif os.path.isdir(p):
            out[f] = [os.path.join(d, x) for d, _, fs in os.walk(p) for x in fs if x.endswith(".rs")]
    return out


def is_test_file(path):
    name = os.path.basename(path)
    return name == "tests.rs" or name.endswith("_tests.rs") or "/tests/" in path


def references(src, prefix):
    """Module names used as `prefix::name` or inside `prefix::{...}` groups."""
    names = re.findall(prefix + r"::(\w+)", src)
    for group in re.findall(prefix + r"::\{([^;]*)\};", src, flags=re.S):
        names += re.findall(r"(?:^|[{,\s])(\w+)::", group)
        names += re.findall(r"(?:^|[{,])\s*(\w+)\s*(?=[,}]|$)", group)
    return names


def graph(mods, prefix):
    g = {m: set() for m in mods}
    for m, files in mods.items():
        for p in files:
            if is_test_file(p):
                continue
            with open(p, encoding="utf-8") as fh:
                lines = [l for l in fh.read().split("\n") if not l.strip().startswith("//")]
            src = "\n".join(lines)
            src = re.sub(r"#\[cfg\(test\)\]\s*mod \w+\s*\{.*", "", src, flags=re.S)
            g[m].update(n for n in references(src, prefix) if n in mods and n != m)
    return g


def circles(g):
    """Strongly connected components with more than one module (Tarjan)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(g[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(g):
        if v not in index:
            visit(v)
    return out


def allowed(where, circle):
    """The allowed entry that holds every module of circle, if any."""
    key = os.path.relpath(os.path.abspath(where), ROOT)
    for entry in ALLOWED.get(key, []):
        if set(circle) <= entry:
            return entry
    return None


def main(dirs):
    dirs = [os.path.relpath(os.path.abspath(d), ROOT) for d in dirs] or workspace_crates()
    os.chdir(ROOT)
    found = False
    used = set()
    for base in dirs:
        top = modules(base)
        checks = [(base, graph(top, "crate"))]
        checks += [
            (os.path.join(base, m), graph(modules(os.path.join(base, m)), "super"))
            for m in top
            if os.path.isdir(os.path.join(base, m))
        ]
        for where, g in checks:
            for c in circles(g):
                entry = allowed(where, c)
                if entry is None:
                    found = True
                    print(f"import-cycles: {where}: {' <-> '.join(c)}")
                else:
                    used.add((os.path.relpath(os.path.abspath(where), ROOT), frozenset(entry)))
                    print(f"import-cycles: warning: allowed for now in {where}: {' <-> '.join(c)}")
    checked = {os.path.relpath(os.path.abspath(d), ROOT) for d in dirs}
    for where, entries in sorted(ALLOWED.items()):
        in_scope = any(where == d or where.startswith(d + "/") for d in checked)
        for entry in entries:
            if in_scope and (where, frozenset(entry)) not in used:
                print(f"import-cycles: {where}: the allowed circle {sorted(entry)} is gone: "
                      "delete its entry in ALLOWED (scripts/import-cycles.py)")
    if not found:
        print(f"import-cycles: no circle outside the allowed list in {len(dirs)} crate(s)")
    return 1 if found else 0


if __name__ == "__main__":
    if any(a.startswith("-") for a in sys.argv[1:]):
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1:]))
