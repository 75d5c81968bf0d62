"""The one place streamfeed relies on Keras internals: telling a peek from an epoch end,
and giving Keras the step count of a resumed epoch.

What. :func:`called_from_epoch_reset` is True when the running
``PyDataset.on_epoch_end`` call comes from Keras's
``keras.src.trainers.epoch_iterator.EpochIterator.reset`` — Keras
abandoning an epoch — rather than from the end of an epoch it iterated.

Why internals. Before training, ``fit`` and ``evaluate`` peek at the data
to build the model and then call ``EpochIterator.reset()``, which calls
``on_epoch_end``. Recorded with Keras 3.15.1 (a probe ``PyDataset`` logging
every call, and a callback logging Keras's own epochs and batches), for an
unbuilt model fitting a one-batch dataset:

    TensorFlow  nb nb nb get0 nb END(reset) | begin0 BEGIN nb nb get0 batch_end0 END epoch_end0 | ...
    JAX, torch  nb nb BEGIN nb nb get0 nb END(reset) | begin0 BEGIN nb nb get0 batch_end0 nb END epoch_end0 | ...

(``nb``: ``num_batches`` read; ``get0``: ``__getitem__(0)``; ``BEGIN``/``END``:
``PyDataset.on_epoch_begin``/``on_epoch_end``; ``begin0``, ``batch_end0``,
``epoch_end0``: the callbacks.) TensorFlow peeks at up to two batches outside
``on_epoch_begin``, so the adapter tells that peek apart with public calls
alone. JAX and PyTorch peek at one batch *through* ``on_epoch_begin``: for a
one-batch epoch the peek and a trained epoch make the very same calls,
including the ``num_batches`` read just before ``on_epoch_end``, with or
without ``steps_per_execution`` (the peek still reads one batch). Keras's
callbacks do see the difference (they are not called for the peek), but
Keras gives a data adapter no way to add a callback to ``fit``, and
requiring users to pass one would break every plain ``fit(train)``. So no
public mechanism exists, and this module is the quarantine.

How. The check compares code objects on the call stack with
``EpochIterator.reset.__code__`` (identity, not a name: a method called
``reset`` elsewhere does not count; the backends' epoch iterators inherit
``reset``). It runs only when an epoch that began with ``on_epoch_begin``
was served in full — once per epoch, a few dozen frames.

If Keras changes. ``tests/keras/test_keras_internals.py`` (the canary)
fails when the method is gone, and the backend tests run a one-batch fit
on each backend. At run time a Keras without the method gets a
``RuntimeWarning`` once, and epochs of one batch may then be counted twice
on JAX and PyTorch (the data epoch runs one ahead of Keras's).

The step count of a resumed epoch
---------------------------------

What. :func:`set_epoch_steps` makes the Keras ``EpochIterator`` that is
beginning an epoch run the number of steps the adapter has for *that*
epoch. ``KerasDataset.on_epoch_begin`` calls it.

Why internals. Keras reads a ``PyDataset``'s ``num_batches`` into
``EpochIterator._num_batches`` when it builds the iterator and in
``reset()``, which ``fit`` calls once, after its peek and *before*
``on_train_begin``, where :class:`DataCheckpoint` restores a mid-epoch
state; every epoch of the ``fit`` then runs that many steps
(``_enumerate_iterator``: ``steps_per_epoch = self.steps_per_epoch or
self._num_batches``). A resumed epoch has fewer batches left (15 of 27 in
the backend tests), so Keras asked for a 16th batch, and (Keras 3.15.1,
measured with a ``PyDataset`` promising 3 batches and serving 2, Adam,
2 epochs):

- every backend warned "Your input ran out of data; interrupting
  training" (``EpochIterator._interrupted_warning``), and
- TensorFlow pulls the batch inside the compiled train step
  (``iterator.get_next()`` with ``steps_per_execution=1``). The step fails
  with ``OutOfRangeError``, but ``optimizer.iterations.assign_add(1)``
  does not depend on the data, so TensorFlow's graph executor runs it
  anyway: ``iterations`` was 3 and 6 after the epochs instead of 2 and 4
  (JAX and PyTorch pull the batch in Python and stay at 2 and 4). SGD does
  not read ``iterations``, so its resume stayed bit-identical; Adam's bias
  correction does, so every later update differed (the resumed Adam run
  ended at 109 iterations instead of 108, weights off by up to 2e-3).

Giving the resumed epoch's count to Keras before ``fit`` (restoring in
the callback's constructor) does not help: Keras reads the count once
per ``fit``, so the later, full epochs would be cut short. No public API
lets a data adapter change the count of one epoch, so this module
sets ``_num_batches`` of the running iterator at the start of each epoch:
``_enumerate_iterator`` calls ``data_adapter.on_epoch_begin()`` (which
reaches ``KerasDataset.on_epoch_begin``) right before it reads
``_num_batches``. The epoch then ends after exactly the batches that are
left, through Keras's normal end-of-epoch path: no warning, no extra step.
The iterator is found like the reset above, by the identity of
``EpochIterator._enumerate_iterator.__code__`` on the call stack (its
frame's ``self``). A ``steps_per_epoch`` given to ``fit`` is left alone.

If Keras changes. The canaries in ``tests/keras/test_keras_internals.py``
fail when the method or the attribute is gone or the order of the two
reads changes, and ``tests/keras/test_backends.py`` resumes Adam runs on
every backend. At run time a Keras without them gets a ``RuntimeWarning``
once, and a resumed epoch behaves as described above (the warning; on
TensorFlow one extra optimizer iteration).
"""

from __future__ import annotations

import functools
import importlib
import sys
import warnings
import weakref
from types import CodeType, FrameType
from typing import Any

from ..errors import describe

MODULE, CLASS, METHOD = "keras.src.trainers.epoch_iterator", "EpochIterator", "reset"
EPOCH_METHOD, STEPS_ATTRIBUTE = "_enumerate_iterator", "_num_batches"


@functools.cache
def reset_code() -> CodeType | None:
    """The code of Keras's ``EpochIterator.reset``, or None (with a warning) if this Keras has none."""
    try:
        return getattr(getattr(importlib.import_module(MODULE), CLASS), METHOD).__code__
    except (ImportError, AttributeError) as exc:
        warnings.warn(
            describe(
                "streamfeed cannot tell a Keras peek from an epoch end with this Keras",
                expected=f"{MODULE}.{CLASS}.{METHOD}",
                found=f"{type(exc).__name__}: {exc}",
                fix="epochs of one batch may be counted twice on JAX and PyTorch; "
                "use a Keras version streamfeed supports, or report this Keras version",
            ),
            RuntimeWarning,
            stacklevel=2,
        )
        return None


def called_from_epoch_reset() -> bool:
    """True when Keras's ``EpochIterator.reset()`` is on the call stack (it abandons an epoch)."""
    code = reset_code()
    frame: FrameType | None = sys._getframe(1)
    while code is not None and frame is not None:
        if frame.f_code is code:
            return True
        frame = frame.f_back
    return False


@functools.cache
def enumerate_code() -> CodeType | None:
    """The code of Keras's ``EpochIterator._enumerate_iterator``, or None (with a warning) if this Keras has none."""
    try:
        return getattr(getattr(importlib.import_module(MODULE), CLASS), EPOCH_METHOD).__code__
    except (ImportError, AttributeError) as exc:
        _warn_no_steps(f"{type(exc).__name__}: {exc}")
        return None


def _warn_no_steps(found: str) -> None:
    warnings.warn(
        describe(
            "streamfeed cannot give Keras the step count of a resumed epoch with this Keras",
            expected=f"{MODULE}.{CLASS}.{EPOCH_METHOD} and its {STEPS_ATTRIBUTE}",
            found=found,
            fix="a resumed epoch may warn that the input ran out of data, and on TensorFlow count one "
            "optimizer iteration too many; use a Keras version streamfeed supports, or report this Keras version",
        ),
        RuntimeWarning,
        stacklevel=3,
    )


def set_epoch_steps(num_batches: int) -> bool:
    """Makes the Keras epoch iterator beginning an epoch (on the call stack) run ``num_batches`` steps.

    Returns whether one was found and set; False outside Keras (a direct
    call) and when ``fit`` was given ``steps_per_epoch``.
    """
    code = enumerate_code()
    frame: FrameType | None = sys._getframe(1)
    while code is not None and frame is not None:
        if frame.f_code is code:
            iterator = frame.f_locals.get("self")
            if not hasattr(iterator, STEPS_ATTRIBUTE):
                _warn_once_no_attribute(type(iterator).__name__)
                return False
            if getattr(iterator, "steps_per_epoch", None):
                return False
            setattr(iterator, STEPS_ATTRIBUTE, num_batches)
            return True
        frame = frame.f_back
    return False


def beginning_epoch_iterator() -> Any:
    """The Keras epoch iterator beginning an epoch (on the call stack, as for :func:`set_epoch_steps`), or None.

    The adapter starts the next epoch's reads early only for an iterator
    that has already completed an epoch (``fit``'s later epochs, a reused
    validation iterator), and stops that early start when the iterator is
    collected (``fit`` returned): Keras does not tell a data adapter when
    it is done; how many epochs ``fit`` has left is read by
    :func:`epochs_after_this`.
    """
    code = enumerate_code()
    frame: FrameType | None = sys._getframe(1)
    while code is not None and frame is not None:
        if frame.f_code is code:
            return frame.f_locals.get("self")
        frame = frame.f_back
    return None


@functools.cache
def _warn_once_no_attribute(class_name: str) -> None:
    _warn_no_steps(f"{class_name} without {STEPS_ATTRIBUTE}")


# --------------------------------------------------- being Keras's data adapter
# What. ``KerasDataset`` is also a ``keras.src.trainers.data_adapters.data_adapter.DataAdapter``,
# so ``fit``/``evaluate``/``predict`` use it as their data adapter (``get_data_adapter``
# returns an instance of it unchanged: "Allow passing a custom data adapter") instead of
# wrapping it in Keras's ``PyDatasetAdapter``. Why: that wrapper crosses from Python to
# TensorFlow once per batch (``tf.data.Dataset.from_generator``); as the adapter, streamfeed
# hands TensorFlow blocks of many batches per crossing, and JAX and PyTorch their batches
# without the per-batch re-indexing and conversions. The class is not in Keras's public API.
# If it is gone, the base is ``object``, a ``RuntimeWarning`` says so once, and Keras wraps
# the dataset in its ``PyDatasetAdapter`` as before (slower on TensorFlow, still exact).
#
# The price: Keras no longer applies ``fit(class_weight=...)`` for us (``get_data_adapter``
# drops it when it returns our adapter). Keras's ``EpochIterator.__init__`` reads the
# adapter's ``num_batches`` right after choosing it, with ``class_weight`` among its locals:
# :func:`note_class_weight`, called from ``num_batches``, records it for that iterator, and
# :func:`class_weight_for_caller` finds it again when that iterator asks for its batches.
# The canaries in ``tests/keras/test_keras_internals.py`` fail when any of this moves.
ADAPTER_MODULE, ADAPTER_CLASS = "keras.src.trainers.data_adapters.data_adapter", "DataAdapter"
INIT_METHOD, CLASS_WEIGHT_LOCAL = "__init__", "class_weight"
_class_weights: "weakref.WeakKeyDictionary[object, Any]" = weakref.WeakKeyDictionary()


def data_adapter_base() -> type:
    """Keras's ``DataAdapter`` class, or ``object`` (with a warning) if this Keras has none."""
    try:
        return getattr(importlib.import_module(ADAPTER_MODULE), ADAPTER_CLASS)
    except (ImportError, AttributeError) as exc:
        warnings.warn(
            describe(
                "streamfeed cannot be Keras's data adapter with this Keras",
                expected=f"{ADAPTER_MODULE}.{ADAPTER_CLASS}",
                found=f"{type(exc).__name__}: {exc}",
                fix="training works through Keras's PyDataset adapter, more slowly on TensorFlow; "
                "use a Keras version streamfeed supports, or report this Keras version",
            ),
            RuntimeWarning,
            stacklevel=2,
        )
        return object


@functools.cache
def _epoch_iterator_class() -> type | None:
    try:
        return getattr(importlib.import_module(MODULE), CLASS)
    except (ImportError, AttributeError):
        return None


def note_class_weight() -> None:
    """Records ``class_weight`` if the caller's caller is Keras's ``EpochIterator.__init__``."""
    cls = _epoch_iterator_class()
    frame = sys._getframe(2)
    if cls is None or frame.f_code is not getattr(cls, INIT_METHOD).__code__:
        return
    iterator = frame.f_locals.get("self")
    if iterator is not None:
        _class_weights[iterator] = frame.f_locals.get(CLASS_WEIGHT_LOCAL)


def class_weight_for_caller(depth: int = 8) -> Any:
    """The ``class_weight`` the Keras epoch iterator asking for batches (on the call stack) was given."""
    cls = _epoch_iterator_class()
    frame: FrameType | None = sys._getframe(1)
    while cls is not None and frame is not None and depth > 0:
        owner = frame.f_locals.get("self") if "self" in frame.f_code.co_varnames else None
        if isinstance(owner, cls):
            return _class_weights.get(owner)
        frame, depth = frame.f_back, depth - 1
    return None


# ------------------------------------------- the epochs the running fit has left
# What. :func:`epochs_after_this` is how many epochs the running ``fit`` will still run after the
# one beginning: ``epochs - 1 - epoch``, the two locals of the backend's ``fit`` loop
# (``for epoch in range(initial_epoch, epochs)``, the same on TensorFlow, JAX and PyTorch).
# Why internals: Keras gives ``epochs`` to callbacks (``params``) but not to a data adapter, and
# the adapter's early start of the next epoch must not read an epoch ``fit`` never runs (issue 28:
# a one-epoch fit read ~0.6 GB for nothing, then waited for those reads when it returned).
# How: from the ``_enumerate_iterator`` frame beginning the epoch (as above), the nearest ``fit``
# frame of a ``keras.Model`` above it: a validation ``evaluate`` inside ``fit`` gets the ``fit``'s
# epochs left. None outside ``fit`` (``evaluate``, ``predict``: one epoch per call), during
# ``fit``'s peek (before its loop) and if this Keras has no such locals: no early start then.
FIT_METHOD, EPOCH_LOCAL, EPOCHS_LOCAL = "fit", "epoch", "epochs"


def epochs_after_this() -> int | None:
    """Epochs the running ``fit`` runs after the one beginning (on the call stack), or None if unknown."""
    import keras

    code = enumerate_code()
    frame: FrameType | None = sys._getframe(1)
    while code is not None and frame is not None and frame.f_code is not code:
        frame = frame.f_back
    while frame is not None:
        if frame.f_code.co_name == FIT_METHOD and isinstance(frame.f_locals.get("self"), keras.Model):
            epoch, epochs = frame.f_locals.get(EPOCH_LOCAL), frame.f_locals.get(EPOCHS_LOCAL)
            return max(0, epochs - 1 - epoch) if isinstance(epoch, int) and isinstance(epochs, int) else None
        frame = frame.f_back
    return None
