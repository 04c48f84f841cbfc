#!/usr/bin/env python3
"""Checks that the library's modules stand in layers and import only downwards.

Reads every `src/**/*.rs` of the library (not the CLI in `src/bin/`), collects the
`crate::` and `super::` paths each file names (in `use` lines and inline), and checks:

1. the top-level modules follow LAYERS: a module names only modules in its own layer
   or below, and modules within one layer name each other without a cycle;
2. within every folder, sibling modules name each other without a cycle.

The Python crate (`python/src/**/*.rs`) is checked the same way, without a layer order:
its top-level modules, and the sibling modules of every folder, name each other without
a cycle.

Prints the import listing per module with `--list`. Exits 1 on a violation, naming it.
"""
import re
import sys
from pathlib import Path

# Bottom first. A module may name modules of its own layer (without a cycle) or below.
LAYERS = [["error"], ["rng", "decode"], ["source"], ["augment"], ["backend"], ["pipeline"], ["frameworks"]]
ROOT = Path(__file__).resolve().parent.parent / "src"
PYTHON_ROOT = Path(__file__).resolve().parent.parent / "python" / "src"

COMMENT = re.compile(r"//.*$", re.M)
CRATE_PATH = re.compile(r"\bcrate((?:::\w+)+)")
SUPER_PATH = re.compile(r"\b((?:super::)+)(\w+)")
USE_GROUP = re.compile(r"\buse\s+(crate|super(?:::super)*)::\{([^;]*)\};", re.S)


def module_of(path: Path, root: Path = ROOT) -> list:
    rel = path.relative_to(root).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] in ("mod", "lib"):
        parts = parts[:-1]
    return parts


def strip_tests(text: str) -> str:
    """Drops `#[cfg(test)] mod tests { ... }` blocks: tests may import anything."""
    out, i = [], 0
    for m in re.finditer(r"#\[cfg\(test\)\]\s*mod\s+\w+\s*\{", text):
        if m.start() < i:
            continue
        out.append(text[i : m.start()])
        depth, j = 1, m.end()
        while j < len(text) and depth:
            depth += {"{": 1, "}": -1}.get(text[j], 0)
            j += 1
        i = j
    out.append(text[i:])
    return "".join(out)


def names(path: Path, text: str, root: Path = ROOT) -> set:
    """The module paths (as tuples) this file names."""
    me = module_of(path, root)
    # A file's `super` is its parent module; mod.rs files are their folder's module.
    base = me
    found = set()
    text = COMMENT.sub("", strip_tests(text))
    # `use crate::{a, b::c}` groups name each member.
    for m in USE_GROUP.finditer(text):
        head = m.group(1)
        for item in re.split(r",", m.group(2)):
            first = re.match(r"\s*(\w+)", item)
            if not first or first.group(1) == "self":
                continue
            if head == "crate":
                found.add((first.group(1),))
            else:
                ups = head.count("super")
                found.add(tuple(base[: len(base) - ups]) + (first.group(1),))
    for m in CRATE_PATH.finditer(text):
        segs = m.group(1).strip(":").split("::")
        found.add(tuple(segs))
    for m in SUPER_PATH.finditer(text):
        ups = m.group(1).count("super")
        found.add(tuple(base[: len(base) - ups]) + (m.group(2),))
    return found


def find_cycle(graph: dict):
    state, stack = {}, []

    def visit(n):
        state[n] = 1
        stack.append(n)
        for d in sorted(graph.get(n, ())):
            if state.get(d) == 1:
                return stack[stack.index(d) :] + [d]
            if d not in state:
                c = visit(d)
                if c:
                    return c
        stack.pop()
        state[n] = 2
        return None

    for n in sorted(graph):
        if n not in state:
            c = visit(n)
            if c:
                return c
    return None


def check(root: Path, layers, listing: bool):
    """The problems of the crate under `root` (`layers`: the top-level order, or None for
    cycles only), and its module and import counts."""
    files = [p for p in root.rglob("*.rs") if "bin" not in p.relative_to(root).parts]
    modules = {tuple(module_of(p, root)) for p in files}
    edges = {}  # (from module, to module), both full paths of existing modules
    for p in files:
        me = tuple(module_of(p, root))
        for n in names(p, p.read_text(), root):
            # The longest prefix that is a module of the crate.
            target = None
            for k in range(len(n), 0, -1):
                if tuple(n[:k]) in modules:
                    target = tuple(n[:k])
                    break
            if target and target != me:
                edges.setdefault(me, set()).add(target)
    if listing:
        for m in sorted(edges):
            print("::".join(m) or "crate", "->", ", ".join(sorted("::".join(t) for t in edges[m])))
    layer = {name: i for i, group in enumerate(layers or []) for name in group}
    problems = []
    top = {}
    for a, ts in edges.items():
        for b in ts:
            if not a or not b or a[0] == b[0]:
                continue
            if layers is not None:
                la, lb = layer.get(a[0]), layer.get(b[0])
                if la is None or lb is None:
                    problems.append(f"{'::'.join(a)} or {'::'.join(b)}: not in a layer of LAYERS")
                    continue
                if lb > la:
                    problems.append(f"{'::'.join(a)} imports {'::'.join(b)}, a layer above it")
            top.setdefault(a[0], set()).add(b[0])
    c = find_cycle(top) if layers is not None else None  # else the crate's siblings say it
    if c:
        problems.append("cycle between top-level modules: " + " -> ".join(c))
    # Siblings: within each parent, the child each side lies under.
    for parent in sorted(modules, key=len):
        sib = {}
        for a, ts in edges.items():
            for b in ts:
                if len(a) > len(parent) and len(b) > len(parent) and a[: len(parent)] == parent == b[: len(parent)] and a[len(parent)] != b[len(parent)]:
                    sib.setdefault(a[len(parent)], set()).add(b[len(parent)])
        c = find_cycle(sib)
        if c:
            problems.append(f"cycle in {'::'.join(parent) or 'crate'}: " + " -> ".join(c))
    return problems, len(modules), sum(len(t) for t in edges.values())


def main() -> int:
    listing = "--list" in sys.argv
    failed = False
    for name, root, layers in (("library", ROOT, LAYERS), ("python crate", PYTHON_ROOT, None)):
        if not root.is_dir():
            continue
        problems, modules, imports = check(root, layers, listing)
        for p in problems:
            print(f"layers ({name}):", p)
        if problems:
            failed = True
        else:
            order = ", every import downwards" if layers is not None else ""
            print(f"layers ({name}): {modules} modules, {imports} imports, no cycle{order}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
