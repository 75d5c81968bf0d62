"""Equal, exact shards and elastic resume (issue 12, items 1 and 2), in one process.

Each worker of an ``n``-worker job is its own ``Dataset`` built in this
process (``shard(i, n, lanes=C)``), as each training process would build
it. A step's *global batch* is the workers' step-``t`` batches concatenated
in worker order; the checks compare global batches by their ``id`` columns.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import streamfeed as sf
from _threads import threads_left
from streamfeed.errors import ArgumentError, StateError
from streamfeed.plan import deal_lanes
from streamfeed.runtime.batch import PAD_MASK

GLOBAL = 64  # rows per global step in every job below


# -------------------------------------------------------------------- inputs
def write_parquet(folder: Path, sizes: list[int], row_group: int) -> np.ndarray:
    """Files of ``sizes`` rows (ids unique across files), in row groups of ``row_group``."""
    folder.mkdir(parents=True, exist_ok=True)
    start = 0
    for number, size in enumerate(sizes):
        ids = np.arange(start, start + size, dtype=np.int64)
        pq.write_table(
            pa.table({"id": ids, "x": ids / 2.0}), folder / f"part-{number}.parquet", row_group_size=row_group
        )
        start += size
    return np.arange(start)


def uneven(tmp_path: Path) -> tuple[sf.Dataset, np.ndarray]:
    """The issue's case: three files of 1000-row groups, 5003 rows (old shards: 3000 and 2003 rows)."""
    ids = write_parquet(tmp_path / "uneven", [2000, 2000, 1003], 1000)
    return sf.read_parquet(tmp_path / "uneven"), ids


def many_groups(tmp_path: Path) -> tuple[sf.Dataset, np.ndarray]:
    """4 files of 100-row groups (the last file 37 rows more): 4037 rows in 41 fragments."""
    ids = write_parquet(tmp_path / "many", [1000, 1000, 1000, 1037], 100)
    return sf.read_parquet(tmp_path / "many"), ids


def numpy_pair(tmp_path: Path) -> tuple[sf.Dataset, np.ndarray]:
    """A second format: .npy columns in fragments of 97 rows, 2003 rows."""
    ids = np.arange(2003)
    np.save(tmp_path / "x.npy", ids / 2.0)
    np.save(tmp_path / "id.npy", ids)
    return sf.read_numpy(tmp_path / "x.npy", arrays={"id": tmp_path / "id.npy"}, rows_per_fragment=97), ids


FORMATS = [pytest.param(many_groups, id="parquet"), pytest.param(numpy_pair, id="numpy")]


# ------------------------------------------------------------------- helpers
def workers(
    ds: sf.Dataset, count: int, *, lanes: int = 4, remainder: str = "drop", last_batch: str = "keep"
) -> list[sf.Dataset]:
    """The ``count`` workers of a job with ``GLOBAL`` rows per step."""
    return [
        ds.shard(index, count, lanes=lanes, remainder=remainder).batch(GLOBAL // count, last_batch=last_batch)
        for index in range(count)
    ]


def run(worker: sf.Dataset, epoch: int = 0, state: dict | None = None) -> list[dict[str, np.ndarray]]:
    """Every batch one worker serves (copied), closing its iterator."""
    stream = worker.iter_epoch(epoch) if state is None else worker.iter_epoch(state=state)
    with stream as it:
        return [{name: np.array(column, copy=True) for name, column in batch.items()} for batch in it]


def global_batches(per_worker: list[list[dict[str, np.ndarray]]]) -> list[dict[str, np.ndarray]]:
    """Step ``t``'s global batch: the workers' step-``t`` batches in worker order."""
    steps = {len(batches) for batches in per_worker}
    assert len(steps) == 1, f"workers served different numbers of steps: {[len(b) for b in per_worker]}"
    return [
        {name: np.concatenate([batches[t][name] for batches in per_worker]) for name in per_worker[0][t]}
        for t in range(steps.pop())
    ]


def real_ids(batches: list[dict[str, np.ndarray]]) -> np.ndarray:
    """The ids of real (weight 1) rows in order; a row's columns must have stayed together."""
    out = [np.zeros(0, dtype=np.int64)]
    for batch in batches:
        np.testing.assert_array_equal(batch["x"], batch["id"] / 2.0)
        keep = batch[PAD_MASK] == 1.0 if PAD_MASK in batch else slice(None)
        out.append(batch["id"][keep])
    return np.concatenate(out)


def ids_per_step(batches: list[dict[str, np.ndarray]]) -> list[list[int]]:
    return [batch["id"].tolist() for batch in batches]


# ---------------------------------------------------------------- equal shards
def test_uneven_row_groups_give_every_worker_the_same_steps_and_batch_sizes(tmp_path):
    ds, ids = uneven(tmp_path)
    for pipeline in (ds, ds.shuffle(7)):
        pair = [pipeline.shard(index, 2).batch(32) for index in range(2)]
        served = [run(worker) for worker in pair]
        assert pair[0].num_batches() == pair[1].num_batches() == len(served[0]) == len(served[1]) == 79
        assert [len(b["id"]) for b in served[0]] == [len(b["id"]) for b in served[1]]  # last batches too
        assert len(served[0][-1]["id"]) == 2501 % 32  # 5003 // 2 rows per worker, "keep"
        seen = np.concatenate([real_ids(batches) for batches in served])
        assert len(np.unique(seen)) == len(seen) == 5002, "every dealt row exactly once, the shards disjoint"
        report = pair[1].shard_report(0)
        assert report["dropped_rows"] == 1 and report["lane_rows"] == 2501 and report["steps"] == 79
        left_out = np.setdiff1d(ids, seen)
        assert len(left_out) == 1
        # The row left out is the last of the global order: the last row of the unsharded
        # epoch with the same window (a sharded default window is capped, see _plan_layout).
        unsharded = pipeline if pipeline.seed is None else ds.shuffle(7, window=pair[0].layout().window)
        assert real_ids(run(unsharded.batch(32)))[-1] == left_out[0]


def test_a_file_of_one_row_group_is_split_between_workers(tmp_path):
    ids = write_parquet(tmp_path / "one", [1000], 1000)
    ds = sf.read_parquet(tmp_path / "one").shuffle(3)
    halves = [real_ids(run(ds.shard(index, 2).batch(50))) for index in range(2)]
    assert [len(half) for half in halves] == [500, 500]
    np.testing.assert_array_equal(np.sort(np.concatenate(halves)), ids)


def test_dropped_remainder_is_logged_once_per_epoch(tmp_path, caplog):
    ds, _ = uneven(tmp_path)
    worker = ds.shuffle(1).shard(0, 4).batch(16)
    with caplog.at_level(logging.INFO, logger="streamfeed"):
        run(worker, 0)
        run(worker, 0)
        run(worker, 1)
    lines = [record.getMessage() for record in caplog.records if "leaves out" in record.getMessage()]
    assert len(lines) == 2, lines
    assert "last 3 of 5003 rows (rows 5000..5002" in lines[0]
    assert worker.shard_report(1)["dropped"] == [5000, 5003]


@pytest.mark.parametrize("last_batch", ["keep", "drop", "pad"])
def test_padded_remainder_serves_every_row_once_and_filler_with_weight_zero(tmp_path, last_batch):
    ds, ids = uneven(tmp_path)
    job = workers(ds.shuffle(5, window=2), 2, lanes=4, remainder="pad", last_batch=last_batch)
    served = [run(worker) for worker in job]
    assert len({len(b) for b in served}) == 1 and len(served[0]) == job[0].num_batches()
    assert [len(b["id"]) for b in served[0]] == [len(b["id"]) for b in served[1]]
    masks = np.concatenate([b[PAD_MASK] for batches in served for b in batches])
    assert set(np.unique(masks)) <= {0.0, 1.0}
    report = job[0].shard_report(0)
    assert report["lane_rows"] == 1251 and report["padded_rows"] == 1 and report["dropped_rows"] == 0
    seen = np.concatenate([real_ids(batches) for batches in served])
    lane_step = GLOBAL // 4  # each lane's rows per step
    if last_batch == "drop":  # 1251 rows per lane, 16 a step: the last 3 of each lane are dropped alike
        assert len(seen) == len(np.unique(seen)) == 4 * (1251 // lane_step) * lane_step
    else:
        assert len(seen) == len(np.unique(seen)) == len(ids)  # every row once; the filler row has weight 0
        np.testing.assert_array_equal(np.sort(seen), ids)
        assert int((masks == 0).sum()) == (1 if last_batch == "keep" else 4 * (lane_step - 1251 % lane_step) + 1)


def test_padded_rows_get_sample_weight_zero_in_keras(tmp_path):
    ds, _ = uneven(tmp_path)
    worker = ds.shard(1, 2, lanes=4, remainder="pad").batch(32)
    with worker.to_keras(features=["x"], label="id") as train:
        train.on_epoch_begin()
        served = [train[index] for index in range(train.num_batches)]  # served in order, as Keras asks
        assert all(len(batch) == 3 for batch in served), "a sharded, padded epoch gives Keras sample weights"
        weights = np.concatenate([np.asarray(batch[2]) for batch in served])
        assert int((weights == 0).sum()) == 1 and len(weights) == worker.num_rows() == 2 * 1251
        assert float(served[-1][2][-1]) == 0.0  # the filler row ends the last lane


# --------------------------------------------------------- elastic determinism
@pytest.mark.parametrize("factory", FORMATS)
@pytest.mark.parametrize("shuffle", [False, True], ids=["in-order", "shuffled"])
def test_global_order_is_the_same_for_1_2_and_4_workers(factory, tmp_path, shuffle):
    ds, ids = factory(tmp_path)
    if shuffle:
        ds = ds.shuffle(11, window=3)
    orders = {}
    for count in (1, 2, 4):
        job = workers(ds, count)
        per_worker = [run(worker, epoch=1) for worker in job]
        orders[count] = ids_per_step(global_batches(per_worker))
        parts = [real_ids(batches) for batches in per_worker]
        everything = np.concatenate(parts)
        assert len(np.unique(everything)) == len(everything), "workers overlap"
        dropped = job[0].shard_report(1)["dropped_rows"]
        assert len(everything) == len(ids) - dropped == len(ids) // 4 * 4
    assert orders[1] == orders[2] == orders[4]
    assert len(orders[1][0]) == GLOBAL


@pytest.mark.parametrize("factory", FORMATS)
def test_each_worker_reads_about_its_share(factory, tmp_path):
    ds, _ = factory(tmp_path)
    fragments = len(ds.source.fragments)
    for pipeline in (ds.shuffle(2, window=2), ds.shuffle(2)):  # a window given, and the default one
        for count in (2, 4):
            reads = []
            for worker in workers(pipeline.with_options(metrics=True), count):
                with worker.iter_epoch(0) as it:
                    for _ in it:
                        pass
                    reads.append(it.metrics()["stages"]["read"]["calls"])
                lanes_here = 4 // count
                # Its share of fragments, plus one boundary unit (window fragments) per lane, and one more.
                assert reads[-1] <= fragments / count + (lanes_here + 1) * worker.layout().window, reads
            assert sum(reads) < 1.5 * fragments, reads


RESUMES = [(2, 1), (2, 4), (1, 2), (4, 2), (2, 2)]


@pytest.mark.parametrize("factory", FORMATS)
@pytest.mark.parametrize("saved_with, resumed_with", RESUMES, ids=[f"{a}to{b}" for a, b in RESUMES])
def test_elastic_resume_serves_the_rest_once_in_the_uninterrupted_order(factory, tmp_path, saved_with, resumed_with):
    ds, _ = factory(tmp_path)
    ds = ds.shuffle(9, window=2)
    epoch, trained = 1, 5
    before = workers(ds, saved_with)
    states, first = [], []
    for worker in before:
        with worker.iter_epoch(epoch) as it:
            first.append([{k: np.array(v, copy=True) for k, v in next(it).items()} for _ in range(trained)])
            states.append(json.loads(json.dumps(it.get_state())))  # through JSON, as a checkpoint would
    assert all(state == states[0] for state in states), "every worker of a job saves the same state"
    assert states[0]["batches"] == trained and states[0]["epoch"] == epoch
    after = workers(ds, resumed_with)
    uninterrupted = ids_per_step(global_batches([run(worker, epoch) for worker in after]))
    assert ids_per_step(global_batches(first)) == uninterrupted[:trained]
    for worker in after:
        assert worker.num_batches(state=states[0]) == len(uninterrupted) - trained
    rest = ids_per_step(global_batches([run(worker, state=states[0]) for worker in after]))
    assert rest == uninterrupted[trained:]
    served = [i for step in uninterrupted[:trained] + rest for i in step]
    assert len(served) == len(set(served)), "a row was served twice across the restart"


@pytest.mark.parametrize("last_batch", ["keep", "pad"])
def test_padded_lanes_resume_from_every_step_with_any_worker_count(tmp_path, last_batch):
    # 67 rows in 4 lanes of 17: lane 3 holds 16 real rows and one filler row, which makes
    # its own last slice (16 rows a lane step): resuming there re-reads the row it repeats.
    write_parquet(tmp_path / "small", [67], 10)
    ds = sf.read_parquet(tmp_path / "small").shuffle(12, window=2)
    job = {count: workers(ds, count, remainder="pad", last_batch=last_batch) for count in (1, 2, 4)}
    whole = {count: global_batches([run(worker) for worker in job[count]]) for count in job}
    assert len(whole[1]) == 2
    for count in job:
        assert [b["id"].tolist() for b in whole[count]] == [b["id"].tolist() for b in whole[1]]
        assert [b[PAD_MASK].tolist() for b in whole[count]] == [b[PAD_MASK].tolist() for b in whole[1]]
    np.testing.assert_array_equal(np.sort(real_ids(whole[1])), np.arange(67))
    for done in range(len(whole[1]) + 1):
        state = {**job[2][0].initial_state(0), "batches": done}
        for count in job:
            rest = global_batches([run(worker, state=state) for worker in job[count]])
            assert [b["id"].tolist() for b in rest] == [b["id"].tolist() for b in whole[count][done:]]
            assert [b[PAD_MASK].tolist() for b in rest] == [b[PAD_MASK].tolist() for b in whole[count][done:]]


def test_a_worker_stopped_mid_epoch_ends_every_lane_thread(tmp_path):
    ds, _ = many_groups(tmp_path)
    worker = ds.shuffle(8, window=2).shard(0, 2, lanes=4, remainder="pad").batch(32)
    baseline = set(threading.enumerate())
    with worker.iter_epoch(0) as it:  # closed after two steps: two lanes' readers are running
        next(it)
        next(it)
    dropped = worker.iter_epoch(0)
    next(dropped)
    del dropped  # never closed: collected, its threads stop
    assert threads_left(baseline, seconds=30) == []


def test_state_after_the_last_step_is_the_next_epoch_start(tmp_path):
    ds, _ = numpy_pair(tmp_path)
    worker = ds.shuffle(4).shard(1, 2, lanes=4).batch(32)
    with worker.iter_epoch(0) as it:
        for _ in it:
            pass
        assert it.get_state() == worker.initial_state(1)
    assert worker.initial_state(0) == {
        "version": 1,
        "epoch": 0,
        "batches": 0,
        "fingerprint": worker.fingerprint(),
    }
    fingerprint = worker.fingerprint()
    assert fingerprint["shard"] == {"lanes": 4, "global_batch": 64, "remainder": "drop"}
    assert fingerprint["batch_size"] == 16  # each lane's rows per step


def test_filters_deal_the_rows_left_after_them(tmp_path):
    ds, ids = many_groups(tmp_path)
    kept = ds.filter(lambda columns: columns["id"] % 3 != 0, name="not-thirds").shuffle(6, window=2)
    per_worker = [run(worker) for worker in workers(kept, 2)]
    assert len(per_worker[0]) == len(per_worker[1])
    seen = np.concatenate([real_ids(batches) for batches in per_worker])
    want = ids[ids % 3 != 0]
    assert len(seen) == len(np.unique(seen)) == len(want) // 4 * 4
    assert set(seen) <= set(want)


def test_per_batch_ops_see_the_workers_batch(tmp_path):
    ds, _ = many_groups(tmp_path)
    sizes: list[int] = []

    def record(columns):
        sizes.append(len(columns["id"]))
        return columns

    worker = ds.shuffle(2).shard(1, 2, lanes=4).batch(32, last_batch="pad").map(record, name="rec")
    served = run(worker)
    assert sizes == [32] * len(served) == [len(batch["id"]) for batch in served]  # not the lanes' 16-row slices


def test_no_rows_is_an_empty_epoch_on_every_worker(tmp_path):
    ds, _ = numpy_pair(tmp_path)
    nothing = ds.filter(lambda columns: np.zeros(len(columns["id"]), dtype=bool), name="none")
    for worker in workers(nothing, 2):
        assert worker.num_batches() == 0 and run(worker) == []


def test_lanes_are_equal_contiguous_and_cover_the_dealt_rows():
    for rows in [0, *range(8, 60), 1001]:
        for count in range(1, 9):
            for remainder in ("drop", "pad"):
                lanes = deal_lanes(rows, count, remainder)
                assert lanes.starts[0] == 0 and list(lanes.starts[1:]) == list(lanes.stops[:-1])  # contiguous
                real = [stop - start for start, stop in zip(lanes.starts, lanes.stops)]
                if remainder == "drop":
                    assert real == [rows // count] * count and lanes.dropped == rows % count and not lanes.padded
                else:
                    assert lanes.stops[-1] == rows and lanes.length == -(-rows // count) and not lanes.dropped
                    assert all(lanes.length - 1 <= size <= lanes.length for size in real)
                    assert lanes.padded == lanes.length * count - rows
                    assert real == sorted(real, reverse=True)  # the short lanes are the last ones
    with pytest.raises(ArgumentError, match="3 rows"):
        deal_lanes(3, 4, "pad")


# ------------------------------------------------------------------ refusals
def test_mismatched_worker_counts_and_batch_sizes_are_refused_clearly(tmp_path):
    ds, _ = numpy_pair(tmp_path)
    ds = ds.shuffle(1)
    with pytest.raises(ArgumentError, match=r"lanes=4: one of \[1, 2, 4\].*count=3"):
        ds.shard(0, 3, lanes=4)
    with pytest.raises(ArgumentError, match=r"batch_size=31, count=2, lanes=4.*batch\(32\) or batch\(30\)"):
        ds.shard(0, 2, lanes=4).batch(31).num_batches()
    with pytest.raises(ArgumentError, match="rows"):
        ds.filter(lambda c: c["id"] < 3, name="three").shard(0, 2, lanes=4).batch(2).num_batches()
    with pytest.raises(ArgumentError, match="batches"):
        ds.shard(0, 2).iter_epoch(0)
    saved = workers(ds, 2)[0]
    with saved.iter_epoch(0) as it:
        next(it)
        state = it.get_state()
    wrong_batch = ds.shard(0, 4, lanes=4).batch(32)  # 4 x 32 = 128 rows a step, not 64
    with pytest.raises(StateError, match=r"batch\(16\)"):
        wrong_batch.iter_epoch(state=state)
    with pytest.raises(StateError, match=r"lanes=4"):
        ds.shard(0, 2, lanes=8).batch(32).num_batches(state=state)
    with pytest.raises(StateError, match="sharded job"):
        ds.batch(64).iter_epoch(state=state)  # an unsharded pipeline
    unsharded = ds.batch(64).initial_state(0)
    with pytest.raises(StateError, match="shard"):
        saved.iter_epoch(state=unsharded)
    with pytest.raises(StateError, match="'batches'"):
        saved.iter_epoch(state={**state, "batches": saved.num_batches() + 1})


def test_unsharded_and_one_worker_one_lane_are_served_as_before(tmp_path):
    ds, _ = many_groups(tmp_path)
    pipeline = ds.shuffle(3, window=2).batch(50)
    one = pipeline.shard(0, 1)
    assert one.fingerprint() == pipeline.fingerprint()
    assert one.initial_state(0) == pipeline.initial_state(0) and "unit" in one.initial_state(0)
    assert ids_per_step(run(one)) == ids_per_step(run(pipeline))


# --------------------------------------------------------------------- keras
FIT = textwrap.dedent(
    """
    import json, sys
    import keras
    import streamfeed as sf

    ds = sf.read_parquet(sys.argv[1]).shuffle(7)
    steps = []
    for index in range(2):
        worker = ds.shard(index, 2).batch(32).to_keras(features=["x"], label="id")
        model = keras.Sequential([keras.Input((1,)), keras.layers.Dense(1)])
        model.compile(keras.optimizers.SGD(1e-9), "mse")
        counted = []
        callback = keras.callbacks.LambdaCallback(on_train_batch_end=lambda batch, logs: counted.append(batch))
        model.fit(worker, epochs=2, verbose=0, callbacks=[callback])
        steps.append(len(counted))
        worker.close()
    print(json.dumps(steps))
    """
)


def test_keras_fit_takes_the_same_steps_on_two_workers(tmp_path):
    write_parquet(tmp_path / "uneven", [2000, 2000, 1003], 1000)
    env = {**os.environ, "KERAS_BACKEND": "jax", "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run(
        [sys.executable, "-c", FIT, str(tmp_path / "uneven")], capture_output=True, text=True, env=env, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == [2 * 79, 2 * 79]


def test_data_checkpoint_of_a_sharded_job_resumes_with_another_worker_count(tmp_path):
    import keras

    from streamfeed.keras import DataCheckpoint

    ds, _ = uneven(tmp_path)
    ds = ds.shuffle(3)
    directory = tmp_path / "checkpoint"

    def model() -> keras.Model:
        built = keras.Sequential([keras.Input((1,)), keras.layers.Dense(1)])
        built.compile(keras.optimizers.SGD(1e-9), "mse")
        return built

    class StopAfter(keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            self.model.stop_training = batch + 1 >= 30

    with ds.shard(0, 2, lanes=4).batch(32).to_keras(features=["x"], label="id") as train:
        model().fit(train, epochs=1, verbose=0, callbacks=[DataCheckpoint(train, directory, every=10), StopAfter()])
    with ds.shard(0, 1, lanes=4).batch(64).to_keras(features=["x"], label="id") as alone:
        resumed = DataCheckpoint(alone, directory)
        resumed.set_model(model())
        resumed.on_train_begin()
        assert alone.get_state()["batches"] == 30
        assert alone.num_batches == 79 - 30  # the rest of the epoch, now served by one worker
