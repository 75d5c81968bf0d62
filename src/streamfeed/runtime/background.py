"""Runs a producer in a background thread behind a bounded queue.

This is the prefetch stage and the owner of shutdown: closing the iterator
(explicitly, by leaving a ``with`` block, when the consumer is interrupted,
or when its owner is dropped) stops the producer, which in turn closes what
it opened. Several threads may consume one iterator: the end of the items,
and ``close()``, wake every one of them.
"""

from __future__ import annotations

import gc
import queue
import threading
import time
from typing import TYPE_CHECKING, Callable, Generic, Iterator, TypeVar

if TYPE_CHECKING:
    from .autotune import Autotuner
    from .metrics import StageMetrics

T = TypeVar("T")
_END = object()  # stays in the queue: each consumer that takes it puts it back for the next
_POLL_SECONDS = 0.05
_OWN_THREADS = "streamfeed-"  # the prefix of every thread streamfeed starts


_collecting = False  # whether the cyclic garbage collector is running (it runs one collection at a time)


def _note_collection(phase: str, info: dict) -> None:
    global _collecting
    _collecting = phase == "start"


gc.callbacks.append(_note_collection)


def collecting() -> bool:
    """Whether a garbage collection is running now: finalizers then run at an arbitrary point of some thread."""
    return _collecting


class _Failure:
    def __init__(self, error: BaseException) -> None:
        self.error = error


class _ResizableQueue(queue.Queue):
    """A bounded queue whose bound the autotuner may move while it is in use."""

    def resize(self, maxsize: int) -> None:
        """Sets the bound; items above a lowered bound stay and are taken first (no put until below it)."""
        with self.mutex:
            self.maxsize = max(1, int(maxsize))
            self.not_full.notify_all()


class BackgroundIterator(Generic[T]):
    """Iterates ``produce(stop)`` in a daemon thread, ``depth`` items ahead.

    ``produce`` must return promptly once ``stop`` is set (the reader and
    the queue here both check it). ``wait_seconds`` accumulates how long the
    consumer blocked waiting for items: the input-stall measure. With
    ``metrics``, the producer's blocked time (``put_wait``), the consumer's
    (``wait``) and the queue's occupancy at each take are recorded too.
    With a ``tuner`` (:class:`~streamfeed.runtime.autotune.Autotuner`), both
    waits are reported to it for each item, and it sets the queue's depth.
    """

    def __init__(
        self,
        produce: Callable[[threading.Event], Iterator[T]],
        depth: int,
        name: str,
        metrics: "StageMetrics | None" = None,
        tuner: "Autotuner | None" = None,
    ) -> None:
        self._metrics = metrics
        self._tuner = tuner
        self._queue: _ResizableQueue = _ResizableQueue(maxsize=max(1, depth))
        if tuner is not None:
            tuner.control_queue(self._queue.resize)
        self._stop = threading.Event()
        self._finished = False
        self.wait_seconds = 0.0
        self._thread = threading.Thread(target=self._run, args=(produce,), name=name, daemon=True)
        self._thread.start()

    def _run(self, produce: Callable[[threading.Event], Iterator[T]]) -> None:
        items = produce(self._stop)
        try:
            for item in items:
                if not self._put(item, produced=True):
                    return
            self._put(_END)
        except BaseException as exc:  # handed to the consumer, raised there
            self._put(_Failure(exc))
        finally:
            close = getattr(items, "close", None)
            if close is not None:
                close()

    def _put(self, item: object, produced: bool = False) -> bool:
        if self._metrics is None and self._tuner is None:
            return self._put_until_stopped(item)
        started = time.perf_counter()
        try:
            done = self._put_until_stopped(item)
        finally:
            blocked = time.perf_counter() - started
            if self._metrics is not None:
                self._metrics.add("put_wait", blocked)
        if done and produced and self._tuner is not None:
            self._tuner.put(blocked)  # the tuner decides here, on the producer's thread
        return done

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
            if self._tuner is not None:
                self._tuner.took(waited)
        except BaseException:
            self.close()
            raise
        if item is _END:
            self._finished = True
            self._end_for_next_consumer()
            self._join()
            raise StopIteration
        if isinstance(item, _Failure):
            self.close()
            raise item.error
        return item

    @property
    def queued(self) -> int:
        """Items ready in the queue (for diagnostics)."""
        return self._queue.qsize()

    def close(self, *, wait: bool = False) -> None:
        """Stops the producer and waits for it; safe to call more than once, from any thread.

        Consumers blocked in ``next()`` on other threads (Keras's tf.data
        thread when fit stops early, or threads sharing the iterator) each
        get ``StopIteration`` rather than waiting forever. ``wait=True``
        joins the producer even from one of streamfeed's threads: for an
        owner thread closing a producer that never waits for it (the epoch's
        producer closing its unit loader).
        """
        self.stop()
        self._join(wait)
        self._drain()  # an item put while the producer was stopping
        self._end_for_next_consumer()

    def stop(self) -> None:
        """Tells the producer to stop and returns at once: the close a finalizer may make.

        A finalizer runs wherever the garbage collector happens to run,
        perhaps on a thread holding a lock the producer needs before it can
        see ``stop``: CI hung with the main thread collecting inside
        ``ThreadPoolExecutor.submit`` (which holds ``concurrent.futures``'
        global lock) and joining a producer waiting for that lock in its own
        ``submit``. Without the join, the producer ends on its own once the
        lock is free and closes what it opened, as after :meth:`close`.
        """
        self._finished = True
        self._stop.set()
        self._drain()  # unblock a producer waiting on a full queue
        self._end_for_next_consumer()

    def finalize(self) -> None:
        """The close a finalizer makes: :meth:`close` when its owner was dropped, :meth:`stop` inside a collection.

        Dropped by its last reference (``del``, a loop left by an
        exception), the owner goes at a point of the user's code, where
        waiting for the producer is safe and leaves no thread behind. Found
        by the garbage collector, it goes wherever the collector runs.
        """
        if collecting():
            self.stop()
        else:
            self.close()

    def _drain(self) -> None:
        while True:
            try:
                self._queue.get_nowait()
            except queue.Empty:
                return

    def _end_for_next_consumer(self) -> None:
        try:
            self._queue.put_nowait(_END)
        except queue.Full:  # an end is already queued, or the unjoined producer filled it (no consumer is left)
            pass

    def _join(self, wait: bool = False) -> None:
        """Waits for the producer, except on one of streamfeed's own threads.

        ``close()`` may run on any thread: from a finalizer, wherever the
        garbage collector happens to run. On the producer itself, or on a
        read thread the producer is waiting for, joining would wait forever;
        there, setting ``stop`` is enough: the producer ends on its own.
        """
        current = threading.current_thread()
        if current is not self._thread and (wait or not current.name.startswith(_OWN_THREADS)):
            self._thread.join()

    def __enter__(self) -> "BackgroundIterator[T]":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
