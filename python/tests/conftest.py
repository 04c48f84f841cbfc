"""Fixtures: small image-folder datasets written with Pillow (an independent encoder),
fresh for each test session, with label masks whose pixels the images encode, so that
alignment can be checked after any geometry."""

from __future__ import annotations

import os
import random
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

CLASSES = ["cat", "dog", "fox"]
# The grey level of each mask class in the images: far apart, so that interpolation at
# edges cannot be mistaken for another class.
LEVELS = {0: 20, 1: 120, 2: 230}


def _write_set(root: Path, per_class: int, seed: int, masks: bool = True) -> None:
    rng = random.Random(seed)
    for c, name in enumerate(CLASSES):
        (root / "images" / name).mkdir(parents=True, exist_ok=True)
        for i in range(per_class):
            w, h = rng.randint(40, 90), rng.randint(40, 90)
            mask = np.zeros((h, w), np.uint8)
            # Two rectangles of classes 1 and 2 on background 0.
            for k in (1, 2):
                x0, y0 = rng.randint(0, w - 12), rng.randint(0, h - 12)
                mask[y0 : y0 + rng.randint(8, 20), x0 : x0 + rng.randint(8, 20)] = k
            grey = np.vectorize(LEVELS.get)(mask).astype(np.uint8)
            rgb = np.stack([grey] * 3, axis=-1)
            stem = f"{name}_{i:03d}"
            # PNG: lossless, so image and mask agree exactly before augmentation.
            Image.fromarray(rgb).save(root / "images" / name / f"{stem}.png")
            if masks:
                (root / "masks").mkdir(exist_ok=True)
                Image.fromarray(mask).save(root / "masks" / f"{stem}.png")


@pytest.fixture(scope="session")
def shapes(tmp_path_factory) -> Path:
    """`images/<class>/<stem>.png` (3 classes x 14) and `masks/<stem>.png`."""
    root = tmp_path_factory.mktemp("shapes")
    _write_set(root, per_class=14, seed=int.from_bytes(os.urandom(4), "little"))
    return root


@pytest.fixture(scope="session")
def photos(tmp_path_factory) -> Path:
    """A class folder of JPEGs of random noise and gradients (3 classes x 10)."""
    root = tmp_path_factory.mktemp("photos")
    rng = np.random.default_rng(int.from_bytes(os.urandom(4), "little"))
    for name in CLASSES:
        (root / name).mkdir()
        for i in range(10):
            h, w = rng.integers(48, 120, size=2)
            img = rng.integers(0, 256, size=(h, w, 3), dtype=np.uint8)
            Image.fromarray(img).save(root / name / f"{i:02d}.jpg", quality=90)
    return root


@pytest.fixture()
def damaged(tmp_path, photos) -> Path:
    """The photos with one file cut short and one that is not an image."""
    import shutil

    root = tmp_path / "damaged"
    shutil.copytree(photos, root)
    cut = root / "cat" / "00.jpg"
    cut.write_bytes(cut.read_bytes()[:200])
    (root / "dog" / "zz_not_an_image.jpg").write_bytes(b"this is text, not a JPEG\n" * 4)
    return root
