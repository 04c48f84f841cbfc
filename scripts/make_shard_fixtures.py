#!/usr/bin/env python3
"""Write (or check) TFRecord and WebDataset-tar test shards with the real tools.

stoker's shard readers (src/source/shards/) are tested on files written by
TensorFlow and by webdataset themselves, not by stoker. This script writes
those files once, by hand; the result is committed under tests/data/shards/
and read by the Rust tests, which never run Python. It is never run by CI.

Setup (Python 3.11, Linux x86_64; see scripts/requirements-shards.txt):

    python3.11 -m venv .venv-shards
    .venv-shards/bin/pip install -r scripts/requirements-shards.txt

Write the fixtures (run from the repository root; wipes and rewrites
tests/data/shards/tfrecord/, tests/data/shards/tar/ and
tests/data/shards/expected.json; README.md is left alone):

    .venv-shards/bin/python scripts/make_shard_fixtures.py [--out tests/data/shards]

Read shards written by someone else (for example `stoker convert` output) back
with TensorFlow and webdataset, and exit non-zero if anything fails:

    .venv-shards/bin/python scripts/make_shard_fixtures.py --check DIR [--expected FILE]

--check finds every ``*.tfrecord`` and ``*.tar`` under DIR (recursively),
parses each TFRecord with ``tf.data.TFRecordDataset`` +
``tf.io.parse_single_example`` and each tar with ``webdataset.WebDataset``,
decodes every image (and mask, where there is one), and prints per shard the
number of samples and their labels. With --expected (an expected.json as this
script writes it) it also compares every shard listed there sample by sample.

What is written (paths relative to --out):

* ``tfrecord/train-0000{0,1}-of-00002.tfrecord``: plain (uncompressed)
  TFRecord files written by ``tf.io.TFRecordWriter``; one ``tf.train.Example``
  per record with the features

  - ``image/encoded``   bytes: the source JPEG file, byte for byte
  - ``image/class/label`` int64
  - ``image/format``    bytes: b"jpeg"
  - ``image/filename``  bytes: the source file's base name
  - ``image/height``, ``image/width`` int64 (extra features a reader must
    ignore or may use)
  - ``image/segmentation/class/encoded`` bytes, only for some records: an
    8-bit gray PNG label mask (class ids 0..4) of the JPEG's width x height.

* ``tar/train-00000{0,1}.tar``: written by ``webdataset.ShardWriter`` (which
  writes through ``webdataset.TarWriter``) from samples
  ``{"__key__": key, "jpg": jpeg bytes, "cls": label (int), "png": mask bytes}``
  (``png`` only where the TFRecord has a mask): the same images, labels, masks
  and split as the TFRecords. The tar members are ``KEY.cls`` (the label as
  ASCII decimal), ``KEY.jpg`` and ``KEY.png``, in that order. The mtime is
  fixed to a non-integer value so that the files are reproducible and still,
  like every shard webdataset writes with its default mtime=time.time(), carry a
  PAX extended header ('x' member) before every member.

* ``expected.json``: what the Rust tests assert; see ``write_fixtures`` and
  tests/data/shards/README.md for its schema.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import os
import platform
import shutil
import sys
import tarfile
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402  (installed with tensorflow)
from PIL import Image  # noqa: E402

REPO = Path(__file__).resolve().parent.parent

# (source file relative to the repo root, label, has mask). Small, valid
# baseline/progressive JPEGs without EXIF orientation; licences are in
# tests/data/LICENSES under the same paths. Records 0..4 go to shard 0 and
# 5..8 to shard 1, in this order.
SOURCES = [
    ("tests/data/jpeg/go_video-001_q50_411.jpg", 0, True),  # 150x103 4:1:1
    ("tests/data/jpeg/go_video-001_q50_444.jpg", 1, False),  # 150x103 4:4:4
    ("tests/data/jpeg/ljt_testorig.jpg", 2, True),  # 227x149 4:2:0
    ("tests/data/jpeg/jd_moz_jpg-gray.jpg", 0, True),  # 32x32 grayscale
    ("tests/data/jpeg/jd_moz_jpg-progressive.jpg", 1, False),  # 32x32 progressive
    ("tests/data/jpeg/jd_moz_jpg-size-33x33.jpg", 2, False),  # 33x33
    ("tests/data/jpeg/jd_moz_jpg-size-1x1.jpg", 0, True),  # 1x1
    ("tests/data/jpeg/go_video-001_221212.jpg", 1, False),  # 150x103 odd sampling
    ("tests/data/samples/science/skimage_camera.jpg", 2, True),  # 512x512 gray
]
PER_SHARD = 5  # records per shard: 5 + 4
NUM_SHARDS = 2
MASK_KEY = "image/segmentation/class/encoded"
# Fixed, non-integer tar mtime: reproducible bytes, and tarfile writes it as a
# PAX header exactly as it does for webdataset's default time.time().
TAR_MTIME = 1700000000.5


def sha256(b: bytes | None) -> str | None:
    return None if b is None else hashlib.sha256(b).hexdigest()


def versions() -> dict:
    import google.protobuf
    import PIL
    import pyarrow
    import tensorflow as tf
    import webdataset

    return {
        "pyarrow": pyarrow.__version__,
        "python": platform.python_version(),
        "tensorflow": tf.__version__,
        "webdataset": webdataset.__version__,
        "protobuf": google.protobuf.__version__,
        "pillow": PIL.__version__,
        "numpy": np.__version__,
    }


def make_mask(width: int, height: int, label: int) -> bytes:
    """An 8-bit gray PNG label mask: 0 background, an ellipse of class
    label+1 (1..3) in the middle, and a class-4 box over the top-left
    quarter (drawn over the ellipse; empty below 4 pixels). Deterministic."""
    y, x = np.mgrid[0:height, 0:width]
    cx, cy = (width - 1) / 2.0, (height - 1) / 2.0
    rx, ry = max(width / 3.0, 0.5), max(height / 3.0, 0.5)
    m = np.zeros((height, width), dtype=np.uint8)
    m[((x - cx) / rx) ** 2 + ((y - cy) / ry) ** 2 <= 1.0] = label + 1
    m[: height // 4, : width // 4] = 4
    buf = io.BytesIO()
    Image.fromarray(m, mode="L").save(buf, format="PNG")
    return buf.getvalue()


def load_samples() -> list[dict]:
    samples = []
    for i, (rel, label, has_mask) in enumerate(SOURCES):
        path = REPO / rel
        jpeg = path.read_bytes()
        with Image.open(io.BytesIO(jpeg)) as im:
            width, height = im.size
            if im.getexif().get(0x0112, 1) != 1:
                raise SystemExit(f"{rel}: has EXIF rotation; pick another file")
        mask = make_mask(width, height, label) if has_mask else None
        stem = path.stem  # no dots: webdataset keys end at the first dot
        assert "." not in stem
        samples.append(
            {
                "index": i,
                "source": rel,
                "filename": path.name,
                "key": f"{i:06d}_{stem}",
                "label": label,
                "width": width,
                "height": height,
                "jpeg": jpeg,
                "mask": mask,
            }
        )
    return samples


def write_tfrecords(out: Path, samples: list[dict]) -> list[str]:
    import tensorflow as tf

    def b(v):
        return tf.train.Feature(bytes_list=tf.train.BytesList(value=[v]))

    def i64(v):
        return tf.train.Feature(int64_list=tf.train.Int64List(value=[v]))

    d = out / "tfrecord"
    d.mkdir(parents=True)
    paths = []
    for shard in range(NUM_SHARDS):
        rel = f"tfrecord/train-{shard:05d}-of-{NUM_SHARDS:05d}.tfrecord"
        # No options: plain, uncompressed TFRecord.
        with tf.io.TFRecordWriter(str(out / rel)) as w:
            for s in samples[shard * PER_SHARD : (shard + 1) * PER_SHARD]:
                feats = {
                    "image/encoded": b(s["jpeg"]),
                    "image/class/label": i64(s["label"]),
                    "image/format": b(b"jpeg"),
                    "image/filename": b(s["filename"].encode()),
                    "image/height": i64(s["height"]),
                    "image/width": i64(s["width"]),
                }
                if s["mask"] is not None:
                    feats[MASK_KEY] = b(s["mask"])
                ex = tf.train.Example(features=tf.train.Features(feature=feats))
                # deterministic=True: map entries in key order, so reruns
                # write the same bytes.
                w.write(ex.SerializeToString(deterministic=True))
        paths.append(rel)
    return paths


def write_tars(out: Path, samples: list[dict]) -> list[str]:
    import webdataset as wds

    d = out / "tar"
    d.mkdir(parents=True)
    with wds.ShardWriter(
        str(d / "train-%06d.tar"), maxcount=PER_SHARD, verbose=0, mtime=TAR_MTIME
    ) as sink:
        for s in samples:
            obj = {"__key__": s["key"], "jpg": s["jpeg"], "cls": s["label"]}
            if s["mask"] is not None:
                obj["png"] = s["mask"]
            sink.write(obj)
    return [f"tar/train-{i:06d}.tar" for i in range(NUM_SHARDS)]


def write_parquets(out: Path, samples: list[dict]) -> list[tuple[str, list[dict]]]:
    """Two Parquet files with pyarrow: `train.parquet` (columns image: binary, label:
    int64, mask: binary with nulls; row groups of 4 rows, small data pages, snappy, a
    page index) and `hf.parquet` in the Hugging Face `Image` layout (image: struct{bytes,
    path}, label: int32; one row group, zstd, no page index)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    d = out / "parquet"
    d.mkdir(parents=True)
    plain = pa.table(
        {
            "image": pa.array([s["jpeg"] for s in samples], pa.binary()),
            "label": pa.array([s["label"] for s in samples], pa.int64()),
            "mask": pa.array([s["mask"] for s in samples], pa.binary()),
            "filename": pa.array([s["filename"] for s in samples], pa.string()),
        }
    )
    pq.write_table(
        plain,
        d / "train.parquet",
        row_group_size=4,
        data_page_size=8192,
        compression="snappy",
        write_page_index=True,
        use_dictionary=False,
    )
    image_type = pa.struct([("bytes", pa.binary()), ("path", pa.string())])
    hf = pa.table(
        {
            "image": pa.array(
                [{"bytes": s["jpeg"], "path": s["filename"]} for s in samples], image_type
            ),
            "label": pa.array([s["label"] for s in samples], pa.int32()),
        }
    )
    pq.write_table(hf, d / "hf.parquet", compression="zstd")
    return [("parquet/train.parquet", samples), ("parquet/hf.parquet", [dict(s, mask=None) for s in samples])]


def tar_members(path: Path) -> list[dict]:
    """Regular-file members in archive order (PAX headers are consumed by
    tarfile and not listed)."""
    with tarfile.open(path, "r:") as tf_:
        return [
            {"name": m.name, "size": m.size}
            for m in tf_.getmembers()
            if m.isfile()
        ]


def sample_entry(j: int, s: dict, key: str, **extra) -> dict:
    """One sample of a shard in expected.json."""
    return {
        "record": j,
        "key": key,
        "label": s["label"],
        "filename": s["filename"],
        "width": s["width"],
        "height": s["height"],
        "image_len": len(s["jpeg"]),
        "image_sha256": sha256(s["jpeg"]),
        "mask_len": None if s["mask"] is None else len(s["mask"]),
        "mask_sha256": sha256(s["mask"]),
        **extra,
    }


def write_fixtures(out: Path) -> None:
    samples = load_samples()
    for sub in ("tfrecord", "tar", "parquet"):
        shutil.rmtree(out / sub, ignore_errors=True)
    out.mkdir(parents=True, exist_ok=True)
    tfr = write_tfrecords(out, samples)
    tars = write_tars(out, samples)
    parquets = write_parquets(out, samples)

    shards = []
    for shard, rel in enumerate(tfr):
        part = samples[shard * PER_SHARD : (shard + 1) * PER_SHARD]
        data = (out / rel).read_bytes()
        shards.append(
            {
                "path": rel,
                "format": "tfrecord",
                "compression": None,
                "size": len(data),
                "sha256": sha256(data),
                "samples": [
                    sample_entry(j, s, key=s["filename"]) for j, s in enumerate(part)
                ],
            }
        )
    for shard, rel in enumerate(tars):
        part = samples[shard * PER_SHARD : (shard + 1) * PER_SHARD]
        data = (out / rel).read_bytes()
        members = tar_members(out / rel)
        names = [m["name"] for m in members]
        entries = []
        for j, s in enumerate(part):
            mine = [n for n in names if n.split(".", 1)[0] == s["key"]]
            entries.append(sample_entry(j, s, key=s["key"], members=mine))
        shards.append(
            {
                "path": rel,
                "format": "webdataset-tar",
                "compression": None,
                "size": len(data),
                "sha256": sha256(data),
                "members": members,
                "samples": entries,
            }
        )

    for rel, part in parquets:
        data = (out / rel).read_bytes()
        shards.append(
            {
                "path": rel,
                "format": "parquet",
                "compression": "snappy" if rel.endswith("train.parquet") else "zstd",
                "size": len(data),
                "sha256": sha256(data),
                "samples": [
                    sample_entry(j, s, key=s["filename"]) for j, s in enumerate(part)
                ],
            }
        )

    expected = {
        "generator": "scripts/make_shard_fixtures.py",
        "versions": versions(),
        "features": {
            "image": "image/encoded",
            "label": "image/class/label",
            "format": "image/format",
            "filename": "image/filename",
            "height": "image/height",
            "width": "image/width",
            "mask": MASK_KEY,
        },
        "tar_extensions": {"image": "jpg", "label": "cls", "mask": "png"},
        "shards": shards,
    }
    (out / "expected.json").write_text(json.dumps(expected, indent=2) + "\n")
    print(f"wrote {len(shards)} shards and expected.json under {out}")


# ---------------------------------------------------------------- --targets

# Targets beyond one class id, per sample of the first seven SOURCES, in pixels
# (multiples of 1/4: exact in float32). None: no targets. "bad": a box with
# x1 < x0, which every format must report. Boxes are [x0, y0, x1, y1, class];
# keypoints [x, y, visibility], each box's keypoints in turn (the same number
# per box, as the TensorFlow Object Detection API lays them out).
TARGETS = [
    {"labels": [1, 4], "values": [0.5, -2.25],
     "boxes": [[10, 5.5, 60, 40, 3], [0, 0, 150, 103, 1]],
     "keypoints": [[12, 7, 2], [50.25, 30, 1], [3, 4, 2], [149.75, 102, 0]]},
    {"labels": [0]},
    {"values": [7.75, 0, 1e-3],
     "boxes": [[100.5, 20, 226, 148.25, 2]],
     "keypoints": [[101, 21, 2], [150, 80.5, 2], [225, 147, 1]]},
    None,
    "bad",
    {"keypoints": [[1, 2, 2], [31.5, 30, 0], [16, 16, 1]]},
    {"multi": [0, 2]},  # TFRecord: several ids in image/class/label
]


def targets_samples() -> list[dict]:
    samples = load_samples()[: len(TARGETS)]
    for s, t in zip(samples, TARGETS):
        s["targets"] = t
    return samples


def f32(x: float) -> float:
    return float(np.float32(x))


def write_targets_tfrecord(path: Path, samples: list[dict]) -> list[dict]:
    """The Object Detection API's features (normalised boxes and keypoints), and
    stoker/labels, stoker/values. Returns what each record must give, in pixels:
    the fractions as float32, times the size as float32."""
    import tensorflow as tf

    def b(v):
        return tf.train.Feature(bytes_list=tf.train.BytesList(value=[v]))

    def ints(v):
        return tf.train.Feature(int64_list=tf.train.Int64List(value=list(v)))

    def floats(v):
        return tf.train.Feature(float_list=tf.train.FloatList(value=list(v)))

    expected = []
    with tf.io.TFRecordWriter(str(path)) as w:
        for s in samples:
            t = s["targets"]
            wd, ht = np.float32(s["width"]), np.float32(s["height"])
            feats = {
                "image/encoded": b(s["jpeg"]),
                "image/class/label": ints([s["label"]]),
                "image/filename": b(s["filename"].encode()),
                "image/height": ints([s["height"]]),
                "image/width": ints([s["width"]]),
            }
            want = {"key": s["filename"], "label": s["label"], "targets": None, "refused": None}
            if t == "bad":
                feats["image/object/bbox/xmin"] = floats([30 / s["width"]])
                feats["image/object/bbox/xmax"] = floats([10 / s["width"]])
                feats["image/object/bbox/ymin"] = floats([0.0])
                feats["image/object/bbox/ymax"] = floats([0.5])
                want["refused"] = "xmax < xmin"
                want["label"] = None
            elif t is not None and "multi" in t:
                feats["image/class/label"] = ints(t["multi"])
                want["refused"] = "holds 2 class ids"
                want["label"] = None
            elif t is not None:
                got = {"classes": t.get("labels", []), "values": [f32(v) for v in t.get("values", [])],
                       "boxes": [], "keypoints": []}
                if "labels" in t:
                    feats["stoker/labels"] = ints(t["labels"])
                if "values" in t:
                    feats["stoker/values"] = floats(t["values"])
                boxes = t.get("boxes", [])
                if boxes:
                    fr = {k: [] for k in ("xmin", "ymin", "xmax", "ymax")}
                    for x0, y0, x1, y1, c in boxes:
                        for k, v, size in (("xmin", x0, wd), ("ymin", y0, ht), ("xmax", x1, wd), ("ymax", y1, ht)):
                            fr[k].append(np.float32(v / float(size)))
                    for k, v in fr.items():
                        feats[f"image/object/bbox/{k}"] = floats(v)
                    feats["image/object/class/label"] = ints([bx[4] for bx in boxes])
                    for i, bx in enumerate(boxes):
                        got["boxes"].append([float(np.float32(fr["xmin"][i] * wd)), float(np.float32(fr["ymin"][i] * ht)),
                                             float(np.float32(fr["xmax"][i] * wd)), float(np.float32(fr["ymax"][i] * ht)), bx[4]])
                kps = t.get("keypoints", [])
                if kps:
                    kx = [np.float32(k[0] / float(wd)) for k in kps]
                    ky = [np.float32(k[1] / float(ht)) for k in kps]
                    feats["image/object/keypoint/x"] = floats(kx)
                    feats["image/object/keypoint/y"] = floats(ky)
                    feats["image/object/keypoint/visibility"] = ints([k[2] for k in kps])
                    per = len(kps) // max(len(boxes), 1)
                    for i, k in enumerate(kps):
                        got["keypoints"].append([float(np.float32(kx[i] * wd)), float(np.float32(ky[i] * ht)), k[2],
                                                 i // per if boxes else 0])
                want["targets"] = got
            ex = tf.train.Example(features=tf.train.Features(feature=feats))
            w.write(ex.SerializeToString(deterministic=True))
            expected.append(want)
    return expected


def manifest_keys(t) -> dict:
    """A sample's targets with a JSON Lines manifest's keys (pixels)."""
    if t == "bad":
        return {"boxes": [[30, 0, 10, 10]]}
    if t is None or "multi" in t:
        return {}
    out = {k: t[k] for k in ("labels", "values") if k in t}
    if "boxes" in t:
        out["boxes"] = [bx[:4] for bx in t["boxes"]]
        out["box_classes"] = [bx[4] for bx in t["boxes"]]
    if "keypoints" in t:
        out["keypoints"] = t["keypoints"]
    return out


def manifest_expected(s: dict, key: str) -> dict:
    t = s["targets"]
    want = {"key": key, "label": s["label"], "targets": None, "refused": None}
    if t == "bad":
        want["refused"] = "x1 < x0"
        want["label"] = None
        return want
    m = manifest_keys(t)
    if m:
        want["targets"] = {
            "classes": m.get("labels", []),
            "values": [f32(v) for v in m.get("values", [])],
            "boxes": [bx + [c] for bx, c in zip(m.get("boxes", []), m.get("box_classes", []))],
            "keypoints": [k + [0] for k in m.get("keypoints", [])],
        }
    return want


def write_targets(out: Path) -> None:
    """tests/data/shards/targets/: the same targets in a TFRecord (Object Detection
    API features), a WebDataset tar (a json member) and a Parquet file (list
    columns), and targets.json, what each sample must give."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    import webdataset as wds

    d = out / "targets"
    shutil.rmtree(d, ignore_errors=True)
    d.mkdir(parents=True)
    samples = targets_samples()
    tfr = write_targets_tfrecord(d / "objects.tfrecord", samples)
    with wds.TarWriter(str(d / "objects.tar"), mtime=TAR_MTIME) as sink:
        for s in samples:
            obj = {"__key__": s["key"], "jpg": s["jpeg"], "cls": s["label"]}
            m = manifest_keys(s["targets"])
            if m:
                obj["json"] = m
            sink.write(obj)
    rows = [manifest_keys(s["targets"]) for s in samples]
    coords = pa.list_(pa.list_(pa.float32()))
    table = pa.table(
        {
            "image": pa.array([s["jpeg"] for s in samples], pa.binary()),
            "label": pa.array([s["label"] for s in samples], pa.int64()),
            "labels": pa.array([r.get("labels") for r in rows], pa.list_(pa.int64())),
            "values": pa.array([r.get("values") for r in rows], pa.list_(pa.float32())),
            "boxes": pa.array([r.get("boxes") for r in rows], coords),
            "box_classes": pa.array([r.get("box_classes") for r in rows], pa.list_(pa.int32())),
            "keypoints": pa.array([r.get("keypoints") for r in rows], coords),
        }
    )
    pq.write_table(table, d / "objects.parquet", row_group_size=4, compression="snappy")
    expected = {
        "generator": "scripts/make_shard_fixtures.py --targets",
        "versions": versions(),
        "tfrecord": tfr,
        "tar": [manifest_expected(s, s["key"]) for s in samples],
        "parquet": [manifest_expected(s, f"objects.parquet/{i:08d}") for i, s in enumerate(samples)],
    }
    (d / "targets.json").write_text(json.dumps(expected, indent=2) + "\n")
    print(f"wrote {d}")


# ---------------------------------------------------------------- --check


def check_tfrecord(path: Path) -> list[dict]:
    import tensorflow as tf

    spec = {
        "image/encoded": tf.io.FixedLenFeature([], tf.string),
        # Unlabelled datasets (a flat folder) have no label feature.
        "image/class/label": tf.io.FixedLenFeature([], tf.int64, default_value=-1),
        "image/format": tf.io.FixedLenFeature([], tf.string, default_value=b""),
        "image/filename": tf.io.FixedLenFeature([], tf.string, default_value=b""),
        MASK_KEY: tf.io.FixedLenFeature([], tf.string, default_value=b""),
    }
    out = []
    for j, raw in enumerate(tf.data.TFRecordDataset(str(path))):
        ex = tf.io.parse_single_example(raw, spec)
        img = ex["image/encoded"].numpy()
        mask = ex[MASK_KEY].numpy() or None
        shape = tf.io.decode_image(img, expand_animations=False).shape
        if mask is not None:
            mshape = tf.io.decode_png(mask).shape
            if mshape[:2] != shape[:2] or mshape[2] != 1:
                raise ValueError(f"record {j}: mask {mshape} vs image {shape}")
        out.append(
            {
                "record": j,
                "key": ex["image/filename"].numpy().decode() or None,
                "label": (int(ex["image/class/label"].numpy())
                          if int(ex["image/class/label"].numpy()) >= 0 else None),
                "image_sha256": sha256(img),
                "mask_sha256": sha256(mask),
            }
        )
    return out


def check_tar(path: Path) -> list[dict]:
    import webdataset as wds

    ds = wds.WebDataset(str(path), shardshuffle=False, empty_check=False)
    out = []
    for j, s in enumerate(ds):
        # The image: jpg/jpeg, else png; the mask: mask.png or seg.png, else a png beside
        # a JPEG (the layout the fixtures use). `cls` is absent for unlabelled datasets.
        jpeg = s.get("jpg", s.get("jpeg"))
        named_mask = s.get("mask.png", s.get("seg.png"))
        if jpeg is not None:
            img, mask = jpeg, named_mask if named_mask is not None else s.get("png")
        elif "png" in s:
            img, mask = s["png"], named_mask
        else:
            raise ValueError(f"sample {j} ({s.get('__key__')}): no image in keys {sorted(s)}")
        with Image.open(io.BytesIO(img)) as im:
            im.load()
            size = im.size
        if mask is not None:
            with Image.open(io.BytesIO(mask)) as m:
                m.load()
                if m.size != size or m.mode not in ("L", "P"):
                    raise ValueError(f"{s['__key__']}: mask {m.size} {m.mode} vs {size}")
        out.append(
            {
                "record": j,
                "key": s["__key__"],
                "label": int(s["cls"].decode().strip()) if "cls" in s else None,
                "image_sha256": sha256(img),
                "mask_sha256": sha256(mask),
            }
        )
    return out


def check(dir_: Path, expected_path: Path | None) -> int:
    shards = sorted(dir_.rglob("*.tfrecord")) + sorted(dir_.rglob("*.tar"))
    if not shards:
        print(f"no *.tfrecord or *.tar under {dir_}", file=sys.stderr)
        return 1
    expected = None
    if expected_path is not None:
        expected = {s["path"]: s for s in json.loads(expected_path.read_text())["shards"]}
    failed = 0
    passed = 0
    seen = set()
    for path in shards:
        rel = path.relative_to(dir_).as_posix()
        try:
            got = check_tfrecord(path) if path.suffix == ".tfrecord" else check_tar(path)
        except Exception as e:  # noqa: BLE001 - report every shard
            print(f"FAIL {rel}: {type(e).__name__}: {e}")
            failed += 1
            continue
        labels = [g["label"] for g in got]
        masks = sum(g["mask_sha256"] is not None for g in got)
        print(f"ok   {rel}: {len(got)} samples, {masks} with mask, labels {labels}")
        if expected is not None and rel in expected:
            seen.add(rel)
            want = [
                {k: e[k] for k in ("record", "key", "label", "image_sha256", "mask_sha256")}
                for e in expected[rel]["samples"]
            ]
            if got != want:
                print(f"FAIL {rel}: differs from {expected_path}")
                failed += 1
                continue
        passed += 1
    if expected is not None:
        for rel in sorted(set(expected) - seen):
            print(f"FAIL {rel}: listed in {expected_path} but not found")
            failed += 1
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=REPO / "tests/data/shards")
    ap.add_argument("--check", type=Path, metavar="DIR", help="read shards in DIR back")
    ap.add_argument("--expected", type=Path, help="with --check: expected.json to compare")
    ap.add_argument("--targets", action="store_true",
                    help="write only OUT/targets/ (targets beyond one class id)")
    args = ap.parse_args()
    if args.check is not None:
        return check(args.check, args.expected)
    if args.targets:
        write_targets(args.out)
        return 0
    write_fixtures(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
