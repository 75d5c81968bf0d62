"""The one place streamfeed relies on a Keras internal: telling a peek from an epoch end.

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
"""

from __future__ import annotations

import functools
import importlib
import sys
import warnings
from types import CodeType, FrameType

from ..errors import describe

MODULE, CLASS, METHOD = "keras.src.trainers.epoch_iterator", "EpochIterator", "reset"


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
