#!/usr/bin/env python3
"""Lines of code of the library's files, largest first: the drift the house rules bound.

Counts, per `.rs` file under `src/` and `python/src/`, the lines that hold code: blank
lines, comment lines (`//`, `///`, `//!` and lines inside `/* ... */`) and the
`#[cfg(test)] mod ... { ... }` blocks are left out. Prints the `--top` largest (default
10) and how many files exceed `--limit` lines of code (default 800, the house rule). With
`--strict` it exits 1 when one does; without, it only reports (CI prints it last, so that
each change sees where the files stand).
"""
import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from check_layers import strip_tests  # noqa: E402  (the same test-module rule)

ROOT = Path(__file__).resolve().parent.parent
def lines_of_code(text: str) -> int:
    """Lines that hold code, outside comments."""
    count, in_block = 0, False
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
        count += 1
    return count


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--top", type=int, default=10)
    ap.add_argument("--limit", type=int, default=800)
    ap.add_argument("--strict", action="store_true")
    args = ap.parse_args()
    files = sorted(
        p for d in ("src", "python/src") if (ROOT / d).is_dir() for p in (ROOT / d).rglob("*.rs")
    )
    counts = sorted(
        ((lines_of_code(p.read_text(encoding="utf-8")), p.relative_to(ROOT).as_posix()) for p in files),
        reverse=True,
    )
    over = [c for c in counts if c[0] > args.limit]
    print(f"lines of code: {sum(c for c, _ in counts)} in {len(counts)} files; "
          f"{len(over)} over {args.limit}; the largest:")
    for n, path in counts[: args.top]:
        mark = "  (over the limit)" if n > args.limit else ""
        print(f"  {n:6d}  {path}{mark}")
    return 1 if args.strict and over else 0


if __name__ == "__main__":
    sys.exit(main())
