"""`inspect` and its quality pass on list columns: rows hashed by their elements (duplicates found,
reordered rows told apart), NaN and inf counted per row, constant lists recognised across row groups."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from streamfeed.core_ragged import Ragged
from streamfeed.inspect import inspect, quality_report
from streamfeed.inspect.hashing import ragged_hash


def _write(path, columns: dict[str, pa.Array], row_group: int = 40) -> None:
    pq.write_table(pa.table(columns), path, row_group_size=row_group)


def test_exact_copies_of_list_rows_are_duplicates_and_reordered_ones_are_not(tmp_path):
    rng = np.random.default_rng(3)
    unique = [rng.integers(0, 50, size=int(n)).tolist() for n in rng.integers(2, 9, 200)]
    unique = [row for index, row in enumerate(unique) if row not in unique[:index]]
    copies = [list(row) for row in unique[:37]]
    _write(tmp_path / "dup.parquet", {"tok": pa.array(unique + copies, type=pa.list_(pa.int64()))})
    distinct_rows = {tuple(row) for row in unique}
    reordered = [row[::-1] for row in unique[:37] if tuple(row[::-1]) not in distinct_rows]
    longer = [[*row, 0] for row in unique[:20]]  # a zero appended: a different row
    _write(tmp_path / "nodup.parquet", {"tok": pa.array(unique + reordered + longer, type=pa.list_(pa.int64()))})

    assert quality_report(tmp_path / "dup.parquet").duplicates["estimated"] == 37
    assert quality_report(tmp_path / "nodup.parquet").duplicates["estimated"] == 0


def test_a_rows_hash_depends_on_its_elements_and_their_order_not_on_its_neighbours():
    rows = [[1, 2, 3], [3, 2, 1], [], [0], [1, 2, 3], [1, 2, 3, 0]]
    hashes = ragged_hash(Ragged.from_rows(rows, dtype=np.int64))
    assert hashes[0] == hashes[4]
    assert len({int(h) for h in hashes[[0, 1, 2, 3, 5]]}) == 5
    sliced = Ragged.from_rows(rows, dtype=np.int64)[3:6]  # offsets not starting at 0
    assert list(ragged_hash(sliced)) == list(hashes[3:6])


def test_nan_and_inf_are_counted_per_row_and_constant_lists_are_recognised(tmp_path):
    rows = [[0.5, 1.5] for _ in range(120)]
    for index in (3, 50, 51, 119):  # four rows with NaN, one of them twice
        rows[index] = [np.nan, np.nan] if index == 50 else [np.nan, 2.0]
    rows[7] = [np.inf, 1.0]
    _write(
        tmp_path / "q.parquet",
        {
            "w": pa.array(rows, type=pa.large_list(pa.float64())),
            "same": pa.array([[1, 2, 3]] * 120, type=pa.list_(pa.int32())),
            "last_differs": pa.array([[1, 2, 3]] * 119 + [[1, 2]], type=pa.list_(pa.int32())),
        },
    )
    columns = quality_report(tmp_path / "q.parquet").columns
    assert columns["w"]["nan_rate"] == 4 / 120 and columns["w"]["inf_rate"] == 1 / 120
    assert columns["w"]["dtype"] == "list<float64>"
    assert columns["same"]["constant"] and not columns["last_differs"]["constant"]
    assert not columns["w"]["constant"]


def test_inspect_shows_list_rows_as_samples(tmp_path):
    _write(tmp_path / "s.parquet", {"tok": pa.array([[1, 2], [3], list(range(20))], type=pa.list_(pa.int32()))})
    report = inspect(tmp_path / "s.parquet")
    column = next(column for column in report.columns if column.name == "tok")
    assert column.samples == [[1, 2], [3], "array[20]"]
