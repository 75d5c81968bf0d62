"""User ops as the runtime runs them: ``map`` and ``filter`` functions wrapped with their checks and their identity.

A wrapped op is a plain ``Chunk -> Chunk`` function (``runtime.spec.Op``)
carrying ``identity`` (who it is in a saved state's fingerprint) and, when
known, ``new_columns`` (what it adds). What a user function raises becomes
a :class:`~streamfeed.errors.UserFunctionError` naming it and where it ran.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ..core import Chunk, chunk_len
from ..errors import ArgumentError, CorruptFileError, DataError, ErrorBudgetExceeded, UserFunctionError, describe
from ..runtime.batch import PAD_MASK
from ..runtime.reader import op_place
from ..runtime.rows import rows_left_out
from ..runtime.spec import Op


def call_user(fn: Callable[[Chunk], Any], chunk: Chunk, kind: str, name: str, *, mask: bool = False) -> Any:
    """``fn(chunk)`` (as a boolean array if ``mask``); what it raises names it and where it ran.

    A failing user function is a bug, not bad input: it becomes a
    :class:`UserFunctionError`, which ``on_error="skip"`` never skips.
    streamfeed's own transforms (``decode_images``) are not user code: the
    data faults they find (undecodable bytes, an image bomb) stay data
    faults, under the error policy like a fragment that cannot be read, and
    so does the error budget their skipped rows exceed.
    """
    try:
        out = fn(chunk)
        return np.asarray(out, dtype=bool) if mask else out
    except Exception as exc:
        ours = str(getattr(fn, "__module__", "")).startswith("streamfeed.")
        if ours and isinstance(exc, (CorruptFileError, DataError, ErrorBudgetExceeded)):
            raise
        raise UserFunctionError(
            describe(
                f"{kind} {name!r} raised {type(exc).__name__}: {exc}",
                where=op_place(),
                fix=f"fix {name}: an error in user code always raises (on_error='skip' skips only bad data)",
            )
        ) from exc


_VERSION_LENGTH = 200  # a version names a revision ("2", a date, a commit), not a document


def op_identity(fn: Callable[..., Any], name: str | None, version: str | None) -> str:
    """Who a user op is in a fingerprint: the ``name`` given, else its module and name; then ``@version``.

    A saved state is restored only into a pipeline with the same ops: a
    filter added or changed would serve other rows at the same position.
    Code is not hashed (a closure's values would escape it anyway): bump
    ``version`` when a function changes its rows under the same name.
    """
    if version is not None and (not isinstance(version, str) or not 0 < len(version) <= _VERSION_LENGTH):
        raise ArgumentError(
            describe(
                "Invalid op version",
                expected=f"a string of 1 to {_VERSION_LENGTH} characters (version='2', a date, a commit)",
                found=repr(version)[:80],
            )
        )
    if name is None:
        qualified = str(getattr(fn, "__qualname__", type(fn).__qualname__))
        renamed = str(getattr(fn, "__name__", qualified))  # streamfeed's transforms name their column
        last = qualified.rsplit(".", 1)[-1]
        name = f"{getattr(fn, '__module__', None) or '?'}.{qualified if renamed == last else renamed}"
    return name if version is None else f"{name}@{version}"


def row_preserving(fn: Callable[[Chunk], Chunk], name: str) -> Callable[[Chunk], Chunk]:
    """``fn`` as an op that must return a dict of columns with as many rows as it was given.

    Less the rows it left out as bad input (``runtime/rows.py``: only
    streamfeed's own transforms do, under ``on_error="skip"``), each of them
    reported.
    """

    def op(chunk: Chunk) -> Chunk:
        left_out = rows_left_out()
        out = call_user(fn, chunk, "map function", name)
        rows = chunk_len(chunk) - (rows_left_out() - left_out)
        if not isinstance(out, dict):
            found = f"a {type(out).__name__}"
        else:
            wrong = {key: len(column) if hasattr(column, "__len__") else None for key, column in out.items()}
            found = ", ".join(f"{key!r}: {n} rows" for key, n in wrong.items() if n != rows)
            if not found and (out or not rows):
                return out
        raise UserFunctionError(
            describe(
                f"map function {name!r} changed the number of rows",
                where=op_place(),
                expected=f"a dict of columns of {rows} rows, as many as in",
                found=found or "no columns",
                fix="use .filter() to drop rows; map must keep one output row per input row",
            )
        )

    op.__name__ = name
    if hasattr(fn, "new_columns"):  # declared; otherwise what it returns is known only by running it
        op.new_columns = tuple(fn.new_columns)  # type: ignore[attr-defined]
    if getattr(fn, "leaves_out_rows", False):  # under on_error="skip": its rows are counted, as a filter's
        op.leaves_out_rows = True  # type: ignore[attr-defined]
    return op


def filtering(predicate: Callable[[Chunk], np.ndarray], name: str) -> Callable[[Chunk], Chunk]:
    """``predicate`` as an op keeping the rows where its mask (one bool per row) is True."""

    def op(chunk: Chunk) -> Chunk:
        mask = call_user(predicate, chunk, "filter predicate", name, mask=True)
        if mask.shape != (chunk_len(chunk),):
            raise UserFunctionError(
                describe(
                    f"filter predicate {name!r} returned the wrong shape",
                    where=op_place(),
                    expected=f"a boolean mask of shape ({chunk_len(chunk)},), one entry per row",
                    found=f"shape {mask.shape}",
                    fix=f"make {name} return one bool per row of the columns it is given",
                )
            )
        return {key: column[mask] for key, column in chunk.items()}

    op.__name__ = name
    op.new_columns = ()  # type: ignore[attr-defined]  # a filter keeps the columns it is given
    return op


def drops_rows(op: Op, on_error: str) -> bool:
    """Whether ``op`` leaves bad rows out one by one (``decode_images`` under ``on_error="skip"``): rows to count."""
    return bool(getattr(op, "leaves_out_rows", False)) and on_error == "skip"


def identity_of(op: Op) -> str:
    return str(getattr(op, "identity", getattr(op, "__name__", "op")))


def keeping_pad_mask(pack: Op) -> Op:
    """``pack`` for whole batches: the padding mask the batcher added passes through."""

    def packed(batch: Chunk) -> Chunk:
        out = pack(batch)
        return {**out, PAD_MASK: batch[PAD_MASK]} if PAD_MASK in batch else out

    packed.__name__ = getattr(pack, "__name__", "pack")
    return packed
