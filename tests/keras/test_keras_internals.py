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


# ------------------------------------------------- the step count of an epoch
class Resumed(keras.utils.PyDataset):
    """``counts[i]`` batches in epoch ``i`` (a resumed epoch is shorter); tells Keras at each epoch's start."""

    def __init__(self, counts: list[int]) -> None:
        super().__init__()
        self.counts, self.epoch, self.set = list(counts), 0, []

    @property
    def num_batches(self) -> int:
        return self.counts[min(self.epoch, len(self.counts) - 1)]

    def __getitem__(self, index: int) -> tuple:
        return np.ones((2, 1), "float32"), np.ones((2, 1), "float32")

    def on_epoch_begin(self) -> None:
        self.set.append(_keras_internals.set_epoch_steps(self.num_batches))

    def on_epoch_end(self) -> None:
        if not _keras_internals.called_from_epoch_reset():
            self.epoch += 1


class Steps(keras.callbacks.Callback):
    def __init__(self) -> None:
        super().__init__()
        self.epochs: list[list[int]] = []

    def on_epoch_begin(self, epoch, logs=None):
        self.epochs.append([])

    def on_train_batch_end(self, batch, logs=None):
        self.epochs[-1].append(batch)


def adam_model():
    keras.utils.set_random_seed(0)
    inputs = keras.Input((1,))
    model = keras.Model(inputs, keras.layers.Dense(1)(inputs))
    model.compile(keras.optimizers.Adam(0.01), "mse")
    model.optimizer.build(model.trainable_variables)
    return model


def test_installed_keras_has_the_epoch_method_and_step_attribute_the_hook_sets():
    epoch_iterator_class = getattr(importlib.import_module(_keras_internals.MODULE), _keras_internals.CLASS)
    method = getattr(epoch_iterator_class, _keras_internals.EPOCH_METHOD)
    assert _keras_internals.enumerate_code() is method.__code__
    assert hasattr(epoch_iterator_class(x=Resumed([1])), _keras_internals.STEPS_ATTRIBUTE)
    assert _keras_internals.set_epoch_steps(3) is False  # not inside Keras: nothing to set


def test_an_epoch_shorter_than_the_fit_began_with_ends_cleanly_and_counts_its_steps():
    """A resumed epoch (2 batches) followed by full ones (3): Keras read 3 once, before the resume.

    Under this suite's ``filterwarnings = error`` Keras's "ran out of data"
    warning fails the test; without the hook TensorFlow also counted a third,
    failed step of the short epoch in ``optimizer.iterations``.
    """
    dataset, steps, model = Resumed([3]), Steps(), adam_model()

    class Resume(keras.callbacks.Callback):  # what DataCheckpoint.on_train_begin does: a shorter epoch now
        def on_train_begin(self, logs=None):
            dataset.counts = [2, 3]

    model.fit(dataset, epochs=3, verbose=0, callbacks=[Resume(), steps])
    assert steps.epochs == [[0, 1], [0, 1, 2], [0, 1, 2]]
    assert int(keras.ops.convert_to_numpy(model.optimizer.iterations)) == 8
    assert all(dataset.set[-3:])


def test_a_steps_per_epoch_given_to_fit_is_left_alone():
    dataset, steps = Resumed([4]), Steps()  # Keras runs 2 steps per epoch on one stream of 4 batches
    adam_model().fit(dataset, epochs=2, steps_per_epoch=2, verbose=0, callbacks=[steps])
    assert steps.epochs == [[0, 1], [0, 1]]
    assert not any(dataset.set)


def test_a_keras_without_the_epoch_method_warns_and_sets_nothing(monkeypatch):
    monkeypatch.setattr(_keras_internals, "EPOCH_METHOD", "no_such_method")
    _keras_internals.enumerate_code.cache_clear()
    try:
        with pytest.warns(RuntimeWarning, match="step count of a resumed epoch"):
            assert _keras_internals.set_epoch_steps(3) is False
    finally:
        monkeypatch.undo()
        _keras_internals.enumerate_code.cache_clear()
    assert _keras_internals.enumerate_code() is not None


# ------------------------------------------------ being Keras's data adapter
class WeightProbe(keras.utils.PyDataset, _keras_internals.data_adapter_base()):
    """Records the class_weight that the Keras epoch iterator asking for batches was given."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list = []

    @property
    def num_batches(self) -> int:
        _keras_internals.note_class_weight()
        return 1

    def _batches(self):
        self.seen.append(_keras_internals.class_weight_for_caller())
        yield np.ones((2, 1), "float32"), np.zeros((2, 1), "float32")

    def get_tf_dataset(self):
        import tensorflow as tf

        self.seen.append(_keras_internals.class_weight_for_caller())
        return tf.data.Dataset.from_tensors((np.ones((2, 1), "float32"), np.zeros((2, 1), "float32")))

    def get_jax_iterator(self):
        return self._batches()

    def get_torch_dataloader(self):
        return iter(list(self._batches()))


def test_installed_keras_takes_a_data_adapter_as_given():
    base = _keras_internals.data_adapter_base()
    assert base.__name__ == _keras_internals.ADAPTER_CLASS and base.__module__ == _keras_internals.ADAPTER_MODULE
    from keras.src.trainers.data_adapters import get_data_adapter

    probe = WeightProbe()
    assert get_data_adapter(probe, class_weight={0: 2.0}) is probe


def test_the_class_weight_given_to_fit_reaches_the_adapter_per_fit():
    """Keras drops class_weight for a custom adapter; the hook finds it for the iterator that asks."""
    inputs = keras.Input((1,))
    model = keras.Model(inputs, keras.layers.Dense(1)(inputs))
    model.compile("sgd", "mse")
    probe = WeightProbe()
    model.fit(probe, epochs=1, verbose=0, class_weight={0: 2.0, 1: 0.5})
    model.fit(probe, epochs=1, verbose=0)
    first, last = probe.seen[0], probe.seen[-1]
    assert first == {0: 2.0, 1: 0.5} and last is None


def test_a_keras_without_the_adapter_class_warns_and_falls_back(monkeypatch):
    monkeypatch.setattr(_keras_internals, "ADAPTER_CLASS", "NoSuchAdapter")
    with pytest.warns(RuntimeWarning, match="cannot be Keras's data adapter"):
        assert _keras_internals.data_adapter_base() is object
