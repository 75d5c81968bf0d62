"""Padding variable-length list columns of a batch into rectangular arrays, with their lengths or mask.

Keras 3 takes no ragged tensors on JAX or torch (keras#19646), so a batch
of :class:`~streamfeed.core_ragged.Ragged` rows reaches the model as one
``(batch, length)`` NumPy array: every row written from the left, the rest
``value``. ``length`` is the batch's longest row (fewest pad values, one
shape per distinct longest row: each recompiles under XLA) or a fixed
length (one shape for the whole run). A row longer than a fixed length is
an error (``truncate="error"``, the default: nothing is cut silently), or
keeps its first (``"end"``: cut at the end) or last (``"start"``) values.
Beside each padded column ``<name>_length`` (int32, the row's kept values)
or ``<name>_mask`` (bool, True on real values) is added, which
``Embedding(mask_zero=True)``, ``Masking`` or an attention mask can use.

It runs per batch, first among the per-batch ops (``Dataset.batch(...,
pad=Pad(...))``), so the shuffle, the batcher, shards and resume move
ragged rows and the packing for Keras sees rectangular arrays only. Its
settings are the op's identity, every field of :class:`Pad` by
construction: a saved state restores only into the same padding.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import Callable, Literal

import numpy as np

from ..core import Chunk
from ..core_ragged import Ragged
from ..errors import ArgumentError, DataError, describe

Truncate = Literal["error", "end", "start"]
Mark = Literal["length", "mask", "none"]
Op = Callable[[Chunk], Chunk]  # spec.Op, not imported: spec names bucketing, which pads with this module


@dataclass(frozen=True)
class Pad:
    """How ``batch(..., pad=...)`` pads list columns.

    ``columns``: the columns to pad (None: every variable-length column of
    the batch; a named column must be one). ``length``: a fixed length, or
    None for the longest row of each batch. ``value``: what fills the rest
    (0, the id ``Embedding(mask_zero=True)`` masks). ``truncate``: what a
    row longer than ``length`` does (module doc). ``mark``: the column
    added beside each padded one: ``"length"`` (``<name>_length``),
    ``"mask"`` (``<name>_mask``) or ``"none"``.
    """

    columns: tuple[str, ...] | None = None
    length: int | None = None
    value: int | float = 0
    truncate: Truncate = "error"
    mark: Mark = "length"

    def __post_init__(self) -> None:
        if self.length is not None and (
            isinstance(self.length, bool) or not isinstance(self.length, int) or self.length < 0
        ):
            raise ArgumentError(
                describe("Invalid pad length", expected="an integer >= 0, or None", found=repr(self.length))
            )
        if self.truncate not in ("error", "end", "start"):
            raise ArgumentError(
                describe("Invalid truncate", expected="'error', 'end' or 'start'", found=repr(self.truncate))
            )
        if self.mark not in ("length", "mask", "none"):
            raise ArgumentError(describe("Invalid mark", expected="'length', 'mask' or 'none'", found=repr(self.mark)))
        if isinstance(self.value, bool) or not isinstance(self.value, (int, float)):
            raise ArgumentError(describe("Invalid pad value", expected="a number", found=repr(self.value)))
        if self.columns is not None:
            if isinstance(self.columns, str) or not all(isinstance(name, str) for name in self.columns):
                raise ArgumentError(
                    describe(
                        "Invalid pad columns", expected="a tuple of column names, or None", found=repr(self.columns)
                    )
                )
            object.__setattr__(self, "columns", tuple(self.columns))

    def identity(self) -> str:
        """Who this padding is in a fingerprint: every field (``dataclasses.asdict``), so none is forgotten."""
        return "streamfeed.pad" + json.dumps(dataclasses.asdict(self), sort_keys=True)

    def op(self) -> Op:
        """The per-batch op that pads a batch under these settings."""

        def pad(batch: Chunk) -> Chunk:
            return pad_batch_lists(batch, self)

        pad.__name__ = "pad"
        pad.identity = self.identity()  # type: ignore[attr-defined]
        pad.varies_shape = self.length is None  # type: ignore[attr-defined]  # each batch its longest row
        return pad


def pad_batch_lists(batch: Chunk, pad: Pad) -> Chunk:
    """``batch`` with its list columns padded and their length or mask columns added (module doc)."""
    names = (
        [name for name, column in batch.items() if isinstance(column, Ragged)] if pad.columns is None else pad.columns
    )
    out: Chunk = {}
    for name, column in batch.items():
        if name not in names:
            out[name] = column
            continue
        if not isinstance(column, Ragged):
            raise ArgumentError(
                describe(
                    f"Column {name!r} is not a variable-length list column",
                    expected="a column read as ragged rows (a Parquet list of numbers)",
                    found=f"an array of shape {np.shape(column)}",
                    fix=f"leave {name!r} out of Pad(columns=...)",
                )
            )
        padded, kept = pad_rows(column, pad, name)
        out[name] = padded
        if pad.mark == "length":
            out[f"{name}_length"] = kept.astype(np.int32)
        elif pad.mark == "mask":
            out[f"{name}_mask"] = np.arange(padded.shape[1]) < kept[:, None]
    missing = [name for name in names if name not in batch]
    if missing:
        raise ArgumentError(
            describe(
                "Pad names columns the batch does not have",
                expected=f"columns among {sorted(batch)}",
                found=", ".join(repr(name) for name in missing),
            )
        )
    return out


def pad_rows(column: Ragged, pad: Pad, name: str) -> tuple[np.ndarray, np.ndarray]:
    """``column`` as a ``(rows, length)`` array and each row's kept length (vectorised, no row loop)."""
    lengths = column.lengths()
    rows = len(column)
    longest = int(lengths.max()) if rows else 0
    width = longest if pad.length is None else pad.length
    if longest > width and pad.truncate == "error":
        row = int(np.argmax(lengths > width))
        raise DataError(
            describe(
                f"A list in column {name!r} is longer than the pad length",
                where=f"row {row} of the batch",
                expected=f"at most {width} values (Pad(length={width}, truncate='error'))",
                found=f"{int(lengths[row])} values",
                fix="raise Pad(length=...), or cut long rows with truncate='end' or 'start'",
            )
        )
    kept = np.minimum(lengths, width)
    starts = column.offsets[:-1] + (lengths - kept if pad.truncate == "start" else 0)
    out = np.full((rows, width), pad.value, dtype=column.dtype)
    within = np.arange(int(kept.sum()), dtype=np.int64) - np.repeat(np.cumsum(kept) - kept, kept)
    out[np.repeat(np.arange(rows), kept), within] = column.values[np.repeat(starts, kept) + within]
    return out, kept
