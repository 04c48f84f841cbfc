"""What the Rust pipeline can do, from Python: weighted and class-balanced sampling,
fixed-order iteration, and datasets, splits and augmentations that pickle (for spawned
worker processes) into objects that deliver the very same batches."""

from __future__ import annotations

import hashlib
import math
import multiprocessing
import os
import pickle
import random
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

import stoker


def fresh_seed() -> int:
    """A new seed each run (said in every assertion that uses it)."""
    return int.from_bytes(os.urandom(4), "little")


@pytest.fixture(scope="module")
def imbalanced(tmp_path_factory) -> Path:
    """An image folder of 3 classes with 40, 12 and 5 small PNGs (random pixels)."""
    root = tmp_path_factory.mktemp("imbalanced")
    rng = np.random.default_rng(fresh_seed())
    for name, n in (("many", 40), ("some", 12), ("few", 5)):
        (root / name).mkdir()
        for i in range(n):
            img = rng.integers(0, 256, size=(12, 10, 3), dtype=np.uint8)
            Image.fromarray(img).save(root / name / f"{i:03d}.png")
    return root


def cpu(data, **kw):
    kw.setdefault("backend", "cpu")
    kw.setdefault("batch_size", 16)
    kw.setdefault("augment", stoker.Augment().resize(8, 8))
    return stoker.Pipeline(data, **kw)


def drawn_ids(pipe, epoch: int) -> list[int]:
    out = []
    for b in pipe.epoch(epoch):
        assert b.errors == []
        out += b.ids
    return out


def batches(pipe, epochs=(0, 1)) -> list[tuple[int, list[int], str, str | None]]:
    """Every batch of `epochs`: its epoch, ids, and digests of its images and masks."""
    out = []
    for e in epochs:
        for b in pipe.epoch(e):
            assert b.errors == []
            x = np.ascontiguousarray(np.from_dlpack(b.images))
            m = b.masks
            mdig = None if m is None else hashlib.sha256(np.ascontiguousarray(np.from_dlpack(m)).tobytes()).hexdigest()
            out.append((e, b.ids, hashlib.sha256(x.tobytes()).hexdigest(), mdig))
    return out


# -- weighted and class-balanced sampling ---------------------------------------------


def chi_square(observed: list[int], expected: list[float]) -> float:
    return sum((o - e) ** 2 / e for o, e in zip(observed, expected))


def test_class_balanced_draws_each_class_equally_often(imbalanced):
    data = stoker.Dataset.image_folder(imbalanced)
    label_of = dict(zip(data.ids, data.labels))
    seed = fresh_seed()
    n = 900
    pipe = cpu(data, class_balanced=True, num_samples=n, seed=seed, batch_size=64)
    assert len(pipe) == math.ceil(n / 64)
    counts = Counter(label_of[i] for i in drawn_ids(pipe, 0))
    assert sum(counts.values()) == n
    observed = [counts[c] for c in range(len(data.classes))]
    # Each class has probability 1/3 per draw: chi-square with 2 degrees of freedom,
    # whose tail beyond 27.6 is 1e-6 (-2 ln 1e-6).
    stat = chi_square(observed, [n / 3] * 3)
    assert stat < 27.6, (observed, stat, seed)
    # Unweighted, the classes come as they are in the folder (40 : 12 : 5), every one once.
    plain = Counter(label_of[i] for i in drawn_ids(cpu(data, seed=seed), 0))
    assert [plain[c] for c in range(3)] == [data.labels.count(c) for c in range(3)]


def test_weights_are_followed_and_zero_is_never_drawn(imbalanced):
    data = stoker.Dataset.image_folder(imbalanced)
    seed = fresh_seed()
    rng = random.Random(seed)
    # A third never drawn, the rest weighted 1 or 4.
    weights = [rng.choice([0.0, 1.0, 4.0]) for _ in data.ids]
    weight_of = dict(zip(data.ids, weights))
    n = 1200
    pipe = cpu(data, weights=np.array(weights), num_samples=n, seed=seed, batch_size=100)
    ids = drawn_ids(pipe, 0) + drawn_ids(pipe, 1)
    assert len(ids) == 2 * n
    assert all(weight_of[i] > 0 for i in ids), seed
    # Every sample of positive weight comes (the chance that one of the ~40 is missed in
    # 2400 draws is below 1e-12).
    assert set(ids) == {i for i, w in weight_of.items() if w > 0}, seed
    # The share of the weight-4 samples: binomial, within 5 standard deviations.
    p = sum(w for w in weights if w == 4.0) / sum(weights)
    heavy = sum(weight_of[i] == 4.0 for i in ids)
    sd = math.sqrt(len(ids) * p * (1 - p))
    assert abs(heavy - len(ids) * p) < 5 * sd, (heavy, len(ids) * p, sd, seed)

    # Without replacement: distinct samples, none of weight 0.
    k = sum(w > 0 for w in weights) - 2
    once = drawn_ids(cpu(data, weights=weights, num_samples=k, replacement=False, seed=seed), 3)
    assert len(once) == k == len(set(once)) and all(weight_of[i] > 0 for i in once), seed


def test_weighted_draws_repeat_with_the_seed_and_differ_with_another(imbalanced):
    data = stoker.Dataset.image_folder(imbalanced)
    seed = fresh_seed()
    kw = dict(class_balanced=True, num_samples=60)
    a = drawn_ids(cpu(data, seed=seed, **kw), 2)
    assert a == drawn_ids(cpu(data, seed=seed, batch_size=7, readers=1, **kw), 2), seed
    assert a != drawn_ids(cpu(data, seed=seed + 1, **kw), 2), seed
    assert a != drawn_ids(cpu(data, seed=seed, **kw), 3), seed


def test_sampling_arguments_that_cannot_work_are_refused(imbalanced):
    data = stoker.Dataset.image_folder(imbalanced)
    split = data.split(0.3, seed=1)
    bad = [
        dict(weights=[1.0] * (len(data) - 1)),
        dict(weights=[1.0] * len(data), class_balanced=True),
        dict(weights=[0.0] * len(data)),
        dict(weights=[-1.0] + [1.0] * (len(data) - 1)),
        dict(num_samples=10),
        dict(replacement=False),
        dict(class_balanced=True, shuffle=False),
    ]
    for kw in bad:
        with pytest.raises(stoker.ConfigError):
            cpu(data, **kw)
    with pytest.raises(stoker.ConfigError):
        cpu(split.val, class_balanced=True)
    # A validation subset can be drawn from when asked to shuffle.
    ids = drawn_ids(cpu(split.val, class_balanced=True, shuffle=True, num_samples=30), 0)
    assert len(ids) == 30 and set(ids) <= set(split.val.ids)


# -- fixed order -------------------------------------------------------------------------


def test_shuffle_false_reads_any_data_in_its_order_every_epoch(imbalanced):
    data = stoker.Dataset.image_folder(imbalanced)
    split = data.split(0.4, seed=fresh_seed())
    for d in (data, split.train, data.all(), split.val):
        pipe = cpu(d, shuffle=False, batch_size=5, seed=fresh_seed())
        for e in (0, 1, 7):
            assert drawn_ids(pipe, e) == d.ids
    # The default shuffles the training side (57 samples: the sorted order by chance
    # about once in 10^76) and keeps the validation side's order.
    assert drawn_ids(cpu(data), 0) != data.ids
    assert sorted(drawn_ids(cpu(data), 0)) == sorted(data.ids)
    assert drawn_ids(cpu(split.val), 0) == split.val.ids
    # shuffle=True shuffles a validation subset: a permutation of it, another each epoch.
    pipe = cpu(split.val, shuffle=True, seed=fresh_seed())
    e0, e1 = drawn_ids(pipe, 0), drawn_ids(pipe, 1)
    assert sorted(e0) == sorted(e1) == sorted(split.val.ids) and e0 != e1


# -- pickling ---------------------------------------------------------------------------


def augmentation() -> stoker.Augment:
    return (
        stoker.Augment()
        .random_resized_crop(24, scale=(0.3, 1.0))
        .flip_horizontal(0.5)
        .random_affine(degrees=(-20.0, 20.0), translate=(0.1, 0.0))
        .color_jitter(0.3, 0.2, hue=0.05)
        .random_erasing(0.5, value=[0.5, 0.5, 0.5])
        .fill([10, 20, 30])
        .normalize([0.5, 0.4, 0.3], [0.2, 0.25, 0.3])
        .layout("nhwc")
        .dtype("f16")
    )


def test_augment_pickles_to_the_same_configuration():
    for aug in (augmentation(), stoker.Augment(), stoker.Augment.validation(32).crop_aware(False)):
        back = pickle.loads(pickle.dumps(aug))
        assert type(back) is stoker.Augment
        assert repr(back) == repr(aug) and back.size == aug.size and back.is_random == aug.is_random
    # Each object keeps its own chain: the objects it was made from are unchanged.
    base = stoker.Augment().resize(8, 8)
    _ = base.flip_vertical(1.0)
    assert repr(pickle.loads(pickle.dumps(base))) == repr(base)


def test_dataset_split_and_augment_pickle_into_the_same_batches(shapes):
    data = stoker.Dataset.image_folder(shapes / "images").with_masks(shapes / "masks")
    split = data.split(0.3, seed=5, group_by=r"\d\d\.png$")
    assert len(split.val) > 0 and len(split.train) > 0
    aug = augmentation()
    d2, s2, a2 = (pickle.loads(pickle.dumps(x)) for x in (data, split, aug))
    assert (d2.ids, d2.paths, d2.labels, d2.classes) == (data.ids, data.paths, data.labels, data.classes)
    assert (s2.train.ids, s2.val.ids, s2.added) == (split.train.ids, split.val.ids, split.added)
    seed = fresh_seed()
    for mine, theirs in ((data, d2), (split.train, s2.train), (split.val, s2.val)):
        a = batches(cpu(mine, augment=aug, seed=seed, batch_size=8))
        b = batches(cpu(theirs, augment=a2, seed=seed, batch_size=8))
        assert a == b and a[0][3] is not None, seed

    # A split loaded from its manifest pickles too, and keeps `added` as it was.
    split.save(shapes.parent / "split.json")
    loaded = stoker.Split.load(shapes.parent / "split.json", data)
    back = pickle.loads(pickle.dumps(loaded))
    assert back.added == loaded.added == (0, 0) and back.train.ids == split.train.ids


def test_unpickling_a_changed_dataset_is_refused(tmp_path, imbalanced):
    import shutil

    root = tmp_path / "copy"
    shutil.copytree(imbalanced, root)
    data = stoker.Dataset.image_folder(root)
    blob = pickle.dumps(data)
    assert pickle.loads(blob).ids == data.ids
    (root / "few" / "000.png").unlink()
    with pytest.raises(stoker.SourceError, match="differs"):
        pickle.loads(blob)


def spawned_batches(data, aug, seed: int, side: str | None = None) -> list:
    """Runs in a spawned process, with `data` and `aug` unpickled there: the batches of
    epochs 0 and 1 (of the split's `side` when `data` is a split)."""
    if side is not None:
        data = getattr(data, side)
    return batches(cpu(data, augment=aug, seed=seed, batch_size=8))


def test_a_spawned_process_delivers_the_same_batches(shapes):
    data = stoker.Dataset.image_folder(shapes / "images").with_masks(shapes / "masks")
    split = data.split(0.25, seed=2)
    aug, val_aug = augmentation(), stoker.Augment.validation(16)
    seed = fresh_seed()
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        from_split = pool.apply(spawned_batches, (split, aug, seed, "train"))
        from_data = pool.apply(spawned_batches, (data, val_aug, seed))
    assert from_split == batches(cpu(split.train, augment=aug, seed=seed, batch_size=8)), seed
    assert from_data == batches(cpu(data, augment=val_aug, seed=seed, batch_size=8)), seed
