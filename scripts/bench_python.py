#!/usr/bin/env python3
"""stoker's Python pipeline against torch.utils.data.DataLoader, side by side in one run.

Both feed the same files in batches of the same size, each epoch read from disk (the page
cache after a warm-up) and ending as torch tensors in the loop:

  stoker      stoker.Pipeline(Dataset.flat(dir), RandomResizedCrop 224, flip 0.5,
              normalise, float32 NCHW), backend "cpu" (or --backend), its own threads;
              each batch through torch.from_dlpack (images and labels)
  Loader      stoker.torch.Loader over the same data and augmentation (the same
              pipeline, used as a DataLoader: `for x, y in loader`, an epoch per
              iteration; pin_memory left automatic: off without a GPU)
  DataLoader  a Dataset reading each file, torchvision.io.decode_jpeg (RGB), then
              v2.RandomResizedCrop(224, antialias=True), v2.RandomHorizontalFlip(),
              v2.ToDtype(float32, scale=True), v2.Normalize; DataLoader(batch_size,
              shuffle=True, num_workers=2, persistent_workers=True)

Rounds alternate (stoker, Loader, DataLoader, stoker, ...); each round is one whole epoch
timed from the first `next()` to the last batch. The ratios quoted are of the medians.

It also measures stoker's per-batch Python overhead: with the consumer sleeping between
batches (so each next batch is ready when asked for), the time `next(epoch)` takes plus
`torch.from_dlpack` of the images and the labels: what a training loop pays per batch on
its own thread for using the package, beyond the pipeline's work; and the same for the
Loader's `next()` (which makes both tensors itself).

    .venv-peers/bin/python scripts/bench_python.py [--images bench-data/in500] [--rounds 5]
        [--batch 32] [--backend cpu] [--ready-wait 0.25] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

import torch
import torchvision
from torchvision.transforms import v2

import stoker
from stoker.torch import Loader

MEAN, STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]


class Files(torch.utils.data.Dataset):
    def __init__(self, paths):
        self.paths = paths
        self.tf = v2.Compose(
            [
                v2.RandomResizedCrop(224, antialias=True),
                v2.RandomHorizontalFlip(),
                v2.ToDtype(torch.float32, scale=True),
                v2.Normalize(MEAN, STD),
            ]
        )

    def __len__(self):
        return len(self.paths)

    def __getitem__(self, i):
        data = torchvision.io.read_file(str(self.paths[i]))
        img = torchvision.io.decode_jpeg(data, mode=torchvision.io.ImageReadMode.RGB)
        return self.tf(img), 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--images", type=Path, default=Path("bench-data/in500"))
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--backend", default="cpu")
    ap.add_argument("--workers", type=int, default=2, help="DataLoader worker processes")
    ap.add_argument("--ready-wait", type=float, default=0.25,
                    help="seconds the overhead measurement sleeps before each next(): long enough "
                    "for the next batch to be ready (longer for an unoptimised build)")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()

    data = stoker.Dataset.flat(args.images)
    paths = [args.images / p for p in data.paths]
    n = len(paths)
    aug = stoker.Augment().random_resized_crop(224).flip_horizontal(0.5).normalize(MEAN, STD)
    pipe = stoker.Pipeline(data, augment=aug, batch_size=args.batch, seed=1, backend=args.backend)
    wrapped = Loader(data, batch_size=args.batch, seed=1, augment=aug, backend=args.backend)
    loader = torch.utils.data.DataLoader(
        Files(paths), batch_size=args.batch, shuffle=True, num_workers=args.workers, persistent_workers=True
    )

    def count(pairs):
        """Images in an epoch's (images, labels) pairs, each checked for one label per image."""
        n = 0
        for x, y in pairs:
            assert y.shape[0] == x.shape[0]
            n += x.shape[0]
        return n

    def run_stoker(epoch):
        return count((torch.from_dlpack(b.images), torch.from_dlpack(b.labels)) for b in pipe.epoch(epoch))

    def run_wrapped(_epoch):
        return count(wrapped)

    def run_loader(_epoch):
        return count(loader)

    # Warm-up: the page cache, the workers' start, the pipeline's threads.
    assert run_stoker(0) == n and run_wrapped(0) == n and run_loader(0) == n
    times = {"stoker": [], "Loader": [], "DataLoader": []}
    for r in range(args.rounds):
        for name, fn in (("stoker", run_stoker), ("Loader", run_wrapped), ("DataLoader", run_loader)):
            t = time.perf_counter()
            got = fn(r + 1)
            times[name].append(time.perf_counter() - t)
            assert got == n, (name, got)
    rate = {k: n / statistics.median(v) for k, v in times.items()}

    # Per-batch Python overhead: next() with the batch ready, plus the two hand-offs.
    overhead = []
    handoff = []
    ep = pipe.epoch(99)
    it = iter(ep)
    while True:
        time.sleep(args.ready_wait)  # the pipeline readies the next batch meanwhile
        t = time.perf_counter()
        try:
            b = next(it)
        except StopIteration:
            break
        t1 = time.perf_counter()
        x = torch.from_dlpack(b.images)
        y = torch.from_dlpack(b.labels)
        t2 = time.perf_counter()
        overhead.append(t2 - t)
        handoff.append(t2 - t1)
        del x, y, b
    over_us = statistics.median(overhead) * 1e6
    hand_us = statistics.median(handoff) * 1e6
    # The same for the Loader: next() with the batch ready, both tensors made inside.
    wrapped_overhead = []
    it = iter(wrapped)
    while True:
        time.sleep(args.ready_wait)
        t = time.perf_counter()
        try:
            xy = next(it)
        except StopIteration:
            break
        wrapped_overhead.append(time.perf_counter() - t)
        del xy
    loader_us = statistics.median(wrapped_overhead) * 1e6

    out = {
        "images": n,
        "batch": args.batch,
        "rounds": args.rounds,
        "backend": pipe.backend,
        "cpus": os.cpu_count(),
        "stoker_images_per_s": rate["stoker"],
        "dataloader_images_per_s": rate["DataLoader"],
        "loader_images_per_s": rate["Loader"],
        "ratio": rate["stoker"] / rate["DataLoader"],
        "loader_ratio": rate["Loader"] / rate["DataLoader"],
        "loader_epoch_seconds": times["Loader"],
        "loader_per_batch_overhead_us": loader_us,
        "loader_pin_memory": wrapped.pin_memory,
        "stoker_epoch_seconds": times["stoker"],
        "dataloader_epoch_seconds": times["DataLoader"],
        "per_batch_overhead_us": over_us,
        "per_batch_dlpack_us": hand_us,
        "torch": torch.__version__,
        "torchvision": torchvision.__version__,
    }
    print(
        f"{n} images, batch {args.batch}, {args.rounds} alternating rounds, median epoch:\n"
        f"  stoker ({pipe.backend}):        {rate['stoker']:8.1f} images/s\n"
        f"  stoker.torch.Loader:         {rate['Loader']:8.1f} images/s\n"
        f"  DataLoader ({args.workers} workers):  {rate['DataLoader']:8.1f} images/s\n"
        f"  ratio: {out['ratio']:.2f}x (Loader: {out['loader_ratio']:.2f}x)\n"
        f"  stoker per-batch Python overhead (next() with the batch ready, and two "
        f"torch.from_dlpack): {over_us:.0f} us median, of which from_dlpack {hand_us:.0f} us\n"
        f"  Loader per-batch overhead (next() with the batch ready, tensors included): "
        f"{loader_us:.0f} us median (pin_memory={wrapped.pin_memory})"
    )
    if args.json:
        args.json.write_text(json.dumps(out, indent=2))


if __name__ == "__main__":
    sys.exit(main())
