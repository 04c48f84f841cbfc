#!/usr/bin/env python3
"""Write tests/data/refs/: reference cases for stoker's CPU image ops.

The Rust CPU reference implementation (resize, colour jitter and the other
colour ops, normalise, warps, the augmentation policies' tables) is checked
against what Pillow and torchvision produce on the same inputs. This script
makes those inputs and outputs once, by hand; the result is committed and read by
the Rust tests, which never run Python.

Run from the repository root (it wipes and rewrites tests/data/refs/):

    .venv-peers/bin/python scripts/make_refs.py

Generated with Python 3.11, Pillow 13.0.0, numpy 2.4.6, torch 2.15.0 and
torchvision 0.29.2 (scripts/requirements-peers.txt); cases.json records the
versions of the run that wrote it. Everything is drawn from fixed numpy seeds,
so a rerun with the same versions writes the same bytes.

What is written (file names relative to tests/data/refs/):

* ``in_*.png`` inputs: 8-bit RGB PNGs (random noise, smooth gradients, a
  palette of colour edge cases, and small crops of the public-domain / CC0
  scikit-image photos in shared/corpus/photos) from 1x1 to 120x90, and 8-bit L
  (gray) label planes with class ids 0..20 in blocks plus noise. For the filter
  cases also a photo crop squeezed into values 60..140 (``in_lowcontrast_*``), a
  flat single-colour image (``in_flat_*``) and noise 1 pixel wide and 2 pixels
  tall (``in_noise_1x9``, ``in_noise_13x2``).
* ``cases.json``::

    {"generator": "scripts/make_refs.py", "versions": {...}, "cases": [CASE, ...]}

  with one CASE per reference output:

  - ``{"op": "resize", "filter": "bilinear", "antialias": true, "box": [x0, y0,
    x1, y1], "size": [w, h], ...}``: Pillow
    ``Image.open(input).convert("RGB").resize((w, h), Image.Resampling.BILINEAR,
    box=box)`` (reducing_gap None). Box coordinates are floats in multiples of
    1/16, so they are exact in f32 as well as f64.
  - the same with ``"antialias": false``: torchvision, an integer crop
    ``t[:, y0:y1, x0:x1]`` of the uint8 CHW tensor, then
    ``torchvision.transforms.v2.functional.resize(t, [h, w],
    InterpolationMode.BILINEAR, antialias=False)`` (uint8 in, uint8 out).
  - ``{"op": "resize", "filter": "nearest", ...}`` on an L label plane: Pillow
    ``im.resize((w, h), Image.Resampling.NEAREST, box=box)``.
  - ``{"op": "jitter", "ops": [["brightness", f], ["contrast", f],
    ["saturation", f], ["hue", h], ...]}``: torchvision v2 functional
    adjust_brightness / adjust_contrast / adjust_saturation / adjust_hue
    applied in the listed order to a uint8 CHW tensor, which stays uint8
    between the ops (torchvision's uint8 code path, with its truncating float
    to uint8 conversions). Factors are multiples of 1/256 and hue shifts
    multiples of 1/512 (exact in f32).
    The same case holds the colour ops that follow the jitter: ``["grayscale", 0]``
    (``F.rgb_to_grayscale(t, num_output_channels=3)``), ``["posterize", bits]``
    (``F.posterize(t, bits)``) and ``["solarize", threshold]`` (``F.solarize(t,
    threshold)``), drawn after every other case.
    The filter cases (names ``filter_*``) use the same format with
    ``["autocontrast", 0]`` (``F.autocontrast(t)``), ``["equalize", 0]``
    (``F.equalize(t)``), ``["sharpness", f]`` (``F.adjust_sharpness(t, f)``) and
    ``["blur", [kx, ky, sigma]]`` (``F.gaussian_blur(t, kernel_size=[kx, ky],
    sigma=[sigma, sigma])``), alone and in sequences with the ops above. torch's
    reflect padding needs ``k // 2`` below the side along each axis, so no blur here
    has a larger kernel. They are drawn after every other case, from a generator of
    their own (``SEED_FILTERS``), as are the two kinds below.
  - ``{"op": "policy_magnitudes", "policy": "RandAugment" | "TrivialAugmentWide",
    "bins": n, "size": [w, h], "magnitudes": {op: [bits, ...] | null, ...}}``: for
    every op of the torchvision.transforms.v2 class's ``_AUGMENTATION_SPACE`` (in its
    order), ``magnitudes_fn(n, h, w)`` as float32, each value's bits as 8 hex digits;
    null for the ops without magnitudes. ``input`` and ``output`` are null. (torch
    2.15's vectorised CPU ``linspace`` rounds ``start + step * i`` and
    ``end - step * (n - 1 - i)`` once, as a fused multiply-add: not always what two
    roundings give.)
  - ``{"op": "policy_op", "policy": ..., "bins": n, "bin": b, "transform": op,
    "magnitude": m, "magnitude_bits": bits, "fill": [r, g, b]}``: the policy class
    (``interpolation=InterpolationMode.BILINEAR``, ``fill``)'s
    ``_apply_image_or_video_transform(t, op, m, interpolation=BILINEAR,
    fill=policy._fill)`` on the uint8 CHW tensor, with ``m`` the table's value at bin
    ``b`` as a Python float, negated for some draws of the signed ops (as the
    policies' ``forward`` does); ``magnitude_bits`` holds ``float32(m)``'s bits
    (``m`` is a float32 value, so they give back the exact float the op was given).
  - ``{"op": "erase", "box": [x, y, w, h], "value": [...]}``: torchvision v2
    ``F.erase(t, y, x, h, w, v)`` with ``v`` the value per channel: with ``"mean"``
    and ``"std"`` on the normalised float32 tensor (as ``normalize`` below, output raw
    float32), else on the uint8 tensor (output a PNG). Drawn after every other case.
  - ``{"op": "normalize", "mean": [...], "std": [...], "output": "*.f32"}``:
    ``F.normalize(F.to_dtype(t, torch.float32, scale=True), mean, std)`` on the
    uint8 CHW tensor, written as raw little-endian float32 in CHW order.
  - ``{"op": "affine", "filter": "bilinear", "angle": a, "translate": [tx, ty],
    "scale": s, "shear": [sx, sy], "fill": [r, g, b], ...}``: torchvision v2
    ``F.affine(t, angle=a, translate=[tx, ty], scale=s, shear=[sx, sy],
    interpolation=InterpolationMode.BILINEAR, fill=[r, g, b])`` on the uint8 CHW
    tensor (about the centre, output the input's size); with ``"filter":
    "nearest"`` and ``"fill": [id]`` the same on an L label plane as a (1, H, W)
    uint8 tensor with InterpolationMode.NEAREST. These cases are drawn after all
    the others, so adding them left the earlier files byte for byte as they were.
  - ``{"op": "letterbox", "size": [w, h], "fill": [...], "filter": ...}``: Pillow,
    the input resized (BILINEAR, or NEAREST for label planes) to
    ``round(side * min(w / W, h / H))`` pixels and pasted centred (offsets floored)
    on a canvas of the fill.
  - ``{"op": "resize_center_crop", "resize": r, "size": [w, h]}``: torchvision
    v2 on the PIL image, ``F.resize(im, [r], BILINEAR)`` then ``F.center_crop(im,
    [h, w])``, which pads a side shorter than the crop with 0 (left and top by
    ``floor(difference / 2)``).
  - ``{"op": "pad_crop", "size": [w, h], "padding": p, "offset": [dx, dy], "fill":
    [...]}``: torchvision v2 ``F.pad(t, [p], fill=fill)`` then the ``w x h`` crop at
    ``(dx, dy)`` of the padded uint8 tensor.

  Every CASE also has ``name``, ``input`` and ``output`` (null for
  ``policy_magnitudes``).
* ``README.md``: a short description of the folder and the licences.
"""
import json
import shutil
import sys
from pathlib import Path

import numpy as np
import PIL
import torch
import torchvision
from PIL import Image
from torchvision.transforms.v2 import RandAugment, TrivialAugmentWide
from torchvision.transforms.v2 import functional as F
from torchvision.transforms.v2.functional import InterpolationMode

SEED = 20240611
ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "data" / "refs"
PHOTOS = ROOT.parent / "shared" / "corpus" / "photos"  # shared/ sits next to the checkout
SIZE_LIMIT = 1024 * 1024  # the whole folder must stay under this many bytes (600 KiB before
#                           the filter and policy cases)

rng = np.random.default_rng(SEED)
cases = []


# ---------------------------------------------------------------- helpers

def sixteenths(x):
    """Round a coordinate to a multiple of 1/16 (exact in f32 and f64)."""
    return round(x * 16) / 16


def save_png(arr, name):
    """Save an HxWx3 (RGB) or HxW (L) uint8 array as tests/data/refs/<name>."""
    mode = "RGB" if arr.ndim == 3 else "L"
    Image.fromarray(np.ascontiguousarray(arr), mode).save(OUT / name, optimize=True)
    return name


def load_rgb(name):
    return Image.open(OUT / name).convert("RGB")


def to_chw(im):
    """PIL RGB image -> uint8 CHW tensor."""
    return torch.from_numpy(np.asarray(im, dtype=np.uint8).copy()).permute(2, 0, 1).contiguous()


def from_chw(t):
    """uint8 CHW tensor -> HxWx3 uint8 array."""
    assert t.dtype == torch.uint8, t.dtype
    return t.permute(1, 2, 0).contiguous().numpy()


def image_size(name):
    with Image.open(OUT / name) as im:
        return im.size


# ---------------------------------------------------------------- inputs

def make_noise(w, h):
    return save_png(rng.integers(0, 256, (h, w, 3), dtype=np.uint8), f"in_noise_{w}x{h}.png")


def make_gradient(w, h):
    """Smooth colour gradient: red along x, green along y, blue a slow wave."""
    y, x = np.mgrid[0:h, 0:w].astype(np.float64)
    fx = x / max(w - 1, 1)
    fy = y / max(h - 1, 1)
    r = 255 * fx
    g = 255 * fy
    b = 127.5 + 110 * np.sin(2 * np.pi * (0.7 * fx + 0.4 * fy))
    arr = np.clip(np.rint(np.stack([r, g, b], axis=-1)), 0, 255).astype(np.uint8)
    return save_png(arr, f"in_grad_{w}x{h}.png")


def make_palette():
    """16x12 image of colour edge cases for the jitter ops: black, white, grays
    (r = g = b), primaries and secondaries, channels differing by one, hue
    sector boundaries, plus random colours in the remaining pixels."""
    special = [
        (0, 0, 0), (255, 255, 255), (1, 1, 1), (254, 254, 254), (128, 128, 128), (127, 127, 127),
        (255, 0, 0), (0, 255, 0), (0, 0, 255), (255, 255, 0), (0, 255, 255), (255, 0, 255),
        (128, 127, 127), (127, 128, 127), (127, 127, 128), (128, 128, 127), (1, 0, 0), (0, 0, 1),
        (255, 254, 254), (254, 255, 255), (255, 128, 0), (128, 255, 0), (0, 255, 128),
        (0, 128, 255), (128, 0, 255), (255, 0, 128), (200, 100, 100), (100, 200, 100),
        (100, 100, 200), (10, 20, 30), (250, 240, 230), (64, 32, 16),
    ]
    w, h = 16, 12
    arr = rng.integers(0, 256, (h * w, 3), dtype=np.uint8)
    arr[: len(special)] = np.array(special, dtype=np.uint8)
    return save_png(arr.reshape(h, w, 3), f"in_palette_{w}x{h}.png")


def make_photo(src, scale_to, crop, tag):
    """Crop of a scikit-image photo: scale to `scale_to` (Lanczos), crop
    `crop` = (x, y, w, h), save as RGB (grayscale photos get r = g = b)."""
    with Image.open(PHOTOS / src) as im:
        im = im.convert("RGB")
        if scale_to is not None:
            im = im.resize(scale_to, Image.Resampling.LANCZOS)
        x, y, w, h = crop
        arr = np.asarray(im.crop((x, y, x + w, y + h)), dtype=np.uint8)
    return save_png(arr, f"in_photo_{tag}_{w}x{h}.png")


def make_labels(w, h, block):
    """L label plane: random class ids 0..20 in block x block tiles, then about
    15 % of the pixels replaced by random ids (noise)."""
    bw, bh = -(-w // block), -(-h // block)
    tiles = rng.integers(0, 21, (bh, bw), dtype=np.uint8)
    arr = np.repeat(np.repeat(tiles, block, axis=0), block, axis=1)[:h, :w].copy()
    noise = rng.random((h, w)) < 0.15
    arr[noise] = rng.integers(0, 21, int(noise.sum()), dtype=np.uint8)
    return save_png(arr, f"in_labels_{w}x{h}.png")


# ---------------------------------------------------------------- cases

def full_box(name):
    w, h = image_size(name)
    return [0.0, 0.0, float(w), float(h)]


def random_box(name, min_w, min_h, snap=sixteenths):
    """Random box inside the image, at least min_w x min_h, corners snapped
    by `snap` (1/16 for Pillow boxes, int for torchvision crops)."""
    w, h = image_size(name)
    for _ in range(1000):
        bw = rng.uniform(min_w, w)
        bh = rng.uniform(min_h, h)
        x0 = snap(rng.uniform(0, w - bw))
        y0 = snap(rng.uniform(0, h - bh))
        x1 = snap(x0 + bw)
        y1 = snap(y0 + bh)
        if x1 <= w and y1 <= h and x1 - x0 >= min_w and y1 - y0 >= min_h:
            return [float(x0), float(y0), float(x1), float(y1)]
    raise RuntimeError(f"no {min_w}x{min_h} box fits in {name}")


def scaled_size(box, fx, fy=None):
    """Output size for scaling the box by 1/fx horizontally and 1/fy vertically."""
    fy = fx if fy is None else fy
    return [max(1, round((box[2] - box[0]) / fx)), max(1, round((box[3] - box[1]) / fy))]


def resize_bilinear_aa(name, inp, box, size):
    """Pillow BILINEAR (antialiased when downscaling) on an RGB image."""
    out = load_rgb(inp).resize(tuple(size), Image.Resampling.BILINEAR, box=tuple(box))
    out.save(OUT / f"{name}.png", optimize=True)
    cases.append(dict(name=name, op="resize", input=inp, box=box, size=size,
                      filter="bilinear", antialias=True, output=f"{name}.png"))


def resize_bilinear_noaa(name, inp, box, size):
    """torchvision bilinear, antialias=False, integer crop, uint8 in and out."""
    x0, y0, x1, y1 = (int(v) for v in box)
    assert [x0, y0, x1, y1] == box, f"{name}: torchvision boxes must be integers"
    t = to_chw(load_rgb(inp))[:, y0:y1, x0:x1]
    w, h = size
    out = F.resize(t, [h, w], interpolation=InterpolationMode.BILINEAR, antialias=False)
    save_png(from_chw(out), f"{name}.png")
    cases.append(dict(name=name, op="resize", input=inp, box=[float(v) for v in box], size=size,
                      filter="bilinear", antialias=False, output=f"{name}.png"))


def resize_nearest(name, inp, box, size):
    """Pillow NEAREST on an L label plane."""
    with Image.open(OUT / inp) as im:
        assert im.mode == "L"
        out = im.resize(tuple(size), Image.Resampling.NEAREST, box=tuple(box))
    out.save(OUT / f"{name}.png", optimize=True)
    cases.append(dict(name=name, op="resize", input=inp, box=box, size=size,
                      filter="nearest", output=f"{name}.png"))


JITTER_FNS = {
    "brightness": F.adjust_brightness,
    "contrast": F.adjust_contrast,
    "saturation": F.adjust_saturation,
    "hue": F.adjust_hue,
}


# The colour ops after the jitter (a separate table: the random jitter sequences above
# draw from JITTER_FNS's length, and must keep their draws).
COLOR_FNS = {
    "grayscale": lambda t, _: F.rgb_to_grayscale(t, num_output_channels=3),
    "posterize": lambda t, bits: F.posterize(t, int(bits)),
    "solarize": F.solarize,
}


# The whole-image colour ops (a third table, for the same reason): blur's parameter is
# [kx, ky, sigma], the same sigma along both axes.
FILTER_FNS = {
    "autocontrast": lambda t, _: F.autocontrast(t),
    "equalize": lambda t, _: F.equalize(t),
    "sharpness": F.adjust_sharpness,
    "blur": lambda t, p: F.gaussian_blur(t, kernel_size=[int(p[0]), int(p[1])],
                                         sigma=[float(p[2]), float(p[2])]),
}


def jitter(name, inp, ops):
    """torchvision colour ops in order on a uint8 CHW tensor (kept uint8)."""
    t = to_chw(load_rgb(inp))
    for op, f in ops:
        t = (JITTER_FNS.get(op) or COLOR_FNS.get(op) or FILTER_FNS[op])(t, f)
        assert t.dtype == torch.uint8, (op, t.dtype)
    save_png(from_chw(t), f"{name}.png")
    cases.append(dict(name=name, op="jitter", input=inp, ops=[[op, f] for op, f in ops],
                      output=f"{name}.png"))


def normalize(name, inp, mean, std):
    """to_dtype(float32, scale=True) then normalize; raw LE float32, CHW."""
    t = F.to_dtype(to_chw(load_rgb(inp)), torch.float32, scale=True)
    out = F.normalize(t, mean=mean, std=std)
    (OUT / f"{name}.f32").write_bytes(out.numpy().astype("<f4").tobytes())
    cases.append(dict(name=name, op="normalize", input=inp, mean=mean, std=std,
                      output=f"{name}.f32"))


def erase(name, inp, box, value, mean=None, std=None):
    """torchvision v2 F.erase(t, i, j, h, w, v) of a [x, y, w, h] box: on the normalised
    float32 tensor (raw LE float32, CHW) with mean and std, else on the uint8 one (PNG)."""
    t = to_chw(load_rgb(inp))
    x, y, w, h = box
    if mean is not None:
        t = F.normalize(F.to_dtype(t, torch.float32, scale=True), mean=mean, std=std)
        v = torch.tensor(value, dtype=torch.float32)[:, None, None]
        out = F.erase(t, y, x, h, w, v)
        output = f"{name}.f32"
        (OUT / output).write_bytes(out.numpy().astype("<f4").tobytes())
    else:
        v = torch.tensor(value, dtype=torch.uint8)[:, None, None]
        out = F.erase(t, y, x, h, w, v)
        output = f"{name}.png"
        save_png(from_chw(out), output)
    case = dict(name=name, op="erase", input=inp, box=list(box), value=list(value),
                output=output)
    if mean is not None:
        case.update(mean=mean, std=std)
    cases.append(case)


def affine(name, inp, angle, translate, scale, shear, fill, labels=False):
    """torchvision v2 affine about the centre on a uint8 CHW tensor (bilinear, the RGB
    fill), or on an L label plane as a (1, H, W) uint8 tensor (nearest, the id fill)."""
    if labels:
        with Image.open(OUT / inp) as im:
            assert im.mode == "L"
            t = torch.from_numpy(np.asarray(im).copy()).unsqueeze(0)
        mode = InterpolationMode.NEAREST
    else:
        t = to_chw(load_rgb(inp))
        mode = InterpolationMode.BILINEAR
    out = F.affine(t, angle=angle, translate=list(translate), scale=scale, shear=list(shear),
                   interpolation=mode, fill=[float(f) for f in fill])
    assert out.dtype == torch.uint8
    if labels:
        Image.fromarray(out[0].numpy(), mode="L").save(OUT / f"{name}.png", optimize=True)
    else:
        save_png(from_chw(out), f"{name}.png")
    cases.append(dict(name=name, op="affine", input=inp, angle=angle, translate=list(translate),
                      scale=scale, shear=list(shear), fill=list(fill),
                      filter="nearest" if labels else "bilinear", output=f"{name}.png"))


def letterbox(name, inp, size, fill, labels=False):
    """Pillow: the image resized to fit `size` with its aspect kept (BILINEAR, or NEAREST
    for an L label plane; round(side * scale) pixels), pasted centred on a `fill`
    canvas."""
    with Image.open(OUT / inp) as im:
        im = im.convert("L" if labels else "RGB")
        w, h = im.size
        r = min(size[0] / w, size[1] / h)
        nw = min(max(1, round(w * r)), size[0])
        nh = min(max(1, round(h * r)), size[1])
        mode = Image.Resampling.NEAREST if labels else Image.Resampling.BILINEAR
        canvas = Image.new(im.mode, tuple(size), fill[0] if labels else tuple(fill))
        canvas.paste(im.resize((nw, nh), mode), ((size[0] - nw) // 2, (size[1] - nh) // 2))
    canvas.save(OUT / f"{name}.png", optimize=True)
    cases.append(dict(name=name, op="letterbox", input=inp, size=list(size), fill=list(fill),
                      filter="nearest" if labels else "bilinear", output=f"{name}.png"))


def pad_crop(name, inp, size, padding, offset, fill):
    """torchvision v2: pad by `padding` (constant fill) on every side, then the crop of
    `size` at `offset` of the padded tensor (RandomCrop(size, padding)'s two steps)."""
    t = to_chw(load_rgb(inp))
    t = F.pad(t, [padding], fill=[float(f) for f in fill])
    dx, dy = offset
    t = t[:, dy:dy + size[1], dx:dx + size[0]]
    save_png(from_chw(t), f"{name}.png")
    cases.append(dict(name=name, op="pad_crop", input=inp, size=list(size), padding=padding,
                      offset=list(offset), fill=list(fill), output=f"{name}.png"))


def resize_center_crop(name, inp, resize, size):
    """torchvision v2 on a PIL image: Resize(resize) (shorter side; Pillow's BILINEAR)
    then CenterCrop(size), which pads a side shorter than the crop with 0 first."""
    out = F.center_crop(F.resize(load_rgb(inp), [resize], InterpolationMode.BILINEAR),
                        [size[1], size[0]])
    out.save(OUT / f"{name}.png", optimize=True)
    cases.append(dict(name=name, op="resize_center_crop", input=inp, resize=resize,
                      size=list(size), output=f"{name}.png"))


def factor(lo, hi, step=256):
    """Random factor in [lo, hi], a multiple of 1/step."""
    return round(rng.uniform(lo, hi) * step) / step


# ---------------------------------------------------------------- filters and policies
# Drawn from a generator of their own, after every other case: adding them left every
# earlier file and draw as it was.

SEED_FILTERS = 20251208


def f32_bits(x):
    """The bits of float32(x) as 8 hex digits (x must be a float32 value)."""
    b = np.float32(x)
    assert float(b) == float(x), x
    return f"{int(b.view(np.uint32)):08x}"


def make_lowcontrast(src, scale_to, crop, tag):
    """Photo crop as make_photo, its values squeezed into 60..140."""
    with Image.open(PHOTOS / src) as im:
        im = im.convert("RGB").resize(scale_to, Image.Resampling.LANCZOS)
        x, y, w, h = crop
        arr = np.asarray(im.crop((x, y, x + w, y + h)), dtype=np.uint16)
    arr = (60 + (arr * 80 + 127) // 255).astype(np.uint8)
    return save_png(arr, f"in_lowcontrast_{tag}_{w}x{h}.png")


def make_flat(w, h, rgb):
    return save_png(np.full((h, w, 3), rgb, dtype=np.uint8), f"in_flat_{w}x{h}.png")


def blur_fits(inp, kx, ky):
    """torch's reflect padding needs the pad (kernel // 2) below the side."""
    w, h = image_size(inp)
    return kx // 2 < w and ky // 2 < h


def policy_magnitudes(name, cls, bins, size):
    """Every op's magnitudes of a policy class's table (float32 bits; null without)."""
    w, h = size
    table = {}
    for op, (fn, _signed) in cls._AUGMENTATION_SPACE.items():
        m = fn(bins, h, w)
        table[op] = None if m is None else [f32_bits(np.float32(v)) for v in
                                            m.to(torch.float32).tolist()]
    cases.append(dict(name=name, op="policy_magnitudes", input=None, output=None,
                      policy=cls.__name__, bins=bins, size=list(size), magnitudes=table))


def policy_op(name, inp, cls, bins, bin_, op, sign, fill):
    """One op of a policy's augmentation space at the magnitude of `bin_` (times `sign`),
    applied by the policy's own `_apply_image_or_video_transform` (bilinear, `fill`)."""
    t = to_chw(load_rgb(inp))
    h, w = t.shape[-2:]
    fn, signed = cls._AUGMENTATION_SPACE[op]
    table = fn(bins, h, w)
    m = 0.0 if table is None else float(table[bin_])
    assert sign > 0 or signed
    if sign < 0:
        m *= -1
    kwargs = dict(interpolation=InterpolationMode.BILINEAR, fill=[float(f) for f in fill])
    policy = cls(num_magnitude_bins=bins, **kwargs)
    out = policy._apply_image_or_video_transform(
        t, op, m, interpolation=InterpolationMode.BILINEAR, fill=policy._fill)
    assert out.dtype == torch.uint8 and out.shape == t.shape
    save_png(from_chw(out), f"{name}.png")
    cases.append(dict(name=name, op="policy_op", input=inp, policy=cls.__name__, bins=bins,
                      bin=bin_, transform=op, magnitude=m, magnitude_bits=f32_bits(m),
                      fill=list(fill), output=f"{name}.png"))


def filter_and_policy_cases(jitter_inputs):
    """Auto-contrast, equalize, sharpness and blur cases (op "jitter"), the policies'
    magnitude tables and their ops one at a time, with a generator of their own."""
    g = np.random.default_rng(SEED_FILTERS)

    def fac(lo, hi, step=256):
        return round(g.uniform(lo, hi) * step) / step

    low = make_lowcontrast("skimage_coffee.jpg", (72, 48), (30, 14, 32, 24), "coffee")
    flat = make_flat(9, 7, (200, 30, 90))
    thin_w = save_png(g.integers(0, 256, (9, 1, 3), dtype=np.uint8), "in_noise_1x9.png")
    thin_h = save_png(g.integers(0, 256, (2, 13, 3), dtype=np.uint8), "in_noise_13x2.png")
    inputs = list(jitter_inputs) + [low, flat, thin_w, thin_h]
    tag = lambda inp: Path(inp).stem[3:]  # noqa: E731

    # --- auto-contrast and equalize on every input ---------------------------
    for op in ["autocontrast", "equalize"]:
        for inp in inputs:
            jitter(f"filter_{op}_{tag(inp)}", inp, [(op, 0)])

    # --- sharpness: each factor on two inputs, then the thin and flat ones ---
    jc, jr, jh, jcam, jg, jp, jn, n1 = jitter_inputs
    sharp_inputs = [jc, jr, jh, jcam, jg, jp, jn, low]
    k = 0
    for f in [0.0, 0.5, 1.0, 2.0, 5.3]:
        for _ in range(2):
            inp = sharp_inputs[k % len(sharp_inputs)]
            jitter(f"filter_sharpness_{f:g}_{tag(inp)}", inp, [("sharpness", f)])
            k += 1
    for inp, f in [(thin_w, 2.0), (thin_w, 0.0), (thin_h, 2.0), (thin_h, 0.0), (flat, 5.3),
                   (n1, 0.0)]:
        jitter(f"filter_sharpness_{f:g}_{tag(inp)}", inp, [("sharpness", f)])

    # --- Gaussian blur: every kernel size with every sigma -------------------
    blur_inputs = [jc, jr, jh, jcam, jg, jp, jn, low]
    k = 0
    for kx, ky in [(3, 3), (5, 9), (23, 23), (7, 1)]:
        for s in [0.1, 0.8, 2.0, 5.0]:
            inp = blur_inputs[k % len(blur_inputs)]
            while not blur_fits(inp, kx, ky):
                k += 1
                inp = blur_inputs[k % len(blur_inputs)]
            jitter(f"filter_blur_{kx}x{ky}_{s:g}_{tag(inp)}", inp, [("blur", [kx, ky, s])])
            k += 1
    # the pad at its largest (side - 1), 2-pixel and 1-pixel sides, a flat image
    for inp, p in [(jp, [23, 23, 5.0]), (jcam, [9, 63, 3.0]), (thin_h, [3, 3, 0.8]),
                   (thin_h, [7, 1, 2.0]), (thin_w, [1, 5, 2.0]), (thin_w, [1, 17, 5.0]),
                   (flat, [5, 5, 2.0]), (n1, [1, 1, 0.8])]:
        if blur_fits(inp, p[0], p[1]):
            jitter(f"filter_blur_{p[0]}x{p[1]}_{p[2]:g}_{tag(inp)}", inp, [("blur", p)])

    # --- sequences: fixed ones, then random ones of every colour op ----------
    fixed = [
        (jc, [("brightness", 1.25), ("blur", [5, 5, 1.5]), ("solarize", 128.0), ("equalize", 0)]),
        (jr, [("contrast", 0.75), ("sharpness", 2.0), ("posterize", 4), ("autocontrast", 0)]),
        (jcam, [("autocontrast", 0), ("sharpness", 0.5), ("blur", [3, 7, 0.8])]),
        (jp, [("equalize", 0), ("saturation", 1.5), ("hue", 0.099609375), ("grayscale", 0)]),
        (low, [("blur", [23, 23, 5.0]), ("autocontrast", 0)]),
        (low, [("equalize", 0), ("posterize", 3), ("solarize", 100.5)]),
        (jh, [("sharpness", 3.5), ("brightness", 0.75), ("autocontrast", 0)]),
    ]
    for i, (inp, ops) in enumerate(fixed):
        jitter(f"filter_seq_fixed{i}_{tag(inp)}", inp, ops)
    pool = ["brightness", "contrast", "saturation", "hue", "grayscale", "posterize",
            "solarize", "autocontrast", "equalize", "sharpness", "blur"]
    for i in range(12):
        inp = inputs[i % 9]  # the jitter inputs and the low-contrast one
        w, h = image_size(inp)
        ops = []
        for j in g.permutation(len(pool))[:int(g.integers(2, 6))]:
            op = pool[j]
            if op == "hue":
                v = fac(-0.5, 0.5, 512)
            elif op in ("grayscale", "autocontrast", "equalize"):
                v = 0
            elif op == "posterize":
                v = int(g.integers(0, 9))
            elif op == "solarize":
                v = float(g.integers(0, 1021)) / 4.0
            elif op == "sharpness":
                v = fac(0.0, 4.0)
            elif op == "blur":
                kx, ky = (int(v) for v in 2 * g.integers(0, 6, 2) + 1)
                kx, ky = min(kx, 2 * w - 1), min(ky, 2 * h - 1)  # pad below the side
                v = [kx, ky, fac(0.1, 3.0, 64)]
            else:
                v = fac(0.0, 2.0)
            ops.append((op, v))
        jitter(f"filter_seq{i:02d}_{tag(inp)}", inp, ops)

    # --- the policies' magnitude tables --------------------------------------
    for cls in [RandAugment, TrivialAugmentWide]:
        for bins in [31, 10, 2, 5]:
            for size in [(224, 224), (97, 33)]:
                policy_magnitudes(f"policy_magnitudes_{cls.__name__}_{bins}_{size[0]}x{size[1]}",
                                  cls, bins, size)

    # --- the policies' ops one at a time on a photo crop ---------------------
    photo = make_photo("skimage_coffee.jpg", (96, 64), (24, 12, 48, 40), "coffee")
    for op, (_fn, signed) in RandAugment._AUGMENTATION_SPACE.items():
        if op == "Identity":
            continue
        if op in ("AutoContrast", "Equalize"):
            draws = [(RandAugment, 9, 1)]
        elif signed:
            draws = [(RandAugment, 9, 1), (RandAugment, 30, -1),
                     (TrivialAugmentWide, int(g.integers(1, 31)), -1),
                     (TrivialAugmentWide, int(g.integers(1, 31)), 1)]
        elif op == "Posterize":
            draws = [(RandAugment, 9, 1), (RandAugment, 30, 1), (TrivialAugmentWide, 30, 1),
                     (TrivialAugmentWide, int(g.integers(1, 30)), 1)]
        else:  # Solarize
            draws = [(RandAugment, 9, 1), (RandAugment, 0, 1), (TrivialAugmentWide, 30, 1),
                     (TrivialAugmentWide, int(g.integers(1, 30)), 1)]
        for i, (cls, bin_, sign) in enumerate(draws):
            fill = (0, 0, 0) if i % 2 == 0 else tuple(int(v) for v in g.integers(0, 256, 3))
            short = "ra" if cls is RandAugment else "ta"
            name = f"policy_{op}_{short}{bin_}{'_neg' if sign < 0 else ''}_{tag(photo)}"
            policy_op(name, photo, cls, 31, bin_, op, sign, fill)


# ---------------------------------------------------------------- main

def main():
    if OUT.exists():
        shutil.rmtree(OUT)
    OUT.mkdir(parents=True)

    # RGB inputs for the resize cases
    n1 = make_noise(1, 1)
    n7 = make_noise(7, 5)
    n33 = make_noise(33, 17)
    n120 = make_noise(120, 90)
    g119 = make_gradient(119, 91)
    g64 = make_gradient(64, 48)
    g3 = make_gradient(3, 2)
    coffee = make_photo("skimage_coffee.jpg", (180, 120), (30, 20, 120, 80), "coffee")
    hubble = make_photo("skimage_hubble_deep_field.jpg", None, (420, 300, 90, 120), "hubble")
    retina = make_photo("skimage_retina.jpg", (200, 200), (50, 60, 100, 75), "retina")
    camera = make_photo("skimage_camera.jpg", (128, 128), (16, 8, 96, 96), "camera")
    # smaller RGB inputs for the jitter and normalise cases (outputs are full size)
    jn = make_noise(24, 16)
    jg = make_gradient(40, 30)
    jp = make_palette()
    jc = make_photo("skimage_coffee.jpg", (72, 48), (12, 8, 48, 32), "coffee")
    jr = make_photo("skimage_retina.jpg", (100, 100), (30, 30, 40, 40), "retina")
    jh = make_photo("skimage_hubble_deep_field.jpg", (250, 218), (100, 90, 36, 30), "hubble")
    jcam = make_photo("skimage_camera.jpg", (64, 64), (16, 8, 32, 32), "camera")
    # L label planes for the nearest cases
    l1 = make_labels(1, 1, 1)
    l37 = make_labels(37, 23, 3)
    l64 = make_labels(64, 48, 8)
    l120 = make_labels(120, 90, 10)

    # --- Pillow bilinear, antialiased -----------------------------------
    aa = resize_bilinear_aa
    aa("aa_identity_noise33x17", n33, full_box(n33), [33, 17])
    aa("aa_identity_coffee", coffee, full_box(coffee), [120, 80])
    aa("aa_identity_1x1", n1, full_box(n1), [1, 1])
    aa("aa_up_1x1_to_4x4", n1, full_box(n1), [4, 4])
    aa("aa_up_1x1_to_3x1", n1, full_box(n1), [3, 1])
    aa("aa_down_noise120x90_to_1x1", n120, full_box(n120), [1, 1])
    aa("aa_down_frac_to_1x1", coffee, [10.5, 20.25, 17.75, 29.5], [1, 1])
    aa("aa_crop_1x1_box_grad", g64, [20.0, 30.0, 21.0, 31.0], [1, 1])
    # uniform downscales of whole images, factors 1.1 .. 9
    for f, inp in [(1.1, n120), (1.25, coffee), (1.5, g119), (2, n120), (2.5, hubble),
                   (3, retina), (4, n120), (6, coffee), (9, g119), (9, n120)]:
        box = full_box(inp)
        tag = Path(inp).stem[3:]
        aa(f"aa_down{f:g}_{tag}", inp, box, scaled_size(box, f))
    # downscales of random fractional boxes, random factors in [1.1, 9]
    for i, inp in enumerate([n120, coffee, hubble, retina, g119, camera, n33, g64]):
        f = float(rng.uniform(1.1, 9.0))
        box = random_box(inp, min(image_size(inp)) * 0.4, min(image_size(inp)) * 0.4)
        aa(f"aa_down_frac{i}_{Path(inp).stem[3:]}", inp, box, scaled_size(box, f))
    # upscales up to 4x
    aa("aa_up2_noise7x5", n7, full_box(n7), [14, 10])
    aa("aa_up4_noise7x5", n7, full_box(n7), [28, 20])
    aa("aa_up3_grad3x2", g3, full_box(g3), [9, 6])
    aa("aa_up4_frac_coffee", coffee, [40.5, 27.25, 70.5, 47.25], [120, 80])
    aa("aa_up1.3_frac_retina", retina, [5.0625, 3.5, 77.0625, 57.5], [94, 70])
    aa("aa_up2.5_frac_hubble", hubble, [12.75, 40.125, 40.75, 76.125], [70, 90])
    aa("aa_up3_frac_camera", camera, [33.3125, 20.0, 63.3125, 50.0], [90, 90])
    # anisotropic: down in one axis, up in the other; very different factors
    aa("aa_aniso_downx_upy_grad", g64, full_box(g64), [21, 96])
    aa("aa_aniso_upx_downy_noise", n33, full_box(n33), [66, 5])
    aa("aa_aniso_down9x_1y_noise", n120, full_box(n120), [13, 90])
    aa("aa_aniso_frac_hubble", hubble, [3.25, 7.5, 88.5, 119.0], [17, 83])
    # boxes touching the image borders with fractional inner edges
    aa("aa_border_topleft_coffee", coffee, [0.0, 0.0, 61.5, 40.25], [25, 17])
    aa("aa_border_bottomright_noise", n120, [58.625, 44.375, 120.0, 90.0], [31, 23])
    aa("aa_border_leftright_grad", g119, [0.0, 10.5, 119.0, 71.75], [51, 100])
    aa("aa_border_topbottom_retina", retina, [20.25, 0.0, 55.5, 75.0], [13, 29])
    # odd sizes
    aa("aa_odd_grad119x91_to_37x29", g119, full_box(g119), [37, 29])
    aa("aa_odd_grad119x91_to_61x45", g119, full_box(g119), [61, 45])
    aa("aa_odd_noise33x17_to_11x7", n33, full_box(n33), [11, 7])

    # --- torchvision bilinear, antialias=False, integer boxes ---------------
    na = resize_bilinear_noaa
    na("noaa_identity_noise33x17", n33, [0, 0, 33, 17], [33, 17])
    na("noaa_down1.1_noise120x90", n120, [0, 0, 120, 90], [109, 82])
    na("noaa_down1.5_coffee", coffee, [0, 0, 120, 80], [80, 53])
    na("noaa_down2_noise120x90", n120, [0, 0, 120, 90], [60, 45])
    na("noaa_down2.5_crop_hubble", hubble, [5, 10, 85, 110], [32, 40])
    na("noaa_down3_grad119x91", g119, [0, 0, 119, 91], [40, 30])
    na("noaa_down3_crop_retina", retina, [7, 3, 97, 72], [30, 23])
    na("noaa_up1.5_crop_noise", n120, [50, 40, 70, 60], [30, 30])
    na("noaa_up2_noise7x5", n7, [0, 0, 7, 5], [14, 10])
    na("noaa_up3_crop_camera", camera, [40, 30, 70, 55], [90, 75])
    na("noaa_up4_crop_coffee", coffee, [60, 30, 90, 50], [120, 80])
    na("noaa_aniso_crop_grad", g64, [3, 5, 63, 25], [30, 40])
    na("noaa_up_1x1_to_3x3", n1, [0, 0, 1, 1], [3, 3])
    na("noaa_crop1x1_to_5x4", n33, [30, 16, 31, 17], [5, 4])
    # a 1x1 output (from more than one input pixel) trips an internal assert in
    # torch 2.15's uint8 bilinear kernel, so the smallest output here is 1x2
    na("noaa_down_3x2_to_1x2", g3, [0, 0, 3, 2], [1, 2])
    na("noaa_odd_crop_noise_to_17x13", n33, [1, 2, 32, 17], [17, 13])

    # --- Pillow nearest on label planes -------------------------------------
    nn = resize_nearest
    nn("nearest_identity_labels37x23", l37, full_box(l37), [37, 23])
    nn("nearest_down2_labels64x48", l64, full_box(l64), [32, 24])
    nn("nearest_down3_labels120x90", l120, full_box(l120), [40, 30])
    nn("nearest_down1.5_labels37x23", l37, full_box(l37), [25, 15])
    nn("nearest_down7.3_frac_labels120x90", l120, [2.5, 1.25, 119.375, 88.875], [16, 12])
    nn("nearest_up2_labels37x23", l37, full_box(l37), [74, 46])
    nn("nearest_up3.5_frac_labels64x48", l64, [10.25, 5.5, 31.75, 24.0], [75, 65])
    nn("nearest_up4_labels37x23", l37, [0.0, 0.0, 20.0, 15.0], [80, 60])
    nn("nearest_up_1x1_to_5x3", l1, full_box(l1), [5, 3])
    nn("nearest_down_to_1x1", l64, full_box(l64), [1, 1])
    nn("nearest_frac_to_1x1", l37, [3.75, 2.125, 9.25, 8.5], [1, 1])
    nn("nearest_aniso_labels120x90", l120, full_box(l120), [17, 120])
    nn("nearest_border_bottomright_labels64x48", l64, [33.3125, 20.6875, 64.0, 48.0], [19, 41])
    nn("nearest_border_topleft_labels120x90", l120, [0.0, 0.0, 70.5, 50.25], [47, 33])
    for i in range(2):  # random fractional boxes, random factors
        box = random_box(l120, 20, 20)
        fx, fy = float(rng.uniform(0.4, 4.0)), float(rng.uniform(0.4, 4.0))
        nn(f"nearest_frac{i}_labels120x90", l120, box, scaled_size(box, fx, fy))

    # --- colour jitter (torchvision uint8 path) -----------------------------
    jitter_inputs = [jc, jr, jh, jcam, jg, jp, jn, n1]
    singles = [("brightness", [0.0, 1.0, 0.5, 1.75, 2.0]),
               ("contrast", [0.0, 1.0, 0.375, 1.625, 2.0]),
               ("saturation", [0.0, 1.0, 0.3125, 1.8125, 2.0]),
               ("hue", [0.0, 0.5, -0.5, 0.099609375, -0.267578125])]
    k = 0
    for op, values in singles:
        for v in values:
            inp = jitter_inputs[k % len(jitter_inputs)]
            jitter(f"jitter_{op}_{v:g}_{Path(inp).stem[3:]}", inp, [(op, v)])
            k += 1
    # random sequences of 2-4 distinct ops in random order (like ColorJitter)
    names = list(JITTER_FNS)
    for i in range(20):
        n_ops = int(rng.integers(2, 5))
        order = rng.permutation(len(names))[:n_ops]
        ops = []
        for j in order:
            op = names[j]
            if op == "hue":
                v = 0.0 if rng.random() < 0.1 else factor(-0.5, 0.5, 512)
            else:
                # include the exact end points and identity now and then
                v = float(rng.choice([0.0, 1.0, 2.0])) if rng.random() < 0.15 else factor(0.0, 2.0)
            ops.append((op, v))
        inp = jitter_inputs[i % len(jitter_inputs)]
        jitter(f"jitter_seq{i:02d}_{Path(inp).stem[3:]}", inp, ops)

    # --- normalise -----------------------------------------------------------
    normalize("normalize_imagenet_coffee", jc, [0.485, 0.456, 0.406], [0.229, 0.224, 0.225])
    normalize("normalize_half_noise", jn, [0.5, 0.5, 0.5], [0.5, 0.5, 0.5])
    normalize("normalize_identity_grad", jg, [0.0, 0.0, 0.0], [1.0, 1.0, 1.0])
    normalize("normalize_odd_palette", jp, [0.1, 0.9, 0.33], [0.05, 2.0, 0.7])
    normalize("normalize_imagenet_1x1", n1, [0.485, 0.456, 0.406], [0.229, 0.224, 0.225])

    # --- affine (torchvision v2), after every earlier draw -----------------
    affine("affine_identity_grad", jg, 0.0, (0, 0), 1.0, (0.0, 0.0), (0, 0, 0))
    affine("affine_rot90_camera", jcam, 90.0, (0, 0), 1.0, (0.0, 0.0), (0, 0, 0))
    affine("affine_shift_fill_coffee", jc, 0.0, (5, -3), 1.0, (0.0, 0.0), (10, 200, 30))
    affine("affine_zoom2_retina", jr, 0.0, (0, 0), 2.0, (0.0, 0.0), (0, 0, 0))
    affine("affine_shrink_hubble", jh, 0.0, (0, 0), 0.5, (0.0, 0.0), (255, 255, 255))
    affine("affine_shear_noise", jn, 0.0, (0, 0), 1.0, (20.0, -10.0), (0, 0, 0))
    affine_inputs = [jn, jg, jc, jr, jh, jcam, n33, g64]
    for i in range(24):
        inp = affine_inputs[i % len(affine_inputs)]
        w, h = image_size(inp)
        angle = float(rng.uniform(-180.0, 180.0))
        translate = (int(round(rng.uniform(-0.2, 0.2) * w)), int(round(rng.uniform(-0.2, 0.2) * h)))
        scale = float(rng.uniform(0.5, 1.6))
        shear = (float(rng.uniform(-25.0, 25.0)), float(rng.uniform(-10.0, 10.0)) if i % 2 else 0.0)
        fill = tuple(int(v) for v in rng.integers(0, 256, 3)) if i % 3 else (0, 0, 0)
        affine(f"affine_rand{i:02d}_{Path(inp).stem[3:]}", inp, angle, translate, scale, shear, fill)
    affine("affine_rot90_labels64", l64, 90.0, (0, 0), 1.0, (0.0, 0.0), (255,), labels=True)
    affine("affine_shift_labels37", l37, 0.0, (4, 2), 1.0, (0.0, 0.0), (255,), labels=True)
    for i in range(10):
        inp = [l37, l64, l120][i % 3]
        w, h = image_size(inp)
        angle = float(rng.uniform(-180.0, 180.0))
        translate = (int(round(rng.uniform(-0.2, 0.2) * w)), int(round(rng.uniform(-0.2, 0.2) * h)))
        scale = float(rng.uniform(0.5, 1.6))
        shear = (float(rng.uniform(-25.0, 25.0)), float(rng.uniform(-10.0, 10.0)))
        affine(f"affine_labels_rand{i:02d}_{Path(inp).stem[3:]}", inp, angle, translate, scale,
               shear, (255 if i % 2 else 0,), labels=True)

    # --- letterbox (Pillow) and padded random crops (torchvision), after the rest ---
    letterbox("letterbox_wide_coffee", jc, (40, 40), (114, 114, 114))
    letterbox("letterbox_tall_retina", jr, (30, 50), (0, 0, 0))
    letterbox("letterbox_up_noise", jn, (64, 36), (1, 2, 3))
    letterbox("letterbox_grad", g64, (20, 31), (255, 0, 255))
    letterbox("letterbox_labels37", l37, (40, 40), (255,), labels=True)
    letterbox("letterbox_labels120", l120, (33, 50), (0,), labels=True)
    for i, inp in enumerate([jn, jcam, jc, n33, jg]):
        w, h = image_size(inp)
        size = (w, h) if i % 2 == 0 else (max(4, w - 6), max(4, h - 3))
        p = int(rng.integers(1, 6))
        dx = int(rng.integers(0, w + 2 * p - size[0] + 1))
        dy = int(rng.integers(0, h + 2 * p - size[1] + 1))
        fill = tuple(int(v) for v in rng.integers(0, 256, 3))
        pad_crop(f"padcrop{i}_{Path(inp).stem[3:]}", inp, size, p, (dx, dy), fill)

    # --- resize and centre crop, the crop larger than the image on a side -------
    resize_center_crop("centercrop_pad_x_coffee", jc, 20, (36, 16))
    resize_center_crop("centercrop_pad_y_camera", jcam, 24, (20, 31))
    resize_center_crop("centercrop_pad_both_noise", jn, 12, (21, 15))
    resize_center_crop("centercrop_inside_grad", jg, 28, (22, 20))

    # --- grayscale, posterize, solarize (torchvision v2), after the rest ------
    color_inputs = [jp, jc, jn, jg, jcam, jr, jh, n1]
    color_singles = [("grayscale", [0]),
                     ("posterize", [0, 1, 2, 3, 4, 5, 6, 7, 8]),
                     ("solarize", [0.0, 1.0, 64.0, 127.5, 128.0, 200.25, 254.5, 255.0])]
    k = 0
    for op, values in color_singles:
        for v in values:
            for inp in color_inputs[k % 4:k % 4 + (4 if op == "grayscale" else 1)]:
                jitter(f"color_{op}_{v:g}_{Path(inp).stem[3:]}", inp, [(op, v)])
            k += 1
    # ColorJitter's ops in a random order, then the colour ops the pipeline runs after
    # them, in its fixed order (grayscale, posterize, solarize), each present or not.
    for i in range(16):
        n_ops = int(rng.integers(0, 5))
        ops = []
        for j in rng.permutation(len(names))[:n_ops]:
            op = names[j]
            v = factor(-0.5, 0.5, 512) if op == "hue" else factor(0.0, 2.0)
            ops.append((op, v))
        present = rng.random(3) < 0.6
        if not present.any():
            present[i % 3] = True
        if present[0]:
            ops.append(("grayscale", 0))
        if present[1]:
            ops.append(("posterize", int(rng.integers(0, 9))))
        if present[2]:
            ops.append(("solarize", float(rng.integers(0, 1021)) / 4.0))
        inp = color_inputs[i % len(color_inputs)]
        jitter(f"color_seq{i:02d}_{Path(inp).stem[3:]}", inp, ops)

    # --- random erasing's erase (torchvision v2), after the rest -------------
    imagenet = ([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])
    # small inputs: the float32 outputs are 12 bytes a pixel
    erase_inputs = [jn, jp, jc, n1, jp, jn, jcam, jn, jp]
    for i in range(9):
        inp = erase_inputs[i % len(erase_inputs)]
        w, h = image_size(inp)
        bw, bh = int(rng.integers(0, w + 1)), int(rng.integers(0, h + 1))
        box = (int(rng.integers(0, w - bw + 1)), int(rng.integers(0, h - bh + 1)), bw, bh)
        if i % 3 == 2:
            value = [int(v) for v in rng.integers(0, 256, 3)]
            erase(f"erase{i:02d}_u8_{Path(inp).stem[3:]}", inp, box, value)
        else:
            value = [0.0, 0.0, 0.0] if i % 3 == 0 else [float(v) for v in
                                                        rng.normal(size=3).astype(np.float32)]
            erase(f"erase{i:02d}_{Path(inp).stem[3:]}", inp, box, value, *imagenet)

    # --- auto-contrast, equalize, sharpness, blur, the policies: after the rest ---
    filter_and_policy_cases(jitter_inputs)

    versions = {"Pillow": PIL.__version__, "torch": torch.__version__,
                "torchvision": torchvision.__version__, "numpy": np.__version__}
    # one case per line: compact, and a rerun's diff shows which cases changed
    lines = [f'{{"generator": "scripts/make_refs.py", "versions": {json.dumps(versions)},',
             ' "cases": [']
    lines += ["  " + json.dumps(c) + ("," if i + 1 < len(cases) else "") for i, c in enumerate(cases)]
    lines.append(" ]}")
    text = "\n".join(lines) + "\n"
    assert json.loads(text) == {"generator": "scripts/make_refs.py", "versions": versions,
                                "cases": cases}
    (OUT / "cases.json").write_text(text)
    write_readme(versions)
    summary(versions)


def write_readme(versions):
    vs = ", ".join(f"{k} {v}" for k, v in versions.items())
    (OUT / "README.md").write_text(f"""# Reference cases for the CPU image ops

Written by `scripts/make_refs.py` (run by hand: `.venv-peers/bin/python
scripts/make_refs.py`; it wipes and rewrites this folder) with {vs}.
`cases.json` lists every case: the op, its parameters, the input and the
expected output; the script's docstring describes the format and exactly which
Pillow / torchvision call made each output.

Inputs `in_noise_*`, `in_grad_*`, `in_palette_*`, `in_flat_*` and `in_labels_*`
are generated from fixed random seeds. `in_photo_*` are small crops of
scikit-image sample photos (`skimage_coffee`, `skimage_camera`,
`skimage_retina`: CC0-1.0; `skimage_hubble_deep_field`: public domain, NASA),
taken from the project's photo corpus (see its MANIFEST.tsv);
`in_lowcontrast_*` is such a crop with its values squeezed into 60..140.
Outputs derive from these inputs.

Besides resizing, jitter, normalisation, erasing and the warps, the cases cover
torchvision's auto-contrast, equalize, sharpness and Gaussian blur (`filter_*`,
kind `jitter`), the magnitude tables of `RandAugment` and `TrivialAugmentWide`
(`policy_magnitudes`: float32 bits, no images) and each op of their augmentation
space applied alone at a drawn magnitude (`policy_*`, kind `policy_op`).
""")


def summary(versions):
    kinds = {}
    for c in cases:
        key = c["op"]
        if c["op"] == "resize":
            key += f" {c['filter']}" + (f" antialias={c['antialias']}" if "antialias" in c else "")
        kinds[key] = kinds.get(key, 0) + 1
    files = sorted(OUT.iterdir())
    total = sum(p.stat().st_size for p in files)
    print(f"wrote {OUT.relative_to(ROOT)}: {len(cases)} cases, {len(files)} files, "
          f"{total / 1024:.1f} KiB")
    for k, n in sorted(kinds.items()):
        print(f"  {n:3d}  {k}")
    print("  versions: " + ", ".join(f"{k} {v}" for k, v in versions.items()))
    if total > SIZE_LIMIT:
        sys.exit(f"error: {total} bytes is over the {SIZE_LIMIT} byte limit")


if __name__ == "__main__":
    if not PHOTOS.is_dir():
        sys.exit(f"error: photo corpus not found at {PHOTOS}")
    main()
