"""Keras preprocessing layers built from a statistics file, without ``adapt``.

``layer.adapt(data)`` walks the data again in a Python loop, per layer.
These functions read the numbers from a :class:`streamfeed.stats.Stats`
(one streaming pass, frozen to JSON) and pass them to the layer's
constructor, so the layer is ready at once and training and serving use
exactly the numbers in the file. The values are part of the layer's config
and weights, so a model saved as ``.keras`` carries them.

Where each layer runs (Keras 3, verified by ``tests/keras/test_layers.py``):

=================  ==========  ============================================
layer              TensorFlow  JAX / PyTorch
=================  ==========  ============================================
Normalization      yes         yes (pure Keras ops)
Discretization     yes         yes (pure Keras ops)
IntegerLookup      yes         PyTorch: yes (eager; needs TensorFlow
                               installed). JAX: only called eagerly outside
                               a model; inside one, building the model fails
                               (TensorFlow cannot take a traced JAX array),
                               even with ``run_eagerly=True``. On JAX use
                               :func:`streamfeed.transforms.stats.vocabulary_lookup`
                               in the pipeline: it gives the same ids.
StringLookup       yes         no: JAX and PyTorch have no string tensors;
                               :func:`string_lookup_layer` raises there.
=================  ==========  ============================================

Strings cannot go through a ``PyDataset`` on any backend (Keras refuses the
dtype), so train on the ids of ``vocabulary_lookup`` (same order, OOV 0,
as this module's lookup layers with ``num_oov_indices=1``) and, on
TensorFlow, serve raw strings by putting :func:`string_lookup_layer` in
front of the trained model.

Vocabulary order is the stats' (count descending, then value ascending),
so ids are stable across runs. ``adapt`` breaks ties between equally
frequent values differently (by value descending), so ids of tied values
may differ from an adapted layer's; values with distinct counts get the
same ids.
"""

from __future__ import annotations

from typing import Any, Sequence

import keras
import numpy as np

from ..errors import ArgumentError, BackendError, SchemaError, describe


def _column(stats: Any, name: str, kind: str | None = None) -> Any:
    try:
        column = stats[name]
    except KeyError:
        raise SchemaError(
            describe(
                f"Column {name!r} has no statistics",
                expected=f"one of {sorted(stats.columns)}",
                fix="compute the stats with this column included",
            )
        ) from None
    if kind is not None and column.kind != kind:
        raise SchemaError(
            describe(
                f"Column {name!r} is {column.kind}, not {kind}",
                fix="compute the stats with categorical=[...] for lookup columns" if kind == "categorical" else None,
            )
        )
    return column


def normalization_layer(
    stats: Any, columns: str | Sequence[str], *, axis: int | None = -1, name: str | None = None
) -> keras.layers.Layer:
    """``keras.layers.Normalization`` with the columns' mean and population variance.

    For a list of columns the layer expects them stacked in that order on
    the last axis (what ``to_keras(features=columns)`` gives); for one
    column, inputs of shape ``(batch, 1)``. A constant column has variance
    0; the layer then divides by ``sqrt(epsilon)`` of Keras (its output is 0).
    """
    names = [columns] if isinstance(columns, str) else list(columns)
    stat = [_column(stats, column, "numeric") for column in names]
    mean = np.array([float(s.mean) for s in stat], dtype="float32")
    variance = np.array([float(s.variance) for s in stat], dtype="float32")
    return keras.layers.Normalization(axis=axis, mean=mean, variance=variance, name=name)


def discretization_layer(stats: Any, column: str, *, num_bins: int, name: str | None = None) -> keras.layers.Layer:
    """``keras.layers.Discretization`` with ``num_bins`` equal-frequency bins.

    The ``num_bins - 1`` boundaries are the sketch's quantiles: each is
    within ``stats[column].quantile_rank_error`` (in rank) of the exact
    quantile. Works on every backend.
    """
    if num_bins < 2:
        raise ArgumentError(
            describe(
                "Discretization needs at least two bins",
                where=f"discretization_layer(column={column!r})",
                expected="num_bins >= 2",
                found=repr(num_bins),
            )
        )
    boundaries = [float(b) for b in _column(stats, column, "numeric").quantiles(num_bins)]
    return keras.layers.Discretization(bin_boundaries=boundaries, name=name)


def _vocabulary(stats: Any, column: str, num_oov_indices: int, max_tokens: int | None) -> list:
    values = [value for value, _ in _column(stats, column).vocabulary]
    if max_tokens is not None:
        values = values[: max(0, max_tokens - num_oov_indices)]  # Keras counts OOV indices in max_tokens
    return values


def integer_lookup_layer(
    stats: Any,
    column: str,
    *,
    num_oov_indices: int = 1,
    max_tokens: int | None = None,
    name: str | None = None,
    **options: Any,
) -> keras.layers.Layer:
    """``keras.layers.IntegerLookup`` over the column's vocabulary, most frequent first.

    Index 0 is OOV (with the default ``num_oov_indices=1``), then the
    vocabulary in frequency order, like an adapted layer. Needs TensorFlow
    installed; works in models on TensorFlow and PyTorch, not inside a JAX
    model (see the module docs).
    """
    values = _vocabulary(stats, column, num_oov_indices, max_tokens)
    if any(not float(v).is_integer() for v in values):
        raise SchemaError(
            describe(f"Column {column!r} has non-integer vocabulary values", fix="use string_lookup_layer")
        )
    vocabulary = np.array([int(v) for v in values], dtype="int64")
    return keras.layers.IntegerLookup(vocabulary=vocabulary, num_oov_indices=num_oov_indices, name=name, **options)


def string_lookup_layer(
    stats: Any,
    column: str,
    *,
    num_oov_indices: int = 1,
    max_tokens: int | None = None,
    name: str | None = None,
    **options: Any,
) -> keras.layers.Layer:
    """``keras.layers.StringLookup`` over the column's vocabulary, most frequent first.

    **TensorFlow backend only** for training or serving a model: string
    tensors exist only in TensorFlow, so on JAX or PyTorch this raises.
    There, map the column to ids in the pipeline with
    :func:`streamfeed.transforms.stats.vocabulary_lookup` (same order, OOV
    id 0, like this layer's default) and feed integers to the model.
    """
    backend = keras.backend.backend()
    if backend != "tensorflow":
        raise BackendError(
            describe(
                f"StringLookup needs the TensorFlow backend; Keras runs on {backend!r}",
                where=f"string_lookup_layer(column={column!r})",
                expected="KERAS_BACKEND=tensorflow (only TensorFlow has string tensors)",
                fix=f"map {column!r} to integer ids in the pipeline with "
                "streamfeed.transforms.stats.vocabulary_lookup(stats, column) and feed those to the model",
            )
        )
    values = [
        v.decode("utf-8") if isinstance(v, bytes) else str(v)
        for v in _vocabulary(stats, column, num_oov_indices, max_tokens)
    ]
    return keras.layers.StringLookup(vocabulary=values, num_oov_indices=num_oov_indices, name=name, **options)
