#!/usr/bin/env python3
"""Makes the damaged-JPEG cases of tests/suite/lenient.rs, and Pillow's decodes of them.

From one corpus photo (photos/lomiri_seeding_by_Clements_Engelhardt.jpg, CC0-1.0),
scaled down to 240x135, Pillow writes a baseline and a progressive JPEG; the damaged
cases are made from those by editing bytes:

  seeding_baseline.jpg              clean baseline (quality 90, 4:2:0)
  seeding_progressive.jpg           clean progressive
  seeding_extraneous.jpg            baseline with 5 bytes inserted before its SOS marker
  seeding_progressive_extraneous.jpg  progressive with 3 bytes inserted before the
                                    marker after its first scan's data
  seeding_progressive_cut.jpg       progressive cut after its second-to-last scan
                                    (the file ends there: no end-of-image marker)
  seeding_progressive_cut_eoi.jpg   the same, with an end-of-image marker added
  seeding_truncated.jpg             baseline cut inside its scan's data
  seeding_corrupt.jpg               baseline with 48 entropy-coded bits set to 1 in the
                                    middle of its scan (no Huffman code is all ones)
  seeding_marker.jpg                baseline with a restart marker written into the middle
                                    of its scan's data (it has no restart interval)

Reference decodes (Pillow, libjpeg-turbo, accurate integer IDCT, fancy upsampling):
  seeding_baseline.png, seeding_progressive.png     the clean files
  seeding_progressive_cut.png                       the cut progressive file
  seeding_truncated.png                             the truncated file, as Pillow decodes
                                                    it with LOAD_TRUNCATED_IMAGES

The script checks that Pillow decodes the extraneous-bytes files to the pixels of the
clean ones and both cut progressive files to the same pixels, and that the damage
changes Pillow's pixels.

Usage: scripts/make_damaged_jpegs.py CORPUS_DIR [OUT_DIR]   (OUT_DIR: tests/data/lenient)
"""

import io
import pathlib
import sys

import numpy as np
from PIL import Image, ImageFile

SOURCE = "photos/lomiri_seeding_by_Clements_Engelhardt.jpg"
SIZE = (240, 135)


def segments(data):
    """(marker, start, end) of each marker segment up to the first scan's data, then the
    scans: for an SOS, `end` is where its entropy-coded data ends (the next marker that is
    not a restart marker)."""
    out = []
    i = 2
    while i < len(data) - 1:
        if data[i] != 0xFF:
            raise ValueError(f"no marker at {i}")
        m = data[i + 1]
        if m == 0xD9:
            out.append((m, i, i + 2))
            break
        length = int.from_bytes(data[i + 2 : i + 4], "big")
        end = i + 2 + length
        if m == 0xDA:
            j = end
            while True:
                j = data.index(b"\xff", j)
                nxt = data[j + 1]
                if nxt == 0x00 or 0xD0 <= nxt <= 0xD7:
                    j += 2
                    continue
                break
            out.append((m, i, j))
            i = j
        else:
            out.append((m, i, end))
            i = end
    return out


def decode(data):
    img = Image.open(io.BytesIO(data))
    img.load()
    return np.asarray(img.convert("RGB"))


def main():
    corpus = pathlib.Path(sys.argv[1])
    out = pathlib.Path(sys.argv[2] if len(sys.argv) > 2 else "tests/data/lenient")
    out.mkdir(parents=True, exist_ok=True)
    photo = Image.open(corpus / SOURCE).convert("RGB").resize(SIZE, Image.LANCZOS)

    def save(**kw):
        b = io.BytesIO()
        photo.save(b, "JPEG", quality=90, subsampling="4:2:0", **kw)
        return b.getvalue()

    baseline = save()
    progressive = save(progressive=True)
    files = {"seeding_baseline.jpg": baseline, "seeding_progressive.jpg": progressive}

    # Extraneous bytes before a marker: between two header segments (before SOS) ...
    sos = next(s for s in segments(baseline) if s[0] == 0xDA)
    files["seeding_extraneous.jpg"] = baseline[: sos[1]] + b"\x00\x2a\x00\x2a\x00" + baseline[sos[1] :]
    # ... and after a scan's entropy-coded data (progressive: after the first scan).
    first_scan = next(s for s in segments(progressive) if s[0] == 0xDA)
    files["seeding_progressive_extraneous.jpg"] = (
        progressive[: first_scan[2]] + b"\x00\x00\x00" + progressive[first_scan[2] :]
    )

    # The progressive file cut after its second-to-last scan.
    scans = [s for s in segments(progressive) if s[0] == 0xDA]
    cut = progressive[: scans[-2][2]]
    files["seeding_progressive_cut.jpg"] = cut
    files["seeding_progressive_cut_eoi.jpg"] = cut + b"\xff\xd9"

    # The baseline file cut inside its scan's data, and corrupt in the middle of it.
    data_start, data_end = sos[1] + 2 + int.from_bytes(baseline[sos[1] + 2 : sos[1] + 4], "big"), sos[2]
    mid = (data_start + data_end) // 2
    files["seeding_truncated.jpg"] = baseline[: data_start + (data_end - data_start) * 11 // 20]
    files["seeding_corrupt.jpg"] = baseline[:mid] + b"\xff\x00" * 6 + baseline[mid + 12 :]
    files["seeding_marker.jpg"] = baseline[:mid] + b"\xff\xd3" + baseline[mid + 2 :]

    for name, data in files.items():
        (out / name).write_bytes(data)

    refs = {
        "seeding_baseline.png": decode(baseline),
        "seeding_progressive.png": decode(progressive),
        "seeding_progressive_cut.png": decode(cut + b"\xff\xd9"),
    }
    ImageFile.LOAD_TRUNCATED_IMAGES = True
    refs["seeding_truncated.png"] = decode(files["seeding_truncated.jpg"])
    cut_no_eoi = decode(cut)
    ImageFile.LOAD_TRUNCATED_IMAGES = False

    same = np.array_equal
    assert same(decode(files["seeding_extraneous.jpg"]), refs["seeding_baseline.png"])
    assert same(decode(files["seeding_progressive_extraneous.jpg"]), refs["seeding_progressive.png"])
    assert same(cut_no_eoi, refs["seeding_progressive_cut.png"])
    assert not same(refs["seeding_progressive_cut.png"], refs["seeding_progressive.png"])
    assert not same(refs["seeding_truncated.png"], refs["seeding_baseline.png"])
    for damaged in ["seeding_corrupt.jpg", "seeding_marker.jpg"]:
        ImageFile.LOAD_TRUNCATED_IMAGES = True
        assert not same(decode(files[damaged]), refs["seeding_baseline.png"]), damaged
        ImageFile.LOAD_TRUNCATED_IMAGES = False

    for name, px in refs.items():
        Image.fromarray(px).save(out / name, optimize=True)
    for name in sorted(list(files) + list(refs)):
        print(f"{name}: {(out / name).stat().st_size} bytes")
    print(f"progressive: {len(scans)} scans; cut at byte {len(cut)} of {len(progressive)}")


if __name__ == "__main__":
    main()
