"""Parquet list columns end to end: read as ragged rows, carried through shuffle, batch, shards and resume.

Files are written by pyarrow with ``list<int32>``, ``large_list<float64>``
columns of a long-tailed length distribution (a quarter of the rows empty,
a few a hundred values long); every row carries its ``id``, and the truth
is pyarrow's own ``to_pylist`` of the file.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import streamfeed as sf

ROWS, FILES, ROW_GROUP = 900, 3, 70


def long_tail_lists(rng: np.random.Generator, rows: int) -> list[list[int]]:
    """Lists of lengths 0 (about a quarter), a few, and a long tail (Pareto), of token ids >= 1."""
    lengths = np.where(rng.random(rows) < 0.25, 0, np.minimum(1 + (rng.pareto(1.2, rows) * 4).astype(int), 150))
    return [rng.integers(1, 1000, size=int(n)).tolist() for n in lengths]


@pytest.fixture(scope="module")
def list_files(tmp_path_factory) -> tuple[Path, dict[int, dict]]:
    """Three files with ``id``, ``tok`` (list<int32>) and ``w`` (large_list<float64>); the truth by id."""
    folder = tmp_path_factory.mktemp("lists")
    rng = np.random.default_rng(24)
    truth: dict[int, dict] = {}
    for index in range(FILES):
        ids = np.arange(index * ROWS // FILES, (index + 1) * ROWS // FILES)
        tokens = long_tail_lists(rng, len(ids))
        weights = [[float(v) / 8 for v in row[::2]] for row in tokens]
        table = pa.table(
            {
                "id": pa.array(ids, type=pa.int64()),
                "tok": pa.array(tokens, type=pa.list_(pa.int32())),
                "w": pa.array(weights, type=pa.large_list(pa.float64())),
            }
        )
        path = folder / f"part-{index}.parquet"
        pq.write_table(table, path, row_group_size=ROW_GROUP)
        for row in pq.read_table(path).to_pylist():  # the truth is what pyarrow reads back
            truth[row["id"]] = row
    return folder, truth


def served(ds: sf.Dataset, *, state: dict | None = None) -> list[dict]:
    """Every row of an epoch (from ``state``), as Python values, in the order served."""
    rows: list[dict] = []
    with ds.iter_epoch(0, state=state) as it:
        for batch in it:
            assert isinstance(batch["tok"], sf.Ragged) and isinstance(batch["w"], sf.Ragged)
            for i, (tok, w) in enumerate(zip(batch["tok"].to_list(), batch["w"].to_list())):
                rows.append({"id": int(batch["id"][i]), "tok": tok, "w": w})
    return rows


def read_epoch(ds: sf.Dataset) -> list[dict]:
    """The batches of epoch 0, its threads stopped whatever it raises."""
    with ds.iter_epoch(0) as it:
        return list(it)


def test_every_row_once_with_its_exact_values_shuffled(list_files):
    folder, truth = list_files
    rows = served(sf.read_parquet(folder).shuffle(5, window=4).batch(64))
    assert sorted(row["id"] for row in rows) == sorted(truth)
    assert [row["id"] for row in rows] != sorted(truth)  # shuffled
    for row in rows:
        assert row == truth[row["id"]]
    assert any(not row["tok"] for row in rows) and max(len(row["tok"]) for row in rows) > 50


def test_unshuffled_rows_come_in_file_order_with_their_values(list_files):
    folder, truth = list_files
    rows = served(sf.read_parquet(folder).batch(100))
    assert rows == [truth[i] for i in sorted(truth)]


def test_the_dtypes_are_the_files(list_files):
    folder, _ = list_files
    with sf.read_parquet(folder).batch(10).iter_epoch(0) as it:
        batch = next(it)
    assert batch["tok"].dtype == np.int32 and batch["w"].dtype == np.float64
    assert batch["tok"].offsets.dtype == np.int64 and len(batch["tok"].offsets) == 11


@pytest.mark.parametrize("threads", [2, 4])
def test_shuffled_epoch_is_the_same_for_any_read_threads(list_files, threads):
    folder, _ = list_files
    ds = sf.read_parquet(folder).shuffle(9, window=3).batch(50)
    assert served(ds.with_options(read_threads=threads)) == served(ds.with_options(read_threads=1))


def test_resume_mid_epoch_equals_uninterrupted(list_files):
    folder, _ = list_files
    ds = sf.read_parquet(folder).shuffle(3, window=4).batch(40)
    full = served(ds)
    with ds.iter_epoch(0) as it:
        for _ in range(7):
            next(it)
        state = it.get_state()
    assert served(ds, state=state) == full[7 * 40 :]


def test_shards_split_the_rows_with_their_values(list_files):
    folder, truth = list_files
    ds = sf.read_parquet(folder).shuffle(4, window=3).batch(30)
    shards = [served(ds.shard(index, 2, remainder="pad")) for index in range(2)]
    seen = [row for shard in shards for row in shard]
    assert {row["id"] for row in seen} == set(truth)
    for row in seen:
        assert row == truth[row["id"]]
    assert len(shards[0]) == len(shards[1])


def test_filter_and_padded_last_batch_gather_ragged_rows(list_files):
    folder, truth = list_files
    ds = sf.read_parquet(folder).filter(lambda c: c["id"] % 3 == 0, name="thirds").batch(64, last_batch="pad")
    rows = served(ds)
    kept = sorted(i for i in truth if i % 3 == 0)
    real = len(kept)
    assert len(rows) % 64 == 0 and [row["id"] for row in rows[:real]] == kept
    for row in rows:  # the padding repeats rows of the last batch, values and all
        assert row == truth[row["id"]]


def test_a_null_list_raises_naming_file_row_and_column(tmp_path):
    path = tmp_path / "nulls.parquet"
    tokens = [[1, 2], [], None, [3]] * 10
    pq.write_table(
        pa.table({"id": np.arange(40), "tok": pa.array(tokens, pa.list_(pa.int64()))}), path, row_group_size=16
    )
    with pytest.raises(sf.DataError) as excinfo:
        read_epoch(sf.read_parquet(path).batch(8))
    text = str(excinfo.value)
    assert "'tok'" in text and str(path) in text and "row 2 of the file" in text and "null" in text
    dropped = sf.read_parquet(path, nulls="drop").batch(8)
    with dropped.iter_epoch(0) as it:
        batches = list(it)
    ids = np.concatenate([b["id"] for b in batches])
    assert list(ids) == [i for i in range(40) if i % 4 != 2]
    assert sum((b["tok"].to_list() for b in batches), []) == [tokens[i] for i in ids]


def test_a_null_inside_a_list_raises_naming_its_row(tmp_path):
    path = tmp_path / "inner.parquet"
    tokens = [[1, 2], [3, None, 4], [5]]
    pq.write_table(pa.table({"id": np.arange(3), "tok": pa.array(tokens, pa.list_(pa.int64()))}), path)
    with pytest.raises(sf.DataError) as excinfo:
        read_epoch(sf.read_parquet(path).batch(3))
    text = str(excinfo.value)
    assert "'tok'" in text and "row 1 of the file" in text and str(path) in text


@pytest.mark.parametrize(
    "values, kind",
    [([["a", "b"], ["c"]], pa.list_(pa.string())), ([[[1], [2, 3]], [[4]]], pa.list_(pa.list_(pa.int64())))],
    ids=["strings", "nested"],
)
def test_lists_of_other_than_numbers_are_refused_with_a_reason(tmp_path, values, kind):
    path = tmp_path / "other.parquet"
    pq.write_table(pa.table({"id": np.arange(2), "v": pa.array(values, kind)}), path)
    with pytest.raises(sf.SchemaError) as excinfo:
        read_epoch(sf.read_parquet(path).batch(2))
    text = str(excinfo.value)
    assert "'v'" in text and str(path) in text and "lists of numbers" in text


def test_ragged_gathers_and_joins_like_the_rows_it_holds():
    rows = [[1, 2, 3], [], [4], [5, 6]]
    ragged = sf.Ragged.from_rows(rows, dtype=np.int64)
    assert ragged[1:3].to_list() == [[], [4]] and ragged[::2].to_list() == [[1, 2, 3], [4]]
    assert np.take(ragged, [3, 0, 3], axis=0).to_list() == [[5, 6], [1, 2, 3], [5, 6]]
    assert ragged[np.array([True, False, False, True])].to_list() == [[1, 2, 3], [5, 6]]
    assert np.concatenate([ragged[2:], ragged[:1]]).to_list() == [[4], [5, 6], [1, 2, 3]]
    with pytest.raises(sf.ArgumentError, match="pad"):
        np.asarray(ragged)


def test_the_cache_writes_and_serves_ragged_rows(list_files, tmp_path):
    folder, truth = list_files
    ds = sf.read_parquet(folder).shuffle(6, window=3).cache(tmp_path / "cache").batch(64)
    first = served(ds)  # written while read
    assert list(tmp_path.joinpath("cache").rglob("*.parquet")), "no cache written"
    assert served(ds) == first  # read from the copy
    for row in first:
        assert row == truth[row["id"]]


def test_an_unpadded_list_column_cannot_reach_keras_and_says_why(list_files):
    folder, _ = list_files
    with pytest.raises(sf.ArgumentError, match=r"pad=Pad"):
        sf.read_parquet(folder).batch(16).to_keras(features=["tok"], label="id")[0]


def test_a_list_column_left_out_of_the_features_does_not_stop_keras(list_files):
    folder, _ = list_files
    data = sf.read_parquet(folder).shuffle(2, window=3).batch(16).to_keras(features=["id"], label="id")
    x, y = data[0][:2]
    assert x.shape == (16, 1) and np.array_equal(x[:, 0], y)


def test_a_null_list_is_filled_with_a_list_and_a_non_list_fill_is_refused(tmp_path):
    path = tmp_path / "fill.parquet"
    tokens = [[1], None, [2, 3], []]
    pq.write_table(pa.table({"id": np.arange(4), "tok": pa.array(tokens, pa.list_(pa.int64()))}), path)
    (batch,) = read_epoch(sf.read_parquet(path, nulls="fill", fill={"tok": [0, 0]}).batch(4))
    assert batch["tok"].to_list() == [[1], [0, 0], [2, 3], []]
    with pytest.raises(sf.ArgumentError) as excinfo:
        read_epoch(sf.read_parquet(path, nulls="fill", fill={"tok": 0}).batch(4))
    assert "'tok'" in str(excinfo.value) and "[]" in str(excinfo.value)
