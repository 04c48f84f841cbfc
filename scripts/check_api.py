#!/usr/bin/env python3
"""The public API as `cargo doc` shows it, checked against the list kept in the repository.

Reads the HTML that `cargo doc --no-deps --features parquet,object-store` wrote (the
build `scripts/test.sh` makes; no build of its own) and
  1. lists every module and item the docs show (`stoker/all.html` and the module pages)
     and compares that with `scripts/public-api.txt`: a module or item that appears or
     disappears fails the check until the list is updated, so a change of the public
     surface is a change someone wrote down;
  2. fails on a link of the docs that leads nowhere: to a page the docs do not have, or
     one rustdoc could not make because its target is `#[doc(hidden)]` (it shows the
     link's text in brackets and does not warn).

Usage: check_api.py [DOC_DIR] [--update]
DOC_DIR defaults to $CARGO_TARGET_DIR/doc, else target/doc. --update rewrites the list.
"""

import html
import os
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXPECTED = ROOT / "scripts" / "public-api.txt"
HEADER = """\
# The modules and items `cargo doc --no-deps --features parquet,object-store` shows
# (the default features with Parquet and object storage: the build CI documents), one a
# line. scripts/check_api.py compares the docs with this list in CI; after a deliberate
# change of the public API, `python3 scripts/check_api.py --update` rewrites it.
"""

# all.html's section ids, singular.
KINDS = {
    "structs": "struct",
    "enums": "enum",
    "traits": "trait",
    "functions": "fn",
    "types": "type",
    "constants": "const",
    "statics": "static",
    "macros": "macro",
    "unions": "union",
    "trait-aliases": "trait-alias",
    "derives": "derive",
    "attributes": "attr",
    "primitives": "primitive",
}
SECTION = re.compile(r'<h3 id="([a-z-]+)">.*?</h3>\s*<ul class="all-items">(.*?)</ul>', re.S)
ENTRY = re.compile(r'<li><a href="[^"]*">(.*?)</a></li>')
HREF = re.compile(r'\bhref="([^"]+)"')
UNRESOLVED = re.compile(r"\[<code>([^<]*)</code>\]")


def surface(crate: Path) -> list[str]:
    """`kind path` of every module and item the docs show, sorted."""
    lines = []
    for index in crate.rglob("index.html"):
        parts = index.relative_to(crate).parts[:-1]
        lines.append("mod " + "::".join(("stoker",) + parts))
    text = (crate / "all.html").read_text(encoding="utf-8")
    for section, entries in SECTION.findall(text):
        kind = KINDS.get(section, section)
        for name in ENTRY.findall(entries):
            lines.append(f"{kind} stoker::{html.unescape(re.sub(r'<[^>]+>', '', name))}")
    return sorted(set(lines))


def broken_links(doc: Path, crate: Path) -> list[str]:
    """Links from the crate's pages to pages of the doc tree that do not exist, and links
    rustdoc left unresolved: one to a hidden item is shown as `[name]`, in brackets and
    without a link, and rustdoc says nothing (a dependency's docs shown under "Blanket
    Implementations" are not ours and not read)."""
    broken = []
    for page in crate.rglob("*.html"):
        text = page.read_text(encoding="utf-8")
        text = text.split('id="blanket-implementations"', 1)[0]
        for name in sorted(set(UNRESOLVED.findall(text))):
            broken.append(f"{page.relative_to(doc)}: [{html.unescape(name)}] (not linked)")
        for href in set(HREF.findall(text)):
            href = html.unescape(href).split("#", 1)[0].split("?", 1)[0]
            if re.match(r"^[a-z][a-z0-9+.-]*:", href) or href.startswith("/"):
                continue
            # Only links to pages: a bare word is a link a dependency's docs wrote
            # (blanket impls show their methods' docs), which rustdoc leaves as it is.
            if not href.endswith((".html", "/")):
                continue
            target = os.path.normpath(page.parent / href)
            # Links out of the doc tree (other crates' docs, with --no-deps) are not ours.
            if not target.startswith(str(doc)) or not target.startswith(str(crate)):
                continue
            if not os.path.exists(target):
                broken.append(f"{page.relative_to(doc)}: {href}")
    return sorted(broken)


def main() -> int:
    args = [a for a in sys.argv[1:] if a != "--update"]
    update = "--update" in sys.argv[1:]
    target = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
    doc = Path(args[0]).resolve() if args else (target / "doc").resolve()
    crate = doc / "stoker"
    if not (crate / "all.html").is_file():
        print(f"error: {crate}/all.html not found: run cargo doc first", file=sys.stderr)
        return 2
    found = surface(crate)
    failed = False
    broken = broken_links(doc, crate)
    if broken:
        failed = True
        print("error: links to pages the docs do not have (a hidden or private item?):")
        for b in broken:
            print("  " + b)
    if update:
        EXPECTED.write_text(HEADER + "\n".join(found) + "\n", encoding="utf-8")
        print(f"{EXPECTED.relative_to(ROOT)}: {len(found)} lines written")
        return 1 if failed else 0
    expected = [
        line
        for line in EXPECTED.read_text(encoding="utf-8").splitlines()
        if line and not line.startswith("#")
    ]
    added = sorted(set(found) - set(expected))
    removed = sorted(set(expected) - set(found))
    if added or removed:
        failed = True
        print("error: the public API the docs show differs from scripts/public-api.txt:")
        for line in added:
            print("  + " + line)
        for line in removed:
            print("  - " + line)
        print(
            "If the change is meant (a user needs it, or it was internal), run "
            "`python3 scripts/check_api.py --update`; an internal module or item "
            "the tests, fuzz targets, CLI or bindings need is `#[doc(hidden)]` (see src/lib.rs)."
        )
    mods = sum(1 for line in found if line.startswith("mod "))
    print(f"public API: {mods} modules, {len(found) - mods} items shown by the docs")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
