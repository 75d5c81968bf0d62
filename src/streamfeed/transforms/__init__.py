"""Column transforms for ``Dataset.map``: image decoding and scaling from stats; augmentations for ``random_map``.

Each is a plain function over a dict of NumPy arrays. Nothing is imported
until a name is used, so importing this package loads no source module.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

_WHERE = {
    "compose": ".augment",
    "random_affine": ".augment",
    "random_brightness_contrast": ".augment",
    "random_crop": ".augment",
    "random_flip": ".augment",
    "random_resized_crop": ".augment",
    "random_rotation": ".augment",
    "decode_images": ".images",
    "clip_to_quantiles": ".stats",
    "min_max_scale": ".stats",
    "standardize": ".stats",
    "vocabulary_lookup": ".stats",
}

__all__ = sorted(_WHERE)


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(_WHERE[name], __name__), name)
