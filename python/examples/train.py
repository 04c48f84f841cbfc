"""ResNet-18 trained for a few hundred steps on the synthetic shapes set the Rust
examples make, fed once by stoker and once by torch.utils.data.DataLoader with
torchvision transforms, on the same files, the same split and the same model seed.
Prints images/s, the fraction of the run spent waiting for input, and validation
accuracy for both.

    cargo run --release --example synth_shapes -- /tmp/shapes --images 2400 --size 96
    python python/examples/train.py /tmp/shapes [--steps 300] [--batch 32] [--size 64]

Runs on the GPU when torch sees one (stoker then decodes and augments on it: `backend`
"auto"), on the CPU otherwise.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import torch
import torchvision
from torch import nn
from torchvision.transforms import v2

import stoker

MEAN, STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]


def model(classes: int, seed: int) -> nn.Module:
    torch.manual_seed(seed)
    return torchvision.models.resnet18(num_classes=classes)


def train(net, batches, steps, device, lr):
    """Trains `steps` steps on `batches` (an iterator factory yielding (x, y) per epoch)
    and returns (images/s, input-wait fraction)."""
    opt = torch.optim.AdamW(net.parameters(), lr=lr, weight_decay=1e-4)
    loss_fn = nn.CrossEntropyLoss()
    net.train()
    done, images, waited = 0, 0, 0.0
    start = time.perf_counter()
    epoch = 0
    while done < steps:
        it = batches(epoch)
        while done < steps:
            t = time.perf_counter()
            try:
                x, y = next(it)
            except StopIteration:
                break
            x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
            if device.type == "cuda":
                torch.cuda.synchronize()
            waited += time.perf_counter() - t
            opt.zero_grad(set_to_none=True)
            loss = loss_fn(net(x), y)
            loss.backward()
            opt.step()
            images += x.shape[0]
            done += 1
        epoch += 1
    if device.type == "cuda":
        torch.cuda.synchronize()
    wall = time.perf_counter() - start
    return images / wall, waited / wall


@torch.no_grad()
def accuracy(net, batches, device):
    net.eval()
    right = total = 0
    for x, y in batches:
        x, y = x.to(device), y.to(device)
        right += (net(x).argmax(1) == y).sum().item()
        total += y.numel()
    return right / max(total, 1)


class Files(torch.utils.data.Dataset):
    """The same files for the DataLoader: read, decode_jpeg, v2 transforms."""

    def __init__(self, root: Path, paths, labels, transform):
        self.items = [(root / p, l) for p, l in zip(paths, labels)]
        self.transform = transform

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        path, label = self.items[i]
        img = torchvision.io.decode_jpeg(torchvision.io.read_file(str(path)))
        return self.transform(img), label


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("data", type=Path, help="the folder synth_shapes wrote (images/, masks/)")
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--size", type=int, default=64, help="the network's input side")
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--workers", type=int, default=2, help="DataLoader worker processes")
    ap.add_argument("--only", choices=["stoker", "DataLoader"], help="run one of the two")
    args = ap.parse_args()
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    root = args.data / "images"

    data = stoker.Dataset.image_folder(root)
    split = data.split(0.2, seed=args.seed)  # one split, used by both loaders
    classes = len(data.classes)
    label_of = dict(zip(data.paths, data.labels))
    print(f"{len(split.train)} training and {len(split.val)} validation images, {classes} classes, device {device}")

    # stoker: decode, random resized crop, flip, normalise in its own threads (or on the GPU).
    aug = stoker.Augment().random_resized_crop(args.size, scale=(0.6, 1.0)).flip_horizontal(0.5).normalize(MEAN, STD)
    pipe = stoker.Pipeline(split.train, augment=aug, batch_size=args.batch, seed=args.seed, drop_last=True)
    val_pipe = stoker.Pipeline(
        split.val, augment=stoker.Augment().resize(args.size, args.size).normalize(MEAN, STD), batch_size=256
    )

    def stoker_batches(epoch):
        for b in pipe.epoch(epoch):
            yield torch.from_dlpack(b.images), torch.from_dlpack(b.labels)

    def stoker_val():
        for b in val_pipe.epoch(0):
            yield torch.from_dlpack(b.images), torch.from_dlpack(b.labels)

    # The DataLoader: the same files and split, torchvision's transforms, worker processes.
    tf = v2.Compose(
        [
            v2.RandomResizedCrop(args.size, scale=(0.6, 1.0), antialias=True),
            v2.RandomHorizontalFlip(),
            v2.ToDtype(torch.float32, scale=True),
            v2.Normalize(MEAN, STD),
        ]
    )
    val_tf = v2.Compose([v2.Resize((args.size, args.size), antialias=True), v2.ToDtype(torch.float32, scale=True), v2.Normalize(MEAN, STD)])
    train_set = Files(root, split.train.paths, [label_of[p] for p in split.train.paths], tf)
    val_set = Files(root, split.val.paths, [label_of[p] for p in split.val.paths], val_tf)
    g = torch.Generator().manual_seed(args.seed)
    loader = torch.utils.data.DataLoader(
        train_set, batch_size=args.batch, shuffle=True, num_workers=args.workers, drop_last=True,
        generator=g, persistent_workers=args.workers > 0, pin_memory=device.type == "cuda",
    )
    val_loader = torch.utils.data.DataLoader(val_set, batch_size=256, num_workers=args.workers)

    results = {}
    for name, batches, val in (
        ("stoker", stoker_batches, stoker_val),
        ("DataLoader", lambda e: iter(loader), lambda: iter(val_loader)),
    ):
        if args.only and name != args.only:
            continue
        net = model(classes, args.seed).to(device)
        rate, wait = train(net, batches, args.steps, device, args.lr)
        acc = accuracy(net, val(), device)
        results[name] = (rate, wait, acc)
        print(f"{name:>10}: {rate:8.1f} images/s, input wait {wait:6.1%}, validation accuracy {acc:6.1%}")
    if len(results) < 2:
        return
    r = results["stoker"][0] / results["DataLoader"][0]
    print(f"stoker / DataLoader throughput: {r:.2f}x ({args.steps} steps of {args.batch}, backend {pipe.backend})")


if __name__ == "__main__":
    main()
