"""stoker: keeps accelerators fed.

Reads, decodes, resizes and augments image batches in background threads (on the GPU
where there is one), with the same samples on every backend, and hands them to PyTorch,
NumPy or any DLPack consumer without a copy::

    pipe = stoker.Pipeline(split.train, augment=aug, batch_size=256, seed=42)
    for batch in pipe.epoch(epoch):
        x = torch.from_dlpack(batch.images)
        y = torch.from_dlpack(batch.labels)
"""

import os as _os

# Mesa's device-select Vulkan layer prints an error on stderr each time wgpu lists
# adapters on a machine without a desktop session (no XDG_RUNTIME_DIR); nothing is wrong.
# The stoker command-line tool turns the layer off there, and so does the package, before
# the native module can list adapters (set NODEVICE_SELECT yourself to choose otherwise).
if not _os.environ.get("XDG_RUNTIME_DIR"):
    _os.environ.setdefault("NODEVICE_SELECT", "1")

from ._errors import (
    BackendUnavailableError,
    ConfigError,
    DeviceError,
    PipelineError,
    ResumeError,
    SampleError,
    SourceError,
    SplitError,
    StokerError,
)
from ._stoker import (
    Augment,
    Batch,
    Dataset,
    Epoch,
    Pipeline,
    Report,
    Split,
    Stats,
    Subset,
    Tensor,
    __version__,
    backends,
)

__all__ = [
    "Augment",
    "Batch",
    "Dataset",
    "Epoch",
    "Pipeline",
    "Report",
    "Split",
    "Stats",
    "Subset",
    "Tensor",
    "backends",
    "BackendUnavailableError",
    "ConfigError",
    "DeviceError",
    "PipelineError",
    "ResumeError",
    "SampleError",
    "SourceError",
    "SplitError",
    "StokerError",
    "__version__",
]
