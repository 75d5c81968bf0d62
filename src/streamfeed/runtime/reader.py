"""Reads fragments in a bounded thread pool, in plan order, several ahead.

Threads, not processes: pyarrow's readers and NumPy's copies release the
GIL, so threads overlap I/O and decoding without pickling batches.
"""

from __future__ import annotations

import collections
import concurrent.futures
import contextvars
import functools
import threading
import time
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, Sequence, TypeVar

from ..core import Chunk, Fragment, chunk_len
from ..errors import BadInputReport, CorruptFileError, DataError
from ..memory import decoding_within

if TYPE_CHECKING:
    from .metrics import StageMetrics

RowOp = Callable[[Chunk], Chunk]
T = TypeVar("T")


def read_fragment(
    fragment: Fragment,
    row_ops: Sequence[RowOp],
    report: BadInputReport,
    metrics: "StageMetrics | None" = None,
    decode_bytes: int | None = None,
) -> Chunk | None:
    """Reads one fragment and applies the per-fragment ops.

    Data faults (:class:`CorruptFileError`, :class:`DataError`: unreadable,
    corrupt, undecodable, failing the null policy, from ``read()`` or from
    streamfeed's own transforms among the ops) are under the error policy:
    under the report's ``on_error="skip"`` the fragment is recorded in the
    report (with its row count) and ``None`` is returned; under ``"raise"``
    the error propagates, naming the fragment. A user function's failure
    reaches here as a :class:`~streamfeed.errors.UserFunctionError`, which
    is not a data fault: it always propagates. With ``metrics``, the read
    (wall and CPU time, rows, bytes) is recorded; the ops are timed by
    their wrappers (:meth:`StageMetrics.timed_op`). ``decode_bytes`` bounds
    what one item may decode to, in the read and the ops
    (:func:`~streamfeed.memory.decoding_within`).
    """
    try:
        with decoding_within(decode_bytes):
            chunk = fragment.read() if metrics is None else _timed_read(fragment, metrics)
            return apply_ops(chunk, row_ops, f"{fragment.path}, {fragment.location}")
    except (CorruptFileError, DataError) as exc:
        report.reject(exc, path=fragment.path, location=fragment.location, rows=fragment.num_rows)
        return None


_PLACE: contextvars.ContextVar[str] = contextvars.ContextVar("streamfeed_op_place", default="")


def apply_ops(chunk: Chunk, ops: Sequence[RowOp], place: str) -> Chunk:
    """``chunk`` through ``ops`` in order, with :func:`op_place` saying ``place`` meanwhile.

    ``place`` (a fragment's file and location, or a batch) is what a user
    function's error names; ops take only a chunk, and the metrics' timing
    wrappers must not lose it, so it travels in this thread's context.
    """
    token = _PLACE.set(place)
    try:
        for op in ops:
            chunk = op(chunk)
        return chunk
    finally:
        _PLACE.reset(token)


def op_place() -> str:
    """Where the ops running in this thread are applied ("" outside :func:`apply_ops`)."""
    return _PLACE.get()


def _timed_read(fragment: Fragment, metrics: "StageMetrics") -> Chunk:
    from .metrics import chunk_bytes

    started, cpu_started = time.perf_counter(), time.thread_time()
    chunk = fragment.read()
    seconds, cpu = time.perf_counter() - started, time.thread_time() - cpu_started
    metrics.add("read", seconds, rows=chunk_len(chunk), nbytes=chunk_bytes(chunk), cpu_seconds=cpu)
    return chunk


def in_order(
    submit: Callable[[T], concurrent.futures.Future],
    items: Iterable[T],
    ahead: int,
    *,
    take: Callable[[collections.deque], Any] | None = None,
    stopped: Callable[[], bool] = lambda: False,
) -> Iterator[Any]:
    """Results of ``submit(item)`` for each item, in order, at most ``ahead`` in flight.

    ``take`` gets the next result off the deque of pending futures (the
    default waits on the first); iteration ends early once ``stopped()``.
    """
    pending: collections.deque[concurrent.futures.Future] = collections.deque()
    upcoming = iter(items)

    def submit_next() -> None:
        for item in upcoming:
            pending.append(submit(item))
            return

    for _ in range(max(1, ahead)):
        submit_next()
    while pending and not stopped():
        result = take(pending) if take is not None else pending.popleft().result()
        submit_next()
        yield result


class OrderedReader:
    """Yields fragment chunks in the given order, reading ``ahead`` at a time.

    At most ``ahead`` fragments are in flight or waiting, so memory is
    bounded by ``ahead`` fragment sizes whatever the dataset's size.
    """

    def __init__(
        self,
        fragments: Sequence[Fragment],
        order: Sequence[int],
        *,
        row_ops: Sequence[RowOp],
        threads: int,
        ahead: int,
        report: BadInputReport,
        stop: threading.Event,
        metrics: "StageMetrics | None" = None,
        decode_bytes: int | None = None,
    ) -> None:
        self._fragments = fragments
        self._decode_bytes = decode_bytes
        self._metrics = metrics
        self._order = list(order)
        self._row_ops = row_ops
        self._ahead = max(1, ahead)
        self._report = report
        self._stop = stop
        self._pool = concurrent.futures.ThreadPoolExecutor(
            max_workers=max(1, threads), thread_name_prefix="streamfeed-read"
        )

    def __iter__(self) -> Iterator[Chunk | None]:
        take = None if self._metrics is None else functools.partial(_measured_result, self._metrics)
        return in_order(self._submit, self._order, self._ahead, take=take, stopped=self._stop.is_set)

    def _submit(self, index: int) -> concurrent.futures.Future:
        fragment = self._fragments[index]
        return self._pool.submit(
            read_fragment, fragment, self._row_ops, self._report, self._metrics, self._decode_bytes
        )

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)


def _measured_result(metrics: "StageMetrics", pending: collections.deque) -> Chunk | None:
    """The next chunk, recording fragments ready/in flight and the wait for it."""
    ready = sum(future.done() for future in pending)
    metrics.gauge("reader_ready", ready)
    metrics.gauge("reader_in_flight", len(pending) - ready)
    started = time.perf_counter()
    chunk = pending.popleft().result()
    metrics.add("read_wait", time.perf_counter() - started)
    return chunk
