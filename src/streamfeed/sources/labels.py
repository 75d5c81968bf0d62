"""Label maps shared by the sources that carry one (image folders, converted image sets).

A label is a sparse class index: an int (not a bool, not a float even if
integral) in ``0 .. LABEL_LIMIT - 1``, below 2**31 because JAX without x64
and some Keras ops hold labels as int32, where larger values would wrap.
"""

from __future__ import annotations

import json
import os
from typing import Any, Mapping

import numpy as np

from ..files.atomic import write_atomic

LABEL_LIMIT = 2**31
LABEL_EXPECTED = f"an int with 0 <= label < 2**31 = {LABEL_LIMIT} (a sparse class index; not a bool, float or str)"


def is_label(value: Any) -> bool:
    """An int (Python or NumPy, not a bool) in ``0 .. LABEL_LIMIT - 1``: floats are refused even when integral."""
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool) and bool(0 <= value < LABEL_LIMIT)


def class_names(label_map: Mapping[str, int]) -> list[str]:
    """Class names in label order."""
    return sorted(label_map, key=label_map.__getitem__)


def write_label_map(label_map: Mapping[str, int], path: str | os.PathLike) -> None:
    """Writes ``{"class name": label, ...}`` as JSON, the form ``read_images(label_map=path)`` reads."""
    write_atomic(path, json.dumps(dict(label_map), ensure_ascii=False, indent=1))
