"""``streamfeed.mix``: exact quotas, each component's own order, resume, weights in the state, shards, refusals.

Components are Parquet files written by pyarrow, each with its own id range
(``a`` from 0, ``b`` from 10 000, ``c`` from 20 000), so every served row
says where it came from and which of its component's rows it is.
"""

from __future__ import annotations

import collections
import gc
import threading
import weakref

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import streamfeed as sf
from _threads import threads_left
from streamfeed.pipeline.mix_order import largest_remainder

BASES = {"a": 0, "b": 10_000, "c": 20_000}


def _write(path, rows: int, base: int, *, x_dtype: str = "float32", extra: bool = False) -> str:
    columns = {
        "id": np.arange(base, base + rows, dtype="int64"),
        "x": np.random.default_rng(base).normal(size=rows).astype(x_dtype),
    }
    if extra:
        columns["z"] = np.zeros(rows, dtype="int8")
    pq.write_table(pa.table(columns), path, row_group_size=50)
    return str(path)


@pytest.fixture
def parts(tmp_path):
    """Three shuffled components of 600, 210 and 90 rows."""
    rows = {"a": 600, "b": 210, "c": 90}
    return {
        name: sf.read_parquet(_write(tmp_path / f"{name}.parquet", count, BASES[name])).shuffle(seed=i + 1, window=3)
        for i, (name, count) in enumerate(rows.items())
    }


def _component(ids: np.ndarray) -> np.ndarray:
    return ids // 10_000  # 0 for a, 1 for b, 2 for c: the index in the sorted names


def _served(mixed, epoch: int = 0, state=None) -> list[dict]:
    with mixed.iter_epoch(epoch, state=state) as stream:
        return list(stream)


def _ids(batches) -> np.ndarray:
    return np.concatenate([batch["id"] for batch in batches]) if batches else np.empty(0, dtype="int64")


def _own_order(dataset, epochs: int) -> np.ndarray:
    """A component's rows over ``epochs`` of its own epochs, as it serves them alone."""
    out = []
    for epoch in range(epochs):
        with dataset.batch(1000).iter_epoch(epoch) as stream:
            out += [batch["id"] for batch in stream]
    return np.concatenate(out)


def test_largest_remainder_rule_floors_then_the_largest_fractions_ties_to_the_first_name():
    assert largest_remainder([1, 1, 1], 10).tolist() == [4, 3, 3]  # the tie goes to the name sorting first
    assert largest_remainder([0.7, 0.2, 0.1], 7).tolist() == [5, 1, 1]  # 4.9, 1.4, 0.7: floors 4, 1, 0
    assert largest_remainder([5, 0], 3).tolist() == [3, 0]
    for weights in ([0.31, 0.29, 0.4], [1, 2, 3, 4], [1e-9, 1.0]):
        for total in (1, 7, 1000, 12_345):
            quotas = largest_remainder(weights, total)
            share = np.asarray(weights) / np.sum(weights) * total
            assert quotas.sum() == total and np.all(np.abs(quotas - share) < 1)


def test_each_epoch_serves_exactly_its_quotas_in_a_seeded_order(parts):
    mixed = sf.mix(parts, weights={"a": 0.5, "b": 0.3, "c": 0.2}, samples_per_epoch=1001, seed=4).batch(64)
    assert mixed.quotas(0) == dict(zip("abc", largest_remainder([0.5, 0.3, 0.2], 1001).tolist()))
    for epoch in range(3):
        ids = _ids(_served(mixed, epoch))
        assert len(ids) == 1001 == mixed.num_rows(epoch)
        counts = collections.Counter(_component(ids).tolist())
        assert [counts[i] for i in range(3)] == list(mixed.quotas(epoch).values())
    first, again = _ids(_served(mixed, 1)), _ids(_served(mixed, 1))
    assert np.array_equal(first, again)  # determinism
    other = sf.mix(parts, weights={"a": 0.5, "b": 0.3, "c": 0.2}, samples_per_epoch=1001, seed=5).batch(64)
    assert not np.array_equal(_component(_ids(_served(other, 1))), _component(first))  # the seed orders components
    assert not np.array_equal(_component(_ids(_served(mixed, 0))), _component(first))  # and so does the epoch


def test_stratified_batches_each_get_their_share_and_the_epoch_its_quotas(parts):
    weights = {"a": 0.5, "b": 0.3, "c": 0.2}
    mixed = sf.mix(parts, weights=weights, samples_per_epoch=1000, seed=2).batch(64, stratified=True)
    batches = _served(mixed)
    for batch in batches:
        counts = np.bincount(_component(batch["id"]), minlength=3)
        share = np.array(list(weights.values())) * len(batch["id"])
        assert np.all(np.abs(counts - share) < 2), (counts, share)  # within one row of the remaining quota's split
    counts = collections.Counter(_component(_ids(batches)).tolist())
    assert [counts[i] for i in range(3)] == [500, 300, 200]
    plain = sf.mix(parts, weights=weights, samples_per_epoch=1000, seed=2).batch(64)
    spread = [np.bincount(_component(b["id"]), minlength=3)[2] for b in _served(plain)]
    assert max(spread) - min(spread) > 2  # unstratified batches vary (what stratified=True removes)


def test_every_row_of_a_component_comes_once_per_component_epoch_in_its_own_order(parts):
    mixed = sf.mix(parts, weights={"a": 1, "b": 1, "c": 1}, samples_per_epoch=900, seed=1).batch(50)
    ids = np.concatenate([_ids(_served(mixed, epoch)) for epoch in range(4)])  # 1200 rows of each component
    for index, name in enumerate("abc"):
        mine = ids[_component(ids) == index]
        rows = parts[name].num_rows()
        epochs = len(mine) // rows
        assert np.array_equal(mine[: epochs * rows], _own_order(parts[name], epochs))  # its shuffle, epoch by epoch
        for k in range(epochs):
            assert sorted(mine[k * rows : (k + 1) * rows]) == list(range(BASES[name], BASES[name] + rows))
        assert len(set(mine[epochs * rows :].tolist())) == len(mine) - epochs * rows  # a started epoch: no repeat


def test_machine_settings_of_the_components_change_nothing_served(parts):
    weights = {"a": 0.6, "b": 0.3, "c": 0.1}
    plain = sf.mix(parts, weights=weights, samples_per_epoch=700, seed=9).batch(32)
    tuned = {
        name: dataset.with_options(read_threads=1 + i, memory_limit="64MiB").prefetch(1 + 2 * i)
        for i, (name, dataset) in enumerate(parts.items())
    }
    other = sf.mix(tuned, weights=weights, samples_per_epoch=700, seed=9).batch(32)
    for epoch in (0, 1):
        assert np.array_equal(_ids(_served(plain, epoch)), _ids(_served(other, epoch)))
    assert plain.initial_state(1) == other.initial_state(1)


def test_stop_ends_the_epoch_where_a_component_runs_out_and_repeat_starts_its_next_epoch(parts):
    weights = {"a": 1, "b": 1, "c": 1}
    stop = sf.mix(parts, weights=weights, samples_per_epoch=600, seed=3, exhausted="stop").batch(40)
    first = _ids(_served(stop, 0))
    c_rows = first[_component(first) == 2]
    assert len(c_rows) == 90 and sorted(c_rows) == list(range(20_000, 20_090))  # c's epoch, whole
    assert len(first) == stop.num_rows(0) < 600 and stop.num_batches(0) == -(-len(first) // 40)
    second = _ids(_served(stop, 1))  # c starts its next epoch, a and b go on where they were
    assert not set(second[_component(second) == 0].tolist()) & set(first[_component(first) == 0].tolist())
    assert stop.initial_state(1)["starts"]["c"] == [1, 0]
    repeat = sf.mix(parts, weights=weights, samples_per_epoch=600, seed=3).batch(40)
    ids = _ids(_served(repeat, 0))
    assert np.array_equal(ids[: len(first)], first)  # the same order, up to the stop ...
    assert _component(ids[len(first) : len(first) + 1]).tolist() == [2]  # ... which is just before c's 91st row
    assert len(ids) == 600 and np.count_nonzero(_component(ids) == 2) == 200  # 90 + 90 + 20 rows of c
    assert np.array_equal(ids[_component(ids) == 2][:180], _own_order(parts["c"], 2))
    assert repeat.initial_state(1)["starts"]["c"] == [2, 20]


@pytest.mark.parametrize("stratified", [False, True])
def test_a_state_after_any_batch_resumes_the_same_remaining_rows(parts, stratified):
    mixed = sf.mix(parts, weights={"a": 0.2, "b": 0.5, "c": 0.3}, samples_per_epoch=800, seed=6, source_column="src")
    mixed = mixed.batch(64, stratified=stratified)
    with mixed.iter_epoch(1) as stream:
        batches, states = [], []
        for batch in stream:
            batches.append(batch)
            states.append(stream.get_state())
    assert len(batches) == mixed.num_batches(1) == 13
    for k in (0, 5, 11):
        rest = _served(mixed, state=states[k])
        assert mixed.num_batches(state=states[k]) == len(rest) == 12 - k
        assert np.array_equal(_ids(rest), _ids(batches[k + 1 :]))
        assert np.array_equal(np.concatenate([b["src"] for b in rest]), _component(_ids(rest)))
    assert states[-1] == mixed.initial_state(2)  # after the last batch: the next epoch's start
    fresh = sf.mix(parts, weights={"a": 0.2, "b": 0.5, "c": 0.3}, samples_per_epoch=800, seed=6, source_column="src")
    assert np.array_equal(_ids(_served(fresh.batch(64, stratified=stratified), state=states[4])), _ids(batches[5:]))


def test_weights_change_between_epochs_and_a_restored_state_keeps_the_weights_in_force(parts):
    def schedule(epoch: int) -> dict:
        return {"a": 1.0, "b": 1.0, "c": 1.0} if epoch == 0 else {"a": 3.0, "b": 1.0, "c": 0.0}

    mixed = sf.mix(parts, weights=schedule, samples_per_epoch=500, seed=8).batch(50)
    assert mixed.quotas(0) == {"a": 167, "b": 167, "c": 166} and mixed.quotas(1) == {"a": 375, "b": 125, "c": 0}
    with mixed.iter_epoch(1) as stream:
        batches = [next(stream) for _ in range(3)]
        state = stream.get_state()
        rest = list(stream)
    assert state["weights"] == {"a": 3.0, "b": 1.0, "c": 0.0}
    counts = collections.Counter(_component(_ids(batches + rest)).tolist())
    assert (counts[0], counts[1], counts[2]) == (375, 125, 0)
    later = mixed.with_weights({"a": 1.0, "b": 0.0, "c": 1.0})
    assert np.array_equal(_ids(_served(later, state=state)), _ids(rest))  # the state's weights finish its epoch
    following = later.initial_state(2)  # then the new weights, from where the restored epoch left each component
    assert following["weights"] == {"a": 1.0, "b": 0.0, "c": 1.0}
    assert following["starts"] == mixed.initial_state(2)["starts"]
    assert later.quotas(2) == {"a": 250, "b": 0, "c": 250}


def test_shards_serve_equal_disjoint_rows_with_the_same_mix_in_every_step(parts):
    weights = {"a": 0.5, "b": 0.3, "c": 0.2}
    shards = [sf.mix(parts, weights=weights, samples_per_epoch=400, seed=1).shard(i, 2).batch(20) for i in range(2)]
    served = [_served(shard) for shard in shards]
    assert len(served[0]) == len(served[1]) == shards[0].num_batches() == 10
    for left, right in zip(*served):
        assert np.array_equal(_component(left["id"]), _component(right["id"]))  # the same labels, step by step
    ids = [set(_ids(batches).tolist()) for batches in served]
    assert len(ids[0]) == len(ids[1]) == 200 and not ids[0] & ids[1]  # c: 40 of each worker's 45 rows
    assert shards[0].fingerprint() == shards[1].fingerprint()  # no worker index: a state moves between workers
    state = shards[0].iter_epoch(0).get_state()
    assert shards[1].num_batches(state=state) == 10


def test_mismatched_columns_and_types_are_refused_naming_the_component(tmp_path, parts):
    extra = sf.read_parquet(_write(tmp_path / "d.parquet", 40, 30_000, extra=True))
    with pytest.raises(sf.SchemaError, match=r"component 'd'.*extra \['z'\]"):
        sf.mix({"a": parts["a"], "d": extra})
    matched = sf.mix({"a": parts["a"], "d": extra.map(lambda chunk: {"id": chunk["id"], "x": chunk["x"]})})
    assert matched.batch(10).served_columns() == ["id", "x"]
    wide = sf.read_parquet(_write(tmp_path / "e.parquet", 40, 30_000, x_dtype="float64"))
    with pytest.raises(sf.SchemaError, match=r"'x' has different types.*a: float32.*e: float64"):
        _served(sf.mix({"a": parts["a"], "e": wide}, weights={"a": 1, "e": 1}).batch(16))
    with pytest.raises(sf.ArgumentError, match="batched, bucketed or sharded"):
        sf.mix({"a": parts["a"].batch(8), "b": parts["b"]})
    with pytest.raises(sf.ArgumentError, match="Invalid mix weights"):
        sf.mix(parts, weights={"a": 1, "b": -1, "c": 1})
    with pytest.raises(sf.SchemaError, match="already a column"):
        sf.mix(parts, source_column="x")


def test_a_state_of_another_mixture_or_out_of_range_is_refused(parts):
    mixed = sf.mix(parts, samples_per_epoch=300, seed=1).batch(20)
    state = mixed.initial_state(0)
    with pytest.raises(sf.StateError, match="different mixture.*seed"):
        sf.mix(parts, samples_per_epoch=300, seed=2).batch(20).num_batches(state=state)
    for field, value, message in [
        ("rows", 301, "'rows'"),
        ("weights", {"a": 1}, "'weights'"),
        ("starts", {"a": [0, 0], "b": [0, 0], "c": [0, 90]}, r"starts\.c\[1\]"),
        ("version", 2, "'version'"),
    ]:
        with pytest.raises(sf.StateError, match=message):
            mixed.iter_epoch(state={**state, field: value})
    with pytest.raises(sf.StateError, match="'state'"):
        mixed.num_batches(state=[1, 2])


def _threads_left(baseline: set) -> list[str]:
    return threads_left(baseline, seconds=10.0)


def test_no_component_thread_outlives_a_closed_or_dropped_mixed_epoch(parts):
    mixed = sf.mix(parts, samples_per_epoch=900, seed=1).batch(16)
    baseline = set(threading.enumerate())
    with mixed.iter_epoch(0) as stream:
        next(stream)
        assert set(threading.enumerate()) - baseline  # the components' epochs run
    assert _threads_left(baseline) == []
    stream = mixed.iter_epoch(0)
    next(stream)
    dropped = weakref.ref(stream)
    del stream  # unclosed: each component's epoch is stopped by its own finalizer
    gc.collect()
    assert dropped() is None
    assert _threads_left(baseline) == []
