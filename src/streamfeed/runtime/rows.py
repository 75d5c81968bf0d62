"""Leaving one bad row of a fragment out, rather than the fragment, under ``on_error="skip"``.

A per-fragment op of streamfeed's own (``decode_images``) finds bad input
row by row: one undecodable image among 2 000 rows. Raising would cost the
whole fragment (the reader skips what raises), so the op asks
:func:`leave_out_row` instead: under the fragment's ``on_error="skip"``
the row is recorded in the bad-input report (``rows=1``) and the op drops
it; under ``"raise"``, or outside a fragment's ops (a per-batch op, whose
batch has a fixed size), the error is raised as before. The reader opens
the fragment's :func:`fragment_rows` around its ops; ``map``'s row check
and a later rejection of the whole fragment read :func:`rows_left_out`, so
that served + skipped stays the total.
"""

from __future__ import annotations

import contextlib
import contextvars
import itertools
from dataclasses import dataclass
from typing import Iterator, Sequence

from ..core import Fragment
from ..errors import BadInputReport, SkippedUnit, StreamfeedError


@dataclass
class FragmentRows:
    """The fragment whose ops are running: where its rows are reported, and how many were left out."""

    report: BadInputReport
    path: str
    location: str
    left_out: int = 0
    # What a per-row random op keys its draws on (``runtime/row_random.py``): the epoch, and the fragment's
    # first row in the source (the rows of the fragments before it in ``source.fragments``).
    epoch: int = 0
    first_row: int = 0


_CURRENT: contextvars.ContextVar[FragmentRows | None] = contextvars.ContextVar("streamfeed_fragment_rows", default=None)


@contextlib.contextmanager
def fragment_rows(
    report: BadInputReport, path: str, location: str, *, epoch: int = 0, first_row: int = 0
) -> Iterator[FragmentRows]:
    """Lets the ops run inside it leave single rows of the fragment at ``path``, ``location`` out,
    and tells them the ``epoch`` and the fragment's ``first_row`` in the source."""
    current = FragmentRows(report, path, location, epoch=epoch, first_row=first_row)
    token = _CURRENT.set(current)
    try:
        yield current
    finally:
        _CURRENT.reset(token)


def leave_out_row(error: StreamfeedError, row: int, *, path: str | None = None, location: str | None = None) -> None:
    """Records row ``row`` (of the chunk the op was given) as skipped for ``error``, or raises ``error``.

    It raises under ``on_error="raise"`` and outside a fragment's ops.
    The entry names the fragment's file and ``"<its location>, row <row>"``
    (the row of the fragment unless a filter ran before the op), or the
    ``path`` and ``location`` given (an image folder's file: its own unit).
    The caller drops the row when this returns.
    """
    current = _CURRENT.get()
    if current is None or current.report.on_error != "skip":
        raise error
    entry_path = current.path if path is None else path
    entry_location = f"{current.location}, row {row}" if location is None else location
    current.left_out += 1
    current.report.add(SkippedUnit(entry_path, entry_location, str(error), 1))


def rows_left_out() -> int:
    """Rows the ops of the current fragment have left out so far (0 outside a fragment's ops)."""
    current = _CURRENT.get()
    return 0 if current is None else current.left_out


def fragment_key() -> tuple[int, int] | None:
    """``(epoch, first row in the source)`` of the fragment whose ops are running (None outside them)."""
    current = _CURRENT.get()
    return None if current is None else (current.epoch, current.first_row)


def first_rows(fragments: Sequence[Fragment]) -> list[int]:
    """Each fragment's first row in the source: the rows of the fragments before it (from metadata)."""
    return [0, *itertools.accumulate(fragment.num_rows for fragment in fragments)][: len(fragments)]
