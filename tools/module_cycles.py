#!/usr/bin/env python3
"""Import circles between a crate's top-level modules.

    tools/module_cycles.py crates/engine/src [crates/cli/src ...]

Reads every .rs file below each source root, takes its top-level module (`src/cp/recv/mod.rs`
belongs to `cp`; `src/jump.rs` to `jump`; lib.rs and main.rs to none) and the top-level
modules it names as `crate::NAME` or `super::...` that leave its own, and prints each group
of modules that reach each other (a strongly connected component of more than one). Exits 1
when there is one: a module that depends on another that depends back on it is one room
in two files, or a type in the wrong room.
"""
import os
import re
import sys

CRATE_PATH = re.compile(r"\bcrate::([a-z_][a-z0-9_]*)")


def top_module(root, path):
    rel = os.path.relpath(path, root)
    parts = rel.split(os.sep)
    if len(parts) == 1:
        name = parts[0][:-3]
        return None if name in ("lib", "main") else name
    return parts[0]


def strip_comments(text):
    # Line comments (docs included): a doc link is not a dependency.
    return "\n".join(line.split("//", 1)[0] for line in text.splitlines())


def graph(root):
    edges = {}
    for dirpath, _, files in os.walk(root):
        for f in files:
            if not f.endswith(".rs"):
                continue
            path = os.path.join(dirpath, f)
            me = top_module(root, path)
            if me is None:
                continue
            with open(path, encoding="utf-8") as fh:
                text = strip_comments(fh.read())
            # Tests inside a module (`#[cfg(test)] mod tests`) may reach anywhere.
            cut = text.find("#[cfg(test)]")
            if cut >= 0:
                text = text[:cut]
            deps = edges.setdefault(me, set())
            for name in CRATE_PATH.findall(text):
                if name != me:
                    deps.add(name)
    known = set(edges)
    return {m: {d for d in ds if d in known} for m, ds in edges.items()}


def sccs(g):
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(g.get(v, ())):
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
            out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(g):
        if v not in index:
            visit(v)
    return [c for c in out if len(c) > 1]


def main(roots):
    found = False
    for root in roots:
        g = graph(root)
        for comp in sccs(g):
            found = True
            links = [
                f"{a} -> {b}" for a in comp for b in sorted(g[a]) if b in comp
            ]
            print(f"{root}: {', '.join(comp)} reach each other ({'; '.join(links)})")
    if not found:
        print("no import circles between top-level modules in " + ", ".join(roots))
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:] or ["crates/engine/src"]))
