"""Checking the first batch against a model's inputs, in the user's terms.

A mismatch caught here names the column and the model input; caught by
the backend it would be a stack trace from inside a compiled function.
"""

from __future__ import annotations

from typing import Any, Sequence

from ..core import Chunk
from ..errors import SchemaError, describe
from .packing import X


def _input_specs(model: Any) -> list[tuple[str, tuple, str]]:
    specs = []
    for tensor in getattr(model, "inputs", None) or []:
        name = getattr(tensor, "name", "input")
        specs.append((name.split(":")[0], tuple(tensor.shape), str(getattr(tensor, "dtype", ""))))
    return specs


def _fits(want: tuple, got: tuple) -> bool:
    """Whether a column of per-row shape ``got`` feeds an input of per-row shape ``want``, as Keras takes it.

    Keras adds a trailing axis of 1 to a ``(batch,)`` array given to an
    ``Input(shape=(1,))`` (``tree.map_structure`` + ``expand_dims`` in its
    data adapters), so that is accepted; any other rank or size is not.
    """
    if got == () and want in ((1,), (None,)):
        return True
    return len(want) == len(got) and all(w is None or w == g for w, g in zip(want, got))


def check_model_inputs(model: Any, batch: Chunk, features: Sequence[str], inputs: str) -> None:
    """Raises :class:`SchemaError` if the batch cannot feed ``model``'s inputs."""
    specs = _input_specs(model)
    if not specs:  # a subclassed or unbuilt model: Keras will infer the inputs
        return
    if inputs == "matrix":
        if len(specs) != 1:
            raise SchemaError(
                describe(
                    "The model has several inputs but the data is one stacked matrix",
                    expected="one model input for inputs='matrix'",
                    found=f"inputs {[name for name, _, _ in specs]}",
                    fix="use to_keras(inputs='dict') so columns map to inputs by name",
                )
            )
        name, shape, _ = specs[0]
        width = batch[X].shape[1:]
        if tuple(shape[1:]) != tuple(width) and None not in shape[1:]:
            columns = f"{list(features)[:8]}" + ("..." if len(features) > 8 else "")
            raise SchemaError(
                describe(
                    f"The feature matrix does not fit model input {name!r}",
                    expected=f"shape (batch, {', '.join(map(str, shape[1:]))})",
                    found=f"(batch, {', '.join(map(str, width))}) from {len(features)} feature columns {columns}",
                    fix="choose the columns with features=[...] or change the model's Input shape",
                )
            )
        return
    available = {key[len(X) :]: column for key, column in batch.items() if key.startswith(X)}
    for name, shape, dtype in specs:
        if name not in available:
            raise SchemaError(
                describe(
                    f"Model input {name!r} has no column of that name",
                    expected=f"a feature column named {name!r}",
                    found=f"feature columns {sorted(available)}",
                    fix="name the Input layers after the columns, or rename columns with .map()",
                )
            )
        column = available[name]
        if not _fits(tuple(shape[1:]), tuple(column.shape[1:])):
            raise SchemaError(
                describe(
                    f"Column {name!r} does not fit model input {name!r}",
                    expected=f"shape (batch, {', '.join(map(str, shape[1:]))})",
                    found=f"shape (batch, {', '.join(map(str, column.shape[1:]))})",
                    fix="reshape the column with .map(), or change the Input shape",
                )
            )
        if ("string" in dtype) != (column.dtype.kind in "OUS"):
            raise SchemaError(
                describe(
                    f"Column {name!r} has the wrong kind of values for model input {name!r}",
                    expected=f"dtype {dtype}",
                    found=f"dtype {column.dtype}",
                )
            )
