#!/usr/bin/env python3
"""Measure the peers (Pillow, torchvision, TensorFlow) on a folder of JPEGs.

Gives the figures that stoker's own benchmarks are compared with, measured on
the same files on the same machine. Run by hand from the repository root, with
the packages of scripts/requirements-peers.txt:

    .venv-peers/bin/python scripts/bench_peers.py [--images bench-data/imagenet500] [--json out.json]
        [--repeat N] [--min-seconds S] [--quiet-wait S] [--only name,name]

The folder is searched recursively for *.jpg / *.jpeg. Measurements (images/s):

  pillow_decode_1core        Image.open(BytesIO(b)).convert("RGB"), pixels loaded
  torchvision_decode_1core   torchvision.io.decode_jpeg(torch.frombuffer(b, dtype=torch.uint8),
                             mode=RGB), torch.set_num_threads(1)
  tf_decode_1core            tf.io.decode_jpeg(b, channels=3), inter/intra op threads 1
  torchvision_train_1core    decode_jpeg (RGB) then v2.RandomResizedCrop(224, antialias=True),
                             v2.RandomHorizontalFlip(), v2.ToDtype(float32, scale=True),
                             v2.Normalize(ImageNet mean/std): CHW float32, one thread
  dataloader_epoch_2workers  a Dataset that reads each file from disk and applies that
                             transform; DataLoader(batch_size=32, num_workers=2, shuffle=True)
  tf_data_epoch              tf.data: file list (shuffled), read_file, decode_jpeg, random
                             crop (sample_distorted_bounding_box, area 8-100 %, aspect
                             3/4-4/3) + bilinear antialiased resize to 224x224, random
                             flip, normalise, batch 32, num_parallel_calls and prefetch
                             AUTOTUNE
  dali_epoch_2threads        NVIDIA DALI's ResNet-50 training pipeline on the CPU
                             (device_id=None, num_threads=2): readers.file (shuffled),
                             decoders.image_random_crop (area 8-100 %, aspect 3/4-4/3),
                             resize to 224x224 (antialiased), crop_mirror_normalize
                             (random flip, ImageNet mean/std, CHW float32), batch 32

The decode-only and *_train_1core figures work on the files read into memory
first; the two epoch figures read from disk (after one warm-up epoch, so from
the page cache). Every decode asks for 3-channel RGB, so grayscale JPEGs are
expanded as Pillow's convert("RGB") does. Each *_1core measurement is also
pinned to one CPU (sched_setaffinity). Each measurement runs in its own child
process (so thread settings and TensorFlow's once-only configuration do not
leak between them) and repeats whole passes over the images (whole epochs for
the epoch figures) until at least --min-seconds (default 2) have passed. The
TensorFlow figures are skipped when tensorflow does not import. tf_data_epoch
is bimodal on a 2-core machine: tf.data's AUTOTUNE settles, for several epochs
at a time, either on using about 1.2 cores or about 1.7 (seen: ~380 vs ~590
images/s on imagenet500), so compare it over a few runs.

Other work on the machine skews the figures, so for each measurement the
script also reports "other load": the CPU time (in cores) that processes
outside the measurement used while it ran, from /proc/stat. Near 0 is a clean
run. To lessen the effect, each measurement first waits (up to --quiet-wait
seconds) for the machine to be idle, and --repeat N runs it N times and keeps
the fastest run.

Prints a table and, with --json, writes
{"date", "machine", "images", "avg_megapixels", "versions", "results": {name: images/s},
 "other_load": {name: cores}} (plus "skipped": {name: reason} when something was skipped).
"""
import argparse
import csv
import datetime
import importlib.metadata
import io
import json
import os
import platform
import resource
import subprocess
import sys
import time
from pathlib import Path

BENCHMARKS = [
    "pillow_decode_1core",
    "torchvision_decode_1core",
    "tf_decode_1core",
    "torchvision_train_1core",
    "dataloader_epoch_2workers",
    "tf_data_epoch",
    "dali_epoch_2threads",
]
IMAGENET_MEAN = [0.485, 0.456, 0.406]
IMAGENET_STD = [0.229, 0.224, 0.225]
RESULT_TAG = "BENCH_RESULT "  # prefix of the line a child prints its result on


class Skip(Exception):
    """Raised by a measurement that cannot run here (e.g. no tensorflow)."""


# ---------------------------------------------------------------- helpers

def list_jpegs(folder):
    files = sorted(p for p in Path(folder).rglob("*") if p.suffix.lower() in (".jpg", ".jpeg"))
    if not files:
        sys.exit(f"error: no JPEG files under {folder}")
    return files


def read_all(files):
    return [p.read_bytes() for p in files]


def labels_for(files):
    """Class labels from labels.csv next to the images (make_bench_set.py), else 0."""
    labels = {}
    for csv_path in {p.parent / "labels.csv" for p in files}:
        if csv_path.exists():
            with open(csv_path, newline="") as f:
                for row in csv.DictReader(f):
                    labels[str(csv_path.parent / row["file"])] = int(row["label"])
    return [labels.get(str(p), 0) for p in files]


def pin_to_one_cpu():
    cpus = sorted(os.sched_getaffinity(0))
    os.sched_setaffinity(0, {cpus[0]})


def timed(run_pass, min_seconds):
    """Call run_pass() (which returns how many images it processed) until
    min_seconds have passed; return (images, seconds)."""
    n = 0
    t0 = time.perf_counter()
    while True:
        n += run_pass()
        dt = time.perf_counter() - t0
        if dt >= min_seconds:
            return n, dt


def import_tf(threads_1core):
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    try:
        import tensorflow as tf
    except ImportError as e:
        raise Skip(f"tensorflow does not import: {e}") from e
    if threads_1core:
        tf.config.threading.set_inter_op_parallelism_threads(1)
        tf.config.threading.set_intra_op_parallelism_threads(1)
    return tf


def torch_train_transform():
    import torch
    from torchvision.transforms import v2

    return v2.Compose([
        v2.RandomResizedCrop(224, antialias=True),
        v2.RandomHorizontalFlip(),
        v2.ToDtype(torch.float32, scale=True),
        v2.Normalize(mean=IMAGENET_MEAN, std=IMAGENET_STD),
    ])


# ---------------------------------------------------------------- measurements
# Each takes (files, min_seconds) and returns (images, seconds).

def bench_pillow_decode_1core(files, min_seconds):
    from PIL import Image

    pin_to_one_cpu()
    blobs = read_all(files)

    def run(bs):
        for b in bs:
            im = Image.open(io.BytesIO(b)).convert("RGB")  # convert() loads the pixels
            assert im.size[0] > 0
        return len(bs)

    run(blobs[:32])  # warm-up
    return timed(lambda: run(blobs), min_seconds)


def bench_torchvision_decode_1core(files, min_seconds):
    import torch
    from torchvision.io import ImageReadMode, decode_jpeg

    pin_to_one_cpu()
    torch.set_num_threads(1)
    # bytearray: torch.frombuffer wants a writable buffer (no copy is made)
    blobs = [bytearray(b) for b in read_all(files)]

    def run(bs):
        for b in bs:
            img = decode_jpeg(torch.frombuffer(b, dtype=torch.uint8), mode=ImageReadMode.RGB)
            assert img.shape[0] == 3
        return len(bs)

    run(blobs[:32])
    return timed(lambda: run(blobs), min_seconds)


def bench_tf_decode_1core(files, min_seconds):
    tf = import_tf(threads_1core=True)
    pin_to_one_cpu()
    blobs = [tf.constant(b) for b in read_all(files)]

    def run(bs):
        for b in bs:
            img = tf.io.decode_jpeg(b, channels=3)
            assert img.shape[2] == 3
        return len(bs)

    run(blobs[:32])
    return timed(lambda: run(blobs), min_seconds)


def bench_torchvision_train_1core(files, min_seconds):
    import torch
    from torchvision.io import ImageReadMode, decode_jpeg

    pin_to_one_cpu()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    transform = torch_train_transform()
    blobs = [bytearray(b) for b in read_all(files)]

    def run(bs):
        for b in bs:
            img = decode_jpeg(torch.frombuffer(b, dtype=torch.uint8), mode=ImageReadMode.RGB)
            out = transform(img)
            assert out.shape == (3, 224, 224) and out.dtype == torch.float32
        return len(bs)

    run(blobs[:32])
    return timed(lambda: run(blobs), min_seconds)


class JpegFolder:
    """torch Dataset: reads one JPEG from disk, decodes it as RGB and applies
    the training transform; returns (CHW float32 tensor, label)."""

    def __init__(self, files, labels):
        self.files = [str(p) for p in files]
        self.labels = labels
        self.transform = torch_train_transform()

    def __len__(self):
        return len(self.files)

    def __getitem__(self, i):
        from torchvision.io import ImageReadMode, decode_jpeg, read_file

        img = decode_jpeg(read_file(self.files[i]), mode=ImageReadMode.RGB)
        return self.transform(img), self.labels[i]


def bench_dataloader_epoch_2workers(files, min_seconds):
    import torch
    from torch.utils.data import DataLoader

    torch.manual_seed(0)
    loader = DataLoader(JpegFolder(files, labels_for(files)), batch_size=32, num_workers=2,
                        shuffle=True)

    def epoch():
        n = 0
        for x, y in loader:
            assert x.shape[1:] == (3, 224, 224) and x.dtype == torch.float32
            n += x.shape[0]
        return n

    epoch()  # warm-up epoch
    return timed(epoch, min_seconds)


def bench_tf_data_epoch(files, min_seconds):
    tf = import_tf(threads_1core=False)
    tf.random.set_seed(0)
    autotune = tf.data.AUTOTUNE
    mean = tf.constant(IMAGENET_MEAN, dtype=tf.float32)
    std = tf.constant(IMAGENET_STD, dtype=tf.float32)
    paths = [str(p) for p in files]
    labels = labels_for(files)

    def load(path, label):
        img = tf.io.decode_jpeg(tf.io.read_file(path), channels=3)
        # RandomResizedCrop-style box: 8-100 % of the area, aspect ratio 3/4 to 4/3
        begin, size, _ = tf.image.sample_distorted_bounding_box(
            tf.shape(img), bounding_boxes=tf.constant([[[0.0, 0.0, 1.0, 1.0]]]),
            min_object_covered=0.0, aspect_ratio_range=(3 / 4, 4 / 3), area_range=(0.08, 1.0),
            max_attempts=10, use_image_if_no_bounding_boxes=True)
        img = tf.slice(img, begin, size)
        img = tf.image.resize(img, [224, 224], method="bilinear", antialias=True)  # float32
        img = tf.image.random_flip_left_right(img)
        img = (img / 255.0 - mean) / std
        return img, label

    ds = (tf.data.Dataset.from_tensor_slices((paths, labels))
          .shuffle(len(paths), reshuffle_each_iteration=True)
          .map(load, num_parallel_calls=autotune)
          .batch(32)
          .prefetch(autotune))

    def epoch():
        n = 0
        for x, y in ds:
            assert x.shape[1:] == (224, 224, 3) and x.dtype == tf.float32
            n += int(x.shape[0])
        return n

    epoch()  # warm-up epoch (also traces the map function)
    return timed(epoch, min_seconds)


def bench_dali_epoch_2threads(files, min_seconds):
    try:
        import nvidia.dali.fn as fn
        import nvidia.dali.types as types
        from nvidia.dali import pipeline_def
    except ImportError as e:
        raise Skip(f"nvidia.dali does not import: {e}")
    batch = 32
    paths = [str(p) for p in files]
    labels = labels_for(files)

    @pipeline_def(batch_size=batch, num_threads=2, device_id=None, seed=0)
    def rn50_cpu():
        jpegs, label = fn.readers.file(files=paths, labels=labels, random_shuffle=True,
                                       pad_last_batch=True, name="reader")
        images = fn.decoders.image_random_crop(jpegs, device="cpu", output_type=types.RGB,
                                               random_area=[0.08, 1.0],
                                               random_aspect_ratio=[3 / 4, 4 / 3])
        images = fn.resize(images, resize_x=224, resize_y=224, antialias=True)
        images = fn.crop_mirror_normalize(
            images, dtype=types.FLOAT, output_layout="CHW",
            mean=[255 * m for m in IMAGENET_MEAN], std=[255 * s for s in IMAGENET_STD],
            mirror=fn.random.coin_flip(probability=0.5))
        return images, label

    pipe = rn50_cpu()
    pipe.build()
    steps = -(-len(paths) // batch)
    last = len(paths) - (steps - 1) * batch

    def epoch():
        n = 0
        for i in range(steps):
            x, y = pipe.run()
            assert x.as_array().shape[1:] == (3, 224, 224)
            n += batch if i + 1 < steps else last  # the last batch is padded
        return n

    epoch()  # warm-up epoch
    return timed(epoch, min_seconds)


# ---------------------------------------------------------------- driver

def run_child(name, folder, min_seconds):
    """Run one measurement in this process; print its result line."""
    files = list_jpegs(folder)
    try:
        n, dt = globals()[f"bench_{name}"](files, min_seconds)
        result = {"images": n, "seconds": dt, "images_per_s": n / dt}
    except Skip as e:
        result = {"skipped": str(e)}
    print(RESULT_TAG + json.dumps(result), flush=True)


def busy_cpu_seconds():
    """CPU time the whole machine has spent busy (all processes), from /proc/stat."""
    with open("/proc/stat") as f:
        fields = [int(v) for v in f.readline().split()[1:]]
    idle = fields[3] + fields[4]  # idle + iowait
    busy = sum(fields[:8]) - idle  # user nice system idle iowait irq softirq steal
    return busy / os.sysconf("SC_CLK_TCK")


def wait_for_quiet(max_wait, threshold=0.1):
    """Wait (up to max_wait seconds) until the machine spends less than
    `threshold` cores busy over a one-second window."""
    deadline = time.monotonic() + max_wait
    while time.monotonic() < deadline:
        b0, t0 = busy_cpu_seconds(), time.perf_counter()
        time.sleep(1.0)
        if (busy_cpu_seconds() - b0) / (time.perf_counter() - t0) < threshold:
            return


def children_cpu_seconds():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)  # includes reaped grandchildren
    return r.ru_utime + r.ru_stime


def run_in_subprocess(name, folder, min_seconds):
    """Run one measurement in a child process. Besides its result, returns
    "other_load": the CPU (in cores) that processes outside the measurement
    used meanwhile, a sign that the figure was disturbed by other work."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    busy0, own0, t0 = busy_cpu_seconds(), children_cpu_seconds(), time.perf_counter()
    proc = subprocess.run(
        [sys.executable, __file__, "--images", str(folder), "--min-seconds", str(min_seconds),
         "--child", name],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith(RESULT_TAG)]
    if proc.returncode != 0 or not lines:
        # the child's stderr is kept back (TensorFlow logs a lot) except on failure
        sys.stderr.write(proc.stderr[-4000:])
        return {"skipped": f"failed (exit code {proc.returncode})"}
    others = (busy_cpu_seconds() - busy0) - (children_cpu_seconds() - own0)
    result = json.loads(lines[-1][len(RESULT_TAG):])
    result["other_load"] = max(0.0, others / (time.perf_counter() - t0))
    return result


def package_version(*names):
    for n in names:
        try:
            return importlib.metadata.version(n)
        except importlib.metadata.PackageNotFoundError:
            pass
    return None


def machine_info():
    cpu_model = None
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu_model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return {
        "platform": platform.platform(),
        "machine": platform.machine(),
        "processor": cpu_model or platform.processor(),
        "python": platform.python_version(),
        "cpu_count": os.cpu_count(),
        "cpus_usable": len(os.sched_getaffinity(0)),
    }


def avg_megapixels(files):
    from PIL import Image

    total = 0
    for p in files:
        with Image.open(p) as im:  # reads the header only
            total += im.size[0] * im.size[1]
    return total / len(files) / 1e6


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--images", default="bench-data/imagenet500",
                    help="folder searched recursively for JPEGs (default bench-data/imagenet500)")
    ap.add_argument("--json", help="write the results as JSON to this file")
    ap.add_argument("--min-seconds", type=float, default=2.0,
                    help="repeat each measurement until this many seconds have passed (default 2)")
    ap.add_argument("--repeat", type=int, default=1,
                    help="run each measurement this many times and keep the fastest (default 1)")
    ap.add_argument("--quiet-wait", type=float, default=60.0,
                    help="before each measurement, wait up to this many seconds for the machine "
                         "to be idle (default 60; 0 to not wait)")
    ap.add_argument("--only", help="comma-separated subset of: " + ", ".join(BENCHMARKS))
    ap.add_argument("--child", help=argparse.SUPPRESS)  # internal: run one measurement
    a = ap.parse_args()

    if a.child:
        run_child(a.child, a.images, a.min_seconds)
        return

    names = BENCHMARKS
    if a.only:
        names = [n.strip() for n in a.only.split(",")]
        unknown = set(names) - set(BENCHMARKS)
        if unknown:
            ap.error(f"unknown measurement(s): {', '.join(sorted(unknown))}")

    files = list_jpegs(a.images)
    mp = avg_megapixels(files)
    versions = {
        "python": platform.python_version(),
        "Pillow": package_version("pillow"),
        "numpy": package_version("numpy"),
        "torch": package_version("torch"),
        "torchvision": package_version("torchvision"),
        "tensorflow": package_version("tensorflow-cpu", "tensorflow"),
        "nvidia-dali": package_version("nvidia-dali-cuda120", "nvidia-dali-cuda130"),
    }
    print(f"{len(files)} JPEGs under {a.images}, {mp:.3f} Mpx on average; "
          f"{os.cpu_count()} CPUs", flush=True)

    results, skipped, other_load = {}, {}, {}
    print(f"{'measurement':28s} {'images/s':>10s} {'Mpx/s':>8s} {'images':>7s} {'seconds':>8s} "
          f"{'other load':>10s}", flush=True)
    for name in names:
        runs = []
        for _ in range(a.repeat):
            wait_for_quiet(a.quiet_wait)
            runs.append(run_in_subprocess(name, a.images, a.min_seconds))
            if "skipped" in runs[-1]:
                break
        # the fastest run is the one least disturbed by other work
        r = max(runs, key=lambda r: r.get("images_per_s", -1.0))
        if "skipped" in r:
            skipped[name] = r["skipped"]
            print(f"{name:28s} skipped: {r['skipped']}", flush=True)
            continue
        results[name] = round(r["images_per_s"], 1)
        other_load[name] = round(r["other_load"], 2)
        print(f"{name:28s} {r['images_per_s']:10.1f} {r['images_per_s'] * mp:8.1f} "
              f"{r['images']:7d} {r['seconds']:8.2f} {r['other_load']:10.2f}", flush=True)
    if any(v > 0.1 for v in other_load.values()):
        print("warning: other processes used CPU during some measurements (other load, in "
              "cores); those figures are low", flush=True)

    if a.json:
        doc = {
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "machine": machine_info(),
            "images": len(files),
            "avg_megapixels": round(mp, 4),
            "versions": versions,
            "results": results,
            "other_load": other_load,
        }
        if skipped:
            doc["skipped"] = skipped
        Path(a.json).parent.mkdir(parents=True, exist_ok=True)
        Path(a.json).write_text(json.dumps(doc, indent=2) + "\n")
        print(f"wrote {a.json}")


if __name__ == "__main__":
    main()
