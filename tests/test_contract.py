"""The contract every source meets, checked through the whole pipeline.

To add a source (CSV, HDF5, images, TFRecord, NumPy, ...), add a module
``tests/factories/<format>.py`` defining ``FACTORIES`` and ``EMPTY_FACTORIES``
(lists of ``pytest.param``); they are collected automatically. A
factory takes ``tmp_path``, writes a few hundred rows with the format's real
writer and returns ``(dataset, expected_ids)``: an unbatched, unshuffled
:class:`streamfeed.Dataset` and the ids it must yield. Rows hold at least
``id`` (int) and ``x = id / 2``, so the checks can tell which rows came out
and that a row's columns were never separated. Use several fragments of
uneven sizes so batches straddle them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Callable

import numpy as np
import pytest

import streamfeed as sf
from factories import EMPTY_FACTORIES, FACTORIES  # one module per format, collected
from streamfeed.core import Source, SourceInfo
from streamfeed.errors import ErrorBudgetExceeded
from streamfeed.runtime.batch import PAD_MASK

Factory = Callable[[Path], "tuple[sf.Dataset, np.ndarray]"]


# -------------------------------------------------------------------- helpers
def run(iterator: sf.EpochIterator) -> list[dict[str, np.ndarray]]:
    """Every batch of one pass (copied), closing the iterator."""
    with iterator as it:
        return [{name: np.array(column, copy=True) for name, column in batch.items()} for batch in it]


def real_ids(batches: list[dict[str, np.ndarray]]) -> np.ndarray:
    """The ids of the real (not padding) rows, in order, with row integrity checked."""
    out = []
    for batch in batches:
        lengths = {name: len(column) for name, column in batch.items()}
        assert len(set(lengths.values())) == 1, f"columns of unequal length: {lengths}"
        np.testing.assert_array_equal(batch["x"], batch["id"] / 2.0, err_msg="a row's columns were separated")
        keep = batch[PAD_MASK] == 1.0 if PAD_MASK in batch else slice(None)
        out.append(np.asarray(batch["id"])[keep])
    return np.concatenate(out) if out else np.zeros(0, dtype=np.int64)


def assert_exactly_once(ids: np.ndarray, expected: np.ndarray) -> None:
    assert len(ids) == len(expected), f"{len(ids)} rows out, {len(expected)} expected"
    np.testing.assert_array_equal(np.sort(ids), np.sort(expected))


def assert_same_batches(got: list[dict], want: list[dict]) -> None:
    assert len(got) == len(want), f"{len(got)} batches, {len(want)} expected"
    for number, (a, b) in enumerate(zip(got, want)):
        assert a.keys() == b.keys(), f"batch {number}: columns {sorted(a)} != {sorted(b)}"
        for name in a:
            np.testing.assert_array_equal(a[name], b[name], err_msg=f"batch {number}, column {name!r}")


def batch_size_not_dividing(rows: int, preferred: int = 64) -> int:
    """A batch size that leaves a short last batch, so every policy matters."""
    size = preferred
    while rows % size == 0:
        size -= 1
    return size


# ------------------------------------------------------------------ the checks
@pytest.mark.parametrize("factory", FACTORIES)
def test_every_row_exactly_once_unbatched(factory: Factory, tmp_path):
    ds, expected = factory(tmp_path)
    assert len(ds) == ds.num_rows(0) == len(expected)
    for pipeline in (ds, ds.shuffle(5, window=3)):
        assert_exactly_once(real_ids(run(pipeline.iter_epoch(0))), expected)


@pytest.mark.parametrize("factory", FACTORIES)
@pytest.mark.parametrize("shuffle", [False, True], ids=["in-order", "shuffled"])
def test_every_row_exactly_once_batched(factory: Factory, tmp_path, shuffle: bool):
    ds, expected = factory(tmp_path)
    if shuffle:
        ds = ds.shuffle(11, window=2)
    batches = run(ds.batch(64).iter_epoch(0))
    assert_exactly_once(real_ids(batches), expected)
    assert [len(b["id"]) for b in batches[:-1]] == [64] * (len(batches) - 1)


@pytest.mark.parametrize("factory", FACTORIES)
def test_in_order_without_shuffle_and_same_every_epoch(factory: Factory, tmp_path):
    ds, expected = factory(tmp_path)
    first = real_ids(run(ds.batch(50).iter_epoch(0)))
    assert_exactly_once(first, expected)
    np.testing.assert_array_equal(real_ids(run(ds.batch(50).iter_epoch(3))), first)
    np.testing.assert_array_equal(real_ids(run(ds.iter_epoch(0))), first)


@pytest.mark.parametrize("factory", FACTORIES)
def test_same_seed_same_order(factory: Factory, tmp_path):
    ds, _ = factory(tmp_path)
    pipeline = ds.shuffle(7, window=2).batch(48)
    assert_same_batches(run(pipeline.iter_epoch(0)), run(pipeline.iter_epoch(0)))
    # A pipeline built again from the same files and seed agrees too.
    again = ds.shuffle(7, window=2).batch(48)
    assert_same_batches(run(again.iter_epoch(0)), run(pipeline.iter_epoch(0)))


@pytest.mark.parametrize("factory", FACTORIES)
def test_different_seed_different_order_same_rows(factory: Factory, tmp_path):
    ds, expected = factory(tmp_path)
    one = real_ids(run(ds.shuffle(1, window=2).batch(48).iter_epoch(0)))
    two = real_ids(run(ds.shuffle(2, window=2).batch(48).iter_epoch(0)))
    assert_exactly_once(one, expected)
    assert_exactly_once(two, expected)
    assert not np.array_equal(one, two)


@pytest.mark.parametrize("factory", FACTORIES)
def test_different_epochs_different_order(factory: Factory, tmp_path):
    ds, expected = factory(tmp_path)
    pipeline = ds.shuffle(3, window=2).batch(48)
    orders = [real_ids(run(pipeline.iter_epoch(epoch))) for epoch in range(3)]
    for order in orders:
        assert_exactly_once(order, expected)
    assert not np.array_equal(orders[0], orders[1])
    assert not np.array_equal(orders[1], orders[2])
    # The default window (every fragment in one unit here) mixes rows too.
    whole = ds.shuffle(3).batch(48)
    assert not np.array_equal(real_ids(run(whole.iter_epoch(0))), real_ids(run(whole.iter_epoch(1))))


RESUME_PIPELINES = {
    "in-order-keep": lambda ds: ds.batch(50),
    "shuffled-keep": lambda ds: ds.shuffle(21, window=2).batch(50),
    "shuffled-drop": lambda ds: ds.shuffle(22, window=3).batch(45, last_batch="drop"),
    "shuffled-pad-shard": lambda ds: ds.shuffle(23, window=2).shard(1, 3).batch(33, last_batch="pad"),
    "default-window": lambda ds: ds.shuffle(24).batch(70),
    "filtered-mapped": lambda ds: (
        ds.filter(lambda c: c["id"] % 3 != 0).map(lambda c: {**c, "x": c["x"] + 0.0}).shuffle(25, window=2).batch(40)
    ),
}


@pytest.mark.parametrize("factory", FACTORIES)
@pytest.mark.parametrize("build", RESUME_PIPELINES.values(), ids=RESUME_PIPELINES.keys())
def test_resume_from_every_batch_boundary(factory: Factory, tmp_path, build):
    ds, _ = factory(tmp_path)
    pipeline = build(ds)
    epoch = 1
    full, states = [], [pipeline.initial_state(epoch)]
    with pipeline.iter_epoch(epoch) as it:
        for batch in it:
            full.append({name: np.array(column, copy=True) for name, column in batch.items()})
            states.append(json.loads(json.dumps(it.get_state())))  # JSON round trip, as a checkpoint would
    assert len(full) == pipeline.num_batches(epoch) >= 3
    assert states.pop() == pipeline.initial_state(epoch + 1)  # after the last batch: the next epoch's start
    for done, state in enumerate(states):
        assert state["epoch"] == epoch
        rest = run(pipeline.iter_epoch(state=state))
        assert pipeline.num_batches(state=state) == len(rest) == len(full) - done
        assert_same_batches(rest, full[done:])


@pytest.mark.parametrize("factory", FACTORIES)
def test_resume_unbatched_from_every_chunk(factory: Factory, tmp_path):
    ds, expected = factory(tmp_path)
    pipeline = ds.shuffle(4, window=3)
    chunks, positions, states = [], [sf.Position()], [pipeline.initial_state(0)]
    with pipeline.iter_epoch(0) as it:
        for chunk in it:
            chunks.append(np.array(chunk["id"], copy=True))
            positions.append(it.position)
            states.append(it.get_state())
    assert_exactly_once(np.concatenate(chunks), expected)
    assert positions == sorted(positions) and len(set(positions)) == len(positions)
    assert states.pop() == pipeline.initial_state(1)
    for done, state in enumerate(states):
        rest = real_ids(run(pipeline.iter_epoch(state=state)))
        np.testing.assert_array_equal(rest, np.concatenate(chunks[done:]))
        assert pipeline.num_rows(0) - len(rest) == sum(len(c) for c in chunks[:done])


@pytest.mark.parametrize("factory", FACTORIES)
@pytest.mark.parametrize("count", [2, 3])
@pytest.mark.parametrize("shuffle", [False, True], ids=["in-order", "shuffled"])
def test_shards_partition_the_rows(factory: Factory, tmp_path, count: int, shuffle: bool):
    ds, expected = factory(tmp_path)
    if shuffle:
        ds = ds.shuffle(8, window=2)
    for epoch in (0, 1):
        parts = []
        for index in range(count):
            shard = ds.shard(index, count)
            ids = real_ids(run(shard.batch(32).iter_epoch(epoch)))
            assert len(ids) == shard.num_rows(epoch), f"shard {index}/{count}: num_rows disagrees with the rows yielded"
            assert shard.num_rows(epoch) == shard.num_rows(0), "a shard's size must not change between epochs"
            assert len(ids) > 0, f"shard {index}/{count} got no rows"
            parts.append(ids)
        everything = np.concatenate(parts)
        assert len(np.unique(everything)) == len(everything), "shards overlap"
        # Equal shards (issue 12): the rows % count rows that do not deal evenly are left out and reported.
        dropped = ds.shard(0, count).shard_report(epoch)["dropped_rows"]
        assert dropped == len(expected) % count
        assert len(everything) == len(expected) - dropped and set(everything) <= set(expected.tolist())


@pytest.mark.parametrize("factory", FACTORIES)
@pytest.mark.parametrize("last_batch", ["keep", "drop", "pad"])
def test_len_equals_batches_produced(factory: Factory, tmp_path, last_batch: str):
    ds, expected = factory(tmp_path)
    rows = len(expected)
    size = batch_size_not_dividing(rows)
    for pipeline in (
        ds.batch(size, last_batch=last_batch),
        ds.shuffle(9, window=2).shard(0, 2).batch(size, last_batch=last_batch),
    ):
        for epoch in (0, 1):
            batches = run(pipeline.iter_epoch(epoch))
            # len() is epoch 0's count; a shard's share of rows may differ in other epochs.
            assert pipeline.num_batches(epoch) == len(batches)
            if epoch == 0:
                assert len(pipeline) == len(batches)
            sizes = [len(b["id"]) for b in batches]
            shard_rows = pipeline.num_rows(epoch)
            if last_batch == "keep":
                assert sizes == [size] * (shard_rows // size) + [shard_rows % size] * (shard_rows % size > 0)
                assert len(real_ids(batches)) == shard_rows
            elif last_batch == "drop":
                assert sizes == [size] * (shard_rows // size)
                assert len(real_ids(batches)) == shard_rows - shard_rows % size
            else:
                assert sizes == [size] * len(batches)
                masks = np.concatenate([b[PAD_MASK] for b in batches])
                assert set(np.unique(masks)) <= {0.0, 1.0}
                assert int(masks.sum()) == shard_rows and len(real_ids(batches)) == shard_rows
                np.testing.assert_array_equal(masks[:shard_rows], 1.0)  # padding rows come last, masked 0
                np.testing.assert_array_equal(masks[shard_rows:], 0.0)
    assert_exactly_once(real_ids(run(ds.batch(size, last_batch="pad").iter_epoch(0))), expected)


@pytest.mark.parametrize("factory", FACTORIES)
def test_filter_matching_nothing_yields_nothing(factory: Factory, tmp_path):
    ds, _ = factory(tmp_path)
    nothing = ds.filter(lambda columns: np.zeros(len(columns["id"]), dtype=bool))
    assert len(nothing) == nothing.num_rows(0) == 0
    for pipeline in (
        nothing,
        nothing.shuffle(1, window=2),
        nothing.batch(16, last_batch="pad"),
        nothing.shard(1, 2).batch(4),
    ):
        assert len(pipeline) == 0
        assert run(pipeline.iter_epoch(0)) == []


@pytest.mark.parametrize("factory", FACTORIES)
def test_filter_keeps_exactly_the_matching_rows(factory: Factory, tmp_path):
    ds, expected = factory(tmp_path)
    odd = ds.filter(lambda columns: columns["id"] % 2 == 1).shuffle(2, window=2).batch(40, last_batch="drop")
    want = expected[expected % 2 == 1]
    batches = run(odd.iter_epoch(0))
    assert len(odd) == len(batches) == len(want) // 40
    assert set(real_ids(batches)) <= set(want) and len(real_ids(batches)) == len(want) // 40 * 40


@pytest.mark.parametrize("factory", EMPTY_FACTORIES)
def test_empty_input_yields_nothing(factory: Factory, tmp_path):
    """Empty input ends its epochs empty; input emptied by ``on_error="skip"`` says so instead (issue 23)."""
    ds, expected = factory(tmp_path)
    assert len(expected) == 0
    assert len(ds) == ds.num_rows(0) == 0
    all_skipped = bool(ds.report.entries)  # every row was bad input, left out
    for pipeline in (
        ds,
        ds.shuffle(1),
        ds.batch(8),
        ds.batch(8, last_batch="pad"),
        ds.shard(1, 2).batch(3, last_batch="drop"),
    ):
        assert len(pipeline) == 0
        for epoch in (pipeline.iter_epoch(0), pipeline.iter_epoch(state=pipeline.initial_state(0))):
            if all_skipped:
                with pytest.raises(ErrorBudgetExceeded, match="served no batch"):
                    run(epoch)
            else:
                assert run(epoch) == []


@pytest.mark.parametrize("factory", FACTORIES)
def test_state_from_another_pipeline_is_rejected(factory: Factory, tmp_path):
    ds, _ = factory(tmp_path)
    pipeline = ds.shuffle(1, window=2).batch(32)
    with pipeline.iter_epoch(0) as it:
        next(it)
        state = it.get_state()
    for other, differing in (
        (ds.shuffle(2, window=2).batch(32), "seed"),
        (ds.shuffle(1, window=3).batch(32), "window"),
        (ds.shuffle(1, window=2).batch(16), "batch_size"),
        (ds.shuffle(1, window=2).shard(1, 2).batch(32), "shard"),
    ):
        with pytest.raises(sf.StateError) as excinfo:
            other.iter_epoch(state=state)
        assert differing in str(excinfo.value)
    outside = {**pipeline.initial_state(0), "unit": len(pipeline.epoch_plan(0).units) + 1}
    with pytest.raises(sf.StateError, match="'unit'"):
        run(pipeline.iter_epoch(state=outside))


@pytest.mark.parametrize("factory", FACTORIES)
def test_the_source_declares_what_it_is(factory: Factory, tmp_path):
    """``Source.info`` is what layers that see only the protocol read (convert, stats, the quality monitor)."""
    ds, _ = factory(tmp_path)
    info = ds.source.info
    assert isinstance(ds.source, Source) and isinstance(info, SourceInfo)
    assert info.format == ds.source.fingerprint()["format"]
    assert info.class_names == sorted(info.label_map, key=info.label_map.__getitem__)
