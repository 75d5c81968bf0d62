"""One running epoch of a mixture, and its state.

A :class:`MixedEpoch` pulls each component's rows from that component's own
epoch (:class:`~streamfeed.pipeline.iterator.EpochIterator`: its shuffle,
plan, shard and threads) through a :class:`_Cursor`, and lays them out in
the order of :class:`~streamfeed.pipeline.mix_order.MixOrder`. A cursor is
``(component epoch, row)``: the next row of that component's epoch order.

The state is positions, never data::

    {"version": 1, "epoch": 3, "rows": 4096,
     "weights": {"books": 0.7, "web": 0.3},
     "starts": {"books": [1, 5000], "web": [0, 61000]},
     "fingerprint": {"mix": {...}}}

``rows`` served of mix epoch ``epoch``, the ``weights`` in force in it, and
where each component's cursor stood when it began (``starts``): the rows of
each component consumed since then follow from ``rows`` and the order
(:meth:`MixOrder.consumed`), so a resume reopens each component at its row,
exactly, re-reading only the component's current read unit (or batch, for
a sharded component).
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any, Mapping, NamedTuple, Protocol, Sequence

import numpy as np

from ..core import Chunk, chunk_len, slice_chunk
from ..errors import DataError, SchemaError, StateError, describe
from .iterator import EpochIterator
from .mix_order import EpochOrder
from .resolve import LanePositions, UnitPositions

if TYPE_CHECKING:
    from .dataset import Dataset

STATE_VERSION = 1
_FIX = "restore a state saved by this same mixture (same components, seed, samples_per_epoch, batch and shard)"


class ServedRows:
    """The furthest row served of each mixed epoch seen in this run, for ``mix_report`` (thread-safe: Keras feeds
    from threads)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._rows: dict[int, int] = {}

    def record(self, epoch: int, rows: int) -> None:
        with self._lock:
            self._rows[epoch] = max(self._rows.get(epoch, 0), int(rows))

    def latest(self) -> int | None:
        with self._lock:
            return max(self._rows) if self._rows else None

    def get(self, epoch: int) -> int:
        with self._lock:
            return self._rows.get(epoch, 0)


class MixStart(NamedTuple):
    """Where a mixed epoch starts (or resumes): the weights in force, each cursor at its start, rows done."""

    epoch: int
    weights: tuple[float, ...]
    starts: tuple[tuple[int, int], ...]
    rows: int = 0


def advance(cursor: tuple[int, int], rows: int, epoch_rows: int) -> tuple[int, int]:
    """A cursor ``rows`` further on: past its epoch's end, into the next epoch (a component's rows per epoch
    are the same in every epoch: the data's, the epoch only orders them)."""
    total = cursor[1] + int(rows)
    return cursor[0] + total // epoch_rows, total % epoch_rows


def make_mix_state(start: MixStart, names: Sequence[str], fingerprint: Mapping[str, Any]) -> dict:
    return {
        "version": STATE_VERSION,
        "epoch": start.epoch,
        "rows": start.rows,
        "weights": dict(zip(names, start.weights)),
        "starts": {name: list(cursor) for name, cursor in zip(names, start.starts)},
        "fingerprint": fingerprint,
    }


def _refuse(field: str, expected: str, found: str) -> StateError:
    return StateError(
        describe(f"The saved mix state's {field!r} is not valid", expected=expected, found=found, fix=_FIX)
    )


def _count(value: Any, field: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise _refuse(field, "an integer >= 0", repr(value))
    return value


def parse_mix_state(
    state: Any, names: Sequence[str], fingerprint: Mapping[str, Any], epoch_rows: Sequence[int]
) -> MixStart:
    """Checks ``state`` field by field against this mixture (as ``state.parse_state`` does); returns its start.

    The range of ``rows`` depends on the epoch's order and is checked by the caller.
    """
    if not isinstance(state, Mapping):
        raise _refuse("state", "a dict", type(state).__name__)
    if state.get("version") != STATE_VERSION:
        raise _refuse("version", str(STATE_VERSION), repr(state.get("version")))
    theirs = state.get("fingerprint")
    if not isinstance(theirs, Mapping) or "mix" not in theirs:
        raise _refuse("fingerprint", "a mixture's fingerprint (a dict with 'mix')", repr(theirs)[:200])
    if theirs != fingerprint:
        ours, saved = fingerprint["mix"], theirs["mix"] if isinstance(theirs["mix"], Mapping) else {}
        differing = sorted(key for key in {*ours, *saved} if ours.get(key) != saved.get(key))
        raise StateError(
            describe(
                "The saved state belongs to a different mixture",
                expected=f"the same {', '.join(differing) or 'fingerprint'}",
                found=f"saved {[saved.get(k) for k in differing]}"[:600]
                + f", now {[ours.get(k) for k in differing]}"[:600],
                fix=_FIX,
            )
        )
    epoch, rows = _count(state.get("epoch"), "epoch"), _count(state.get("rows"), "rows")
    weights, starts = state.get("weights"), state.get("starts")
    if not isinstance(weights, Mapping) or sorted(weights) != sorted(names):
        raise _refuse("weights", f"a weight for each of {list(names)}", repr(weights)[:200])
    values = tuple(weights[name] for name in names)
    if any(isinstance(w, bool) or not isinstance(w, (int, float)) or not w >= 0 for w in values) or not sum(values) > 0:
        raise _refuse("weights", "numbers >= 0, not all 0", repr(weights)[:200])
    if not isinstance(starts, Mapping) or sorted(starts) != sorted(names):
        raise _refuse("starts", f"a [epoch, row] for each of {list(names)}", repr(starts)[:200])
    cursors = []
    for name, limit in zip(names, epoch_rows):
        cursor = starts[name]
        if not isinstance(cursor, (list, tuple)) or len(cursor) != 2:
            raise _refuse(f"starts.{name}", "[component epoch, row]", repr(cursor))
        ce, row = _count(cursor[0], f"starts.{name}[0]"), _count(cursor[1], f"starts.{name}[1]")
        if row >= limit:
            raise _refuse(f"starts.{name}[1]", f"a row in 0..{limit - 1} of the component's epoch", str(row))
        cursors.append((ce, row))
    return MixStart(epoch, tuple(float(w) for w in values), tuple(cursors), rows)


class Mixture(Protocol):
    """What a mixed epoch reads of its :class:`~streamfeed.pipeline.mix.MixedDataset` (typed so, not by the class,
    so that ``mix.py`` importing this module closes no circle)."""

    @property
    def names(self) -> tuple[str, ...]: ...

    @property
    def components(self) -> tuple[Dataset, ...]: ...

    @property
    def epoch_rows(self) -> tuple[int, ...]: ...

    @property
    def columns(self) -> list[str]: ...

    def epoch_order(self, start: MixStart) -> EpochOrder: ...

    def finish(self, batch: Chunk, labels: np.ndarray) -> Chunk: ...

    @property
    def served(self) -> ServedRows: ...

    def state_at(self, start: MixStart) -> dict: ...

    def iter_epoch(self, epoch: int = 0, *, state: Mapping[str, Any] | None = None) -> MixedEpoch: ...


class _Cursor:
    """One component's rows, taken in its own epoch order, across its epochs."""

    def __init__(self, name: str, dataset: Dataset, epoch_rows: int, cursor: tuple[int, int]) -> None:
        self.name, self.dataset, self.epoch_rows = name, dataset, epoch_rows
        self.epoch, self.row = cursor
        self._stream: EpochIterator | None = None
        self._buffer: Chunk | None = None
        self._at = 0
        self.closed_wait_seconds = 0.0

    def _open(self) -> None:
        """Opens the component at the cursor: from the state at its row (or its batch, sharded), skipping the rest."""
        dataset = self.dataset
        positions = dataset.resolution.positions
        if isinstance(positions, LanePositions):  # a position is the batches served
            size = int(dataset.batch_size or 1)
            state, self._at = positions.state(self.epoch, self.row // size), self.row % size
        elif isinstance(positions, UnitPositions):
            state, self._at = positions.state(self.epoch, dataset.epoch_plan(self.epoch).position_of(self.row)), 0
        else:  # mix() takes unbatched components only, so never a bucketed one
            raise StateError(
                describe("A bucketed dataset cannot be a mixture's component", fix="mix unbatched datasets")
            )
        self._stream = dataset.iter_epoch(state=state)
        self._buffer = None
        self._refill(skip=self._at)

    def _refill(self, skip: int = 0) -> None:
        assert self._stream is not None
        try:
            self._buffer = next(self._stream)
        except StopIteration:
            raise DataError(
                describe(
                    f"Component {self.name!r} ended before the rows it counted",
                    where=f"component epoch {self.epoch}, row {self.row}",
                    expected=f"{self.epoch_rows} rows per epoch",
                    fix="inspect the component's bad-input report: rows were lost while reading",
                )
            ) from None
        self._at = skip

    def take(self, n: int) -> list[Chunk]:
        """The next ``n`` rows (slices of the component's batches), moving to its next epoch at its end."""
        out: list[Chunk] = []
        while n > 0:
            if self._stream is None:
                self._open()
            elif self._buffer is None or self._at >= chunk_len(self._buffer):
                self._refill()
            assert self._buffer is not None
            piece = min(n, chunk_len(self._buffer) - self._at)
            out.append(slice_chunk(self._buffer, self._at, self._at + piece))
            self._at += piece
            self.row += piece
            n -= piece
            if self.row == self.epoch_rows:  # its epoch is over: the next one starts afresh (repeat)
                self.close()
                self.epoch, self.row = self.epoch + 1, 0
        return out

    @property
    def wait_seconds(self) -> float:
        return self.closed_wait_seconds + (self._stream.wait_seconds if self._stream is not None else 0.0)

    def close(self, *, finalizing: bool = False) -> None:
        if self._stream is not None:
            self.closed_wait_seconds += self._stream.wait_seconds
            if finalizing:
                self._stream.release()
            else:
                self._stream.close()
            self._stream, self._buffer = None, None


def _dtype(column: Any) -> Any:
    return getattr(column, "dtype", None) or getattr(getattr(column, "values", None), "dtype", None)


def assemble(
    parts: Sequence[tuple[int, list[Chunk]]], labels: np.ndarray, names: Sequence[str], columns: Sequence[str]
) -> Chunk:
    """One batch: the components' rows (``(component, slices)`` in component order) placed where ``labels`` says."""
    chunks = [(i, piece) for i, pieces in parts for piece in pieces]
    out: Chunk = {}
    order = np.argsort(labels, kind="stable")  # the rows of component 0 first, each component's in its order
    where = np.empty(len(labels), dtype=np.int64)
    where[order] = np.arange(len(labels))
    for column in columns:
        values = [piece[column] for _, piece in chunks]
        kinds = {str(_dtype(v)) for v in values}
        if len(kinds) > 1:
            found = sorted({(names[i], str(_dtype(piece[column]))) for i, piece in chunks})
            raise SchemaError(
                describe(
                    f"Column {column!r} has different types in the mixed components",
                    expected="one type for each column in every component",
                    found=", ".join(f"{name}: {kind}" for name, kind in found),
                    fix="cast it in each component with .map(...) before mix()",
                )
            )
        merged = values[0] if len(values) == 1 else np.concatenate(values)
        out[column] = np.take(merged, where, axis=0) if len(chunks) > 1 else merged
    return out


class MixMark(NamedTuple):
    """Where a mixed epoch stood after a batch: the state it names, made only when asked for."""

    mixed: Mixture
    start: MixStart

    def state(self) -> dict:
        return self.mixed.state_at(self.start)


class MixedEpoch:
    """One running mixed epoch: yields batches; its components' epochs (and threads) open while it runs.

    Close it (``with``, ``close()``); a dropped one is closed by its components' own finalizers.
    """

    def __init__(self, mixed: Mixture, start: MixStart) -> None:
        self.mixed, self.start = mixed, start
        self.epoch = start.epoch
        self._plan = plan = mixed.epoch_order(start)
        consumed = plan.order.consumed(start.rows)
        self._cursors = [
            _Cursor(name, dataset, rows, advance(cursor, done, rows))
            for name, dataset, rows, cursor, done in zip(
                mixed.names, mixed.components, mixed.epoch_rows, start.starts, consumed
            )
        ]
        self._rows = start.rows
        self._closed = False

    def __iter__(self) -> MixedEpoch:
        return self

    def __next__(self) -> Chunk:
        plan = self._plan
        if self._closed or self._rows >= plan.served_rows:
            raise StopIteration
        stop = min(self._rows + plan.batch_size, plan.rows)
        labels = plan.order.labels(self._rows, stop)
        counts = np.bincount(labels, minlength=len(self._cursors))
        parts = [(i, self._cursors[i].take(int(count))) for i, count in enumerate(counts) if count]
        batch = assemble(parts, labels, self.mixed.names, self.mixed.columns)
        self._rows = stop
        self.mixed.served.record(self.epoch, stop)
        return self.mixed.finish(batch, labels)

    @property
    def reads_done(self) -> bool:
        """Never: a mixed epoch does not start its successor early (each component reads on its own)."""
        return False

    def successor(self, state: Mapping[str, Any]) -> MixedEpoch:
        return self.mixed.iter_epoch(state=state)

    def mark(self) -> MixMark:
        return MixMark(self.mixed, self.start._replace(rows=self._rows))

    def get_state(self) -> dict:
        """The state after the last batch handed out (after the epoch's last, the next epoch's start)."""
        return self.mark().state()

    @property
    def wait_seconds(self) -> float:
        return sum(cursor.wait_seconds for cursor in self._cursors)

    def close(self) -> None:
        self._closed = True
        for cursor in self._cursors:
            cursor.close()

    def release(self) -> None:
        self._closed = True
        for cursor in self._cursors:
            cursor.close(finalizing=True)

    def __enter__(self) -> MixedEpoch:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
