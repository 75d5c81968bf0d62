"""Runs a producer in a background thread behind a bounded queue.

This is the prefetch stage and the owner of shutdown: closing the iterator
(explicitly, by leaving a ``with`` block, or when the consumer is
interrupted) stops the producer, which in turn closes what it opened.
"""

from __future__ import annotations

import queue
import threading
import time
from typing import Callable, Generic, Iterator, TypeVar

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
    consumer blocked waiting for items: the input-stall measure.
    """

    def __init__(self, produce: Callable[[threading.Event], Iterator[T]], depth: int, name: str) -> None:
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
        started = time.perf_counter()
        try:
            item = self._queue.get()
        except BaseException:
            self.close()
            raise
        self.wait_seconds += time.perf_counter() - started
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

    def __enter__(self) -> "BackgroundIterator[T]":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
