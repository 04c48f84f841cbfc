"""The hand-off to JAX: a CPU batch through `jax.numpy.from_dlpack`, the same values as
NumPy's view of it. Skipped (and said so) where JAX is not installed; CI installs it."""

from __future__ import annotations

import numpy as np
import pytest

import stoker

jax = pytest.importorskip("jax", reason="jax is not installed: the JAX hand-off test did not run")
jnp = pytest.importorskip("jax.numpy")


def test_a_batch_reaches_jax_with_numpys_values(photos):
    aug = stoker.Augment().random_resized_crop(32).flip_horizontal(0.5)
    pipe = stoker.Pipeline(stoker.Dataset.image_folder(photos), augment=aug, batch_size=8,
                           seed=1, backend="cpu")
    seen = 0
    for batch in pipe.epoch(0):
        want = np.from_dlpack(batch.images)
        x = jnp.from_dlpack(batch.images)
        assert x.dtype == jnp.uint8 and x.shape == want.shape
        assert np.array_equal(np.asarray(x), want)
        y = jnp.from_dlpack(batch.labels)
        assert np.array_equal(np.asarray(y), np.from_dlpack(batch.labels))
        # A computation on it: the same sum as NumPy's.
        assert int(x.astype(jnp.int32).sum()) == int(want.astype(np.int64).sum())
        seen += len(batch)
    assert seen == 30
