#!/usr/bin/env python3
"""Write tests/data/mix/cases.json: torchvision.transforms.v2's MixUp and CutMix on
small random batches, the reference for stoker's batch-level mixing
(src/augment/mix.rs, checked by tests/suite/reference_cases.rs).

torchvision draws its weight and box from torch's global generator; stoker draws them
from its counter-based stream. So each case fixes the draws and lets torchvision do the
rest with them:

* MixUp: ``MixUp.transform(batch, params)`` and the labels through the same call, with
  ``params = {"lam": lam, ...}``: ``batch.roll(1, 0).mul_(1 - lam).add_(batch.mul(lam))``
  on float32 and float16 NCHW batches.
* CutMix: ``CutMix.make_params`` with its Beta sample and its two ``torch.randint`` draws
  replaced by the case's ``lam``, ``r_x`` and ``r_y`` (its box and ``lam_adjusted`` from
  those, by torchvision's own code), then ``CutMix.transform`` of the batch (uint8,
  float16, float32) and the labels.

Tensors are written as the hex of their little-endian bytes (exact), and the weights
also as the hex of their f64 bytes (``*_bits``); labels as class ids and the soft
labels torchvision returns (float32). Run from the repository root:

    .venv-peers/bin/python scripts/make_mix_refs.py

Generated with Python 3.11, numpy 2.4.6, torch 2.15.0 and torchvision 0.29.2
(scripts/requirements-peers.txt); everything is drawn from a fixed numpy seed, so a rerun
with the same versions writes the same bytes.
"""

import json
import os
import struct
from unittest import mock

import numpy as np
import torch
import torchvision
from torchvision.transforms import v2

OUT = os.path.join("tests", "data", "mix")
CLASSES = 5


def hexbytes(t):
    return t.contiguous().numpy().tobytes().hex()


def hexf64(x):
    # The exact double (JSON readers may round decimal floats differently).
    return struct.pack("<d", x).hex()


def batch(rng, dtype, n, h, w):
    if dtype == "uint8":
        return torch.from_numpy(rng.integers(0, 256, (n, 3, h, w), dtype=np.uint8))
    x = rng.normal(0.0, 1.5, (n, 3, h, w)).astype(np.float32)
    # A few exact zeros, tiny values (float16 subnormals) and large ones.
    x.flat[:: 7] = 0.0
    x.flat[3 :: 11] *= 1e-5
    x.flat[5 :: 13] *= 300.0
    t = torch.from_numpy(x)
    return t.to(torch.float16) if dtype == "float16" else t


class FixedBeta:
    """Stands in for the transform's Beta distribution: always `lam` (as float32)."""

    def __init__(self, lam):
        self.lam = lam

    def sample(self, shape):
        return torch.tensor([self.lam], dtype=torch.float32)


def mixed(op, t, params, dtype, images, labels, lam, draws):
    """The case of transform `t` (`op`) run with `params` on `images` and their `labels`:
    the weight `lam`, then the op's own `draws`, then the tensors in and out."""
    out = t.transform(images, params)
    soft = t.transform(labels, params)
    return {
        "op": op,
        "dtype": dtype,
        "shape": list(images.shape),
        "lam": lam,
        "lam_bits": hexf64(lam),
        **draws,
        "input": hexbytes(images),
        "output": hexbytes(out),
        "labels": labels.tolist(),
        "soft_labels": hexbytes(soft.float()),
    }


def main():
    rng = np.random.default_rng(20261204)
    cases = []
    for k in range(8):
        dtype = ["float32", "float16"][k % 2]
        n, h, w = int(rng.integers(2, 5)), int(rng.integers(1, 7)), int(rng.integers(1, 8))
        lam = float(np.float32(rng.beta(0.4, 0.4)))
        images = batch(rng, dtype, n, h, w)
        labels = torch.from_numpy(rng.integers(0, CLASSES, n)).long()
        t = v2.MixUp(alpha=0.4, num_classes=CLASSES)
        params = {"lam": lam, "labels": labels, "batch_size": n}
        cases.append(mixed("mixup", t, params, dtype, images, labels, lam, {}))
    for k in range(9):
        dtype = ["uint8", "float16", "float32"][k % 3]
        n, h, w = int(rng.integers(2, 4)), int(rng.integers(3, 9)), int(rng.integers(3, 10))
        # Small weights: boxes that are not empty on images this small.
        lam = float(np.float32(rng.beta(0.5, 2.0)))
        if k == 0:
            lam = 0.0
        r_x, r_y = int(rng.integers(0, w)), int(rng.integers(0, h))
        images = batch(rng, dtype, n, h, w)
        labels = torch.from_numpy(rng.integers(0, CLASSES, n)).long()
        t = v2.CutMix(alpha=1.0, num_classes=CLASSES)
        t._dist = FixedBeta(lam)
        draws = iter([torch.tensor([r_x]), torch.tensor([r_y])])
        with mock.patch.object(torch, "randint", lambda *a, **kw: next(draws)):
            made = t.make_params([images])
        params = {"labels": labels, "batch_size": n, **made}
        draws = {
            "r_x": r_x,
            "r_y": r_y,
            "box": list(made["box"]),
            "lam_adjusted": made["lam_adjusted"],
            "lam_adjusted_bits": hexf64(made["lam_adjusted"]),
        }
        cases.append(mixed("cutmix", t, params, dtype, images, labels, lam, draws))
    os.makedirs(OUT, exist_ok=True)
    doc = {
        "generator": "scripts/make_mix_refs.py",
        "versions": {
            "torch": torch.__version__,
            "torchvision": torchvision.__version__,
            "numpy": np.__version__,
        },
        "classes": CLASSES,
        "cases": cases,
    }
    with open(os.path.join(OUT, "cases.json"), "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
