"""The Python package against its promises: shapes, labels, masks, determinism across
processes, ranks, errors, batch memory, interrupts. NumPy is the consumer here
(`numpy.from_dlpack`); tests/test_torch.py repeats the hand-off with torch."""

from __future__ import annotations

import gc
import hashlib
import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import numpy as np
import pytest

import stoker
from conftest import CLASSES, LEVELS

MEAN, STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]


def cpu_pipe(data, **kw):
    kw.setdefault("backend", "cpu")
    kw.setdefault("batch_size", 8)
    kw.setdefault("augment", stoker.Augment().random_resized_crop(32).flip_horizontal(0.5))
    return stoker.Pipeline(data, **kw)


def test_shapes_dtypes_and_labels(photos):
    data = stoker.Dataset.image_folder(photos)
    assert len(data) == 30 and data.classes == CLASSES
    label_of = dict(zip(data.ids, data.labels))
    aug = stoker.Augment().random_resized_crop(32).normalize(MEAN, STD)
    pipe = cpu_pipe(data, augment=aug, batch_size=8, seed=3)
    assert len(pipe) == 4 and pipe.backend == "cpu"
    seen = []
    for batch in pipe.epoch(0):
        x = np.from_dlpack(batch.images)
        y = np.from_dlpack(batch.labels)
        assert x.dtype == np.float32 and x.shape == (len(batch), 3, 32, 32)
        assert y.dtype == np.int64 and y.shape == (len(batch),)
        assert batch.masks is None and batch.errors == []
        assert [label_of[i] for i in batch.ids] == y.tolist()
        ids = np.from_dlpack(batch.ids_tensor)
        assert ids.dtype == np.uint64 and ids.tolist() == batch.ids
        # Normalised: not in 0..255 any more.
        assert x.min() < 0
        seen += batch.ids
    assert sorted(seen) == sorted(data.ids)
    # The ids use all 64 bits (about half are past int64's range): uint64 holds them.
    assert any(i >= 2**63 for i in seen)

    u8 = cpu_pipe(data, augment=stoker.Augment().resize(20, 10).layout("nhwc"))
    b = next(iter(u8.epoch(0)))
    x = np.from_dlpack(b.images)
    assert x.dtype == np.uint8 and x.shape == (8, 10, 20, 3) and b.shape == [8, 10, 20, 3]
    f16 = cpu_pipe(data, augment=stoker.Augment().resize(16, 16).dtype("f16"))
    assert np.from_dlpack(next(iter(f16.epoch(0))).images).dtype == np.float16


def test_dlpack_is_zero_copy_and_reusable(photos):
    pipe = cpu_pipe(stoker.Dataset.image_folder(photos))
    batch = next(iter(pipe.epoch(0)))
    t = batch.images
    assert t.__dlpack_device__() == (1, 0) and t.device == "cpu"
    a = np.from_dlpack(t)
    b = np.from_dlpack(t)  # each export is a fresh capsule
    assert a.__array_interface__["data"][0] == t.data_ptr == b.__array_interface__["data"][0]
    # Both ABIs: the legacy capsule (no max_version) and the versioned one.
    assert type(t.__dlpack__()).__name__ == "PyCapsule"
    assert type(t.__dlpack__(max_version=(1, 0))).__name__ == "PyCapsule"
    with pytest.raises(BufferError):
        t.__dlpack__(stream=7)  # a CPU tensor takes no stream
    with pytest.raises(BufferError):
        t.__dlpack__(copy=True)


def test_masks_follow_the_image_geometry(shapes):
    data = stoker.Dataset.image_folder(shapes / "images").with_masks(shapes / "masks")
    aug = (
        stoker.Augment()
        .random_resized_crop(48, scale=(0.3, 1.0))
        .flip_horizontal(0.5)
        .flip_vertical(0.5)
        .random_affine(degrees=(-20, 20), translate=(0.1, 0.1))
        .color_jitter(0.3, 0.3, 0.3)
        .mask_fill(9)  # what the affine uncovers: a class of its own
    )
    pipe = cpu_pipe(data, augment=aug, batch_size=6, seed=11)
    checked = 0
    for epoch in range(2):
        for batch in pipe.epoch(epoch):
            x = np.from_dlpack(batch.images).astype(np.int32)  # [N, 3, H, W]
            m = np.from_dlpack(batch.masks)  # [N, H, W]
            assert m.dtype == np.uint16 and m.shape == (len(batch), 48, 48)
            # Nearest-neighbour: only the classes the masks hold (0, 1, 2), and the fill.
            assert set(np.unique(m)) <= {0, 1, 2, 9}
            for s in range(len(batch)):
                # Away from region edges (where bilinear image values blend), each mask
                # class must cover one uniform grey level of the image, and the colour
                # jitter keeps the levels' order (contrast and brightness are monotone).
                means = {}
                for k in LEVELS:
                    # The interior: pixels 3 or more pixels from another class
                    # (the antialiased resize and the warp blend about 2).
                    core = erode(m[s] == k, 3)
                    if core.sum() >= 4:
                        means[k] = x[s, 0][core].mean()
                        # Uniform inside a class region (up to the jitter's rounding).
                        assert np.ptp(x[s, 0][core]) <= 6, (batch.ids[s], k)
                ks = sorted(means)
                assert [means[k] for k in ks] == sorted(means[k] for k in ks)
                checked += len(ks) > 1
    assert checked > 20


def erode(inside, r):
    """The pixels whose 8 neighbours, r times over, are all inside: r or more pixels from
    the outside in every direction, diagonals included (a 4-neighbour erosion keeps a pixel
    2 rows and 2 columns from a corner, where the blend of the two stages still reaches)."""
    core = inside.copy()
    for _ in range(r):
        nxt = core.copy()
        for dy in (-1, 0, 1):
            for dx in (-1, 0, 1):
                ys = slice(max(dy, 0), core.shape[0] + min(dy, 0))
                yd = slice(max(-dy, 0), core.shape[0] + min(-dy, 0))
                xs = slice(max(dx, 0), core.shape[1] + min(dx, 0))
                xd = slice(max(-dx, 0), core.shape[1] + min(-dx, 0))
                nxt[yd, xd] &= core[ys, xs]
        nxt[0, :] = nxt[-1, :] = nxt[:, 0] = nxt[:, -1] = False
        core = nxt
    return core


HASH_SCRIPT = textwrap.dedent(
    """
    import hashlib, json, sys
    import numpy as np
    import stoker
    root, epoch, readers, workers, batch_size = sys.argv[1:6]
    data = stoker.Dataset.image_folder(root)
    aug = (stoker.Augment().random_resized_crop(24).flip_horizontal(0.5)
           .color_jitter(0.4, 0.4, 0.4).rand_augment())
    pipe = stoker.Pipeline(data, augment=aug, batch_size=int(batch_size), seed=5,
                           backend="cpu", readers=int(readers), workers=int(workers))
    per_id = {}
    for b in pipe.epoch(int(epoch)):
        x = np.from_dlpack(b.images)
        for i, s in zip(b.ids, x):
            per_id[str(i)] = hashlib.sha256(s.tobytes()).hexdigest()
    print(json.dumps(per_id, sort_keys=True))
    """
)


def run_hash(root, epoch, readers, workers, batch_size):
    out = subprocess.run(
        [sys.executable, "-c", HASH_SCRIPT, str(root), str(epoch), str(readers), str(workers), str(batch_size)],
        check=True,
        capture_output=True,
        text=True,
        timeout=300,
    )
    return json.loads(out.stdout)


def test_deterministic_across_processes_threads_and_batch_sizes(photos):
    a = run_hash(photos, 1, 1, 1, 8)
    b = run_hash(photos, 1, 4, 2, 5)
    assert len(a) == 30 and a == b
    # Another epoch draws other augmentations.
    c = run_hash(photos, 2, 2, 2, 8)
    assert sum(a[k] != c[k] for k in a) > 20


def test_each_epoch_is_a_full_permutation_and_resumes(photos):
    data = stoker.Dataset.image_folder(photos)
    pipe = cpu_pipe(data, batch_size=7)
    orders = []
    for e in range(3):
        ids = [i for b in pipe.epoch(e) for i in b.ids]
        assert sorted(ids) == sorted(data.ids)
        orders.append(ids)
    assert orders[0] != orders[1] != orders[2]
    full = [np.from_dlpack(b.images).copy() for b in pipe.epoch(1)]
    tail = [np.from_dlpack(b.images).copy() for b in pipe.epoch_from(1, 2)]
    assert len(pipe.epoch_from(1, 2)) == len(full) - 2
    assert all((x == y).all() for x, y in zip(full[2:], tail))


def test_a_finished_epoch_iterated_again_says_so(photos):
    """A training loop that keeps one Epoch and iterates it each epoch would train on
    nothing from the second pass on: it is told so instead."""
    pipe = cpu_pipe(stoker.Dataset.image_folder(photos), batch_size=7)
    ep = pipe.epoch(0)
    first = sum(len(b) for b in ep)
    assert first == len(stoker.Dataset.image_folder(photos))
    with pytest.raises(RuntimeError, match="pipeline.epoch"):
        for _ in ep:
            pass
    # A closed epoch just ends; a fresh one runs in full.
    closed = pipe.epoch(1)
    closed.close()
    assert list(closed) == [] and list(closed) == []
    assert sum(len(b) for b in pipe.epoch(1)) == first


def test_ranks_get_equal_batches_covering_the_epoch(photos):
    data = stoker.Dataset.image_folder(photos)
    world = 4  # 30 samples: not a multiple
    per_rank = []
    for rank in range(world):
        pipe = cpu_pipe(data, batch_size=3, rank=rank, world_size=world, seed=9)
        batches = list(pipe.epoch(4))
        per_rank.append(batches)
        assert len(batches) == len(pipe)
    assert len({len(b) for b in per_rank}) == 1
    real = set()
    for batches in per_rank:
        for b in batches:
            real |= {i for i, rep in zip(b.ids, b.repeated) if not rep}
    assert real == set(data.ids)
    with pytest.raises(stoker.ConfigError):
        cpu_pipe(data, rank=1)
    with pytest.raises(ValueError):
        cpu_pipe(data, rank=4, world_size=4)


def test_split_save_load_extend(photos, tmp_path):
    data = stoker.Dataset.image_folder(photos)
    split = data.split(0.3, seed=2)
    assert len(split.train) + len(split.val) == 30
    assert split.train.role == "train" and split.val.role == "val"
    assert not set(split.train.ids) & set(split.val.ids)
    split.save(tmp_path / "split.json")
    again = stoker.Split.load(tmp_path / "split.json", data)
    assert again.train.ids == split.train.ids and again.val.ids == split.val.ids
    # The validation order is fixed: the same every epoch.
    pipe = cpu_pipe(split.val, augment=stoker.Augment().resize(16, 16))
    assert [b.ids for b in pipe.epoch(0)] == [b.ids for b in pipe.epoch(5)]
    with pytest.raises(OSError):
        stoker.Split.load(tmp_path / "missing.json", data)

    # The dataset grows: the saved split places only the new samples, keeps the rest.
    import shutil

    grown_root = tmp_path / "grown"
    shutil.copytree(photos, grown_root)
    for i in range(6):
        shutil.copy(photos / "cat" / "00.jpg", grown_root / "cat" / f"new_{i}.jpg")
    grown = stoker.Dataset.image_folder(grown_root)
    with pytest.raises(stoker.SplitError) as info:
        stoker.Split.load(tmp_path / "split.json", grown)  # 6 samples it does not know
    assert info.value.reason
    ext = stoker.Split.extend(tmp_path / "split.json", grown)
    assert sum(ext.added) == 6
    assert set(split.train.ids) <= set(ext.train.ids)
    assert set(split.val.ids) <= set(ext.val.ids)


def test_errors_are_reported_with_path_and_reason(damaged):
    data = stoker.Dataset.image_folder(damaged)
    pipe = cpu_pipe(data, on_error="skip")
    reports = [e for b in pipe.epoch(0) for e in b.errors]
    assert sorted(Path(e.path).name for e in reports) == ["00.jpg", "zz_not_an_image.jpg"]
    for e in reports:
        assert isinstance(e, stoker.SampleError) and e.kind == "decode" and e.reason
        assert isinstance(e.id, int) and e.path in str(e)
    stats = pipe.stats()
    assert stats.samples_reported == 2 and stats.samples_delivered == 29
    assert len(stats.errors) == 2

    strict = cpu_pipe(data, on_error="fail", batch_size=31)
    with pytest.raises(stoker.SampleError) as info:
        for _ in strict.epoch(0):
            pass
    assert info.value.kind == "decode" and info.value.path.endswith(".jpg")

    replaced = cpu_pipe(data, on_error="replace", batch_size=31)
    (b,) = list(replaced.epoch(0))
    assert len(b) == 31 and len(b.replacements) == 2 and len(b.errors) == 2


def test_configuration_and_source_errors(photos, tmp_path):
    data = stoker.Dataset.image_folder(photos)
    with pytest.raises(stoker.ConfigError) as info:
        cpu_pipe(data, batch_size=0)
    assert info.value.setting == "batch_size" and isinstance(info.value, ValueError)
    with pytest.raises(stoker.ConfigError):
        cpu_pipe(data, on_error="ignore")
    with pytest.raises(stoker.ConfigError) as info:
        cpu_pipe(data, hardware_share=1.5)
    assert info.value.setting == "hardware_share"
    assert len(cpu_pipe(data, hardware_share=0.25)) > 0
    with pytest.raises(stoker.ConfigError):
        stoker.Augment().dtype("f64")
    with pytest.raises(stoker.SourceError) as info:
        stoker.Dataset.image_folder(tmp_path / "nowhere")
    assert isinstance(info.value, OSError) and info.value.reason
    with pytest.raises(TypeError):
        stoker.Pipeline("not a dataset")
    with pytest.raises(stoker.StokerError):
        cpu_pipe(data).epoch_from(0, 99)


def test_batches_return_to_the_ring(photos):
    """Many epochs whose tensors are dropped leave no batch out; a tensor held keeps its
    memory unchanged while the ring goes round many times."""
    data = stoker.Dataset.image_folder(photos)
    pipe = cpu_pipe(data, batch_size=4, prefetch=2)
    held = None
    first_copy = None
    for epoch in range(40):
        for batch in pipe.epoch(epoch):
            x = np.from_dlpack(batch.images)
            y = np.from_dlpack(batch.labels)
            assert x.shape[0] == y.shape[0]
            if held is None:
                held, first_copy = x, x.copy()
        del batch, x, y
        gc.collect()
        # Only the held array's batch is out.
        assert pipe.batches_held == 1
    assert (held == first_copy).all()
    del held
    gc.collect()
    assert pipe.batches_held == 0
    # Holding more batches than the ring has buffers lends more rather than stop.
    kept = [np.from_dlpack(b.images) for b in pipe.epoch(0)]
    assert pipe.batches_held == len(kept) == len(pipe) > 2
    del kept
    gc.collect()
    assert pipe.batches_held == 0


def test_iterates_in_a_thread_and_closes_early(photos):
    data = stoker.Dataset.image_folder(photos)
    pipe = cpu_pipe(data, batch_size=2)
    out = []
    t = threading.Thread(target=lambda: out.extend(len(b) for b in pipe.epoch(0)))
    t.start()
    t.join(120)
    assert sum(out) == 30
    with pipe.epoch(1) as ep:
        next(ep)
    assert list(ep) == []  # closed: ends at once
    with pipe:
        e = pipe.epoch(2)
        next(e)
    assert list(e) == []
    assert len(pipe.epoch(3)) == 15


def test_close_from_another_thread_while_it_waits(photos):
    data = stoker.Dataset.image_folder(photos).with_read_latency(0.3)
    pipe = cpu_pipe(data, batch_size=4, readers=1)
    got = []
    t = threading.Thread(target=lambda: got.extend(len(b) for b in pipe.epoch(0)))
    t.start()
    deadline = time.monotonic() + 30
    while not got and time.monotonic() < deadline:
        time.sleep(0.05)
    start = time.monotonic()
    pipe.close()  # the other thread is waiting for a batch, without the GIL
    t.join(30)
    assert not t.is_alive() and time.monotonic() - start < 5
    assert 0 < sum(got) < 30


def _gpu_device_nodes():
    """GPU device nodes this machine has (none: the case the test below is about)."""
    dri = [n for n in (os.listdir("/dev/dri") if os.path.isdir("/dev/dri") else [])
           if n.startswith("renderD")]
    nv = [n for n in os.listdir("/dev") if n.startswith("nvidia") and n[6:].isdigit()]
    return dri + nv + (["dxg"] if os.path.exists("/dev/dxg") else [])


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/maps")
def test_auto_loads_no_graphics_driver_without_a_gpu(photos):
    """On a machine without a GPU, `auto` chooses the CPU without loading Mesa's software
    Vulkan or GL drivers (and their libLLVM, which crashed triton's own LLVM under
    torch.compile later in the same process)."""
    nodes = _gpu_device_nodes()
    if nodes:
        pytest.skip(f"this machine has GPU device nodes ({nodes}): auto lists adapters there")
    script = textwrap.dedent(
        """
        import sys
        import stoker
        pipe = stoker.Pipeline(stoker.Dataset.image_folder(sys.argv[1]), batch_size=4,
                               augment=stoker.Augment().resize(16, 16))
        assert pipe.backend == "cpu", pipe.backend
        print(pipe.backend_reason)
        sum(len(b) for b in pipe.epoch(0))
        print(open("/proc/self/maps").read())
        """
    )
    env = {k: v for k, v in os.environ.items() if k != "STOKER_WGPU_ALLOW_SOFTWARE"}
    r = subprocess.run([sys.executable, "-c", script, str(photos)], capture_output=True,
                       text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    loaded = {line.split()[-1] for line in r.stdout.splitlines()[1:] if "/" in line}
    drivers = [p for p in loaded
               if any(k in os.path.basename(p) for k in ("libvulkan", "libLLVM", "libEGL", "libGL"))]
    assert not drivers, f"auto loaded graphics drivers: {drivers}"
    assert "GPU device node" in r.stdout.splitlines()[0], r.stdout.splitlines()[0]


def test_ctrl_c_mid_epoch_returns_promptly(photos):
    script = textwrap.dedent(
        """
        import signal, sys, time
        import stoker
        # A shell's background job starts with SIGINT ignored, and Python then leaves it
        # so: answer it as an interactive run does, however the tests were started.
        signal.signal(signal.SIGINT, signal.default_int_handler)
        data = stoker.Dataset.image_folder(sys.argv[1]).with_read_latency(0.5)
        pipe = stoker.Pipeline(data, augment=stoker.Augment().resize(16, 16),
                               batch_size=4, readers=1, backend="cpu")
        try:
            for i, b in enumerate(pipe.epoch(0)):
                print("batch", i, flush=True)
        except KeyboardInterrupt:
            print("interrupted", flush=True)
            raise
        """
    )
    p = subprocess.Popen(
        [sys.executable, "-c", script, str(photos)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert p.stdout.readline().startswith("batch 0")
        # The next batch takes seconds (0.5 s a sample, one reader): interrupt the wait.
        sent = time.monotonic()
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=20)
        took = time.monotonic() - sent
    finally:
        p.kill()
    assert "interrupted" in out and "KeyboardInterrupt" in err
    # Within the poll (50 ms) plus the epoch's shutdown (the reader's sample in hand).
    assert took < 3.0, took


def test_backends_and_unavailable_device(photos):
    assert "cpu" in stoker.backends()
    if "cuda" in stoker.backends() and os.environ.get("STOKER_REQUIRE_CUDA") != "1":
        try:
            import torch  # noqa: F401

            has_gpu = torch.cuda.is_available()
        except ImportError:
            has_gpu = Path("/dev/nvidia0").exists()
        if not has_gpu:
            with pytest.raises(stoker.BackendUnavailableError) as info:
                cpu_pipe(stoker.Dataset.image_folder(photos), backend="cuda")
            assert info.value.backend == "cuda" and isinstance(info.value, stoker.DeviceError)


SHARDS = Path(__file__).resolve().parents[2] / "tests" / "data" / "shards"


@pytest.mark.skipif(not SHARDS.is_dir(), reason="the repository's shard fixtures are not beside the tests")
def test_shards_written_by_tensorflow_webdataset_and_pyarrow():
    """The fixtures hold the same 9 samples as TFRecord (TensorFlow), tar (webdataset) and
    Parquet (pyarrow): each container lists them with the same labels, and a pipeline
    delivers or reports every one, or refuses with a SourceError saying why (the TFRecord
    and tar fixtures have masks for some samples only, which a pipeline does not take)."""
    expected = json.loads((SHARDS / "expected.json").read_text())
    tf_samples = [s for shard in expected["shards"] if shard["format"] == "tfrecord" for s in shard["samples"]]
    sets = {
        "tfrecord": stoker.Dataset.tfrecord(SHARDS / "tfrecord"),
        "tar": stoker.Dataset.tar([SHARDS / "tar" / "train-000000.tar", SHARDS / "tar" / "train-000001.tar"]),
        "parquet": stoker.Dataset.parquet(SHARDS / "parquet" / "train.parquet"),
    }
    for name, data in sets.items():
        assert len(data) == len(tf_samples) == 9, name
        assert sorted(data.labels) == sorted(s["label"] for s in tf_samples), name
        assert len(set(data.ids)) == 9 and data.skipped == []
        try:
            pipe = cpu_pipe(data, augment=stoker.Augment().resize(24, 16))
        except stoker.SourceError as e:
            assert "masks" in e.reason, name  # the tfrecord and tar fixtures
            continue
        # Every sample delivered or reported (Parquet's rows with a null mask are
        # reported, with the row), each once.
        seen = []
        for b in pipe.epoch(0):
            seen += b.ids
            seen += [e.id for e in b.errors]
            assert all(e.path and e.reason for e in b.errors)
        assert sorted(seen) == sorted(data.ids), name
