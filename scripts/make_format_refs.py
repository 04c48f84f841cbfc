#!/usr/bin/env python3
"""Write tests/data/formats/: WebP, BMP, TIFF and GIF test files with reference decodes.

Each test file is made by Pillow from a crop of a CC0 photo of the image corpus
(photos/skimage_coffee.jpg, "CC0-1.0 (Rachel Michetti; skimage.data.coffee
docstring)"), and next to it ``<name>.ref.png`` is Pillow's decode of that file
(its first frame), converted to 8-bit RGB the way stoker documents: gray
replicated, alpha dropped (not composited), 16-bit samples to their high byte.
tests/suite/formats.rs decodes each file with stoker and compares with its reference.
The tests read only the committed files; they never run Python.

Run from the repository root (it rewrites tests/data/formats/):

    python3 scripts/make_format_refs.py CORPUS_DIR

Made with Python 3.11, Pillow 13.0.0 and numpy 2.4.6 (another Pillow may write other
bytes; the references are always Pillow's decodes of the files actually written).
"""

import os
import sys

import numpy as np
from PIL import Image

OUT = "tests/data/formats"


def ref(name, img):
    """Saves Pillow's decode of the file `name` (first frame) as name.ref.png."""
    img.save(os.path.join(OUT, name + ".ref.png"))


def pillow_rgb(path):
    with Image.open(path) as im:
        im.seek(0)
        return im.convert("RGB")


def main():
    corpus = sys.argv[1]
    os.makedirs(OUT, exist_ok=True)
    photo = Image.open(os.path.join(corpus, "photos/skimage_coffee.jpg")).convert("RGB")
    # Odd sizes: BMP rows are padded to 4 bytes, TIFF strips split unevenly.
    base = photo.crop((200, 100, 297, 161))  # 97x61
    rng = np.random.default_rng(20261201)

    files = []

    def save(name, im, **kw):
        path = os.path.join(OUT, name)
        im.save(path, **kw)
        files.append(name)
        return path

    # WebP, lossless: exact.
    p = save("coffee_lossless.webp", base, lossless=True, quality=100, method=4)
    ref("coffee_lossless.webp", pillow_rgb(p))
    # WebP, lossless with an alpha channel: the colour is kept, the alpha dropped.
    rgba = base.copy()
    alpha = Image.fromarray(rng.integers(0, 256, (base.height, base.width), dtype=np.uint8))
    rgba.putalpha(alpha)
    p = save("coffee_alpha_lossless.webp", rgba, lossless=True, exact=True)
    ref("coffee_alpha_lossless.webp", pillow_rgb(p))
    # WebP, lossy: a decoder other than libwebp may round differently (tolerance).
    p = save("coffee_lossy.webp", base, quality=80)
    ref("coffee_lossy.webp", pillow_rgb(p))
    # BMP: 24-bit, and 8-bit palette.
    p = save("coffee.bmp", base)
    ref("coffee.bmp", pillow_rgb(p))
    p = save("coffee_palette.bmp", base.quantize(colors=64))
    ref("coffee_palette.bmp", pillow_rgb(p))
    # TIFF: uncompressed and LZW, RGB; LZW gray.
    p = save("coffee_raw.tiff", base, compression=None)
    ref("coffee_raw.tiff", pillow_rgb(p))
    p = save("coffee_lzw.tiff", base, compression="tiff_lzw")
    ref("coffee_lzw.tiff", pillow_rgb(p))
    p = save("coffee_gray_lzw.tiff", base.convert("L"), compression="tiff_lzw")
    ref("coffee_gray_lzw.tiff", pillow_rgb(p))
    # TIFF, 16-bit gray: the reference is the high byte of each sample, from numpy
    # (Pillow's I;16 to RGB clips instead), and the same samples as a 16-bit PNG.
    # (High byte from the photo, low byte random: rounding instead would show.)
    g16 = (np.asarray(base.convert("L"), dtype=np.uint16) * 256
           + rng.integers(0, 256, (base.height, base.width), dtype=np.uint16))
    im16 = Image.fromarray(g16)
    assert im16.mode == "I;16", im16.mode
    p = save("coffee_gray16.tiff", im16, compression=None)
    with Image.open(p) as back:
        assert np.array_equal(np.asarray(back, dtype=np.uint16), g16), "16-bit TIFF round trip"
    save("coffee_gray16.png", im16)
    hi = (g16 >> 8).astype(np.uint8)
    ref("coffee_gray16.tiff", Image.fromarray(np.stack([hi] * 3, axis=-1)))
    # GIF, two frames: the first is the sample.
    f1 = base.quantize(colors=128)
    f2 = base.transpose(Image.Transpose.ROTATE_180).quantize(colors=128)
    p = save("coffee_2frames.gif", f1, save_all=True, append_images=[f2], duration=100, loop=0)
    with Image.open(p) as im:
        assert im.n_frames == 2, im.n_frames
    ref("coffee_2frames.gif", pillow_rgb(p))
    # A JPEG and a PNG of the same crop, for the mixed-format folder test.
    save("coffee.jpg", base, quality=90)
    save("coffee.png", base)
    for f in files:
        print(f, os.path.getsize(os.path.join(OUT, f)))


if __name__ == "__main__":
    main()
