"""`python/examples/train.py --quick` runs both loaders over the seeds and writes what it
measured. Skipped (and said so) where torch is not installed."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch", reason="torch is not installed: the training example did not run")
pytest.importorskip("torchvision", reason="torchvision is not installed: the training example did not run")

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "train.py"


def test_quick_run_trains_both_loaders_on_every_seed(photos, tmp_path):
    out = tmp_path / "runs.json"
    cmd = [sys.executable, str(EXAMPLE), str(photos), "--quick", "--batch", "8", "--size", "32",
           "--backend", "cpu", "--json", str(out)]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    got = json.loads(out.read_text())
    runs = {(run["loader"], run["seed"]): run for run in got["runs"]}
    assert set(runs) == {(name, seed) for name in ("stoker", "torchvision") for seed in (0, 1)}
    for run in runs.values():
        # A run stops at the target or at the cap, and every step's loss is a number.
        assert 1 <= len(run["losses"]) <= got["args"]["max_steps"]
        assert all(math.isfinite(x) and x > 0 for x in run["losses"])
        if run["steps"] is not None:
            assert run["steps"] == len(run["losses"])
    # The same initial weights and the same first batch size: the first losses are of the
    # same model on 8 images of 3 classes, near ln 3 for both loaders.
    for run in runs.values():
        assert abs(run["losses"][0] - math.log(3)) < 1.5
    assert 0 <= got["wilcoxon_p"] <= 1 and 0 <= got["mann_whitney_p"] <= 1
