"""A shuffled unit keeps its 1-D numeric columns of several dtypes in one row block: a batch is one gather.

``runtime/shuffle.UnitBuffer`` used to keep one block per dtype, so a batch
of a click log (float64 time, int64 user and label, float32 price and
dwell) cost a random cache miss a row per dtype; one byte block of rows
halves the gather (issue 27). The rows served must be the same, of the
same dtypes, aligned, whatever the columns' order and widths.
"""

from __future__ import annotations

import numpy as np
import pytest

from streamfeed.runtime.shuffle import UnitBuffer

RNG = np.random.default_rng(5)
DTYPES = ("int8", "float32", "bool", "float64", "uint16", "int64", "int32")  # narrow before wide, on purpose


def _chunk(size: int, first: int) -> dict[str, np.ndarray]:
    ident = np.arange(first, first + size)
    chunk = {f"c_{dtype}": (ident % 100).astype(dtype) if dtype != "bool" else ident % 2 == 0 for dtype in DTYPES}
    chunk["name"] = np.array([f"row {i}" for i in ident], dtype=object)
    chunk["id"] = ident.astype(np.int64)
    return chunk


def _base(array: np.ndarray) -> object:
    while isinstance(array.base, np.ndarray):
        array = array.base
    return array


@pytest.mark.parametrize("sizes", [[5, 17, 1, 9], [0, 3], [40000]])  # 40 000 rows span several write tiles
def test_every_column_is_served_as_written_from_one_gathered_block(sizes: list[int]) -> None:
    chunks, first = [], 0
    for size in sizes:
        chunks.append(_chunk(size, first))
        first += size
    buffer = UnitBuffer()
    buffer.begin(chunks[0], capacity=max(1, first // 2))  # grows past the announced rows
    for chunk in chunks:
        buffer.append(chunk)
    indices = RNG.permutation(first)
    out = buffer.gather(indices)
    whole = {name: np.concatenate([chunk[name] for chunk in chunks]) for name in chunks[0]}
    assert list(out) == list(chunks[0])
    for name, values in whole.items():
        assert out[name].dtype == values.dtype and out[name].shape == (first,)
        np.testing.assert_array_equal(out[name], values[indices])
        assert out[name].flags.aligned and out[name].flags.writeable
    numeric = [out[name] for name in out if name != "name"]
    assert len({id(_base(column)) for column in numeric}) == 1  # fails on the old code: one block a dtype


def test_columns_of_one_dtype_keep_their_own_block_and_contiguous_views() -> None:
    chunk = {"a": np.arange(6, dtype=np.float32), "b": np.arange(6, dtype=np.float32) * 2}
    buffer = UnitBuffer()
    buffer.begin(chunk, capacity=6)
    buffer.append(chunk)
    out = buffer.gather(np.array([4, 1, 5]))
    np.testing.assert_array_equal(out["a"], [4, 1, 5])
    np.testing.assert_array_equal(out["b"], [8, 2, 10])
    assert out["a"].base is out["b"].base and out["a"].base.dtype == np.float32
