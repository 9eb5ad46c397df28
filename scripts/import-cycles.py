#!/usr/bin/env python3
"""Import circles between the modules of a crate: exits 1 naming each circle, 0 if none.

Usage: scripts/import-cycles.py CRATE_SRC_DIR...

A module is a top-level file or folder of the crate's src/ (edges from `use crate::x` and
paths `crate::x::...` in code, comments and doc links excluded), and within each folder
module, its files and subfolders (edges from `super::x`). Test modules and files are left out:
they may import anything. A circle is a strongly connected component of more than one module.
"""
import os
import re
import sys


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


def main(dirs):
    found = False
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
                found = True
                print(f"import-cycles: {where}: {' <-> '.join(c)}")
    if not found:
        print(f"import-cycles: none in {', '.join(dirs)}")
    return 1 if found else 0


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1:]))
