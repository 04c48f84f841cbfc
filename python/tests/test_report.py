"""The verdict on an epoch (`Epoch.report()`) and the Chrome trace (`Pipeline(trace=)`)
from Python, in cases whose answer is known by construction."""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

import stoker


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    """An image folder of 2 classes with 12 small PNGs each."""
    root = tmp_path_factory.mktemp("report")
    rng = np.random.default_rng()
    for name in ("a", "b"):
        (root / name).mkdir()
        for i in range(12):
            img = rng.integers(0, 256, size=(10, 8, 3), dtype=np.uint8)
            Image.fromarray(img).save(root / name / f"{i:03d}.png")
    return root


def test_a_slow_training_step_is_not_input_bound(folder: Path) -> None:
    data = stoker.Dataset.image_folder(str(folder))
    aug = stoker.Augment().resize(8, 8)
    pipe = stoker.Pipeline(data, augment=aug, batch_size=4, backend="cpu", workers=2)
    epoch = pipe.epoch(0)
    for _batch in epoch:
        time.sleep(0.1)  # the training step: 6 of them
    r = epoch.report()
    assert r.input_bound == "no", str(r)
    assert r.bottleneck is None, str(r)
    assert 0.0 <= r.input_wait_fraction < 0.05, str(r)
    assert str(r).startswith("not input-bound"), str(r)
    assert "training step" in r.advice[0]
    stages = {s[0] for s in r.stages}
    assert {"read", "decode", "augment"} <= stages, r.stages
    for _stage, busy, threads, utilisation in r.stages:
        assert busy >= 0 and threads >= 1 and 0 <= utilisation, r.stages


def test_the_trace_has_a_span_per_stage_per_sample(folder: Path, tmp_path: Path) -> None:
    data = stoker.Dataset.image_folder(str(folder))
    path = tmp_path / "trace.json"
    pipe = stoker.Pipeline(
        data, augment=stoker.Augment().resize(8, 8), batch_size=6, backend="cpu", trace=path
    )
    ids = set()
    for batch in pipe.epoch(0):
        ids.update(int(i) for i in batch.ids)
    trace = json.loads(path.read_text())
    spans = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    for stage in ("read", "decode", "augment"):
        seen = sorted(e["args"]["sample"] for e in spans if e["name"] == stage)
        assert seen == sorted(ids), stage
    waits = sorted(e["args"]["batch"] for e in spans if e["name"] == "wait for batch")
    assert waits == [0, 1, 2, 3]
    assert trace["otherData"]["dropped_events"] == 0
