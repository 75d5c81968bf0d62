"""Column transforms whose constants come from a statistics pass.

For users who prefer preprocessing outside the model: each function takes a
:class:`streamfeed.stats.Stats` (computed once, frozen to JSON) and returns
a map function for ``dataset.map(...)`` before ``batch``, so it runs in the
read threads, columnar. The constants are read from the stats when the
function is built, never from the data being mapped: training and serving
see the same numbers, and no per-batch statistics are computed.

Scaled outputs are ``float32``. NaN stays NaN (it is neither clipped nor
looked up). A constant column (std 0, or min == max) maps to 0 instead of
dividing by zero: ``x - mean`` is already 0 for every finite value.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from ..core import Chunk
from ..errors import ArgumentError, SchemaError, describe

MapFn = Callable[[Chunk], Chunk]


def _names(columns: str | Sequence[str]) -> list[str]:
    return [columns] if isinstance(columns, str) else list(columns)


def _column(stats: Any, name: str) -> Any:
    try:
        return stats[name]
    except KeyError:
        raise SchemaError(
            describe(
                f"Column {name!r} has no statistics",
                expected=f"one of {sorted(stats.columns)}",
                fix="compute the stats with this column included (compute_stats(columns=...))",
            )
        ) from None


def _numeric_stats(stats: Any, name: str, what: str) -> Any:
    column = _column(stats, name)
    if column.kind != "numeric":
        raise SchemaError(
            describe(
                f"{what} needs a numeric column; {name!r} is {column.kind}",
                fix="use vocabulary_lookup() for categorical columns",
            )
        )
    return column


def _affine(columns: list[str], shift: dict[str, float], scale: dict[str, float], name: str) -> MapFn:
    """``(x - shift) * scale`` per column, computed in float32 (float64 constants rounded once)."""
    constants = {c: (np.float32(shift[c]), np.float32(scale[c])) for c in columns}

    def transform(chunk: Chunk) -> Chunk:
        out = dict(chunk)
        for column in columns:
            offset, factor = constants[column]
            values = np.asarray(chunk[column], dtype=np.float32)
            out[column] = (values - offset) * factor
        return out

    transform.__name__ = name
    return transform


def _inverse(width: float) -> float:
    """``1 / width``, or 0 for a zero (constant column) or non-finite width."""
    return 1.0 / width if np.isfinite(width) and width > 0 else 0.0


def standardize(stats: Any, columns: str | Sequence[str]) -> MapFn:
    """``(x - mean) / std`` per column (population std, as Keras ``Normalization``).

    A column with std 0 maps every value to 0 (it carries no information);
    this is the behaviour of ``Normalization`` too, up to its epsilon.
    """
    names = _names(columns)
    shift, scale = {}, {}
    for name in names:
        column = _numeric_stats(stats, name, "standardize")
        shift[name], scale[name] = float(column.mean), _inverse(float(column.std))
    return _affine(names, shift, scale, "standardize")


def min_max_scale(stats: Any, columns: str | Sequence[str]) -> MapFn:
    """``(x - min) / (max - min)``: the stats' range onto [0, 1].

    Values outside the range seen by the stats fall outside [0, 1] (clip
    first with :func:`clip_to_quantiles` if that matters). A constant
    column (max == min) maps to 0.
    """
    names = _names(columns)
    shift, scale = {}, {}
    for name in names:
        column = _numeric_stats(stats, name, "min_max_scale")
        low, high = float(column.min), float(column.max)
        shift[name], scale[name] = low, _inverse(high - low)
    return _affine(names, shift, scale, "min_max_scale")


def clip_to_quantiles(stats: Any, columns: str | Sequence[str], low: float = 0.01, high: float = 0.99) -> MapFn:
    """Clips each column to its ``[quantile(low), quantile(high)]`` (as float32).

    The bounds are the sketch's approximate quantiles: their rank error is
    ``stats[column].quantile_rank_error``.
    """
    if not 0.0 <= low <= high <= 1.0:
        raise ArgumentError(
            describe("Invalid quantile bounds", expected="0 <= low <= high <= 1", found=f"low={low}, high={high}")
        )
    names = _names(columns)
    bounds = {}
    for name in names:
        column = _numeric_stats(stats, name, "clip_to_quantiles")
        bounds[name] = (np.float32(column.quantile(low)), np.float32(column.quantile(high)))

    def clip(chunk: Chunk) -> Chunk:
        out = dict(chunk)
        for name in names:
            lower, upper = bounds[name]
            out[name] = np.clip(np.asarray(chunk[name], dtype=np.float32), lower, upper)
        return out

    return clip


def vocabulary_ids(values: Sequence[Any], *, oov: int = 0) -> Callable[[np.ndarray], np.ndarray]:
    """A vectorised lookup: ``values[i]`` → ``i + 1``, anything else → ``oov``.

    The vocabulary is sorted once; a lookup is one ``np.searchsorted`` and
    one comparison per row, with the permutation mapping sorted positions
    back to vocabulary order. Null (``None``) and NaN values map to ``oov``.
    """
    vocabulary = _as_array(list(values))
    order = np.argsort(vocabulary, kind="stable")
    ordered = vocabulary[order]
    ids = (order + 1).astype(np.int64)

    def lookup(column: np.ndarray) -> np.ndarray:
        column = np.asarray(column)
        out = np.full(column.shape, oov, dtype=np.int64)
        if len(ordered) == 0 or column.size == 0:
            return out
        valid = _valid(column)
        keys = column[valid]
        if ordered.dtype.kind == "U":
            keys = _as_text(keys)
        elif ordered.dtype.kind in "iuf" and keys.dtype.kind not in "biuf":
            return out  # strings against a numeric vocabulary: nothing matches
        positions = np.minimum(np.searchsorted(ordered, keys), len(ordered) - 1)
        hit = ordered[positions] == keys
        out[valid] = np.where(hit, ids[positions], oov)
        return out

    return lookup


def _as_array(values: list[Any]) -> np.ndarray:
    if values and all(isinstance(v, (bytes, np.bytes_)) for v in values):
        values = [v.decode("utf-8", "surrogateescape") for v in values]
    if values and all(isinstance(v, (str, np.str_)) for v in values):
        return np.array(values, dtype=str)
    return np.asarray(values) if values else np.array([], dtype=str)


def _as_text(keys: np.ndarray) -> np.ndarray:
    if keys.dtype.kind == "O" and keys.size and isinstance(keys[0], bytes):
        keys = keys.astype("S")
    if keys.dtype.kind == "S":
        return np.char.decode(keys, "utf-8", "surrogateescape")
    return keys.astype(str)


def _valid(column: np.ndarray) -> np.ndarray:
    if column.dtype.kind == "f":
        return ~np.isnan(column)
    if column.dtype.kind == "O":
        return np.not_equal(column, None)  # type: ignore[call-overload]  # NumPy's stubs lack the object-column form
    return np.ones(column.shape, dtype=bool)


def vocabulary_lookup(
    stats: Any,
    column: str,
    *,
    oov: int = 0,
    max_tokens: int | None = None,
    output: str | None = None,
) -> MapFn:
    """Maps a categorical column to stable integer ids from its vocabulary.

    Id ``1`` is the most frequent value, ``2`` the next (ties by value), and
    so on; values outside the vocabulary (or beyond its first
    ``max_tokens`` entries), nulls and NaN get ``oov`` (0 by default). The
    ids depend only on the stats file, so every process and every run
    agrees, unlike ``hash(x) % n``. Bytes columns are compared as UTF-8
    text. The ids replace the column, or go to ``output`` if given.
    """
    stat = _column(stats, column)
    values = [value for value, _ in stat.vocabulary]
    if max_tokens is not None:
        values = values[:max_tokens]
    lookup = vocabulary_ids(values, oov=oov)
    target = output or column

    def transform(chunk: Chunk) -> Chunk:
        return {**chunk, target: lookup(chunk[column])}

    transform.__name__ = "vocabulary_lookup"
    if output is not None:
        transform.new_columns = (output,)  # type: ignore[attr-defined]
    return transform
