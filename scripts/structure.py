#!/usr/bin/env python3
"""The structure drawing of a Rust crate: which file imports which, the circles, the floors.

    scripts/structure.py framework/src            # summary: files, floors, circles, imports back up
    scripts/structure.py framework/src --edges    # every import, file to file
    scripts/structure.py framework/src --folders  # the same drawing, one node per top-level module

It reads the sources, not the compiler: every `use` and every `crate::`/`super::`/`self::` path in
the code outside `#[cfg(test)]` modules, resolved through `pub use` re-exports to the file that
defines the item. `mod x;` declarations are structure, not imports.

- A *circle* is a strongly connected set of two or more files (Tarjan).
- A file's *floor* is the length of its longest chain of imports downwards (files that import
  nothing of the crate are floor 0), taken on the graph with each circle folded into one node.
- An *import back up* is one whose target is not on a lower floor than its source: every import
  inside a circle, and nothing else.

The exit status is 1 when there is a circle, so that a script can require none.
"""

import re
import sys
from collections import defaultdict
from pathlib import Path

USE_RE = re.compile(r"^\s*(pub(\([^)]*\))?\s+)?use\s+([^;]+);", re.M | re.S)
PATH_RE = re.compile(r"\b((?:crate|super|self)(?:::\w+)+)")
TEST_MOD_RE = re.compile(r"#\[cfg\(test\)\]\s*(pub\s+)?mod\s+\w+\s*\{")


def strip_comments(src):
    src = re.sub(r"/\*.*?\*/", "", src, flags=re.S)
    return re.sub(r"//[^\n]*", "", src)


def strip_test_modules(src):
    """Removes `#[cfg(test)] mod x { ... }` blocks by brace matching."""
    out, pos = [], 0
    for m in TEST_MOD_RE.finditer(src):
        if m.start() < pos:
            continue
        out.append(src[pos : m.start()])
        depth, i = 1, m.end()
        while i < len(src) and depth:
            depth += {"{": 1, "}": -1}.get(src[i], 0)
            i += 1
        pos = i
    out.append(src[pos:])
    return "".join(out)


def expand(tree):
    """`a::{b, c::{d, e as f}}` into [['a','b'], ['a','c','d'], ['a','c','e']] (aliases dropped)."""
    tree = re.sub(r"\s+", "", tree)

    def split_top(s):
        parts, depth, cur = [], 0, ""
        for ch in s:
            if ch == "," and depth == 0:
                parts.append(cur)
                cur = ""
                continue
            depth += (ch == "{") - (ch == "}")
            cur += ch
        if cur:
            parts.append(cur)
        return parts

    def go(prefix, s):
        if "{" in s:
            head, rest = s.split("{", 1)
            rest = rest[: rest.rfind("}")]
            head = [p for p in head.split("::") if p]
            res = []
            for part in split_top(rest):
                res += go(prefix + head, part)
            return res
        segs = [p for p in s.split("::") if p]
        if segs[-1:] == ["self"]:
            segs = segs[:-1]
        return [prefix + segs]

    return go([], tree)


class Crate:
    def __init__(self, root):
        self.root = Path(root)
        self.files = {}  # module path tuple -> Path
        for f in sorted(self.root.rglob("*.rs")):
            rel = f.relative_to(self.root).with_suffix("")
            parts = list(rel.parts)
            if parts[-1] in ("mod", "lib", "main"):
                parts = parts[:-1]
            self.files[tuple(parts)] = f
        self.src = {m: strip_test_modules(strip_comments(f.read_text())) for m, f in self.files.items()}
        self.reexports = {m: self._reexports(m) for m in self.files}

    def name(self, m):
        return str(self.files[m].relative_to(self.root))

    def _uses(self, m):
        res = []
        for u in USE_RE.finditer(self.src[m]):
            is_pub = bool(u.group(1)) and u.group(1).strip().startswith("pub") and "(" not in u.group(1)
            raw = re.sub(r"\s+", " ", u.group(3)).strip()
            for segs in self._expand_with_alias(raw):
                res.append((is_pub, segs))
        return res

    def _expand_with_alias(self, raw):
        """Like expand, but keeps `x as y` as (path, alias)."""
        out = []
        for part in expand(raw.replace(" as ", "@as@")):
            alias = None
            last = part[-1]
            if "@as@" in last:
                last, alias = last.split("@as@")
                part = part[:-1] + [last]
            out.append((part, alias))
        return out

    def _reexports(self, m):
        names = {}
        for is_pub, (segs, alias) in self._uses(m):
            if is_pub and segs and segs[-1] != "*":
                names[alias or segs[-1]] = segs
        return names

    def absolute(self, m, segs):
        """A `use` path's segments from module m, as an absolute path from the crate root."""
        if not segs:
            return None
        if segs[0] == "crate":
            return list(segs[1:])
        base = list(m)
        i = 0
        if segs[0] == "self":
            i = 1
        while i < len(segs) and segs[i] == "super":
            base = base[:-1]
            i += 1
        if i == 0:
            # a bare path: a child module of m, or an external crate
            if tuple(base + [segs[0]]) in self.files:
                return base + list(segs)
            return None
        return base + list(segs[i:])

    def resolve(self, path, depth=0):
        """The module (file) that defines the item an absolute path names."""
        if path is None or depth > 20:
            return None
        mod = ()
        for i, seg in enumerate(path):
            if mod + (seg,) in self.files:
                mod = mod + (seg,)
                continue
            # seg is an item of mod: follow a re-export if mod only re-exports it
            target = self.reexports.get(mod, {}).get(seg)
            if target is not None:
                r = self.resolve(self.absolute(mod, target), depth + 1)
                return r if r is not None else mod
            return mod
        return mod

    def defines(self, m, name):
        pattern = rf"\b(struct|enum|trait|fn|type|const|static|mod)\s+{re.escape(name)}\b"
        return re.search(pattern, self.src[m]) is not None

    def edges(self):
        e = defaultdict(set)
        for m in self.files:
            paths = [segs for _, (segs, _) in self._uses(m)]
            code = USE_RE.sub("", self.src[m])
            paths += [p.split("::") for p in PATH_RE.findall(code)]
            for segs in paths:
                # `super::X` inside an inline module (`mod driver { use super::X; }`) names an
                # item of this very file
                if segs[0] == "super" and self.defines(m, segs[-1]):
                    continue
                target = self.resolve(self.absolute(m, segs))
                if target is None or target == m:
                    continue
                # a module's own ancestors declare it: importing from the crate root's facade
                # counts only if the root defines the item itself
                e[m].add(target)
        return e


def tarjan(nodes, edges):
    index, low, on, stack, sccs, counter = {}, {}, set(), [], [], [0]
    sys.setrecursionlimit(10000)

    def strong(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                strong(w)
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
            sccs.append(comp)

    for v in nodes:
        if v not in index:
            strong(v)
    return sccs


def drawing(nodes, edges, label):
    sccs = tarjan(nodes, edges)
    comp_of = {v: i for i, c in enumerate(sccs) for v in c}
    cedges = defaultdict(set)
    for u in nodes:
        for v in edges.get(u, ()):
            if comp_of[u] != comp_of[v]:
                cedges[comp_of[u]].add(comp_of[v])
    floor = {}

    def height(c):
        if c not in floor:
            floor[c] = 0
            floor[c] = max((height(d) + 1 for d in cedges[c]), default=0)
        return floor[c]

    for c in range(len(sccs)):
        height(c)
    circles = [sorted(label(v) for v in c) for c in sccs if len(c) > 1]
    up = [(label(u), label(v)) for u in nodes for v in edges.get(u, ()) if comp_of[u] == comp_of[v]]
    floors = defaultdict(list)
    for v in nodes:
        floors[floor[comp_of[v]]].append(label(v))
    return circles, up, floors


def folders(crate, edges):
    """The same drawing with one node per top-level module: its nodes, edges and label."""
    top = lambda m: m[:1]  # noqa: E731
    fedges = defaultdict(set)
    for u, vs in edges.items():
        for v in vs:
            if top(u) != top(v) and top(v) != ():
                fedges[top(u)].add(top(v))
    nodes = sorted({top(m) for m in crate.files})
    return nodes, fedges, lambda m: "/".join(m) or "lib.rs"


def main():
    args = sys.argv[1:]
    root = next((a for a in args if not a.startswith("--")), "framework/src")
    crate = Crate(root)
    edges = crate.edges()
    nodes = list(crate.files)
    label = crate.name
    if "--folders" in args:
        nodes, edges, label = folders(crate, edges)
    circles, up, floors = drawing(nodes, edges, label)
    if "--edges" in args:
        for u in nodes:
            for v in sorted(edges.get(u, ()), key=label):
                print(f"{label(u)} -> {label(v)}")
    for f in sorted(floors, reverse=True):
        print(f"floor {f}: {' '.join(sorted(floors[f]))}")
    print(f"{len(nodes)} nodes, {sum(len(v) for v in edges.values())} imports, {len(floors)} floors")
    print(f"{len(circles)} circles")
    for c in circles:
        print("  circle: " + " <-> ".join(c))
    print(f"{len(up)} imports back up")
    for u, v in up:
        print(f"  up: {u} -> {v}")
    return 1 if circles else 0


if __name__ == "__main__":
    sys.exit(main())
