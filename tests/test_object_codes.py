"""A shuffled unit keeps an object column of few distinct objects as codes into them (issue 27).

``runtime/shuffle.UnitBuffer`` used to copy a text column's pointers into
an object block of the unit's rows and gather them at random, a cache miss
a row; now their int32 codes ride in the unit's numeric row block and a
batch takes its objects from the unit's table of distinct objects
(``runtime/object_codes.py``). Each row must still be served the very
object it was read with, and the unit must let go of its objects once
served.
"""

from __future__ import annotations

import gc
import weakref

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pytest

import streamfeed as sf
from _unit_buffer import loaded_unit
from streamfeed.runtime.object_codes import object_codes
from streamfeed.runtime.shuffle import UnitBuffer

RNG = np.random.default_rng(11)


def _category(size: int, values: int) -> np.ndarray:
    """As ``files/arrow.text_objects`` reads a category: a fresh object per distinct value, rows pointing at them."""
    distinct = pa.array([f"city {i}" for i in range(values)]).to_numpy(zero_copy_only=False)
    return distinct[RNG.integers(0, values, size)]


def _chunks(sizes: list[int], values: int) -> list[dict[str, np.ndarray]]:
    chunks, first = [], 0
    for size in sizes:
        ident = np.arange(first, first + size)
        chunks.append({"id": ident.astype(np.int64), "city": _category(size, values), "price": ident.astype("f4")})
        first += size
    return chunks


@pytest.mark.parametrize("sizes", [[6000, 5000, 1], [40000], [4096, 3]])
def test_each_row_is_served_the_very_object_it_was_read_with(sizes: list[int]) -> None:
    chunks = _chunks(sizes, values=50)
    buffer = loaded_unit(chunks)
    rows = sum(sizes)
    indices = RNG.permutation(rows)
    out = buffer.gather(indices)
    whole = np.concatenate([chunk["city"] for chunk in chunks])
    assert list(out) == ["id", "city", "price"]
    assert out["city"].dtype == object and out["city"].shape == (rows,)
    assert all(served is read for served, read in zip(out["city"], whole[indices]))
    np.testing.assert_array_equal(out["id"], indices)
    np.testing.assert_array_equal(out["price"], indices.astype("f4"))
    # fails on the old code: the pointers were kept in an object block of the unit's rows
    assert not any(block.dtype == object for block in buffer._blocks.values())


class _Token:
    """An object a user map might put in a column; weakly referable, so a test can see it freed."""

    __slots__ = ("value", "__weakref__")

    def __init__(self, value: int) -> None:
        self.value = value


def test_a_served_unit_lets_go_of_its_objects() -> None:
    tokens = [_Token(i) for i in range(8)]
    refs = [weakref.ref(token) for token in tokens]
    column = np.empty(4000, dtype=object)
    column[:] = [tokens[i % 8] for i in range(4000)]
    chunk = {"token": column, "id": np.arange(4000)}
    del tokens, column
    buffer = UnitBuffer()
    buffer.begin(chunk, capacity=4000)
    buffer.append(chunk)
    out = buffer.gather(np.arange(4000)[::-1])
    assert [token.value for token in out["token"][:9]] == [7, 6, 5, 4, 3, 2, 1, 0, 7]
    del chunk, out
    buffer.drop_chunks()  # the unit is served: UnitBuffers.release does this
    gc.collect()
    assert all(ref() is None for ref in refs)  # fails on the old code: its object block held them until reused


def test_mostly_distinct_objects_and_a_unit_that_turns_distinct_are_served_as_read() -> None:
    distinct = {"name": np.array([f"user {i}" for i in range(5000)], dtype=object), "id": np.arange(5000)}
    buffer = loaded_unit([distinct])
    order = RNG.permutation(5000)
    assert all(a is b for a, b in zip(buffer.gather(order)["name"], distinct["name"][order]))
    # a unit whose first chunk repeats (coded) and whose next one does not, with a None among them
    repeated = {"name": _category(5000, 20), "id": np.arange(5000)}
    later = {
        "name": np.array([f"late {i}" if i % 7 else None for i in range(3000)], dtype=object),
        "id": np.arange(3000),
    }
    buffer = loaded_unit([repeated, later])
    whole = np.concatenate([repeated["name"], later["name"]])
    order = RNG.permutation(8000)
    assert all(a is b for a, b in zip(buffer.gather(order)["name"], whole[order]))


def test_object_codes_of_strided_and_empty_columns() -> None:
    column = _category(1000, 30)[::3]
    codes, distinct = object_codes(column)
    assert codes.dtype == np.int32 and len(distinct) <= 30
    assert all(a is b for a, b in zip(distinct[codes], column))
    codes, distinct = object_codes(np.empty(0, dtype=object))
    assert codes.shape == (0,) and distinct.shape == (0,)


def test_a_shuffled_csv_serves_every_row_with_its_category_once(tmp_path) -> None:
    rows = 30_000
    ids = np.arange(rows)
    cities = np.array([f"city {i % 37}" for i in RNG.permutation(rows)], dtype=object)
    path = tmp_path / "clicks.csv"
    pacsv.write_csv(pa.table({"id": ids, "city": cities}), path)
    data = sf.read_csv(path, fragment_bytes=64 << 10).shuffle(seed=3).batch(1000)
    served = {}
    with data.iter_epoch(0) as batches:
        for batch in batches:
            for ident, city in zip(batch["id"].tolist(), batch["city"]):
                assert ident not in served
                served[ident] = city
    assert served == dict(zip(ids.tolist(), cities))
