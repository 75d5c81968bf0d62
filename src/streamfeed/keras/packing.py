"""Packing columns into what the model takes, once per fragment.

Runs in the read threads before shuffling, so the shuffle moves one
feature matrix instead of many columns and the batches Keras receives are
ready-made views: no per-batch stacking on the training thread.
"""

from __future__ import annotations

from typing import Callable, Literal, Sequence

import numpy as np

from ..core import Chunk, chunk_len, interleave
from ..errors import SchemaError, describe

X, Y, W, IDS = "__x__", "__y__:", "__w__", "__ids__"


def _numeric(column: np.ndarray, name: str, dtype: str) -> np.ndarray:
    if column.dtype.kind not in "biuf":
        raise SchemaError(
            describe(
                f"Feature column {name!r} is not numeric",
                expected=f"numbers to stack into a {dtype} matrix",
                found=f"dtype {column.dtype}",
                fix="leave it out of features=, encode it first (.map), "
                "or use inputs='dict' with a model that takes it",
            )
        )
    return column.astype(dtype, copy=False)


def pack_columns(
    features: Sequence[str],
    labels: Sequence[str],
    sample_weight: str | None,
    ids: str | None,
    *,
    inputs: Literal["matrix", "dict"],
    dtype: str,
    label_dtype: str | None,
) -> Callable[[Chunk], Chunk]:
    """A per-fragment op giving the model's columns under reserved names."""

    def pack(chunk: Chunk) -> Chunk:
        rows = chunk_len(chunk)
        out: Chunk = {}
        if inputs == "matrix" and len(features) == 1 and chunk[features[0]].ndim > 2:
            # one n-D feature (images): the model takes it whole, not flattened
            out[X] = _numeric(chunk[features[0]], features[0], dtype)
        elif inputs == "matrix":
            parts = [_numeric(chunk[name], name, dtype).reshape(rows, -1) for name in features]
            width = sum(part.shape[1] for part in parts)
            matrix = np.empty((rows, width), dtype=dtype)
            if width == len(parts):  # one value per feature: the common, tiled case
                interleave([part[:, 0] for part in parts], matrix)
            else:
                np.concatenate(parts, axis=1, out=matrix)
            out[X] = matrix
        else:
            for name in features:
                column = chunk[name]
                out[X + name] = column.astype(dtype, copy=False) if column.dtype.kind in "biuf" else column
        for name in labels:
            column = chunk[name]
            out[Y + name] = column.astype(label_dtype, copy=False) if label_dtype else column
        if sample_weight is not None:
            out[W] = chunk[sample_weight].astype("float32", copy=False)
        if ids is not None:
            out[IDS] = chunk[ids]
        return out

    pack.__name__ = "pack_for_keras"
    return pack
