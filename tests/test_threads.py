"""An iterator's threads end with it: when dropped unclosed, and for every consumer sharing it.

``for batch in dataset: break`` drops the iterator without closing it; its
producer and read threads must stop anyway (a ``weakref.finalize``), so the
thread count returns to where it was. Several threads may consume one
iterator: the end of the epoch, or ``close()``, wakes every one of them
(issue 9, item 10). Ctrl-C is covered by ``test_shutdown.py``.
"""

from __future__ import annotations

import threading
import time
import weakref

import numpy as np
import pytest

import streamfeed as sf
from _threads import threads_left

HANG_BOUND_SECONDS = 30  # only to turn a hang into a failure; no test measures time


@pytest.fixture
def dataset(mixed_dir) -> sf.Dataset:
    """1800 rows in 19 row groups: far more batches than the prefetch queue holds."""
    return sf.read_parquet(mixed_dir).shuffle(1, window=2).batch(16).prefetch(2)


def _new_threads(baseline: set[threading.Thread]) -> list[str]:
    return threads_left(baseline, HANG_BOUND_SECONDS)


def test_breaking_out_of_bare_loops_ends_every_thread(dataset):
    baseline = set(threading.enumerate())
    for _ in range(5):
        for _batch in dataset:
            break
    assert _new_threads(baseline) == []


@pytest.mark.parametrize("metrics", [False, True])
def test_a_dropped_iterator_is_collected_and_its_threads_end(dataset, metrics):
    baseline = set(threading.enumerate())
    it = dataset.iter_epoch(0, metrics=metrics)
    next(it)
    dropped = weakref.ref(it)
    del it  # no close(): nothing else may hold it (not the producer thread, not the finalizer)
    assert dropped() is None
    assert _new_threads(baseline) == []


def test_a_temporary_iterator_ends_its_threads(dataset):
    baseline = set(threading.enumerate())
    first = next(iter(dataset))
    assert len(first["id"]) == 16
    assert _new_threads(baseline) == []


def _consume_in_threads(it: sf.EpochIterator, consumers: int) -> tuple[list[threading.Thread], list[list]]:
    """Starts ``consumers`` threads iterating ``it``; each records its batches' ids, then ``"end"``."""
    seen: list[list] = [[] for _ in range(consumers)]

    def consume(mine: list) -> None:
        for batch in it:
            mine.append(batch["id"])
        mine.append("end")

    threads = [
        threading.Thread(target=consume, args=(mine,), name=f"consumer-{n}", daemon=True) for n, mine in enumerate(seen)
    ]
    for thread in threads:
        thread.start()
    return threads, seen


def _join(threads: list[threading.Thread]) -> list[str]:
    """Names of the threads still blocked after a join bounded by the hang bound."""
    deadline = time.monotonic() + HANG_BOUND_SECONDS
    for thread in threads:
        thread.join(timeout=max(0.0, deadline - time.monotonic()))
    return [thread.name for thread in threads if thread.is_alive()]


def test_the_end_of_the_epoch_wakes_every_consumer(dataset):
    baseline = set(threading.enumerate())
    it = dataset.iter_epoch(0)
    threads, seen = _consume_in_threads(it, consumers=3)
    try:
        assert _join(threads) == []
    finally:
        it.close()  # frees a consumer blocked forever, should the test fail
        _join(threads)
    assert all(mine[-1] == "end" for mine in seen)
    ids = np.concatenate([batch for mine in seen for batch in mine[:-1]])
    assert np.array_equal(np.sort(ids), np.arange(1800))  # every row once, across the consumers
    assert _new_threads(baseline) == []


def test_close_wakes_every_waiting_consumer(mixed_dir):
    def slow(columns):
        time.sleep(0.3)  # the consumers end up waiting on the empty queue
        return columns

    baseline = set(threading.enumerate())
    it = sf.read_parquet(mixed_dir).map(slow).batch(16).prefetch(1).iter_epoch(0)
    threads, seen = _consume_in_threads(it, consumers=3)
    time.sleep(0.1)  # not a timing assertion: lets the consumers block before close()
    it.close()
    assert _join(threads) == []
    assert all(mine[-1] == "end" for mine in seen)  # each got StopIteration, none an error
    assert _new_threads(baseline) == []
