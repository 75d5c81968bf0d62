"""``batch(bucket=Bucket(...))``: rows batched by length, each batch padded to its bucket's boundary.

The input is a Parquet file written by pyarrow (token lists of lengths 0
to 40 with a long tail, several row groups); every batch is compared with
the rows pyarrow reads back: which bucket each row belongs to, its padded
values, the bucket's batch size. Resume is compared bit for bit with the
uninterrupted epoch at cut points before, inside and after the buckets'
last batches.
"""

from __future__ import annotations

import collections
import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import streamfeed as sf

ROWS, ROW_GROUP = 700, 45
BOUNDARIES, SIZES = (8, 16, 40), (16, 8, 4)


def write_tokens(path: Path, rows: int = ROWS, longest: int = 40) -> dict[int, list[int]]:
    """Token lists (ids 1..999, a tenth empty, lengths up to ``longest``); the truth by id."""
    rng = np.random.default_rng(11)
    lengths = np.where(rng.random(rows) < 0.1, 0, np.minimum(1 + (rng.pareto(1.2, rows) * 6).astype(int), longest))
    tokens = [rng.integers(1, 1000, size=int(n)).tolist() for n in lengths]
    table = pa.table({"id": np.arange(rows), "tok": pa.array(tokens, pa.list_(pa.int32())), "w": rng.random(rows)})
    pq.write_table(table, path, row_group_size=ROW_GROUP)
    return {row["id"]: row["tok"] for row in pq.read_table(path).to_pylist()}


@pytest.fixture(scope="module")
def tokens(tmp_path_factory) -> tuple[Path, dict[int, list[int]]]:
    path = tmp_path_factory.mktemp("bucket") / "tokens.parquet"
    return path, write_tokens(path)


def bucketed(path: Path, seed: int | None = 3, **settings) -> sf.Dataset:
    ds = sf.read_parquet(path)
    if seed is not None:
        ds = ds.shuffle(seed, window=3)
    last_batch = settings.pop("last_batch", "keep")
    return ds.batch(bucket=sf.Bucket("tok", BOUNDARIES, SIZES, **settings), last_batch=last_batch)


def bucket_of(length: int) -> int:
    return next(index for index, boundary in enumerate(BOUNDARIES) if length <= boundary)


def epoch(ds: sf.Dataset, number: int = 0, state: dict | None = None) -> list[dict[str, np.ndarray]]:
    with ds.iter_epoch(number, state=state) as it:
        return list(it)


def same(a: list[dict[str, np.ndarray]], b: list[dict[str, np.ndarray]]) -> bool:
    return len(a) == len(b) and all(
        x.keys() == y.keys() and all(np.array_equal(x[k], y[k]) for k in x) for x, y in zip(a, b)
    )


@pytest.mark.parametrize("seed", [None, 3])
def test_every_row_once_in_its_buckets_rectangular_batch(tokens, seed):
    path, truth = tokens
    ds = bucketed(path, seed)
    steps = len(ds)  # before the first batch
    out = epoch(ds)
    assert steps == len(out)
    seen, shapes, rest = [], set(), collections.Counter()
    for batch in out:
        ids = batch["id"].tolist()
        buckets = {bucket_of(len(truth[i])) for i in ids}
        assert len(buckets) == 1  # one bucket per batch
        (bucket,) = buckets
        width, size = BOUNDARIES[bucket], SIZES[bucket]
        assert batch["tok"].shape == (len(ids), width) and batch["tok"].dtype == np.int32
        assert batch["tok"].tolist() == [truth[i] + [0] * (width - len(truth[i])) for i in ids]
        assert batch["tok_length"].tolist() == [len(truth[i]) for i in ids]
        assert len(ids) <= size
        rest[bucket] += len(ids) < size
        shapes.add(batch["tok"].shape)
        seen += ids
    assert sorted(seen) == sorted(truth) and len(seen) == len(set(seen))
    assert max(rest.values()) <= 1  # only each bucket's last batch may be short
    assert {width for _, width in shapes} == set(BOUNDARIES)
    counts = collections.Counter(bucket_of(len(row)) for row in truth.values())
    assert steps == sum(-(-counts[b] // SIZES[b]) for b in range(len(SIZES)))
    if seed is None:  # unshuffled, a bucket's rows come in the file's order
        for bucket in range(len(SIZES)):
            mine = [i for batch in out for i in batch["id"].tolist() if bucket_of(len(truth[i])) == bucket]
            assert mine == sorted(mine)


@pytest.mark.parametrize("last_batch", ["drop", "pad"])
def test_the_last_batch_policy_applies_to_each_buckets_rest(tokens, last_batch):
    path, truth = tokens
    ds = bucketed(path, last_batch=last_batch)
    steps = ds.num_batches()
    out = epoch(ds)
    counts = collections.Counter(bucket_of(len(row)) for row in truth.values())
    assert steps == len(out)
    assert {batch["tok"].shape for batch in out} == {(size, width) for size, width in zip(SIZES, BOUNDARIES)}
    if last_batch == "drop":
        assert steps == sum(counts[b] // SIZES[b] for b in counts)
        assert sum(len(batch["id"]) for batch in out) == sum(counts[b] // SIZES[b] * SIZES[b] for b in counts)
    else:
        mask = np.concatenate([batch["__streamfeed_pad_mask__"] for batch in out])
        real = np.concatenate([batch["id"] for batch in out])[mask == 1]
        assert sorted(real.tolist()) == sorted(truth)


def test_batches_do_not_depend_on_threads_or_memory_limit(tokens):
    path, _ = tokens
    one = epoch(bucketed(path, 5).with_options(read_threads=1, memory_limit="64MiB"))
    other = epoch(bucketed(path, 5).with_options(read_threads=4, memory_limit="2GiB"))
    assert same(one, other)
    assert same(one, epoch(bucketed(path, 5)))  # and the same on a second run
    assert not same(one, epoch(bucketed(path, 6)))


def test_epochs_reshuffle_the_same_rows(tokens):
    path, truth = tokens
    ds = bucketed(path, 5)
    first, second = epoch(ds, 0), epoch(ds, 1)
    assert not same(first, second)
    assert sorted(np.concatenate([b["id"] for b in second]).tolist()) == sorted(truth)
    assert len(second) == ds.num_batches(1)


@pytest.mark.parametrize("seed", [None, 4])
@pytest.mark.parametrize("last_batch", ["keep", "pad"])
def test_a_resumed_epoch_serves_exactly_the_remaining_batches(tokens, seed, last_batch):
    path, _ = tokens
    ds = bucketed(path, seed, last_batch=last_batch)
    full = epoch(ds)
    for cut in (0, 1, len(full) // 2, len(full) - 3, len(full) - 1):
        with ds.iter_epoch(0) as it:
            for _ in range(cut):
                next(it)
            state = json.loads(json.dumps(it.get_state()))  # a state goes through a file
        assert ds.num_batches(state=state) == len(full) - cut
        fresh = bucketed(path, seed, last_batch=last_batch)  # another process would make its own
        assert same(epoch(fresh, state=state), full[cut:]), cut
    with ds.iter_epoch(0) as it:
        list(it)
        assert it.get_state()["epoch"] == 1  # the end of an epoch is the next one's start


def test_a_resumed_epoch_replays_only_the_waiting_rows(tokens):
    path, _ = tokens
    ds = bucketed(path, 4)
    with ds.iter_epoch(0) as it:
        for _ in range(20):
            next(it)
        state = it.get_state()
    assert 0 < len(state["waiting"]) < sum(SIZES)
    assert all(row < state["row"] for row in state["waiting"]) and sum(state["served"]) == 20


def test_a_filter_and_the_buckets_are_counted_in_one_pass(tokens, monkeypatch):
    path, truth = tokens
    passes = []
    ds = sf.read_parquet(path).filter(lambda c: c["tok"].lengths() > 0, name="nonempty").shuffle(2, window=3)
    ds = ds.batch(bucket=sf.Bucket("tok", BOUNDARIES, SIZES))
    original = type(ds.resolution).fragment_pass

    def counting(self, *args, **kwargs):
        passes.append(kwargs.get("name"))
        return original(self, *args, **kwargs)

    monkeypatch.setattr(type(ds.resolution), "fragment_pass", counting)
    steps = len(ds)
    keras_like = ds.with_options(memory_limit="256MiB")  # a derived dataset keeps the counts
    assert keras_like.num_batches() == steps and passes == ["bucket-count"]
    out = epoch(keras_like)
    assert len(out) == steps and sorted(np.concatenate([b["id"] for b in out]).tolist()) == sorted(
        i for i, row in truth.items() if row
    )


def test_other_list_columns_are_padded_by_pad(tmp_path):
    path = tmp_path / "two.parquet"
    rows = [[1] * n for n in (1, 3, 9, 2, 12, 5)]
    pq.write_table(
        pa.table({"tok": pa.array(rows, pa.list_(pa.int32())), "pos": pa.array(rows, pa.list_(pa.int16()))}), path
    )
    ds = sf.read_parquet(path).batch(bucket=sf.Bucket("tok", (4, 12), (2, 2)), pad=sf.Pad(length=12, mark="none"))
    out = epoch(ds)
    # Lengths 1, 3, 9, 2, 12, 5: [1, 3] fill the first bucket, [9, 12] the second, then each one's rest.
    assert [b["tok"].shape for b in out] == [(2, 4), (2, 12), (1, 4), (1, 12)]
    assert all(b["pos"].shape == (len(b["tok"]), 12) and "pos_length" not in b for b in out)


def test_a_row_longer_than_the_last_boundary_names_its_file_or_is_cut(tokens):
    path, truth = tokens
    with pytest.raises(sf.DataError) as excinfo:
        len(sf.read_parquet(path).batch(bucket=sf.Bucket("tok", (8, 16), (4, 4))))
    text = str(excinfo.value)
    assert "longer than the last bucket boundary" in text and str(path) in text and "truncate" in text
    out = epoch(sf.read_parquet(path).batch(bucket=sf.Bucket("tok", (8, 16), (4, 4), truncate="start", mark="mask")))
    for batch in out:
        width = batch["tok"].shape[1]
        for i, row, mask in zip(batch["id"].tolist(), batch["tok"].tolist(), batch["tok_mask"]):
            kept = truth[i][-16:]
            assert row == kept + [0] * (width - len(kept)) and mask.sum() == len(kept)
    assert sorted(np.concatenate([b["id"] for b in out]).tolist()) == sorted(truth)


@pytest.mark.parametrize(
    "settings, words",
    [
        ({"boundaries": (8, 8), "batch_sizes": (2, 2)}, "strictly increasing"),
        ({"boundaries": (8, 16), "batch_sizes": (2,)}, "one batch size"),
        ({"boundaries": (), "batch_sizes": ()}, "non-empty"),
        ({"boundaries": (0, 4), "batch_sizes": (2, 2)}, ">= 1"),
        ({"boundaries": (4,), "batch_sizes": (0,)}, ">= 1"),
        ({"boundaries": "48", "batch_sizes": (2,)}, "sequence of integers"),
        ({"boundaries": (4,), "batch_sizes": (2,), "truncate": "middle"}, "truncate"),
        ({"boundaries": (4,), "batch_sizes": (2,), "mark": "weights"}, "mark"),
    ],
)
def test_invalid_bucket_settings_are_described(settings, words):
    with pytest.raises(sf.ArgumentError) as excinfo:
        sf.Bucket("tok", **settings)
    assert words in str(excinfo.value) and "expected" in str(excinfo.value).lower()


def test_what_bucketing_cannot_combine_with_is_refused(tokens):
    path, _ = tokens
    bucket = sf.Bucket("tok", BOUNDARIES, SIZES)
    base = sf.read_parquet(path)
    with pytest.raises(sf.ArgumentError, match="batch_size or a bucket"):
        base.batch(32, bucket=bucket)
    with pytest.raises(sf.ArgumentError, match="shard"):
        base.shard(0, 2).batch(bucket=bucket)
    with pytest.raises(sf.ArgumentError, match="shard"):
        base.batch(bucket=bucket).shard(1, 2)
    with pytest.raises(sf.ArgumentError, match="bucket column"):
        base.batch(bucket=bucket, pad=sf.Pad(columns=("tok",)))
    with pytest.raises(sf.ArgumentError, match="Invalid bucket"):
        base.batch(bucket=(8, 16))  # type: ignore[arg-type]
    with pytest.raises(sf.ArgumentError, match="needs a batch_size"):
        base.batch()
    with pytest.raises(sf.ArgumentError) as excinfo:
        len(base.batch(bucket=sf.Bucket("w", (4,), (2,))))
    assert "'w' is not a variable-length list column" in str(excinfo.value) and "'tok'" in str(excinfo.value)
    # a mixture batches its components itself
    with pytest.raises(sf.ArgumentError, match="batched, bucketed or sharded"):
        sf.mix({"a": base.batch(bucket=bucket), "b": base})


def test_states_are_checked_against_the_buckets(tokens):
    path, _ = tokens
    ds = bucketed(path, 4)
    with ds.iter_epoch(0) as it:
        for _ in range(10):
            next(it)
        state = it.get_state()
    other = sf.read_parquet(path).shuffle(4, window=3).batch(bucket=sf.Bucket("tok", (8, 16, 41), SIZES))
    with pytest.raises(sf.StateError):
        other.iter_epoch(0, state=state).close()
    plain = sf.read_parquet(path).shuffle(4, window=3).batch(16)
    with pytest.raises(sf.StateError):
        plain.iter_epoch(0, state=state).close()
    with plain.iter_epoch(0) as it:
        next(it)
        with pytest.raises(sf.StateError):
            ds.iter_epoch(0, state=it.get_state()).close()
    for field, value in (
        ("waiting", [5, 3]),
        ("waiting", [state["row"]]),
        ("waiting", list(range(sum(SIZES)))),
        ("served", [0, 0]),
        ("served", [10**6, 0, 0]),
        ("row", 10**9),
    ):
        with pytest.raises(sf.StateError, match=field):
            ds.iter_epoch(0, state={**state, field: value}).close()


def test_a_fragment_skipped_as_bad_is_left_out_of_the_counts_and_the_epoch(tmp_path):
    rng = np.random.default_rng(0)
    for number in range(3):
        rows = [rng.integers(1, 100, int(n)).tolist() for n in rng.integers(1, 30, 200)]
        table = pa.table({"id": np.arange(200) + 1000 * number, "tok": pa.array(rows, pa.list_(pa.int32()))})
        pq.write_table(table, tmp_path / f"p{number}.parquet", compression="snappy")
    bad = tmp_path / "p1.parquet"
    data = bytearray(bad.read_bytes())
    data[60:600] = bytes(540)  # its pages, not its footer: it opens, and its row group fails to decode
    bad.write_bytes(bytes(data))
    ds = sf.read_parquet(tmp_path, on_error="skip").batch(bucket=sf.Bucket("tok", (10, 30), (8, 4)))
    steps = len(ds)
    out = epoch(ds)
    ids = np.concatenate([b["id"] for b in out])
    assert steps == len(out) and sorted(ids.tolist()) == list(range(200)) + list(range(2000, 2200))
    assert [entry["path"] for entry in ds.report.to_dict()["entries"]] == [str(bad)]
