#!/usr/bin/env python3
"""Check with Pillow (another reader, its own libjpeg build) that a folder written by
`stoker convert --to folder` holds the same images as the folder it came from.

    python3 scripts/check_transcode_pillow.py ORIGINAL_DIR CONVERTED_DIR

Every file under ORIGINAL_DIR that Pillow opens must be at the same relative path under
CONVERTED_DIR and decode to the same mode, size and pixels; a transcoded JPEG (one whose
bytes changed) must also be baseline (SOF0), not progressive, with a restart interval
(Pillow's ``info``/``layer`` say so only partly, so the markers are read here). Exits 1 on
the first difference. Needs Pillow (scripts/test.sh installs it).
"""
import os
import sys

from PIL import Image


def markers(data):
    """(frame marker, scans, restart interval at the first scan) of a JPEG."""
    i, frame, scans, dri, first = 2, None, 0, 0, None
    while i + 4 <= len(data):
        if data[i] != 0xFF:
            i += 1
            continue
        m = data[i + 1]
        if m in (0xFF, 0x00, 0x01) or 0xD0 <= m <= 0xD8:
            i += 1 if m == 0xFF else 2
            continue
        if m == 0xD9:
            break
        n = int.from_bytes(data[i + 2:i + 4], "big")
        if 0xC0 <= m <= 0xCF and m not in (0xC4, 0xC8, 0xCC) and frame is None:
            frame = m
        if m == 0xDD:
            dri = int.from_bytes(data[i + 4:i + 6], "big")
        i += 2 + n
        if m == 0xDA:
            scans += 1
            first = dri if first is None else first
            while i + 1 < len(data) and not (
                data[i] == 0xFF and data[i + 1] not in (0x00, 0xFF) and not 0xD0 <= data[i + 1] <= 0xD7
            ):
                i += 1
    return frame, scans, first


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    orig, conv = sys.argv[1], sys.argv[2]
    same = changed = skipped = 0
    for root, _, files in os.walk(orig):
        for name in sorted(files):
            a = os.path.join(root, name)
            b = os.path.join(conv, os.path.relpath(a, orig))
            try:
                with Image.open(a) as im:
                    im.load()
                    want = (im.mode, im.size, im.tobytes())
            except Exception:
                skipped += 1  # not something Pillow reads (12-bit, lossless, damaged...)
                continue
            with open(a, "rb") as f, open(b, "rb") as g:
                da, db = f.read(), g.read()
            if da == db:
                same += 1
                continue
            with Image.open(b) as im:
                im.load()
                got = (im.mode, im.size, im.tobytes())
            if got != want:
                sys.exit(f"{b}: Pillow decodes other pixels than {a}")
            frame, scans, dri = markers(db)
            if (frame, scans) != (0xC0, 1) or not dri:
                sys.exit(f"{b}: frame {frame}, {scans} scans, restart interval {dri}")
            changed += 1
    print(f"Pillow: {changed} transcoded with the same pixels (baseline, one scan, restarts), "
          f"{same} byte for byte, {skipped} not read by Pillow")
    if changed == 0:
        sys.exit("nothing was transcoded")


if __name__ == "__main__":
    main()
