"""Runs a producer in a background thread behind a bounded queue.

This is the prefetch stage and the owner of shutdown: closing the iterator
(explicitly, by leaving a ``with`` block, or when the consumer is
interrupted) stops the producer, which in turn closes what it opened.
"""

from __future__ import annotations

import queue
import threading
import time
from typing import TYPE_CHECKING, Callable, Generic, Iterator, TypeVar

if TYPE_CHECKING:
    from .metrics import StageMetrics

T = TypeVar("T")
_END = object()
_POLL_SECONDS = 0.05


class _Failure:
    def __init__(self, error: BaseException) -> None:
        self.error = error


class BackgroundIterator(Generic[T]):
    """Iterates ``produce(stop)`` in a daemon thread, ``depth`` items ahead.

    ``produce`` must return promptly once ``stop`` is set (the reader and
    the queue here both check it). ``wait_seconds`` accumulates how long the
    consumer blocked waiting for items: the input-stall measure. With
    ``metrics``, the producer's blocked time (``put_wait``), the consumer's
    (``wait``) and the queue's occupancy at each take are recorded too.
    """

    def __init__(
        self,
        produce: Callable[[threading.Event], Iterator[T]],
        depth: int,
        name: str,
        metrics: "StageMetrics | None" = None,
    ) -> None:
        self._metrics = metrics
        self._queue: queue.Queue = queue.Queue(maxsize=max(1, depth))
        self._stop = threading.Event()
        self._finished = False
        self.wait_seconds = 0.0
        self._thread = threading.Thread(target=self._run, args=(produce,), name=name, daemon=True)
        self._thread.start()

    def _run(self, produce: Callable[[threading.Event], Iterator[T]]) -> None:
        items = produce(self._stop)
        try:
            for item in items:
                if not self._put(item):
                    return
            self._put(_END)
        except BaseException as exc:  # handed to the consumer, raised there
            self._put(_Failure(exc))
        finally:
            close = getattr(items, "close", None)
            if close is not None:
                close()

    def _put(self, item: object) -> bool:
        if self._metrics is not None:
            started = time.perf_counter()
            try:
                return self._put_until_stopped(item)
            finally:
                self._metrics.add("put_wait", time.perf_counter() - started)
        return self._put_until_stopped(item)

    def _put_until_stopped(self, item: object) -> bool:
        while not self._stop.is_set():
            try:
                self._queue.put(item, timeout=_POLL_SECONDS)
                return True
            except queue.Full:
                continue
        return False

    def __iter__(self) -> "BackgroundIterator[T]":
        return self

    def __next__(self) -> T:
        if self._finished:
            raise StopIteration
        try:  # all of it: an interrupt anywhere here must still stop the threads
            if self._metrics is not None:
                self._metrics.gauge("prefetch_queue", self._queue.qsize())
            started = time.perf_counter()
            item = self._queue.get()
            waited = time.perf_counter() - started
            self.wait_seconds += waited
            if self._metrics is not None:
                self._metrics.add("wait", waited)
        except BaseException:
            self.close()
            raise
        if item is _END:
            self._finished = True
            self._thread.join()
            raise StopIteration
        if isinstance(item, _Failure):
            self.close()
            raise item.error
        return item

    @property
    def queued(self) -> int:
        """Items ready in the queue (for diagnostics)."""
        return self._queue.qsize()

    def close(self) -> None:
        """Stops the producer and waits for it; safe to call more than once."""
        self._finished = True
        self._stop.set()
        while True:  # unblock a producer waiting on a full queue
            try:
                self._queue.get_nowait()
            except queue.Empty:
                break
        if self._thread is not threading.current_thread():
            self._thread.join()
        # A consumer blocked in get() on another thread (Keras's tf.data thread
        # when fit stops early) would wait forever and hang interpreter exit.
        try:
            self._queue.put_nowait(_END)
        except queue.Full:
            pass

    def __enter__(self) -> "BackgroundIterator[T]":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
