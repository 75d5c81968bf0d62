"""Text columns as object arrays: the values pyarrow has, and one object per distinct value of a category.

A category's rows point at one Python object per value
(``files/arrow.text_objects``), so a shuffled gather touches few reference
counts (issue 27: a 1 000-value string column made a shuffled CSV epoch
cost 2.8x pyarrow's parse).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest

import streamfeed as sf
from streamfeed.files.arrow import text_objects

RNG = np.random.default_rng(7)
CATEGORIES = np.array([f"cat-{i:03d}" for i in range(40)], dtype=object)


def _reference(column: pa.ChunkedArray) -> np.ndarray:
    combined = column.combine_chunks()
    if pa.types.is_dictionary(combined.type):
        combined = combined.cast(combined.type.value_type)
    return combined.to_numpy(zero_copy_only=False)


def _columns() -> dict[str, pa.ChunkedArray]:
    many = RNG.integers(0, 40, 20_000)
    few = CATEGORIES[many].tolist()
    unique = [f"id-{i}" for i in range(20_000)]
    with_nulls = [None if i % 97 == 0 else value for i, value in enumerate(few)]
    return {
        "category": pa.chunked_array([pa.array(few)]),
        "category, two chunks": pa.chunked_array([pa.array(few[:7_000]), pa.array(few[7_000:])]),
        "ids": pa.chunked_array([pa.array(unique)]),
        "nulls": pa.chunked_array([pa.array(with_nulls)]),
        "large_string": pa.chunked_array([pa.array(few, type=pa.large_string())]),
        "binary": pa.chunked_array([pa.array([value.encode() for value in few], type=pa.binary())]),
        "dictionary": pa.chunked_array([pa.array(few).dictionary_encode()]),
        "dictionary, two chunks": pa.chunked_array(
            [pa.array(few[:5_000]).dictionary_encode(), pa.array(few[5_000:]).dictionary_encode()]
        ),
        "short": pa.chunked_array([pa.array(few[:100])]),
        "empty": pa.chunked_array([pa.array([], type=pa.string())]),
    }


@pytest.mark.parametrize("name", list(_columns()))
def test_values_are_pyarrows(name: str) -> None:
    column = _columns()[name]
    got = text_objects(column)
    want = _reference(column)
    assert got.dtype == object and got.shape == want.shape
    assert got.tolist() == want.tolist()


@pytest.mark.parametrize("name", ["category", "category, two chunks", "large_string", "binary", "dictionary"])
def test_a_category_is_one_object_per_value(name: str) -> None:
    got = text_objects(_columns()[name])
    assert len({id(value) for value in got}) == len(set(got.tolist())) <= 40


def test_mostly_distinct_text_is_read_as_pyarrow_reads_it() -> None:
    got = text_objects(_columns()["ids"])
    assert len({id(value) for value in got}) == len(got)


def _written(tmp_path) -> tuple[str, str, list[str]]:
    values = CATEGORIES[RNG.integers(0, 40, 30_000)].tolist()
    table = pa.table({"category": values, "x": np.arange(30_000, dtype=np.float32)})
    pacsv.write_csv(table, tmp_path / "clicks.csv")
    pq.write_table(table, tmp_path / "clicks.parquet", row_group_size=10_000)
    return str(tmp_path / "clicks.csv"), str(tmp_path / "clicks.parquet"), values


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
@pytest.mark.parametrize("shuffled", [False, True])
def test_readers_serve_a_category_as_shared_objects(tmp_path, fmt: str, shuffled: bool) -> None:
    """Fails on the old code: every row was an object of its own."""
    csv_path, parquet_path, values = _written(tmp_path)
    if fmt == "csv":
        data = sf.read_csv(csv_path, column_types={"category": "string", "x": "float32"})
    else:
        data = sf.read_parquet(parquet_path)
    if shuffled:
        data = data.shuffle(3)
    batches = list(data.batch(4096).iter_epoch(0))
    served = np.concatenate([batch["category"] for batch in batches])
    rows = np.concatenate([batch["x"] for batch in batches]).astype(np.int64)
    assert served.tolist() == [values[row] for row in rows]
    assert sorted(rows.tolist()) == list(range(30_000))
    assert len({id(value) for value in served}) <= 40 * len(batches)
