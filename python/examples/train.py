"""Steps to a target training loss with stoker's `stoker.torch.Loader` and with
torchvision's `ImageFolder` + `torch.utils.data.DataLoader`, over several loader seeds.

One model seed gives every run the same initial weights; each loader seed gives a run its
own order, crops and flips. The same class folder, transform (RandomResizedCrop, a
horizontal flip of probability 0.5, ImageNet normalisation), batch size and optimiser
feed both loaders. Each run trains until the training loss, averaged over the last
`--window` steps, first reaches `--target` (or `--max-steps`), and reports that step.
The script prints the steps per seed, their median, range and interquartile range per
loader, and two exact tests of "the loader makes no difference to the steps": the
Wilcoxon signed-rank test over the seeds (the runs paired by seed number, which share the
model initialisation) and the Mann-Whitney rank-sum test (the runs as two independent
groups, since a seed number keys different orders in the two loaders).

A class folder (`root/<class>/<image>`) is the input; `--classes-from DIR` lays one out
first (symlinks) from the labels.csv of the corpus' make_bench_set.py, whose label is
the photo an image was cut from:

    python make_bench_set.py photos bench-data/imagenet500 -n 500
    python python/examples/train.py bench-data/photo-classes \\
        --classes-from bench-data/imagenet500 [--seeds 10] [--target 0.5] [--backend cpu] [--json out.json]

`--quick` is a smoke run (2 seeds, a few steps). torch uses one thread (`--threads`).
Runs on the GPU when torch sees one, on the CPU otherwise.
"""

from __future__ import annotations

import argparse
import csv
import itertools
import json
import time
from pathlib import Path

import numpy as np
import torch
import torchvision
from torch import nn
from torchvision.transforms import v2

import stoker
from stoker.torch import Loader

MEAN, STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]


def small_cnn(classes: int, width: int, seed: int) -> nn.Module:
    """Four 3x3 convolutions with batch norm, pooled, then a linear layer; its weights
    drawn from `seed`."""
    torch.manual_seed(seed)

    def block(i, o):
        return [nn.Conv2d(i, o, 3, padding=1, bias=False), nn.BatchNorm2d(o), nn.ReLU(inplace=True)]

    w = width
    return nn.Sequential(
        *block(3, w), nn.MaxPool2d(2),
        *block(w, 2 * w), nn.MaxPool2d(2),
        *block(2 * w, 4 * w), nn.MaxPool2d(2),
        *block(4 * w, 8 * w),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8 * w, classes),
    )


def steps_to_target(net, loader, device, args):
    """Trains on `loader` (an epoch per iteration) until the mean loss of the last
    `args.window` steps is at most `args.target`; returns (that step or None, losses)."""
    opt = torch.optim.AdamW(net.parameters(), lr=args.lr, weight_decay=1e-4)
    loss_fn = nn.CrossEntropyLoss()
    net.train()
    losses: list[float] = []
    while len(losses) < args.max_steps:
        if len(loader) == 0:
            raise SystemExit(f"no full batch of {args.batch} in an epoch: a smaller --batch")
        for x, y in loader:
            x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
            opt.zero_grad(set_to_none=True)
            loss = loss_fn(net(x), y)
            loss.backward()
            opt.step()
            losses.append(loss.item())
            if len(losses) >= args.window and np.mean(losses[-args.window:]) <= args.target:
                return len(losses), losses
            if len(losses) >= args.max_steps:
                break
    return None, losses


def read_jpeg(path: str) -> torch.Tensor:
    """ImageFolder's loader for the DataLoader: torchvision's JPEG decoder, RGB."""
    return torchvision.io.decode_jpeg(torchvision.io.read_file(path), mode=torchvision.io.ImageReadMode.RGB)


def class_folder(root: Path, source: Path) -> None:
    """Lays out `root/<label>/<file>` as symlinks to the files of `source/labels.csv`."""
    with open(source / "labels.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    width = len(str(max(int(r["label"]) for r in rows)))
    for r in rows:
        d = root / f"{int(r['label']):0{width}d}"
        d.mkdir(parents=True, exist_ok=True)
        (d / r["file"]).symlink_to((source / r["file"]).resolve())


def ranks(x) -> np.ndarray:
    """1-based ranks, ties given their mean rank."""
    x = np.asarray(x, dtype=float)
    order = np.argsort(x, kind="mergesort")
    r = np.empty(len(x))
    i = 0
    while i < len(x):
        j = i
        while j + 1 < len(x) and x[order[j + 1]] == x[order[i]]:
            j += 1
        r[order[i : j + 1]] = (i + j) / 2 + 1
        i = j + 1
    return r


def wilcoxon_p(a, b) -> float:
    """Exact two-sided p of the Wilcoxon signed-rank statistic of a - b (zero differences
    dropped) over all 2^n sign assignments."""
    d = np.asarray(a, dtype=float) - np.asarray(b, dtype=float)
    d = d[d != 0]
    if len(d) == 0:
        return 1.0
    r = ranks(np.abs(d))
    signs = (np.arange(2 ** len(d))[:, None] >> np.arange(len(d))) & 1
    null = signs @ r
    centre = r.sum() / 2
    return float(np.mean(np.abs(null - centre) >= abs(r[d > 0].sum() - centre) - 1e-9))


def mann_whitney_p(a, b) -> float:
    """Exact two-sided p of the rank sum of `a` among a and b over all ways to split the
    runs into groups of their sizes."""
    r = ranks(np.concatenate([a, b]))
    n, k = len(r), len(a)
    centre = k * (n + 1) / 2
    seen = abs(r[:k].sum() - centre)
    null = np.array([r[list(c)].sum() for c in itertools.combinations(range(n), k)])
    return float(np.mean(np.abs(null - centre) >= seen - 1e-9))


def spread(steps, cap: int) -> tuple[str, str, str]:
    """The median, range and interquartile range of `steps`; a run past `cap` shows as
    ">cap"."""

    def shown(v):
        return f">{cap}" if v > cap else f"{v:g}"

    q1, med, q3 = np.percentile(steps, [25, 50, 75])
    return shown(med), f"{shown(min(steps))}-{shown(max(steps))}", f"{shown(q1)}-{shown(q3)}"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("data", type=Path, help="a class folder, root/<class>/<image>")
    ap.add_argument("--classes-from", type=Path, help="make `data` first from this make_bench_set.py output")
    ap.add_argument("--seeds", type=int, default=10, help="loader seeds 0..N-1")
    ap.add_argument("--model-seed", type=int, default=7)
    ap.add_argument("--target", type=float, default=0.5, help="training loss to reach")
    ap.add_argument("--window", type=int, default=20, help="steps the loss is averaged over")
    ap.add_argument("--max-steps", type=int, default=600)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--size", type=int, default=64, help="the network's input side")
    ap.add_argument("--scale", type=float, nargs=2, default=(0.25, 1.0), help="RandomResizedCrop's area range")
    ap.add_argument("--width", type=int, default=12, help="the first convolution's channels")
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--workers", type=int, default=2, help="DataLoader worker processes and stoker decode threads")
    ap.add_argument("--threads", type=int, default=1, help="torch's threads")
    ap.add_argument("--backend", default="auto", help="stoker's backend")
    ap.add_argument("--quick", action="store_true", help="a smoke run: 2 seeds, at most 5 steps")
    ap.add_argument("--json", type=Path, help="write every run's steps and losses here")
    args = ap.parse_args()
    if args.quick:
        args.seeds, args.max_steps, args.window = 2, 5, 2
    torch.set_num_threads(args.threads)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if args.classes_from is not None and not args.data.exists():
        class_folder(args.data, args.classes_from)

    aug = (
        stoker.Augment()
        .random_resized_crop(args.size, scale=tuple(args.scale))
        .flip_horizontal(0.5)
        .normalize(MEAN, STD)
    )
    tf = v2.Compose(
        [
            v2.RandomResizedCrop(args.size, scale=tuple(args.scale), antialias=True),
            v2.RandomHorizontalFlip(0.5),
            v2.ToDtype(torch.float32, scale=True),
            v2.Normalize(MEAN, STD),
        ]
    )
    folder = torchvision.datasets.ImageFolder(str(args.data), transform=tf, loader=read_jpeg)
    classes = len(folder.classes)

    def stoker_loader(seed):
        return Loader(
            args.data, batch_size=args.batch, shuffle=True, drop_last=True, seed=seed, augment=aug,
            num_workers=args.workers, backend=args.backend,
        )

    def torch_loader(seed):
        torch.manual_seed(seed)  # the transforms' draws when there are no workers
        return torch.utils.data.DataLoader(
            folder, batch_size=args.batch, shuffle=True, drop_last=True, num_workers=args.workers,
            generator=torch.Generator().manual_seed(seed), persistent_workers=args.workers > 0,
            pin_memory=device.type == "cuda",
        )

    print(
        f"{len(folder)} images, {classes} classes, batch {args.batch}, {args.size} px, device {device}; "
        f"target: mean loss of {args.window} steps <= {args.target} (cap {args.max_steps} steps)"
    )
    steps = {"stoker": [], "torchvision": []}
    runs = []
    for seed in range(args.seeds):
        # Alternate which loader goes first, so that neither always runs on a warmer cache.
        order = [("stoker", stoker_loader), ("torchvision", torch_loader)]
        for name, make in order if seed % 2 == 0 else order[::-1]:
            loader = make(seed)
            net = small_cnn(classes, args.width, args.model_seed).to(device)
            t = time.perf_counter()
            reached, losses = steps_to_target(net, loader, device, args)
            wall = time.perf_counter() - t
            del loader
            # A run that never reached the target ranks after every run that did.
            steps[name].append(reached if reached is not None else args.max_steps + 1)
            runs.append({"loader": name, "seed": seed, "steps": reached, "seconds": wall, "losses": losses})
            shown = reached if reached is not None else f">{args.max_steps}"
            print(f"  seed {seed:2d} {name:>11}: {shown} steps ({wall:.0f} s, last loss {losses[-1]:.3f})", flush=True)

    print(f"\n| loader seed | {' | '.join(str(s) for s in range(args.seeds))} | median | range | IQR |")
    print(f"| --- |{' --- |' * (args.seeds + 3)}")
    for name, got in steps.items():
        cells = " | ".join(str(s) if s <= args.max_steps else f">{args.max_steps}" for s in got)
        print(f"| {name} | {cells} | {' | '.join(spread(got, args.max_steps))} |")
    a, b = np.array(steps["stoker"]), np.array(steps["torchvision"])
    ratio = np.median(a) / np.median(b)
    pw, pm = wilcoxon_p(a, b), mann_whitney_p(a, b)
    print(
        f"\nratio of the medians (stoker / torchvision) {ratio:.2f}\n"
        f"Wilcoxon signed-rank (paired by seed): p = {pw:.3f}; Mann-Whitney (unpaired): p = {pm:.3f}"
    )
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "args": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
                    "stoker_backend": stoker_loader(0).pipeline.backend,
                    "torch": torch.__version__,
                    "runs": runs,
                    "wilcoxon_p": pw,
                    "mann_whitney_p": pm,
                },
                indent=1,
            )
        )


if __name__ == "__main__":
    main()
