"""Packing columns into what the model takes, once per fragment.

Runs in the read threads before shuffling, so the batches Keras receives
are ready-made: no per-batch stacking on the training thread. Numeric
features of one value per row are left as columns (:func:`feature_matrix`
names them) that the runtime writes side by side into the feature matrix
where it keeps the rows: once, not once here and again into the shuffle's
buffer (``runtime/assembly.py``).
"""

from __future__ import annotations

from typing import Callable, Literal, Sequence

import numpy as np

from ..core import Chunk, chunk_len
from ..errors import SchemaError, describe
from ..runtime.assembly import MatrixColumns

X, Y, W, IDS = "__x__", "__y__:", "__w__", "__ids__"
_FEATURE = "__x__#"  # the matrix's i-th column, before the runtime writes the matrix


def feature_matrix(features: Sequence[str]) -> MatrixColumns:
    """The columns :func:`pack_columns` leaves for the runtime to make the matrix ``X`` of (``inputs="matrix"``)."""
    return MatrixColumns(X, tuple(f"{_FEATURE}{index}" for index in range(len(features))))


def _not_numeric(name: str, column: np.ndarray, dtype: str) -> SchemaError:
    """Keras takes no strings through a PyDataset on any backend: say how to encode them."""
    return SchemaError(
        describe(
            f"Feature column {name!r} is not numeric",
            expected=f"numbers (a {dtype} feature, or integer ids)",
            found=f"dtype {column.dtype}",
            fix="pass categorical=streamfeed.compute_stats(dataset) to to_keras() to turn it into ids, "
            "or leave it out of features=",
        ),
        cli_fix="name the numeric columns with --features A,B (the command's model takes numbers only)",
    )


def _numeric(column: np.ndarray, name: str, dtype: str) -> np.ndarray:
    if column.dtype.kind not in "biuf":
        raise _not_numeric(name, column, dtype)
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
    encode: Callable[[Chunk], Chunk] | None = None,
    id_columns: frozenset[str] = frozenset(),
) -> Callable[[Chunk], Chunk]:
    """A per-fragment op giving the model's columns under reserved names (after ``encode``, if given).

    With ``inputs="matrix"``, features of one value per row are given as the columns of
    :func:`feature_matrix`, which the runtime writes into the matrix ``X``; others are packed into ``X`` here.

    ``id_columns`` (categorical ids from ``encode``) stay int64 in dict inputs, for ``Embedding``.
    """

    matrix = feature_matrix(features)

    def pack(chunk: Chunk) -> Chunk:
        if encode is not None:
            chunk = encode(chunk)
        rows = chunk_len(chunk)
        out: Chunk = {}
        if inputs == "matrix" and len(features) == 1 and chunk[features[0]].ndim > 2:
            # one n-D feature (images): the model takes it whole, not flattened
            out[X] = _numeric(chunk[features[0]], features[0], dtype)
        elif inputs == "matrix":
            parts = [_numeric(chunk[name], name, dtype).reshape(rows, -1) for name in features]
            width = sum(part.shape[1] for part in parts)
            if width == len(parts):  # one value per feature, the common case: the runtime writes the matrix
                out.update(zip(matrix.columns, (part[:, 0] for part in parts)))
            else:
                out[X] = np.concatenate(parts, axis=1)
        else:
            for name in features:
                column = chunk[name]
                if column.dtype.kind not in "biuf":
                    raise _not_numeric(name, column, dtype)
                out[X + name] = column if name in id_columns else column.astype(dtype, copy=False)
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
