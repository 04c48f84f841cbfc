"""The hand-off to PyTorch: `torch.from_dlpack` on CPU batches, and on CUDA batches with
stream ordering. Skipped (and said so) where torch is not installed; the CUDA tests run
where torch sees a GPU and this build has the CUDA backend (the GPU check script), and
fail instead of skipping there with STOKER_REQUIRE_CUDA=1."""

from __future__ import annotations

import gc
import os

import numpy as np
import pytest

import stoker

torch = pytest.importorskip("torch", reason="torch is not installed: the torch hand-off tests did not run")

REQUIRE_CUDA = os.environ.get("STOKER_REQUIRE_CUDA") == "1"


def cuda_or_skip():
    ok = torch.cuda.is_available() and "cuda" in stoker.backends()
    if not ok:
        if REQUIRE_CUDA:
            pytest.fail("STOKER_REQUIRE_CUDA=1 but torch sees no GPU or this build has no CUDA backend")
        pytest.skip("no CUDA device for torch (or no CUDA backend in this build): the CUDA hand-off tests did not run")


def pipe_on(data, backend, **kw):
    aug = stoker.Augment().random_resized_crop(64).flip_horizontal(0.5)
    return stoker.Pipeline(data, augment=aug, batch_size=8, seed=4, backend=backend, **kw)


def test_torch_cpu_hand_off_is_zero_copy(photos):
    pipe = pipe_on(stoker.Dataset.image_folder(photos), "cpu")
    batch = next(iter(pipe.epoch(0)))
    x = torch.from_dlpack(batch.images)
    y = torch.from_dlpack(batch.labels)
    assert x.dtype == torch.uint8 and x.shape == (8, 3, 64, 64) and x.device.type == "cpu"
    assert y.dtype == torch.int64
    assert x.data_ptr() == batch.images.data_ptr
    ref = x.clone()
    del batch
    gc.collect()
    # The tensor keeps the batch alive: its memory is not reused by later batches.
    assert sum(len(b) for b in pipe.epoch(1)) == 30
    assert pipe.batches_held == 1 and torch.equal(x, ref)
    del x, y
    gc.collect()
    assert pipe.batches_held == 0


def reference(data, epochs):
    """The CPU backend's batches: the oracle of the device's."""
    pipe = pipe_on(data, "cpu")
    return {e: [torch.from_dlpack(b.images).clone() for b in pipe.epoch(e)] for e in epochs}


def test_cuda_batches_on_torch_current_stream(photos):
    cuda_or_skip()
    data = stoker.Dataset.image_folder(photos)
    ref = reference(data, [0])
    pipe = pipe_on(data, "cuda")
    assert pipe.backend == "cuda"
    for i, batch in enumerate(pipe.epoch(0)):
        t = batch.images
        assert t.device == "cuda:0" and t.__dlpack_device__() == (2, 0)
        x = torch.from_dlpack(t)  # torch passes its current stream
        assert x.is_cuda and x.data_ptr() == t.data_ptr
        # The same samples as the CPU backend (the device's IDCT may differ by a level).
        diff = (x.cpu().int() - ref[0][i].int()).abs()
        assert diff.max() <= 2 and diff.float().mean() < 0.05


def test_cuda_batches_on_a_side_stream_and_release_ordering(photos):
    """A consumer on its own stream: the stream waits for each batch (no host sync), and
    a batch freed while the stream's work on it is still queued is not overwritten before
    that work runs (the release waits on the consumer's stream)."""
    cuda_or_skip()
    data = stoker.Dataset.image_folder(photos)
    ref = reference(data, [0, 1])
    sums_ref = [[r.double().sum().item() for r in ref[e]] for e in (0, 1)]
    pipe = pipe_on(data, "cuda", prefetch=2)
    side = torch.cuda.Stream()
    for e in (0, 1):
        sums = []
        with torch.cuda.stream(side):
            for batch in pipe.epoch(e):
                x = torch.from_dlpack(batch.images)
                # Queue a long kernel before reading the batch: the read runs well after
                # the tensor and the batch are dropped here.
                torch.cuda._sleep(20_000_000)
                sums.append(x.double().sum())
                del x, batch
        side.synchronize()
        got = [s.item() for s in sums]
        for g, r in zip(got, sums_ref[e]):
            assert abs(g - r) / max(r, 1.0) < 1e-3
    # Explicit stream arguments: an integer handle, -1 (no ordering), 1 (legacy default).
    batch = next(iter(pipe.epoch(2)))
    for s in (side.cuda_stream, 1, 2):
        torch.from_dlpack(batch.images.__dlpack__(stream=s))
    torch.from_dlpack(batch.images.__dlpack__(stream=-1))
    torch.cuda.synchronize()
