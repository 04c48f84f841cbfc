"""`stoker.torch.Loader`, the DataLoader-like loop over a pipeline, checked against
torchvision's `ImageFolder` + `DataLoader` on the same files (labels, coverage, length,
pixel values) and against itself uninterrupted (a `state_dict` resumed at every batch
position gives the same batches), and `Pipeline.state` / `resume` under it. Skipped (and
said so) where torch is not installed."""

from __future__ import annotations

import io
import json
import math
import os
import subprocess
import sys
import textwrap
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

import stoker

torch = pytest.importorskip("torch", reason="torch is not installed: the stoker.torch tests did not run")
torchvision = pytest.importorskip("torchvision", reason="torchvision is not installed: the stoker.torch tests did not run")

from stoker.torch import Loader  # noqa: E402

MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)


def by_id(data, root):
    """Each sample's file, by its stable id (its path is relative to the dataset's root)."""
    return {i: (Path(root) / p).resolve() for i, p in zip(data.ids, data.paths)}


def cpu_loader(data, **kw):
    kw.setdefault("backend", "cpu")
    return Loader(data, **kw)


def test_import_stoker_alone_does_not_import_torch():
    code = "import sys, stoker; assert 'torch' not in sys.modules, 'torch imported'; import stoker.torch; assert 'torch' in sys.modules"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr


def test_labels_coverage_and_length_match_imagefolder(photos):
    from torchvision import datasets, transforms

    ref = datasets.ImageFolder(str(photos), transform=transforms.PILToTensor())
    label_of = {Path(p).resolve(): c for p, c in ref.samples}
    for drop_last in (False, True):
        loader = cpu_loader(photos, batch_size=7, shuffle=True, seed=3, drop_last=drop_last,
                            augment=stoker.Augment().resize(32, 32), output="dict")
        dl = torch.utils.data.DataLoader(ref, batch_size=7, shuffle=True, drop_last=drop_last,
                                         collate_fn=lambda b: b)
        assert len(loader) == len(dl) == (30 // 7 if drop_last else math.ceil(30 / 7))
        files = by_id(loader.data, photos)
        # The class ids are ImageFolder's class_to_idx.
        assert loader.data.classes == sorted(ref.class_to_idx, key=ref.class_to_idx.get)
        seen = Counter()
        batches = 0
        for b in loader:
            batches += 1
            assert b["ids"].dtype == torch.uint64 and b["labels"].dtype == torch.int64
            for i, y in zip(b["ids"].tolist(), b["labels"].tolist()):
                assert label_of[files[i]] == y
                seen[files[i]] += 1
        assert batches == len(loader)
        if drop_last:
            assert len(seen) == 28 and set(seen.values()) == {1}
        else:
            # Every sample exactly once.
            assert seen == Counter({p: 1 for p in label_of})


def test_pixels_comparable_to_torchvision(photos):
    """The same files through stoker and through torchvision's resize and normalise: the
    same range and dtype, each image's channel means within a few levels (two resizers
    and two JPEG decoders differ in detail, not in content)."""
    from torchvision.transforms import v2

    ref = torchvision.datasets.ImageFolder(
        str(photos),
        transform=v2.Compose([v2.PILToTensor(), v2.Resize((32, 32), antialias=True),
                              v2.ToDtype(torch.float32, scale=True), v2.Normalize(MEAN, STD)]),
    )
    want = {Path(p).resolve(): ref[k][0] for k, (p, _) in enumerate(ref.samples)}
    loader = cpu_loader(photos, batch_size=8, shuffle=False,
                        augment=stoker.Augment().resize(32, 32).normalize(MEAN, STD), output="dict")
    files = by_id(loader.data, photos)
    n = 0
    for b in loader:
        x = b["images"]
        assert x.dtype == torch.float32 and x.shape[1:] == (3, 32, 32)
        for i, img in zip(b["ids"].tolist(), x):
            r = want[files[i]]
            lo, hi = (-m / s for m, s in zip(MEAN, STD)), ((1 - m) / s for m, s in zip(MEAN, STD))
            for c, (l, h) in enumerate(zip(lo, hi)):
                assert l - 1e-4 <= img[c].min() and img[c].max() <= h + 1e-4
            # Channel means, in 0-255 levels.
            diff = (img.mean((1, 2)) - r.mean((1, 2))) * torch.tensor(STD) * 255
            assert diff.abs().max() < 3, (files[i], diff)
            n += 1
    assert n == 30


def take(it, k):
    return [next(it) for _ in range(k)]


def record(batches):
    return [(b["ids"].tolist(), b["images"].clone()) for b in batches]


def same(got, want):
    assert [g[0] for g in got] == [w[0] for w in want]
    for (_, x), (_, y) in zip(got, want):
        assert torch.equal(x, y)


RESUME_KW = dict(batch_size=4, shuffle=True, seed=5, output="dict",
                 augment=stoker.Augment().random_resized_crop(24).flip_horizontal(0.5).color_jitter(0.3, 0.3, 0.3))


def roundtrip(sd):
    """Through a checkpoint as torch.save writes it, and through JSON."""
    buf = io.BytesIO()
    torch.save({"loader": sd}, buf)
    buf.seek(0)
    sd = torch.load(buf, weights_only=True)["loader"]
    return json.loads(json.dumps(sd))


def test_state_dict_resumes_at_every_batch_position(photos):
    """Taken after k batches of epoch 0 (k = 0 .. all of them) or of epoch 1, and loaded
    into a fresh loader: the rest of that epoch and the next one are the uninterrupted
    run's batches, ids and pixels."""
    data = stoker.Dataset.image_folder(photos)
    full = cpu_loader(data, **RESUME_KW)
    want = {e: record(full) for e in range(3)}
    n = len(full)
    assert n == 8 and all(len(want[e]) == n for e in want)
    for epoch in (0, 1):
        for k in range(n + 1):
            a = cpu_loader(data, **RESUME_KW)
            for _ in range(epoch):
                list(a)
            it = iter(a)
            same(record(take(it, k)), want[epoch][:k])
            sd = roundtrip(a.state_dict())
            del it, a
            b = cpu_loader(data, **RESUME_KW)
            b.load_state_dict(sd)
            if k < n:
                same(record(b), want[epoch][k:])
                same(record(b), want[epoch + 1])
            else:
                # After the epoch's last batch: the next epoch.
                same(record(b), want[epoch + 1])


def test_state_dict_with_set_epoch_and_a_fresh_loader(photos):
    data = stoker.Dataset.image_folder(photos)
    full = cpu_loader(data, **RESUME_KW)
    full.set_epoch(4)
    want = record(full)
    a = cpu_loader(data, **RESUME_KW)
    a.set_epoch(4)
    it = iter(a)
    next(it), next(it), next(it)
    sd = a.state_dict()
    assert sd["epoch"] == 4
    b = cpu_loader(data, **RESUME_KW)
    b.load_state_dict(sd)
    b.set_epoch(4)  # the loop's own set_epoch of the same epoch keeps the position
    assert b.state_dict() == sd
    it = iter(b)
    assert b.state_dict() == sd  # begun, nothing received yet: still the loaded position
    same(record(it), want[3:])
    # A fresh loader's state starts at epoch 0.
    fresh = cpu_loader(data, **RESUME_KW).state_dict()
    c = cpu_loader(data, **RESUME_KW)
    c.load_state_dict(fresh)
    assert [i for i, _ in record(c)] == [i for i, _ in record(cpu_loader(data, **RESUME_KW))]


def test_a_state_of_another_configuration_is_refused(photos):
    data = stoker.Dataset.image_folder(photos)
    a = cpu_loader(data, **RESUME_KW)
    next(iter(a))
    sd = a.state_dict()
    with pytest.raises(stoker.ResumeError) as e:
        cpu_loader(data, **{**RESUME_KW, "seed": 6}).load_state_dict(sd)
    assert e.value.reason == "seed" and (e.value.state, e.value.pipeline) == (5, 6)
    with pytest.raises(stoker.ResumeError) as e:
        cpu_loader(data, **{**RESUME_KW, "batch_size": 5}).load_state_dict(sd)
    assert e.value.reason == "global_batch_size" and (e.value.state, e.value.pipeline) == (4, 5)
    with pytest.raises(stoker.ResumeError) as e:
        cpu_loader(data, **{**RESUME_KW, "drop_last": True}).load_state_dict(sd)
    assert e.value.reason == "order"
    pipe = a.pipeline
    for bad in ({"epoch": 0}, "not a state", {**sd["pipeline"], "seed": "five"}):
        with pytest.raises(stoker.ResumeError) as e:
            pipe.resume(bad)
        assert e.value.reason == "format"
    with pytest.raises(stoker.ResumeError) as e:
        pipe.resume({**sd["pipeline"], "samples_consumed": 3})
    assert e.value.reason == "position"


def test_pipeline_state_and_resume(photos):
    """The native layer under the loader: `Batch.state` after batch i resumes with batch
    i + 1 of the same epoch; `Pipeline.state` follows the batches handed out."""
    data = stoker.Dataset.image_folder(photos)
    aug = stoker.Augment().random_resized_crop(16)
    pipe = stoker.Pipeline(data, augment=aug, batch_size=4, seed=2, backend="cpu")
    assert pipe.state()["epoch"] == 0
    full = [(b.ids, np.from_dlpack(b.images).copy(), b.state()) for b in pipe.epoch(3)]
    assert pipe.state() == full[-1][2]
    for i, (_, _, st) in enumerate(full):
        again = stoker.Pipeline(data, augment=aug, batch_size=4, seed=2, backend="cpu")
        ep = again.resume(json.loads(json.dumps(st)))
        assert len(ep) == len(full) - i - 1
        got = [(b.ids, np.from_dlpack(b.images).copy()) for b in ep]
        assert [g[0] for g in got] == [f[0] for f in full[i + 1:]]
        assert all(np.array_equal(g[1], f[1]) for g, f in zip(got, full[i + 1:]))


def test_epochs_differ_and_repeat_with_seed_and_epoch(photos):
    data = stoker.Dataset.image_folder(photos)
    kw = dict(batch_size=5, shuffle=True, seed=9, output="dict", augment=stoker.Augment().resize(8, 8))

    def order(loader):
        return [i for b in loader for i in b["ids"].tolist()]

    auto = cpu_loader(data, **kw)
    orders = [order(auto) for _ in range(3)]
    assert len({tuple(o) for o in orders}) == 3
    assert all(sorted(o) == sorted(data.ids) for o in orders)
    for e in (0, 1, 2):
        s = cpu_loader(data, **kw)
        s.set_epoch(e)
        assert order(s) == orders[e]
        # The same epoch again, asked for again.
        s.set_epoch(e)
        assert order(s) == orders[e]
    # An iteration left early still counts as an epoch: the next one is a new order.
    part = cpu_loader(data, **kw)
    next(iter(part))
    assert order(part) == orders[1]
    assert order(cpu_loader(data, **{**kw, "seed": 10})) != orders[0]
    # Two iterators at once: the position is the latest one's (epoch 1, at its start).
    two = cpu_loader(data, **kw)
    old = iter(two)
    next(old)
    new = iter(two)
    next(old)
    assert two.state_dict()["epoch"] == 1 and two.state_dict()["pipeline"] is None
    assert next(new)["ids"].tolist() == orders[1][:5]
    assert two.state_dict()["pipeline"]["epoch"] == 1


def test_tuple_output_and_an_epoch_is_never_silently_empty(photos):
    data = stoker.Dataset.image_folder(photos)
    loader = cpu_loader(data, batch_size=8, augment=stoker.Augment().resize(16, 16), num_workers=2)
    for _ in range(2):
        n = 0
        for x, y in loader:
            assert isinstance(x, torch.Tensor) and x.dtype == torch.uint8 and x.shape[1:] == (3, 16, 16)
            assert y.dtype == torch.int64 and len(y) == len(x)
            n += len(x)
        assert n == 30
    # The pipeline's epoch iterated after its end raises rather than yield nothing.
    ep = loader.pipeline.epoch(0)
    assert sum(len(b) for b in ep) == 30
    with pytest.raises(RuntimeError, match="iterated to its end"):
        next(iter(ep))


def test_dict_output_masks_soft_labels(shapes, photos):
    data = stoker.Dataset.image_folder(shapes / "images").with_masks(shapes / "masks")
    b = next(iter(cpu_loader(data, batch_size=6, output="dict", augment=stoker.Augment().resize(24, 24))))
    assert b["masks"].dtype == torch.uint16 and b["masks"].shape == (6, 24, 24)
    assert "soft_labels" not in b and "boxes" not in b
    aug = stoker.Augment().resize(24, 24).dtype("f32").mixup(0.4)
    b = next(iter(cpu_loader(photos, batch_size=6, output="dict", augment=aug)))
    soft = b["soft_labels"]
    assert soft.shape == (6, 3) and torch.allclose(soft.sum(1), torch.ones(6))
    assert "masks" not in b


def test_pin_memory(photos):
    if not torch.cuda.is_available():
        pytest.skip("torch sees no CUDA device: page-locked memory needs one (the pin_memory test did not run)")
    aug = stoker.Augment().resize(16, 16)
    loader = cpu_loader(photos, batch_size=8, augment=aug, output="dict")
    assert loader.pin_memory  # automatic: a GPU, and batches on the host
    b = next(iter(loader))
    assert all(t.is_pinned() for t in b.values())
    x, y = next(iter(cpu_loader(photos, batch_size=8, augment=aug, pin_memory=False)))
    assert not x.is_pinned() and not y.is_pinned()


def test_torch_compile_after_an_auto_pipeline(photos, tmp_path):
    """Issue: a `backend="auto"` pipeline, then triton and `torch.compile` in the same
    process: it must run and exit 0 (auto loads no graphics driver, whose LLVM clashed
    with triton's, where there is no GPU)."""
    pytest.importorskip("triton", reason="triton is not installed: the torch.compile test did not run")
    script = textwrap.dedent(
        """
        import sys
        import stoker
        pipe = stoker.Pipeline(stoker.Dataset.image_folder(sys.argv[1]), batch_size=6,
                               backend="auto", augment=stoker.Augment().resize(16, 16).dtype("f32"))
        batches = list(pipe.epoch(0))
        import torch, triton
        model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.ReLU(),
                                    torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(),
                                    torch.nn.Linear(4, 3))
        compiled = torch.compile(model)
        x = torch.from_dlpack(batches[0].images)
        if x.is_cuda:
            model = model.cuda()
        out = compiled(x)
        assert out.shape == (6, 3), out.shape
        assert torch.allclose(out, model(x), atol=1e-5)
        print("ok", pipe.backend)
        """
    )
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "inductor")}
    r = subprocess.run([sys.executable, "-c", script, str(photos)], capture_output=True, text=True,
                       env=env, timeout=300)
    assert r.returncode == 0, (r.returncode, r.stderr[-4000:])
    assert r.stdout.startswith("ok")


def test_dict_output_boxes(photos, tmp_path):
    """A detection dataset (COCO, written here over the photos): the dict carries the
    padded boxes, each sample's count its annotation count."""
    from PIL import Image

    files = sorted(p.relative_to(photos).as_posix() for p in photos.rglob("*.jpg"))[:6]
    images, annotations = [], []
    for k, f in enumerate(files, 1):
        w, h = Image.open(photos / f).size
        images.append({"id": k, "file_name": f, "width": w, "height": h})
        for j in range(k % 3 + 1):  # 1 to 3 boxes
            annotations.append({"id": len(annotations) + 1, "image_id": k, "category_id": 1 + j % 2,
                                "bbox": [1 + j, 2, w / 2, h / 3], "area": w * h / 6, "iscrowd": 0})
    coco = {"images": images, "annotations": annotations,
            "categories": [{"id": 1, "name": "a"}, {"id": 2, "name": "b"}]}
    (tmp_path / "coco.json").write_text(json.dumps(coco))
    data = stoker.Dataset.coco(tmp_path / "coco.json", photos)
    b = next(iter(cpu_loader(data, batch_size=6, shuffle=False, output="dict",
                             augment=stoker.Augment().resize(32, 32))))
    want = {Path(img["file_name"]).as_posix(): img["id"] % 3 + 1 for img in images}
    files_by_id = {i: Path(p).as_posix() for i, p in zip(data.ids, data.paths)}
    counts = b["box_counts"].tolist()
    assert [want[files_by_id[i]] for i in b["ids"].tolist()] == counts
    assert b["boxes"].shape == (6, 3, 4) and b["box_classes"].shape == (6, 3)
    for n, cls in zip(counts, b["box_classes"].tolist()):
        assert all(c >= 0 for c in cls[:n]) and all(c == -1 for c in cls[n:])
