"""Type stubs of stoker's native module (`stoker._stoker`): every class and function
the package exports from it."""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from typing import Any, ClassVar, Literal, Protocol

from ._errors import SampleError

__version__: str

_Path = str | os.PathLike[str]

def backends() -> list[str]:
    """The backends compiled into this build (`cpu` always; `cuda`, `wgpu`)."""

class Tensor:
    """Batch memory (host or CUDA) for any DLPack consumer, without a copy:
    `torch.from_dlpack(t)`, `numpy.from_dlpack(t)`. The consumer's tensor keeps the
    batch alive. On CUDA the consumer's stream waits on the batch's ready event."""

    def __dlpack__(
        self,
        *,
        stream: int | Any | None = None,
        max_version: tuple[int, int] | None = None,
        dl_device: tuple[int, int] | None = None,
        copy: bool | None = None,
    ) -> Any:
        """A DLPack capsule (the Python array API's protocol)."""
    def __dlpack_device__(self) -> tuple[int, int]:
        """`(1, 0)` for the CPU, `(2, ordinal)` for CUDA."""
    @property
    def shape(self) -> list[int]:
        """The shape."""
    @property
    def dtype(self) -> Literal["uint8", "uint16", "int64", "float16", "float32"]:
        """NumPy's name of the element type."""
    @property
    def device(self) -> str:
        """`"cpu"` or `"cuda:N"`."""
    @property
    def data_ptr(self) -> int:
        """The address of the first element."""
    def __len__(self) -> int: ...

class _Samples:
    """What `Dataset` and `Subset` both have: their samples, sorted by path (a base class
    of these stubs only)."""

    @property
    def classes(self) -> list[str]:
        """Class names, indexed by class id."""
    @property
    def paths(self) -> list[str]:
        """Sample paths, sorted."""
    @property
    def ids(self) -> list[int]:
        """Sample ids, in the order of `paths`."""
    @property
    def labels(self) -> list[int | None]:
        """Labels (class ids, or None), in the order of `paths`."""
    def __len__(self) -> int: ...

class _NamedFieldShards(Protocol):
    """The signature of `Dataset.tfrecord` and `Dataset.parquet`: shards (files, or
    folders of them), with the names of the image, label and mask fields (TFRecord keys,
    Parquet columns) where they are not the defaults."""

    def __call__(
        self,
        paths_or_path: _Path | Sequence[_Path],
        *,
        image: str | None = None,
        label: str | None = None,
        mask: str | None = None,
    ) -> Dataset: ...

class Dataset(_Samples):
    """Every sample found, sorted by path, each with a stable id, before any split.

    It pickles (for `spawn`ed workers): the pickle carries how it was made, not its
    samples; `pickle.loads` lists the source again and raises `SourceError` if the
    listing differs from the pickled one.
    """

    @staticmethod
    def image_folder(root: _Path) -> Dataset:
        """`root/<class>/<image>`, as torchvision's ImageFolder (a path or a URL)."""
    @staticmethod
    def flat(root: _Path) -> Dataset:
        """Every image under `root`, unlabelled."""
    @staticmethod
    def files(list: _Path) -> Dataset:
        """A text file listing one image per line (`path` or `path<TAB>label`)."""
    @staticmethod
    def manifest(path: _Path) -> Dataset:
        """A manifest (CSV or JSON Lines) of images with labels, masks and targets."""
    @staticmethod
    def coco(annotations: _Path, images: _Path) -> Dataset:
        """A COCO annotation file over the images in `images`."""
    tfrecord: ClassVar[_NamedFieldShards]
    """TFRecord shards of tf.train.Example records (a static method)."""
    @staticmethod
    def tar(paths_or_path: _Path | Sequence[_Path]) -> Dataset:
        """WebDataset tar shards."""
    parquet: ClassVar[_NamedFieldShards]
    """Parquet files, a row per sample (a static method)."""
    def with_masks(self, mask_dir: _Path) -> Dataset:
        """Each image paired with the label mask of the same stem in `mask_dir`."""
    def with_read_latency(self, seconds: float) -> Dataset:
        """A simulated read latency per sample (benchmarks, tests)."""
    def split(self, val_fraction: float, *, seed: int = 0, group_by: str | None = None) -> Split:
        """The split, made once before any shuffle (by group where `group_by` matches)."""
    def all(self) -> Subset:
        """Every sample, as one training subset (no split)."""
    @property
    def skipped(self) -> list[tuple[str, str]]:
        """What listing left out: `(path, reason)`."""

class Split:
    """A fixed split: training and validation subsets and their manifest.

    It pickles: the pickle carries its dataset (see `Dataset`) and its manifest.
    """

    @staticmethod
    def load(path: _Path, dataset: Dataset) -> Split:
        """The split a saved manifest records, over the same samples."""
    @staticmethod
    def extend(path: _Path, dataset: Dataset) -> Split:
        """The saved split extended to a grown dataset (earlier samples keep their side)."""
    def save(self, path: _Path) -> None:
        """Writes the manifest (JSON)."""
    @property
    def train(self) -> Subset:
        """The training subset (shuffled each epoch)."""
    @property
    def val(self) -> Subset:
        """The validation subset (fixed order)."""
    @property
    def added(self) -> tuple[int, int]:
        """Samples `extend` placed anew: `(train, val)`."""

class Subset(_Samples):
    """One side of a split (or every sample): what a pipeline reads."""

    @property
    def role(self) -> Literal["train", "val"]:
        """`train` (shuffled each epoch) or `val` (fixed order)."""

class Augment:
    """What each sample goes through; methods return a new Augment, so they chain.

    It pickles (for `spawn`ed workers): the pickle carries the chain of calls that made it.
    """

    def __init__(self) -> None: ...
    @staticmethod
    def validation(size: int) -> Augment:
        """The usual evaluation transform for `size`."""
    def random_resized_crop(
        self, size: int, scale: tuple[float, float] = (0.08, 1.0), ratio: tuple[float, float] = (3 / 4, 4 / 3)
    ) -> Augment:
        """torchvision's RandomResizedCrop."""
    def resize_center_crop(self, resize: int, size: int) -> Augment:
        """Resize the shorter side, then centre-crop."""
    def letterbox(self, width: int, height: int) -> Augment:
        """Fit keeping the aspect ratio, padded with the fill."""
    def random_crop_padded(self, width: int, height: int, padding: int) -> Augment:
        """torchvision's RandomCrop with padding."""
    def resize(self, width: int, height: int) -> Augment:
        """Resize to exactly `width` x `height`."""
    def output_size(self, width: int, height: int) -> Augment:
        """Set the output size without changing the geometry."""
    def flip_horizontal(self, p: float = 0.5) -> Augment:
        """Mirror left-right with probability `p`."""
    def flip_vertical(self, p: float = 0.5) -> Augment:
        """Mirror top-bottom with probability `p`."""
    def random_affine(
        self,
        *,
        degrees: tuple[float, float] = (0.0, 0.0),
        translate: tuple[float, float] = (0.0, 0.0),
        scale: tuple[float, float] = (1.0, 1.0),
        shear: tuple[float, float] = (0.0, 0.0),
        shear_y: tuple[float, float] = (0.0, 0.0),
    ) -> Augment:
        """torchvision's RandomAffine."""
    def random_rotation(self, degrees: float) -> Augment:
        """torchvision's RandomRotation."""
    def fill(self, rgb: Sequence[int]) -> Augment:
        """The colour of uncovered pixels."""
    def mask_fill(self, class_id: int) -> Augment:
        """The mask class of uncovered pixels."""
    def color_jitter(
        self, brightness: float = 0.0, contrast: float = 0.0, saturation: float = 0.0, hue: float = 0.0
    ) -> Augment:
        """torchvision's ColorJitter."""
    def random_grayscale(self, p: float = 0.1) -> Augment:
        """RandomGrayscale."""
    def random_posterize(self, bits: int, p: float = 0.5) -> Augment:
        """RandomPosterize."""
    def random_solarize(self, threshold: float, p: float = 0.5) -> Augment:
        """RandomSolarize (threshold in 0..=1)."""
    def gaussian_blur(self, kernel: tuple[int, int], sigma: tuple[float, float] = (0.1, 2.0), p: float = 1.0) -> Augment:
        """GaussianBlur with probability `p`."""
    def random_adjust_sharpness(self, factor: float, p: float = 0.5) -> Augment:
        """RandomAdjustSharpness."""
    def random_autocontrast(self, p: float = 0.5) -> Augment:
        """RandomAutocontrast."""
    def random_equalize(self, p: float = 0.5) -> Augment:
        """RandomEqualize."""
    def rand_augment(self, num_ops: int = 2, magnitude: int = 9, bins: int = 31) -> Augment:
        """RandAugment."""
    def trivial_augment_wide(self, bins: int = 31) -> Augment:
        """TrivialAugmentWide."""
    def random_erasing(
        self,
        p: float = 0.5,
        scale: tuple[float, float] = (0.02, 0.33),
        ratio: tuple[float, float] = (0.3, 3.3),
        value: Sequence[float] = (0.0, 0.0, 0.0),
    ) -> Augment:
        """RandomErasing."""
    def mixup(self, alpha: float) -> Augment:
        """MixUp over each batch (see Batch.soft_labels)."""
    def cutmix(self, alpha: float) -> Augment:
        """CutMix over each batch (see Batch.soft_labels)."""
    def normalize(self, mean: Sequence[float], std: Sequence[float]) -> Augment:
        """Per-channel normalisation (float32 output)."""
    def layout(self, layout: Literal["nchw", "nhwc"]) -> Augment:
        """The image layout."""
    def dtype(self, dtype: Literal["u8", "f16", "f32"]) -> Augment:
        """The element type."""
    def antialias(self, on: bool) -> Augment:
        """Antialiased downscaling (default on)."""
    def crop_aware(self, on: bool) -> Augment:
        """Decode only what the crop reads."""
    @property
    def size(self) -> tuple[int, int]:
        """The output `(width, height)`."""
    @property
    def is_random(self) -> bool:
        """Whether any choice is random."""
    @property
    def mixes(self) -> bool:
        """Whether batches are mixed (MixUp, CutMix): `soft_labels` are their targets."""

class Report:
    """The verdict on an epoch (`Epoch.report()`); `str(report)` says it in words."""

    input_wait_fraction: float
    input_bound: Literal["no", "moderately", "highly"]
    """Under 5 % of the time waiting for input: "no"; 5 % to 20 %: "moderately"."""
    stages: list[tuple[str, float, int, float]]
    """`(stage, busy_seconds, threads, utilisation)`, busiest first; the stage one of
    "read", "decode", "augment", "device_submit"."""
    bottleneck: str | None
    advice: list[str]

class Stats:
    """Pipeline statistics: stage times summed over threads; wait and wall the caller's."""

    read_seconds: float
    decode_seconds: float
    augment_seconds: float
    wait_seconds: float
    wall_seconds: float
    input_wait_fraction: float
    bytes_read: int
    samples_delivered: int
    samples_reported: int
    replacements: int
    cache_hits: int
    batches: int
    gpu_decoded: int
    cpu_fallbacks: int
    samples_with_warnings: int
    errors: list[SampleError]

class Batch:
    """One batch: images, masks and targets as DLPack tensors, ids, reports."""

    @property
    def images(self) -> Tensor:
        """`[N, 3, H, W]` (or NHWC) of the augmentation's dtype."""
    @property
    def masks(self) -> Tensor | None:
        """`[N, H, W]` uint16 class ids, or None."""
    @property
    def labels(self) -> Tensor:
        """`[N]` int64, -100 where a sample has none."""
    def labels_or(self, missing: int = -100) -> Tensor:
        """`[N]` int64 with `missing` where a sample has none."""
    def soft_labels(self, classes: int) -> Tensor:
        """`[N, classes]` float32 soft targets (MixUp/CutMix; one-hot otherwise)."""
    def padded_boxes(self) -> tuple[Tensor, Tensor, Tensor]:
        """`(boxes [N, M, 4] float32, classes [N, M] int64, counts [N] int64)`."""
    @property
    def targets(self) -> list[dict[str, Any] | None]:
        """Each slot's targets beyond one class id, moved by its plan."""
    @property
    def ids(self) -> list[int]:
        """Stable sample ids (all 64 bits: about half do not fit an int64)."""
    @property
    def ids_tensor(self) -> Tensor:
        """The sample ids, `[N]` uint64 (a host tensor)."""
    @property
    def repeated(self) -> list[bool]:
        """Slots repeating a sample to pad a rank's shard."""
    @property
    def errors(self) -> list[SampleError]:
        """Samples of this batch that could not be delivered."""
    @property
    def replacements(self) -> list[tuple[int, int, int]]:
        """`(slot, failed_id, by_id)` per replaced slot."""
    @property
    def warnings(self) -> list[tuple[int, int, str, str, str]]:
        """`(slot, id, path, kind, message)` per tolerated fault."""
    def state(self) -> dict[str, Any]:
        """The job's state right after this batch: a dict for a checkpoint, given back to
        `Pipeline.resume` (keep it as it is)."""
    @property
    def index(self) -> int:
        """Position in the epoch."""
    @property
    def epoch(self) -> int:
        """The epoch."""
    @property
    def shape(self) -> list[int]:
        """The images' shape."""
    @property
    def dtype(self) -> Literal["uint8", "float16", "float32"]:
        """The images' element type."""
    @property
    def on_device(self) -> bool:
        """Whether the batch lives in device memory."""
    def __len__(self) -> int: ...

class Epoch:
    """The batches of one epoch, in order; a context manager that stops its threads.

    One pass: iterated again after its end it raises RuntimeError (call
    `pipeline.epoch(e)` for each pass); closed, it just ends.
    """

    def __iter__(self) -> Iterator[Batch]: ...
    def __next__(self) -> Batch: ...
    def __len__(self) -> int: ...
    def stats(self) -> Stats:
        """Statistics of this epoch so far."""
    def report(self) -> Report:
        """The verdict on this epoch so far: whether the training waited for input,
        each stage's load, the bottleneck and what to try (`print(epoch.report())`)."""
    def close(self) -> None:
        """Stops the epoch's threads."""
    def __enter__(self) -> Epoch: ...
    def __exit__(self, *args: object) -> bool: ...

class Pipeline:
    """A configured pipeline over one subset (or a whole dataset): reads, decodes and
    augments batches in background threads while the caller trains. Call `epoch(e)` once
    per epoch and iterate it."""

    def __init__(
        self,
        data: Subset | Dataset,
        *,
        augment: Augment | None = None,
        batch_size: int = 32,
        seed: int = 0,
        backend: Literal["auto", "cpu", "cuda", "wgpu"] = "auto",
        device: int | None = None,
        prefetch: int | None = None,
        readers: int | None = None,
        workers: int | None = None,
        on_error: Literal["skip", "replace", "fail"] = "skip",
        rank: int | None = None,
        world_size: int | None = None,
        drop_last: bool = False,
        block_order: int | None = None,
        cache_bytes: int | None = None,
        memory_limit: int | None = None,
        strict_decode: bool | None = None,
        max_pixels: int | None = None,
        max_bytes: int | None = None,
        allow_software_gpu: bool = False,
        hardware_decode: Literal["off", "exact", "all"] | None = None,
        hardware_share: float | None = None,
        shuffle: bool | None = None,
        weights: Sequence[float] | None = None,
        class_balanced: bool = False,
        num_samples: int | None = None,
        replacement: bool = True,
        trace: str | os.PathLike[str] | None = None,
    ) -> None:
        """A pipeline over `data` (a `Subset`, or a `Dataset` taken whole); the GIL is
        released while it builds.

        - `augment`: what each sample goes through (none: the decoded image as it is).
        - `batch_size`, `seed`: the shuffle, the weighted draws and every random choice
          of the augmentation are keyed by `seed`, the epoch and the sample's id.
        - `backend`: `"auto"` (CUDA, else wgpu, else CPU), `"cpu"`, `"cuda"`, `"wgpu"`;
          `device`: the CUDA device ordinal.
        - `prefetch`, `readers`, `workers`: batches in flight, reader and worker threads.
        - `on_error`: what a sample that cannot be delivered does: `"skip"` (its slot is
          left out and reported in `batch.errors`), `"replace"` (reported, another sample
          delivered in its slot), `"fail"` (raises `SampleError`).
        - `rank`, `world_size`: this process's shard for data-parallel training; `None`
          reads torchrun's or SLURM's variables when set. `drop_last`: drop the last
          partial batch of each epoch.
        - `shuffle`: `None` shuffles a training subset (and a `Dataset`) each epoch and
          reads a validation subset in its fixed order; `False` reads any data in its
          fixed order (`data.ids`), every epoch the same; `True` shuffles any data.
        - `weights`: one per sample of `data`, in the order of `data.ids` (finite, >= 0,
          not all 0): each epoch is `num_samples` draws (default `len(data)`), sample `i`
          with probability `weights[i] / sum(weights)`, with or without `replacement`, as
          PyTorch's `WeightedRandomSampler`; a weight of 0 is never drawn.
          `class_balanced=True`: each sample weighted by one over its class's count (a
          sample without a label never drawn). Both draw training epochs: not with
          `shuffle=False` or a validation subset (give `shuffle=True` for one).
        - `trace`: a path for a Chrome trace of the stages (a span per sample read,
          decoded and augmented, per batch waited for), rewritten at the end of every
          epoch, for Perfetto; off by default.
        - the others: the Rust `PipelineBuilder`'s settings of those names.
        """
    def epoch(self, epoch: int) -> Epoch:
        """The batches of `epoch`."""
    def epoch_from(self, epoch: int, first_batch: int) -> Epoch:
        """The batches of `epoch` from `first_batch` on."""
    def state(self) -> dict[str, Any]:
        """The state after the last batch handed out (prefer `Batch.state` for a
        checkpoint: batches are prepared ahead)."""
    def resume(self, state: dict[str, Any]) -> Epoch:
        """The rest of the epoch a saved state was taken in; `ResumeError` if this
        pipeline cannot continue it."""
    def __len__(self) -> int: ...
    @property
    def num_batches(self) -> int:
        """Batches per epoch (this rank's)."""
    @property
    def backend(self) -> str:
        """The backend running the batches."""
    @property
    def backend_reason(self) -> str:
        """Why that backend was chosen."""
    @property
    def readers(self) -> int:
        """Reader threads."""
    @property
    def batches_held(self) -> int:
        """Batches handed out and not yet returned to the ring."""
    @property
    def memory_in_flight(self) -> int:
        """Bytes of the batch ring."""
    def stats(self) -> Stats:
        """Statistics over every finished epoch."""
    def wait_device(self) -> None:
        """Waits until the device finished every batch handed out."""
    def close(self) -> None:
        """Stops the threads of every epoch this pipeline started."""
    def __enter__(self) -> Pipeline: ...
    def __exit__(self, *args: object) -> bool: ...
