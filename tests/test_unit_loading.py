"""Loading the next read unit (and the next epoch) while the current one is served.

A shuffled unit emits no row before all of its rows are loaded, so the
runtime loads unit u+1 into the second of two buffers while unit u is
served, and the Keras adapter starts epoch e+1 (``EpochIterator.successor``)
once epoch e has read all of its fragments. Neither may change a single
row: these tests compare against plain epochs, and check that the shared
buffers never leave an epoch waiting forever.
"""

from __future__ import annotations

import threading

import numpy as np
import pytest

import streamfeed as sf
from streamfeed.runtime.shuffle import UnitBuffer, UnitBuffers

HANG_BOUND_SECONDS = 60  # only to turn a hang into a failure; no test measures time


def ids_of(iterator) -> list[int]:
    with iterator as stream:
        return [int(i) for batch in stream for i in batch["id"]]


@pytest.fixture(params=["shuffled", "unshuffled", "balanced"])
def pipeline(request, mixed_dir) -> sf.Dataset:
    """1800 rows in 19 row groups; shuffled in units of 3 row groups (7 units an epoch)."""
    dataset = sf.read_parquet(mixed_dir)
    if request.param == "shuffled":
        dataset = dataset.shuffle(5, window=3)
    elif request.param == "balanced":
        stats = sf.compute_stats(dataset, columns=["label"], categorical=["label"])
        dataset = dataset.shuffle(5, window=3).balance("label", stats=stats, proportions={0: 0.5, 1: 0.25, 2: 0.25})
    return dataset.batch(64).prefetch(2)


def test_a_successor_serves_exactly_the_next_epoch(pipeline, live_threads):
    expected = [ids_of(pipeline.iter_epoch(epoch)) for epoch in (0, 1, 2)]
    served = []
    current = pipeline.iter_epoch(0)
    for epoch in (0, 1, 2):
        ids, successor = [], None
        with current:
            for batch in current:
                ids.extend(int(i) for i in batch["id"])
                if successor is None and current.reads_done:
                    successor = current.successor(pipeline.initial_state(epoch + 1))
        served.append(ids)
        assert successor is not None, "the epoch never reported its reads done"
        current = successor
    current.close()
    assert served == expected
    assert live_threads() == []


def test_a_successor_starts_where_its_state_says(mixed_dir):
    dataset = sf.read_parquet(mixed_dir).shuffle(2, window=4).batch(50)
    with dataset.iter_epoch(1) as stream:
        for _ in range(7):
            next(stream)
        state = stream.get_state()
        rest = [int(i) for batch in stream for i in batch["id"]]
    with dataset.iter_epoch(0) as first:
        for _ in first:
            pass
        assert first.reads_done
        assert ids_of(first.successor(state)) == rest


def test_a_predecessor_closed_early_gives_its_buffers_back(mixed_dir, live_threads):
    """Both buffers held by an epoch abandoned mid-unit: its successor must still get them."""
    dataset = sf.read_parquet(mixed_dir).shuffle(3, window=2).batch(16).prefetch(1)
    expected = ids_of(dataset.iter_epoch(1))
    first = dataset.iter_epoch(0)
    next(first)
    successor = first.successor(dataset.initial_state(1))  # early on purpose: both buffers may be taken
    result: list[list[int]] = []
    consumer = threading.Thread(target=lambda: result.append(ids_of(successor)), name="test-consumer")
    consumer.start()
    first.close()
    consumer.join(HANG_BOUND_SECONDS)
    assert not consumer.is_alive(), "the successor waited forever for a buffer its closed predecessor held"
    assert result == [expected]
    assert live_threads() == []


def test_the_unit_loader_thread_ends_with_its_epoch(mixed_dir, live_threads):
    dataset = sf.read_parquet(mixed_dir).shuffle(1, window=3).batch(16).prefetch(1)
    stream = dataset.iter_epoch(0)
    next(stream)
    assert "streamfeed-units" in live_threads()
    stream.close()
    assert live_threads() == []


def test_a_unit_larger_than_announced_grows_its_buffer():
    """Row counts can be estimates (CSV): the buffer grows rather than overflowing or cutting rows."""
    buffer = UnitBuffer()
    chunks = [
        {"a": np.arange(start, start + 5, dtype=np.float32), "b": np.arange(start, start + 5), "s": np.full(5, "x")}
        for start in range(0, 20, 5)
    ]
    buffer.begin(chunks[0], capacity=3)
    for chunk in chunks:
        buffer.append(chunk)
    assert buffer.rows == 20
    gathered = buffer.gather(np.array([19, 0, 7]))
    assert gathered["a"].tolist() == [19.0, 0.0, 7.0]
    assert gathered["b"].tolist() == [19, 0, 7]
    assert gathered["s"].tolist() == ["x", "x", "x"]


def test_a_pair_of_buffers_makes_a_third_taker_wait_until_one_is_given_back():
    pair, stop = UnitBuffers(), threading.Event()
    first, second = pair.acquire("a", stop), pair.acquire("b", stop)
    assert first is not None and second is not None and first is not second
    taken: list[UnitBuffer | None] = []
    waiter = threading.Thread(target=lambda: taken.append(pair.acquire("c", stop)), name="test-waiter")
    waiter.start()
    waiter.join(0.2)
    assert waiter.is_alive() and taken == []  # no third buffer exists
    pair.release_all("a")
    waiter.join(HANG_BOUND_SECONDS)
    assert taken == [first]
    stop.set()
    assert pair.acquire("d", stop) is None  # stopped: returns rather than waiting
