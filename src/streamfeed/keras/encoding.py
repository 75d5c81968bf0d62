"""Turning categorical and numeric feature columns into model-ready numbers from one stats file.

``to_keras(categorical=stats)`` encodes every feature whose statistics are
categorical (strings, bytes, and columns given as ``categorical=`` to
:func:`~streamfeed.compute_stats`; booleans stay 0/1 numbers) into integer
ids from the stats' vocabulary, and with ``standardize=True`` shifts and
scales numeric features by the stats' mean and standard deviation. It runs
inside the pipeline (in the read threads, before packing), the same on
every backend, so the model gets only numbers.

Ids follow :func:`~streamfeed.transforms.stats.vocabulary_lookup` and the
Keras lookup layers built from the same stats (``num_oov_indices=1``): id
``0`` is the out-of-vocabulary and null bucket, ``1`` the most frequent
value, and so on; a column's ``Embedding`` needs ``input_dim`` of
``len(vocabulary) + 1`` (:attr:`KerasDataset.categorical_sizes`).
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from ..core import Chunk
from ..errors import SchemaError, describe
from ..transforms.stats import vocabulary_ids


def _stats_of(stats: Any, name: str) -> Any:
    try:
        return stats[name]
    except KeyError:
        raise SchemaError(
            describe(
                f"Feature column {name!r} has no statistics",
                expected=f"one of {sorted(stats.columns)}",
                fix="compute the stats on the same columns (streamfeed.compute_stats(dataset)), "
                "or leave the column out of features=",
            )
        ) from None


def feature_encoding(
    features: Sequence[str], stats: Any, standardize: bool | Sequence[str]
) -> tuple[Callable[[Chunk], Chunk] | None, dict[str, int]]:
    """The op encoding ``features`` from ``stats`` (None if nothing to do), and each id column's size."""
    lookups: dict[str, Callable[[np.ndarray], np.ndarray]] = {}
    sizes: dict[str, int] = {}
    affine: dict[str, tuple[float, float]] = {}
    scaled = set(features if standardize is True else (standardize or ()))
    for name in features:
        column = _stats_of(stats, name) if stats is not None else None
        if column is not None and column.kind == "categorical" and column.dtype != "bool":
            values = [value for value, _ in column.vocabulary or []]
            lookups[name] = vocabulary_ids(values)
            sizes[name] = len(values) + 1
        elif name in scaled:
            if column is None or column.kind != "numeric" or column.mean is None:
                raise SchemaError(
                    describe(
                        f"Column {name!r} cannot be standardized",
                        expected="a numeric column with a mean and variance in the stats",
                        found="no stats" if column is None else f"{column.kind} statistics",
                        fix="pass categorical=stats with numeric stats for it, or leave it out of standardize=",
                    )
                )
            std = float(np.sqrt(column.variance or 0.0))
            affine[name] = (float(column.mean), 1.0 / std if std > 0 else 1.0)
    if not lookups and not affine:
        return None, sizes

    def encode(chunk: Chunk) -> Chunk:
        out = dict(chunk)
        for name, lookup in lookups.items():
            out[name] = lookup(chunk[name]).astype(np.int32)  # JAX holds int32 without x64; ids < 2**31
        for name, (mean, inverse) in affine.items():
            out[name] = ((np.asarray(chunk[name], dtype=np.float64) - mean) * inverse).astype(np.float32)
        return out

    encode.__name__ = "encode_features"
    return encode, sizes
