"""Canary for the one Keras internal streamfeed relies on (``streamfeed.keras._keras_internals``).

These fail the day Keras renames or reroutes ``EpochIterator.reset``, which
would otherwise make one-batch epochs count twice on JAX and PyTorch. The
same check runs inside a real ``fit`` on every backend in
``test_backends.py::test_canary_keras_resets_after_its_peek``.
"""

from __future__ import annotations

import importlib

import keras
import numpy as np
import pytest

from streamfeed.keras import _keras_internals


class Probe(keras.utils.PyDataset):
    """One batch; records, at each ``on_epoch_end``, whether the check saw ``reset``."""

    def __init__(self) -> None:
        super().__init__()
        self.ends: list[bool] = []

    @property
    def num_batches(self) -> int:
        return 1

    def __getitem__(self, index: int) -> tuple:
        return np.ones((2, 1), "float32"), np.ones((2, 1), "float32")

    def on_epoch_end(self) -> None:
        self.ends.append(_keras_internals.called_from_epoch_reset())


def test_installed_keras_has_the_method_the_check_looks_for():
    module = importlib.import_module(_keras_internals.MODULE)
    method = getattr(getattr(module, _keras_internals.CLASS), _keras_internals.METHOD)
    assert _keras_internals.reset_code() is method.__code__


def test_the_check_fires_inside_reset_and_nowhere_else():
    """Keras's own epoch iterator: ``reset()`` abandons, a full pass ends an epoch."""
    epoch_iterator_class = getattr(importlib.import_module(_keras_internals.MODULE), _keras_internals.CLASS)
    probe = Probe()
    iterator = epoch_iterator_class(x=probe)
    iterator.reset()
    batches = [data for _, _, data in iterator]
    probe.on_epoch_end()  # a direct call: not Keras abandoning anything
    assert len(batches) == 1
    assert probe.ends == [True, False, False]


def test_a_real_fit_resets_once_after_its_peek():
    """An unbuilt model peeks (on this process's backend), resets, then trains two epochs."""
    keras.utils.set_random_seed(0)
    inputs = keras.Input((1,))
    model = keras.Model(inputs, keras.layers.Dense(1)(inputs))
    model.compile("sgd", "mse")
    probe = Probe()
    model.fit(probe, epochs=2, verbose=0)
    assert probe.ends == [True, False, False]


def test_a_keras_without_the_method_warns_and_counts_no_reset(monkeypatch):
    monkeypatch.setattr(_keras_internals, "METHOD", "no_such_method")
    _keras_internals.reset_code.cache_clear()
    try:
        with pytest.warns(RuntimeWarning, match="cannot tell a Keras peek from an epoch end"):
            assert _keras_internals.called_from_epoch_reset() is False
    finally:
        monkeypatch.undo()
        _keras_internals.reset_code.cache_clear()
    assert _keras_internals.reset_code() is not None
