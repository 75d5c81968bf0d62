"""Parquet footers that lie, and row groups too large for the memory limit, are bad units.

The files are written by pyarrow; then one row group's ``num_rows`` in the
footer (Thrift compact protocol) is rewritten, and the footer's length
field with it, as a damaged or hostile writer would leave them.
"""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import streamfeed as sf


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | 0x80 if value else byte)
        if not value:
            return bytes(out)


def _zigzag(value: int) -> int:
    return (value << 1) ^ (value >> 63)


def lie_about_rows(path: Path, group: int, claimed: int) -> None:
    """Rewrites the footer so that row group ``group`` claims ``claimed`` rows.

    In the footer's ``RowGroup`` struct, ``total_byte_size`` (field 2) and
    ``num_rows`` (field 3) are consecutive i64 fields: header byte 0x16,
    then a zigzag varint each.
    """
    data = path.read_bytes()
    rg = pq.ParquetFile(path).metadata.row_group(group)
    length = struct.unpack("<I", data[-8:-4])[0]
    footer = data[-8 - length : -8]
    size = b"\x16" + _varint(_zigzag(rg.total_byte_size))
    old = size + b"\x16" + _varint(_zigzag(rg.num_rows))
    assert footer.count(old) == 1
    footer = footer.replace(old, size + b"\x16" + _varint(_zigzag(claimed)))
    path.write_bytes(data[: -8 - length] + footer + struct.pack("<I", len(footer)) + b"PAR1")


def two_row_groups(path: Path) -> Path:
    """Row group 0: ids 0..999; row group 1: ids 1000..1699 (sizes differ, so footers differ)."""
    with pq.ParquetWriter(path, pa.schema([("id", pa.int64()), ("x", pa.float64())])) as writer:
        for ids in (np.arange(1000), np.arange(1000, 1700)):
            writer.write_table(pa.table({"id": ids, "x": ids / 2.0}))
    return path


def ids_of(dataset: sf.Dataset) -> np.ndarray:
    with dataset.batch(128).iter_epoch(0) as stream:
        return np.concatenate([batch["id"] for batch in stream])


def test_a_row_group_with_fewer_rows_than_its_footer_promises_raises_naming_both(tmp_path):
    path = two_row_groups(tmp_path / "d.parquet")
    lie_about_rows(path, 1, 7000)
    data = sf.read_parquet(path)
    assert data.num_rows() == 8000  # what the footer promises
    with pytest.raises(sf.CorruptFileError) as excinfo:
        ids_of(data)
    text = str(excinfo.value)
    assert str(path) in text and "row group 1" in text and "7000" in text and "700" in text


def test_under_skip_the_lying_row_group_is_left_out_and_reported_with_its_promise(tmp_path):
    path = two_row_groups(tmp_path / "d.parquet")
    lie_about_rows(path, 1, 7000)
    data = sf.read_parquet(path, on_error="skip")
    np.testing.assert_array_equal(np.sort(ids_of(data)), np.arange(1000))
    [entry] = data.report.entries
    assert (entry.path, entry.location, entry.rows) == (str(path), "row group 1", 7000)
    assert "700" in entry.reason


def test_a_footer_claiming_2_to_the_60_rows_names_the_file_and_can_be_skipped(tmp_path):
    path = two_row_groups(tmp_path / "d.parquet")
    lie_about_rows(path, 0, 2**60)
    with pytest.raises(sf.MemoryLimitError) as excinfo:
        ids_of(sf.read_parquet(path))
    assert str(path) in str(excinfo.value) and "row group 0" in str(excinfo.value)
    skipped = sf.read_parquet(path, on_error="skip")
    np.testing.assert_array_equal(np.sort(ids_of(skipped)), np.arange(1000, 1700))
    [entry] = skipped.report.entries
    assert (entry.location, entry.rows) == ("row group 0", 2**60)


def test_row_size_is_planned_from_every_file_not_the_first(tmp_path):
    """A second file whose strings are 10 000x longer must size the buffers, not the first file's numbers."""
    (tmp_path / "d").mkdir()
    pq.write_table(pa.table({"s": ["a"] * 2000}), tmp_path / "d" / "a.parquet")
    long = [f"{i:05d}" + "b" * 10_000 for i in range(2000)]  # distinct: stored plain, compressed to almost nothing
    pq.write_table(pa.table({"s": long}), tmp_path / "d" / "b.parquet", compression="zstd")
    assert (tmp_path / "d" / "b.parquet").stat().st_size < 2_000_000
    data = sf.read_parquet(tmp_path / "d")
    assert data.source.row_bytes >= 10_000
