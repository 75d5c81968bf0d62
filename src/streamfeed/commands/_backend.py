"""Choosing a Keras backend before Keras is imported, and importing it without TensorFlow's start-up lines."""

from __future__ import annotations

import contextlib
import json
import os
import sys
from pathlib import Path
from typing import Iterator

from ..errors import MissingDependencyError, describe


def choose_keras_backend() -> str:
    """Keeps the user's KERAS_BACKEND; otherwise the first installed of TF, JAX, torch.

    Keras defaults to TensorFlow even when only JAX or torch is installed;
    the demo must run on whichever backend the machine has.
    """
    import importlib.util

    configured = os.environ.get("KERAS_BACKEND") or _keras_config_backend()
    if configured:
        return configured
    for backend, module in (("tensorflow", "tensorflow"), ("jax", "jax"), ("torch", "torch")):
        if importlib.util.find_spec(module) is not None:
            os.environ["KERAS_BACKEND"] = backend
            return backend
    raise MissingDependencyError(
        describe(
            "No Keras backend is installed",
            expected="TensorFlow, JAX or torch",
            fix="pip install 'streamfeed[tensorflow]' (or [jax], [torch]), or from a checkout of streamfeed "
            "pip install -e '.[tensorflow]'",
        )
    )


def _keras_config_backend() -> str | None:
    config = Path(os.environ.get("KERAS_HOME", Path.home() / ".keras")) / "keras.json"
    try:
        return json.loads(config.read_text()).get("backend")
    except (OSError, ValueError):
        return None


def load_keras(*, silence: bool = True) -> None:
    """Chooses the backend and imports Keras, with its C++ start-up lines silenced unless ``silence`` is False.

    TensorFlow writes its absl and oneDNN notices straight to file
    descriptor 2 while it loads, before ``TF_CPP_MIN_LOG_LEVEL`` is read,
    so the import runs with that descriptor pointed at the null device
    (an exception still surfaces as usual; ``--debug`` shows everything).
    """
    choose_keras_backend()
    if "keras" in sys.modules:
        return
    with _stderr_silenced() if silence else contextlib.nullcontext():
        import keras  # noqa: F401


@contextlib.contextmanager
def _stderr_silenced() -> Iterator[None]:
    sys.stderr.flush()
    try:
        saved = os.dup(2)
    except OSError:  # no descriptor 2 to silence
        yield
        return
    null = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(null, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(null)
