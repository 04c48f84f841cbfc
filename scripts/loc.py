#!/usr/bin/env python3
"""Lines of code of the library's files, largest first: the drift the house rules bound.

Counts, per `.rs` file under `src/` and `python/src/`, the lines that hold code: blank
lines, comment lines (`//`, `///`, `//!` and lines inside `/* ... */`) and the
`#[cfg(test)] mod ... { ... }` blocks are left out. Prints the `--top` largest (default
10) and how many files exceed `--limit` lines of code (default 800, the house rule), then
every function longer than `--fn-limit` lines of code (default 150, the house rule), counted
the same way from its `fn` line to its closing brace. With `--strict` it exits 1 when a file
or a function is over its limit; without, it only reports (CI prints it last, so that each
change sees where the files stand).
"""
import argparse
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from check_layers import strip_tests  # noqa: E402  (the same test-module rule)

ROOT = Path(__file__).resolve().parent.parent
def code_lines(text: str):
    """The lines that hold code, outside comments and test modules."""
    in_block = False
    for line in strip_tests(text).splitlines():
        s = line.strip()
        if in_block:
            if "*/" in s:
                in_block = False
                s = s.split("*/", 1)[1].strip()
            else:
                continue
        if s.startswith("/*"):
            if "*/" not in s:
                in_block = True
                continue
            s = s.split("*/", 1)[1].strip()
        if not s or s.startswith("//"):
            continue
        yield s


def lines_of_code(text: str) -> int:
    """Lines that hold code, outside comments."""
    return sum(1 for _ in code_lines(text))


FN = re.compile(r"\bfn\s+(\w+)")
# What cannot hold a brace of the code: strings, characters, a trailing comment.
NOT_CODE = re.compile(r'"(?:\\.|[^"\\])*"|\'(?:\\.|[^\'\\])\'|//.*$')


def long_functions(text: str, limit: int):
    """`(name, line, length)` of each function over `limit` lines of code, `line` its `fn`
    line in `text` (1-based). Nested functions count in their outer one's lines too."""
    lines = list(code_lines(text))
    original = text.splitlines()
    found, cursor = [], 0
    for i, line in enumerate(lines):
        # Its line in the file: the stripped code keeps the file's order.
        while cursor < len(original) and original[cursor].strip() != line:
            cursor += 1
        m = FN.search(NOT_CODE.sub("", line))
        if not m:
            cursor += 1
            continue
        depth, opened, end = 0, False, None
        for j in range(i, len(lines)):
            code = NOT_CODE.sub("", lines[j])
            if not opened and ";" in code.split("{", 1)[0]:
                break  # a declaration without a body
            for ch in code:
                if ch == "{":
                    depth, opened = depth + 1, True
                elif ch == "}":
                    depth -= 1
                    if opened and depth == 0:
                        end = j
                        break
            if end is not None:
                break
        if end is not None and end - i + 1 > limit:
            found.append((m.group(1), cursor + 1, end - i + 1))
        cursor += 1
    return found


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--top", type=int, default=10)
    ap.add_argument("--limit", type=int, default=800)
    ap.add_argument("--fn-limit", type=int, default=150)
    ap.add_argument("--strict", action="store_true")
    args = ap.parse_args()
    files = sorted(
        p for d in ("src", "python/src") if (ROOT / d).is_dir() for p in (ROOT / d).rglob("*.rs")
    )
    texts = {p.relative_to(ROOT).as_posix(): p.read_text(encoding="utf-8") for p in files}
    counts = sorted(((lines_of_code(t), path) for path, t in texts.items()), reverse=True)
    over = [c for c in counts if c[0] > args.limit]
    print(f"lines of code: {sum(c for c, _ in counts)} in {len(counts)} files; "
          f"{len(over)} over {args.limit}; the largest:")
    for n, path in counts[: args.top]:
        mark = "  (over the limit)" if n > args.limit else ""
        print(f"  {n:6d}  {path}{mark}")
    long = [(path, *f) for path, t in texts.items() for f in long_functions(t, args.fn_limit)]
    print(f"functions over {args.fn_limit} lines of code: {len(long)}")
    for path, name, line, n in sorted(long, key=lambda f: -f[3]):
        print(f"  {n:6d}  {name} ({path}:{line})")
    return 1 if args.strict and (over or long) else 0


if __name__ == "__main__":
    sys.exit(main())
