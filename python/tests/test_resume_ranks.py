"""A job checkpointed on 4 ranks resumes on 2 and on 8 with the same global batches, from
Python's state dict (`Batch.state`, `Pipeline.resume`), as the Rust test does: the ranks'
batches, concatenated in rank order at each step (padding left out), are an uninterrupted
1-rank run's global batches, sample for sample and pixel for pixel, and every sample of the
epoch comes once."""

from __future__ import annotations

import json

import numpy as np

import stoker

GLOBAL = 8
EPOCH = 1


def pipe(data, aug, rank, world):
    return stoker.Pipeline(
        data,
        augment=aug,
        batch_size=GLOBAL // world,
        seed=13,
        backend="cpu",
        rank=rank,
        world_size=world,
    )


def slots(batch):
    """(id, pixels) of each slot that is not padding."""
    images = np.from_dlpack(batch.images)
    return [(i, images[k].copy()) for k, i in enumerate(batch.ids) if not batch.repeated[k]]


def steps(epochs):
    """Each step's global batch: the ranks' slots at that step in rank order."""
    return [sum((slots(b) for b in per_rank), []) for per_rank in zip(*epochs)]


def same(a, b):
    assert [i for i, _ in a] == [i for i, _ in b]
    assert all(np.array_equal(x, y) for (_, x), (_, y) in zip(a, b))


def test_a_state_from_4_ranks_resumes_on_2_and_8(photos):
    data = stoker.Dataset.image_folder(photos)  # 30 samples: the last global batch is short
    aug = stoker.Augment().random_resized_crop(16).flip_horizontal(0.5)
    whole = steps([list(pipe(data, aug, 0, 1).epoch(EPOCH))])
    assert sorted(i for step in whole for i, _ in step) == sorted(s for s in data.ids)
    k = 2
    # 4 ranks train k steps; the state after the k-th, the same on every rank, is saved.
    four = [pipe(data, aug, r, 4) for r in range(4)]
    ran = []
    for p in four:
        ep = p.epoch(EPOCH)
        ran.append([next(ep) for _ in range(k)])
    saved = {json.dumps(b[-1].state(), sort_keys=True) for b in ran}
    assert len(saved) == 1, "every rank's state is the same"
    state = json.loads(saved.pop())
    same(sum(steps(ran), []), sum(whole[:k], []))
    for world in (2, 8):
        rest = steps([list(pipe(data, aug, r, world).resume(state)) for r in range(world)])
        assert len(rest) == len(whole) - k, world
        for got, want in zip(rest, whole[k:]):
            same(got, want)
