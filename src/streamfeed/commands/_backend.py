"""Choosing a Keras backend before Keras is imported."""

from __future__ import annotations

import json
import os
from pathlib import Path

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
            fix="pip install 'streamfeed[tensorflow]' (or [jax], [torch])",
        )
    )


def _keras_config_backend() -> str | None:
    config = Path(os.environ.get("KERAS_HOME", Path.home() / ".keras")) / "keras.json"
    try:
        return json.loads(config.read_text()).get("backend")
    except (OSError, ValueError):
        return None
