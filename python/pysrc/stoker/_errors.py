"""stoker's exceptions: the library's error categories, with its fields as attributes."""

from __future__ import annotations

from typing import Any


class StokerError(Exception):
    """Base class of every error stoker raises. Fields given as keywords are attributes."""

    def __init__(self, message: str, **fields: Any) -> None:
        super().__init__(message)
        for name, value in fields.items():
            setattr(self, name, value)


class ConfigError(StokerError, ValueError):
    """A setting is out of range or contradicts another: ``setting``, ``reason``."""

    setting: str
    reason: str


class SourceError(StokerError, OSError):
    """A dataset could not be listed or read, or is inconsistent: ``path`` (or None),
    ``reason``."""

    path: str | None
    reason: str

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class SplitError(StokerError):
    """A split could not be made, loaded, extended or checked: ``path`` (or None),
    ``reason``."""

    path: str | None
    reason: str


class SampleError(StokerError):
    """One sample that could not be delivered: ``id`` (its stable id), ``path``, ``kind``
    (``io``, ``decode``, ``limit``, ``unsupported``, ``mask``, ``corrupt``, ``label``,
    ``transform``, ``internal``) and ``reason``.

    Raised by the iterator under ``on_error="fail"``; under ``"skip"`` and ``"replace"``
    the reports are listed in ``Batch.errors`` instead, as instances of this class.
    """

    id: int
    path: str
    kind: str
    reason: str


class DeviceError(StokerError):
    """A GPU failed at run time, or a batch was asked for on another device."""


class BackendUnavailableError(DeviceError):
    """The backend asked for is not in this build or not on this machine: ``backend``,
    ``reason``."""

    backend: str
    reason: str


class PipelineError(StokerError):
    """The pipeline's threads stopped, or ``on_error="replace"`` found no replacement:
    ``samples`` lists the SampleErrors concerned (may be empty)."""

    samples: list[SampleError]


class ResumeError(StokerError, ValueError):
    """A saved state (``batch.state()``, ``pipeline.state()``) that cannot resume this
    pipeline: ``reason`` names what differs (``version``, ``seed``, ``order`` (another
    dataset or sampling), ``global_batch_size``, ``position``), or ``format`` for
    something that is not a state; ``state`` and ``pipeline`` hold the state's value and
    the pipeline's where there are two (else None)."""

    reason: str
    state: int | None
    pipeline: int | None


__all__ = [
    "StokerError",
    "ConfigError",
    "SourceError",
    "SplitError",
    "SampleError",
    "DeviceError",
    "BackendUnavailableError",
    "PipelineError",
    "ResumeError",
]
