"""stoker for a PyTorch training loop: :class:`Loader`, used as a ``DataLoader`` is.

Importing this module imports torch (``import stoker`` alone does not)::

    from stoker.torch import Loader

    loader = Loader(split.train, batch_size=256, shuffle=True, seed=42,
                    augment=stoker.Augment().random_resized_crop(224).flip_horizontal(0.5))
    for epoch in range(start_epoch, epochs):
        loader.set_epoch(epoch)
        for images, labels in loader:
            ...

The batches are stoker's, handed to torch without a copy (``torch.from_dlpack``): on the
CPU backend host tensors (page-locked with ``pin_memory``), on CUDA device tensors
ordered on torch's current stream. ``state_dict()`` / ``load_state_dict()`` save and
restore the position in the epochs, so a job restarted from a checkpoint continues with
exactly the batches it had not trained on.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import torch

from . import Augment, Batch, Dataset, Epoch, Pipeline, Subset

__all__ = ["Loader"]

#: The format of :meth:`Loader.state_dict`.
_STATE_VERSION = 1


class Loader:
    """Batches of a stoker pipeline as torch tensors, with ``DataLoader``'s usual
    arguments.

    - ``data``: a ``stoker.Subset`` (``split.train``, ``split.val``), a ``stoker.Dataset``
      (read whole), or a path (``str`` / ``os.PathLike``) of a class folder,
      ``root/<class>/<image>``, read as ``stoker.Dataset.image_folder``, the layout and
      class ids (``class_to_idx``: the sorted class names) of torchvision's
      ``ImageFolder``.
    - ``batch_size`` (1, as DataLoader's), ``drop_last`` (False).
    - ``shuffle``: None (default) shuffles a training subset or a ``Dataset`` each epoch
      and reads a validation subset in its fixed order; True or False as DataLoader's.
    - ``num_workers``: stoker's decode threads (threads, not processes: nothing is
      pickled or forked); 0 (default) lets stoker choose (one per core).
    - ``seed``: keys the shuffle and every random choice of the augmentation, with the
      epoch and the sample's id: the same ``(seed, epoch)`` gives the same batches.
    - ``augment``: a ``stoker.Augment`` (its size is the batches' size); ``backend``:
      ``"auto"`` (default), ``"cpu"``, ``"cuda"``, ``"wgpu"``.
    - ``pin_memory``: copy host batches into page-locked memory (``tensor.pin_memory()``,
      as DataLoader does) so that ``.cuda(non_blocking=True)`` overlaps; None (default)
      pins when torch sees a GPU and the batches are on the host (a CUDA backend's
      batches are already on the device and are never copied).
    - ``output``: ``"tuple"`` (default) yields ``(images, labels)``; ``"dict"`` yields
      a dict with ``images``, ``labels`` and ``ids`` (uint64), and where the data has
      them ``masks`` (``[N, H, W]`` uint16), ``soft_labels`` (``[N, classes]``, when the
      augmentation mixes batches: MixUp, CutMix) and ``boxes``, ``box_classes``,
      ``box_counts`` (``Batch.padded_boxes``, when a sample of the batch has targets).
    - any other keyword goes to ``stoker.Pipeline`` (``prefetch``, ``readers``,
      ``on_error``, ``rank``, ``world_size``, ``weights``, ...).

    ``len(loader)`` is the batches per epoch on this rank. Each ``iter(loader)`` is one
    epoch: the one given to ``set_epoch(e)`` before it, else the epoch after the last one
    iterated (the first is 0), so a loop that never calls ``set_epoch`` still gets a new
    order each epoch.
    """

    def __init__(
        self,
        data: Subset | Dataset | str | os.PathLike[str],
        batch_size: int = 1,
        shuffle: bool | None = None,
        *,
        num_workers: int = 0,
        drop_last: bool = False,
        seed: int = 0,
        augment: Augment | None = None,
        backend: str = "auto",
        pin_memory: bool | None = None,
        output: str = "tuple",
        **pipeline_kwargs: Any,
    ) -> None:
        if isinstance(data, (str, os.PathLike)):
            data = Dataset.image_folder(data)
        if output not in ("tuple", "dict"):
            raise ValueError(f'output is "tuple" or "dict", not {output!r}')
        if num_workers < 0:
            raise ValueError("num_workers must be >= 0 (0: stoker's default)")
        if num_workers > 0:
            pipeline_kwargs.setdefault("workers", num_workers)
        self.data = data
        self.batch_size = batch_size
        self.drop_last = drop_last
        self.seed = seed
        self.output = output
        self.pipeline = Pipeline(
            data,
            augment=augment,
            batch_size=batch_size,
            seed=seed,
            backend=backend,
            drop_last=drop_last,
            shuffle=shuffle,
            **pipeline_kwargs,
        )
        self._num_classes = len(data.classes)
        self._mixes = augment is not None and augment.mixes
        if pin_memory is None:
            pin_memory = torch.cuda.is_available() and self.pipeline.backend != "cuda"
        self.pin_memory = bool(pin_memory)
        # The epoch of the next iteration (or the one under way), and how it starts.
        self._epoch = 0
        # set_epoch or load_state_dict chose the next epoch: the next iteration does not
        # advance.
        self._chosen = False
        # An iteration of `_epoch` has begun: the next one advances (unless chosen).
        self._begun = False
        # A loaded position to resume `_epoch` from (a pipeline state), for the next
        # iteration.
        self._resume: dict[str, Any] | None = None
        self._resumed: Epoch | None = None
        # The position after the last batch handed out in this epoch, and whether that
        # batch was the epoch's last.
        self._position: dict[str, Any] | None = None
        self._at_end = False
        # Iterations begun: only the latest one's batches move the position.
        self._iteration = 0

    @property
    def dataset(self) -> Subset | Dataset:
        """The data read (DataLoader's name for it)."""
        return self.data

    def __len__(self) -> int:
        """Batches per epoch on this rank."""
        return len(self.pipeline)

    @property
    def epoch(self) -> int:
        """The epoch being iterated (or the next one, before its iteration begins)."""
        return self._epoch

    def set_epoch(self, epoch: int) -> None:
        """The epoch the next iteration reads (as ``DistributedSampler.set_epoch``): its
        order is keyed by ``(seed, epoch)``. After ``load_state_dict`` the loaded epoch
        given again keeps its resume position; another epoch starts from its beginning."""
        epoch = int(epoch)
        if epoch < 0:
            raise ValueError("epoch must be >= 0")
        if epoch != self._epoch:
            self._resume = None
            self._drop_resumed()
        self._epoch = epoch
        self._chosen = True

    def __iter__(self) -> Iterator[Any]:
        if self._begun and not self._chosen and self._resume is None:
            self._epoch += 1
        self._chosen = False
        self._begun = True
        resumed, resume = self._resumed, self._resume
        self._resumed = self._resume = None
        # Until a batch is handed out, the position is where the epoch starts.
        self._position, self._at_end = resume, False
        self._iteration += 1
        epoch = resumed if resumed is not None else self.pipeline.epoch(self._epoch)
        return self._batches(epoch, self._iteration)

    def _drop_resumed(self) -> None:
        if self._resumed is not None:
            self._resumed.close()
            self._resumed = None

    def _batches(self, epoch: Epoch, iteration: int) -> Iterator[Any]:
        last = len(self.pipeline) - 1
        with epoch:
            for batch in epoch:
                out = self._convert(batch)
                # An older iterator still in use does not move the loader's position.
                if iteration == self._iteration:
                    self._position = batch.state()
                    self._at_end = batch.index == last
                yield out
            if iteration == self._iteration:
                self._at_end = True

    def _host(self, t: torch.Tensor) -> torch.Tensor:
        if self.pin_memory and t.device.type == "cpu":
            return t.pin_memory()
        return t

    def _convert(self, batch: Batch) -> Any:
        images = self._host(torch.from_dlpack(batch.images))
        labels = self._host(torch.from_dlpack(batch.labels))
        if self.output == "tuple":
            return images, labels
        out: dict[str, torch.Tensor] = {
            "images": images,
            "labels": labels,
            "ids": self._host(torch.from_dlpack(batch.ids_tensor)),
        }
        masks = batch.masks
        if masks is not None:
            out["masks"] = self._host(torch.from_dlpack(masks))
        if self._mixes:
            out["soft_labels"] = self._host(torch.from_dlpack(batch.soft_labels(self._num_classes)))
        if any(t is not None for t in batch.targets):
            boxes, classes, counts = batch.padded_boxes()
            out["boxes"] = self._host(torch.from_dlpack(boxes))
            out["box_classes"] = self._host(torch.from_dlpack(classes))
            out["box_counts"] = self._host(torch.from_dlpack(counts))
        return out

    def state_dict(self) -> dict[str, Any]:
        """Where the loop stands, for a checkpoint (plain data: ``torch.save``,
        ``json.dump`` and ``pickle`` keep it): taken after the loop received ``k``
        batches of an epoch, a fresh ``Loader`` with the same arguments given it by
        ``load_state_dict`` yields that epoch's remaining batches, the same samples and
        the same pixels; taken after an epoch's last batch, it goes on with the next
        epoch. Take it after the step that trained on the last batch received."""
        if self._resume is not None:
            epoch, position = self._epoch, self._resume
        elif self._begun and not self._chosen:
            if self._at_end:
                epoch, position = self._epoch + 1, None
            else:
                epoch, position = self._epoch, self._position
        else:
            epoch, position = self._epoch, None
        return {"version": _STATE_VERSION, "epoch": epoch, "pipeline": position}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Continue where ``state_dict()`` was taken: the next iteration yields the rest
        of its epoch (``set_epoch`` of that same epoch keeps it). A position of another
        seed, dataset, sampling or global batch size raises ``stoker.ResumeError``."""
        version = state_dict.get("version")
        if version != _STATE_VERSION:
            raise ValueError(
                f"a stoker.torch.Loader state of version {version!r}; this loader reads version {_STATE_VERSION}"
            )
        epoch, position = int(state_dict["epoch"]), state_dict["pipeline"]
        # Resumed now: a state this pipeline cannot continue is refused here, and the
        # epoch's first batches are prepared while the caller restores the rest.
        resumed = self.pipeline.resume(position) if position is not None else None
        self._drop_resumed()
        self._epoch, self._resume, self._resumed = epoch, position, resumed
        self._chosen = True
        self._begun = False
        self._position, self._at_end = None, False

    def close(self) -> None:
        """Stops the threads of every epoch started."""
        self._drop_resumed()
        self.pipeline.close()

    def __repr__(self) -> str:
        return (
            f"stoker.torch.Loader({len(self)} batches of {self.batch_size}, "
            f"backend={self.pipeline.backend}, epoch={self._epoch})"
        )
