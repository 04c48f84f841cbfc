#!/usr/bin/env python3
"""Counts code written twice: pairs of places, in the files git tracks, that share a run of
six or more lines (compared with white space folded, comments, blank lines, lone
punctuation and `use`/`#include` lines passed over). A report for the CI log, so that each
change sees the drift; not a gate.

    scripts/dupes.py [--min-lines N] [--list K]

Same lines only: a copy with other names is not found. Prints the number of pairs, how
many are between two CUDA kernel files or between two WGSL shader files (the house allows
none), and the K longest (default 10). A run that stands in more than eight places is
boilerplate and not counted, as it cannot be one helper.
"""

import argparse
import collections
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SUFFIXES = {".rs", ".cu", ".cuh", ".wgsl", ".py", ".sh"}
SKIP_LINE = re.compile(r"^(//|#(?!\[)|\*|/\*|use |#include|pub use |mod |pub mod )")
PUNCTUATION = re.compile(r"^[\s{}()\[\];,.]*$")
MAX_PLACES = 8


def code_lines(path):
    """(line number, folded text) of the lines that count."""
    out = []
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return out
    for n, line in enumerate(text.splitlines(), 1):
        folded = " ".join(line.split())
        if not folded or PUNCTUATION.match(folded) or SKIP_LINE.match(folded):
            continue
        out.append((n, folded))
    return out


def tracked_files():
    listed = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True
    ).stdout.split(b"\0")
    for name in listed:
        path = ROOT / name.decode()
        if name and path.suffix in SUFFIXES and path.is_file():
            yield path


def pairs(files, k):
    """Maximal shared runs of at least `k` lines, as (length, (file, line), (file, line))."""
    windows = collections.defaultdict(list)
    lines = {}
    for f in files:
        lines[f] = code_lines(f)
        texts = [t for _, t in lines[f]]
        for i in range(len(texts) - k + 1):
            windows[hash(tuple(texts[i : i + k]))].append((f, i))
    # Each pair of places grows from its first shared window: a window whose
    # predecessors are also shared continues a run already counted.
    seen = set()
    found = []
    for places in windows.values():
        if len(places) < 2 or len(places) > MAX_PLACES:
            continue
        for a in range(len(places)):
            for b in range(a + 1, len(places)):
                (fa, ia), (fb, ib) = places[a], places[b]
                if fa == fb and abs(ia - ib) < k:
                    continue
                key = (fa, ia, fb, ib)
                if key in seen:
                    continue
                la, lb = lines[fa], lines[fb]
                if ia > 0 and ib > 0 and la[ia - 1][1] == lb[ib - 1][1]:
                    continue  # inside a longer run, counted from its start
                n = 0
                while ia + n < len(la) and ib + n < len(lb) and la[ia + n][1] == lb[ib + n][1]:
                    seen.add((fa, ia + n, fb, ib + n))
                    n += 1
                found.append((n, (fa, la[ia][0]), (fb, lb[ib][0])))
    return found


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--min-lines", type=int, default=6)
    ap.add_argument("--list", type=int, default=10)
    args = ap.parse_args()
    found = pairs(sorted(tracked_files()), args.min_lines)
    # One row a pair of files' places; several runs between the same two regions count once.
    regions = {}
    for n, (fa, la), (fb, lb) in found:
        key = (fa, fb, la // 40, lb // 40)
        regions[key] = max(regions.get(key, (0,)), (n, la, lb))
    rows = sorted(
        ((n, fa, la, fb, lb) for (fa, fb, _, _), (n, la, lb) in regions.items()), reverse=True
    )

    def between(folder):
        return sum(
            1
            for _, fa, _, fb, _ in rows
            if fa.parent.name == folder and fb.parent.name == folder and fa != fb
        )

    print(
        f"duplicates: {len(rows)} pairs of places sharing {args.min_lines}+ lines; "
        f"{between('kernels')} between kernel files, {between('shaders')} between shader files"
    )
    for n, fa, la, fb, lb in rows[: args.list]:
        print(f"    {n:4}  {fa.relative_to(ROOT)}:{la} ~ {fb.relative_to(ROOT)}:{lb}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
