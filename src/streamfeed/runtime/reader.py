"""Reads fragments in a bounded thread pool, in plan order, several ahead.

Threads, not processes: pyarrow's readers and NumPy's copies release the
GIL, so threads overlap I/O and decoding without pickling batches.
"""

from __future__ import annotations

import collections
import concurrent.futures
import contextvars
import functools
import itertools
import threading
import time
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, Sequence, TypeVar, cast

from ..core import Chunk, Fragment, chunk_len
from ..errors import BadInputReport, CorruptFileError, DataError
from ..memory import decoding_within
from .rows import first_rows, fragment_rows

if TYPE_CHECKING:
    from .autotune import Autotuner
    from .metrics import StageMetrics

RowOp = Callable[[Chunk], Chunk]
T = TypeVar("T")


def read_fragment(
    fragment: Fragment,
    row_ops: Sequence[RowOp],
    report: BadInputReport,
    metrics: "StageMetrics | None" = None,
    decode_bytes: int | None = None,
    *,
    epoch: int = 0,
    first_row: int = 0,
) -> Chunk | None:
    """Reads one fragment and applies the per-fragment ops.

    Data faults (:class:`CorruptFileError`, :class:`DataError`: unreadable,
    corrupt, undecodable, failing the null policy, from ``read()`` or from
    streamfeed's own transforms among the ops) are under the error policy:
    under the report's ``on_error="skip"`` the fragment is recorded in the
    report (with its row count) and ``None`` is returned; under ``"raise"``
    the error propagates, naming the fragment. A user function's failure
    reaches here as a :class:`~streamfeed.errors.UserFunctionError`, which
    is not a data fault: it always propagates. A transform of streamfeed's
    own may leave single bad rows out instead (``runtime/rows.py``): those
    are reported already, and a later rejection of the fragment counts only
    the rest of its rows. With ``metrics``, the read
    (wall and CPU time, rows, bytes) is recorded; the ops are timed by
    their wrappers (:meth:`StageMetrics.timed_op`). ``decode_bytes`` bounds
    what one item may decode to, in the read and the ops
    (:func:`~streamfeed.memory.decoding_within`). ``epoch`` and ``first_row``
    (the fragment's first row in the source) are what a per-row random op
    keys its draws on (``runtime/row_random.py``).
    """
    with fragment_rows(report, fragment.path, fragment.location, epoch=epoch, first_row=first_row) as rows:
        try:
            with decoding_within(decode_bytes):
                chunk = fragment.read() if metrics is None else _timed_read(fragment, metrics)
                return apply_ops(chunk, row_ops, f"{fragment.path}, {fragment.location}")
        except (CorruptFileError, DataError) as exc:  # rows an op left out one by one are reported already
            report.reject(exc, path=fragment.path, location=fragment.location, rows=fragment.num_rows - rows.left_out)
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
    ahead: int | Callable[[], int],
    *,
    take: Callable[[collections.deque], Any] | None = None,
    stopped: Callable[[], bool] = lambda: False,
) -> Iterator[Any]:
    """Results of ``submit(item)`` for each item, in order, at most ``ahead`` in flight.

    ``ahead`` may be a function, asked before each submission (the
    autotuner moves it during an epoch; lowered, the futures already in
    flight are consumed before new ones are submitted). ``take`` gets the
    next result off the deque of pending futures (the default waits on the
    first); iteration ends early once ``stopped()``.
    """
    pending: collections.deque[concurrent.futures.Future] = collections.deque()
    upcoming = iter(items)
    limit = ahead if callable(ahead) else (lambda: ahead)

    def fill() -> None:
        while len(pending) < max(1, limit()):
            item = next(upcoming, _NO_ITEM)
            if item is _NO_ITEM:
                return
            pending.append(submit(cast(T, item)))

    fill()
    while pending and not stopped():
        result = take(pending) if take is not None else pending.popleft().result()
        fill()
        yield result


_NO_ITEM = object()


class OrderedReader:
    """Yields fragment chunks in the given order, reading ``ahead`` at a time.

    At most ``ahead`` fragments are in flight or waiting, so memory is
    bounded by ``ahead`` fragment sizes whatever the dataset's size.

    With a ``tuner`` (:class:`~streamfeed.runtime.autotune.Autotuner`),
    ``threads`` and ``ahead`` are the tuner's and move during the epoch:
    the pool runs as many threads as the tuner's ``read_threads`` (a
    :class:`TunedPool`), and the reads ahead are asked of the tuner before
    each submission. The chunks still come in the given order: the
    concurrency changes when fragments are read, never which one comes next.
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
        tuner: "Autotuner | None" = None,
        epoch: int = 0,
    ) -> None:
        self._fragments = fragments
        self._epoch = epoch
        self._first_rows: list[int] | None = None  # computed at the first read: metadata only
        self._decode_bytes = decode_bytes
        self._metrics = metrics
        self._order = list(order)
        self._row_ops = row_ops
        self._ahead: int | Callable[[], int] = max(1, ahead)
        self._report = report
        self._stop = stop
        self._tuner = tuner
        self._pool: concurrent.futures.ThreadPoolExecutor | TunedPool
        if tuner is not None:
            self._ahead = lambda: tuner.read_ahead
            self._pool = TunedPool(lambda: tuner.settings.read_threads, "streamfeed-read")
            tuner.attach_pool(self._pool.resize)
        else:
            self._pool = concurrent.futures.ThreadPoolExecutor(
                max_workers=max(1, threads), thread_name_prefix="streamfeed-read"
            )

    def __iter__(self) -> Iterator[Chunk | None]:
        take = None
        if self._metrics is not None or self._tuner is not None:
            take = functools.partial(_measured_result, self._metrics, self._tuner)
        return in_order(self._submit, self._order, self._ahead, take=take, stopped=self._stop.is_set)

    def _submit(self, index: int) -> concurrent.futures.Future:
        fragment = self._fragments[index]
        if self._first_rows is None:
            self._first_rows = first_rows(self._fragments)
        read = functools.partial(
            read_fragment,
            fragment,
            self._row_ops,
            self._report,
            self._metrics,
            self._decode_bytes,
            epoch=self._epoch,
            first_row=self._first_rows[index],
        )
        if self._tuner is not None:
            return self._pool.submit(_told_read, self._tuner, read)
        return self._pool.submit(read)

    def close(self) -> None:
        if isinstance(self._pool, TunedPool):
            cast("Autotuner", self._tuner).detach_pool(self._pool.resize)
            self._pool.shutdown()
        else:
            self._pool.shutdown(wait=True, cancel_futures=True)


def _told_read(tuner: "Autotuner", read: Callable[[], Chunk | None]) -> Chunk | None:
    """:func:`read_fragment`, told to the tuner: wall and thread CPU time (does decoding need the CPU?), bytes held."""
    from .metrics import chunk_bytes

    started, cpu_started = time.perf_counter(), time.thread_time()
    try:
        chunk = read()
    finally:
        tuner.read_done(time.perf_counter() - started, time.thread_time() - cpu_started)
    if chunk is not None:  # the bytes it holds after the ops, which the tuner's estimates follow
        tuner.held(chunk_len(chunk), chunk_bytes(chunk))
    return chunk


class TunedPool:
    """Threads running submitted calls in submission order, as many as ``limit()`` says at each moment.

    Why not ``ThreadPoolExecutor(max_workers=ceiling)`` with a gate: every
    thread that ever decodes keeps its allocator's per-thread memory, and
    measured (32 gzip CSV fragments of 30 000 rows, two epochs, 2 reads at a
    time), a pool of 8 gated to 2 peaked at 383–390 MiB RSS against
    253–275 MiB for a pool of 2. Here a worker starts only when work waits,
    no worker is idle and fewer than ``limit()`` run; a worker above the
    limit exits after its current call (:meth:`resize` wakes idle ones).
    """

    def __init__(self, limit: Callable[[], int], name: str) -> None:
        self._limit = limit
        self._name = name
        self._numbers = itertools.count()
        self._condition = threading.Condition()
        self._work: collections.deque[tuple[concurrent.futures.Future, Callable[..., Any], tuple]] = collections.deque()
        self._workers: set[threading.Thread] = set()
        self._idle = 0
        self._closed = False

    def submit(self, fn: Callable[..., Any], *args: Any) -> concurrent.futures.Future:
        future: concurrent.futures.Future = concurrent.futures.Future()
        with self._condition:
            if self._closed:  # cancelled at once (its result() raises) rather than never run
                future.cancel()
                return future
            self._work.append((future, fn, args))
            self._start_workers()
            self._condition.notify()
        return future

    def resize(self) -> None:
        """Follows a changed ``limit()``: more workers if work waits, surplus idle ones exit."""
        with self._condition:
            self._start_workers()
            self._condition.notify_all()

    def _start_workers(self) -> None:  # under the condition's lock
        while not self._closed and len(self._workers) < max(1, self._limit()) and len(self._work) > self._idle:
            worker = threading.Thread(target=self._run, name=f"{self._name}_{next(self._numbers)}", daemon=True)
            self._workers.add(worker)
            worker.start()

    def _run(self) -> None:
        me = threading.current_thread()
        while True:
            with self._condition:
                while not self._work or len(self._workers) > max(1, self._limit()):
                    if self._closed or len(self._workers) > max(1, self._limit()):
                        self._workers.discard(me)
                        self._condition.notify()  # another worker may now be within the limit
                        return
                    self._idle += 1
                    self._condition.wait()
                    self._idle -= 1
                future, fn, args = self._work.popleft()
            if not future.set_running_or_notify_cancel():
                continue
            try:
                result = fn(*args)
            except BaseException as exc:  # handed to whoever waits on the future, as an executor does
                future.set_exception(exc)
            else:
                future.set_result(result)

    def shutdown(self) -> None:
        """Cancels the calls not started and waits for the running ones; safe to call more than once."""
        with self._condition:
            self._closed = True
            for future, _, _ in self._work:
                future.cancel()
            self._work.clear()
            workers = list(self._workers)
            self._condition.notify_all()
        for worker in workers:
            if worker is not threading.current_thread():
                worker.join()


def _measured_result(
    metrics: "StageMetrics | None", tuner: "Autotuner | None", pending: collections.deque
) -> Chunk | None:
    """The next chunk, recording fragments ready/in flight (metrics) and the producer's wait for it (both)."""
    if metrics is not None:
        ready = sum(future.done() for future in pending)
        metrics.gauge("reader_ready", ready)
        metrics.gauge("reader_in_flight", len(pending) - ready)
    started = time.perf_counter()
    chunk = pending.popleft().result()
    waited = time.perf_counter() - started
    if metrics is not None:
        metrics.add("read_wait", waited)
    if tuner is not None:
        tuner.read_waited(waited)
    return chunk
