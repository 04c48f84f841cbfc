#!/usr/bin/env python3
"""torchvision on the GPU, on the same files as `stoker bench`: the peer figures for
the CUDA backend, measured side by side in one run (scripts/device-check.sh).

    python3 scripts/bench_torchvision_gpu.py IMAGE_DIR [--batch 256] [--seconds 20]

decode: torchvision.io.decode_jpeg(list of encoded tensors, device="cuda") in batches
        (nvJPEG's batched decode), RGB; the clock stops after torch.cuda.synchronize().
train:  that decode, then per image v2.RandomResizedCrop(224, antialias=True) and
        v2.RandomHorizontalFlip() on the GPU, stacked, ToDtype(float16, scale=True) and
        Normalize(ImageNet mean/std): an NCHW f16 batch, as `stoker bench pipeline
        --size 224 --batch 256 --dtype f16` makes.

The files are read into memory first; each figure repeats whole passes for at least
--seconds after one warm-up pass. Prints one JSON object.
"""
import argparse
import json
import os
import time

import torch
import torchvision
from torchvision.io import ImageReadMode, decode_jpeg
from torchvision.transforms import v2


def files(root):
    out = []
    for d, _, names in os.walk(root):
        out += [os.path.join(d, n) for n in names if n.lower().endswith((".jpg", ".jpeg"))]
    return sorted(out)


def timed(passes_fn, n, seconds):
    passes_fn()  # warm-up
    torch.cuda.synchronize()
    t = time.perf_counter()
    done = 0
    while True:
        passes_fn()
        torch.cuda.synchronize()
        done += n
        el = time.perf_counter() - t
        if el >= seconds:
            return done / el, el, done


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("images")
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--seconds", type=float, default=20.0)
    a = ap.parse_args()
    paths = files(a.images)
    data = [torchvision.io.read_file(p) for p in paths]
    batches = [data[i:i + a.batch] for i in range(0, len(data), a.batch)]

    def decode_all():
        for b in batches:
            decode_jpeg(b, mode=ImageReadMode.RGB, device="cuda")

    crop = v2.Compose([v2.RandomResizedCrop(224, antialias=True), v2.RandomHorizontalFlip()])
    norm = v2.Compose([
        v2.ToDtype(torch.float16, scale=True),
        v2.Normalize(mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225]),
    ])

    def train_all():
        for b in batches:
            imgs = decode_jpeg(b, mode=ImageReadMode.RGB, device="cuda")
            norm(torch.stack([crop(x) for x in imgs]))

    out = {
        "torch": torch.__version__,
        "torchvision": torchvision.__version__,
        "device": torch.cuda.get_device_name(0),
        "files": len(paths),
        "batch": a.batch,
    }
    for name, fn in [("decode", decode_all), ("train", train_all)]:
        rate, el, n = timed(fn, len(paths), a.seconds)
        out[name] = {"images_per_s": rate, "seconds": el, "images": n}
    print(json.dumps(out))


if __name__ == "__main__":
    main()
