"""A CSV line too long for pyarrow's parser: named under ``on_error="raise"``, left out alone under ``"skip"``.

pyarrow parses CSV in blocks of 4 MiB (``PARSE_BLOCK_BYTES``) and refuses a
record that reaches past the block after the one it starts in ("straddling
object straddles two block boundaries"), failing the whole fragment. A
record of two blocks (8 MiB) or more does that wherever it starts, so a
12 MiB line shows the same failure as the issue's 50 MB line at a quarter
of the disk and time; one case keeps the 50 MB line.
"""

from __future__ import annotations

import bz2
import gzip
import json

import numpy as np
import pytest

import streamfeed as sf
from streamfeed.readers import read_csv
from streamfeed.sources.csv.options import PARSE_BLOCK_BYTES

MIB = 1 << 20
LONG = 3 * PARSE_BLOCK_BYTES  # over two blocks: refused at any offset
LONG_LINE = 502  # the header is line 1, rows 0-499 lines 2-501


@pytest.fixture(autouse=True)
def _cache_in_tmp(tmp_path, monkeypatch):
    """Row-count caches go to the test's directory, never the user's."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))


def _good(ids: range) -> bytes:
    return b"".join(f"{i},{i / 2}\n".encode() for i in ids)


def _value(size: int, quoted: bool) -> bytes:
    """A field of ``size`` bytes in all, written in 1 MiB pieces; a quoted one holds a line break per MiB."""
    if not quoted:
        return b"x" * size
    pieces = [b"x" * (MIB - 1) + b"\n"] * ((size - 2) // MIB)
    return b'"' + b"".join(pieces) + b"x" * ((size - 2) % MIB) + b'"'


def write(path, size: int, *, quoted: bool = False) -> tuple[int, int]:
    """1000 good rows ``a,b``; between rows 499 and 500 (line 502) a line whose ``a`` is ``size`` bytes.

    Returns the long record's length in bytes (without its line end) and
    the number of physical lines it spans.
    """
    value = _value(size, quoted)
    opener = {".gz": gzip.open, ".bz2": bz2.open}.get(path.suffix, open)
    with opener(path, "wb") as out:
        out.write(b"a,b\n" + _good(range(500)))
        out.write(value + b",1\n")
        out.write(_good(range(500, 1000)))
    return len(value) + 2, 1 + value.count(b"\n")


def collect(ds: sf.Dataset) -> dict[str, np.ndarray]:
    with ds.iter_epoch(0) as it:
        chunks = list(it)
    return {name: np.concatenate([c[name] for c in chunks]) for name in chunks[0]}


@pytest.mark.parametrize(
    ("size", "quoted"),
    [(LONG, False), (LONG, True), (50_000_000, False)],
    ids=["12MiB", "12MiB-quoted-multiline", "50MB"],
)
def test_long_line_raises_naming_file_line_and_length(tmp_path, size, quoted):
    path = tmp_path / "long.csv"
    length, _ = write(path, size, quoted=quoted)
    with pytest.raises(sf.CorruptFileError) as excinfo:
        collect(read_csv(path))
    message = str(excinfo.value)
    assert f"{path}, line {LONG_LINE}" in message
    assert f"{length:,} bytes" in message
    assert "Fix:" in message and "on_error='skip'" in message
    assert "straddl" not in message


@pytest.mark.parametrize(
    ("name", "size", "quoted", "fragment_bytes"),
    [
        ("long.csv", LONG, False, 16 * MIB),  # one fragment: the long line and all 1000 good rows
        ("long.csv", LONG, True, 16 * MIB),
        ("long.csv", LONG, False, 4096),  # byte ranges: the long line ends its own
        ("long.csv.gz", LONG, False, 4096),  # gzip ranges, resumed from checkpoints
        ("long.csv.bz2", LONG, False, 16 * MIB),  # one stream, decompressed again for the retry
        ("long.csv", 50_000_000, False, 16 * MIB),  # the case: 500 good rows share its fragment
    ],
    ids=["one-fragment", "quoted-multiline", "byte-ranges", "gzip", "bz2", "50MB"],
)
def test_long_line_skipped_alone_and_every_good_row_kept(tmp_path, name, size, quoted, fragment_bytes):
    path = tmp_path / name
    write(path, size, quoted=quoted)
    report_path = tmp_path / "report.jsonl"
    ds = read_csv(path, on_error="skip", report_path=report_path, fragment_bytes=fragment_bytes)
    assert ds.report.total_rows == 1001
    got = collect(ds)
    np.testing.assert_array_equal(np.sort(got["a"]), np.arange(1000))
    np.testing.assert_array_equal(got["b"][np.argsort(got["a"])], np.arange(1000) / 2)
    assert len(ds) == 1000  # counted once, after skipping
    assert [(e.path, e.location, e.rows) for e in ds.report.entries] == [(str(path), f"line {LONG_LINE}", 1)]
    assert "bytes" in ds.report.entries[0].reason and "straddl" not in ds.report.entries[0].reason
    assert [json.loads(line)["location"] for line in report_path.read_text().splitlines()] == [f"line {LONG_LINE}"]


def _text_file(path, *, long: bool) -> bytes:
    """``id,text``: 300 rows; row 100 (line 102) is 6 MiB and, after 3 MiB of rows, ends past the next block.

    With ``long``, row 200 (line 202) is 12 MiB. Returns row 100's text.
    """
    rows = [f"{i},t{i}-".encode() + b"p" * (32 << 10) + b"\n" for i in range(300)]
    medium = b"m" * (6 * MIB)
    with open(path, "wb") as out:
        out.write(b"id,text\n" + b"".join(rows[:100]))
        out.write(b"100," + medium + b"\n")
        out.write(b"".join(rows[101:200]))
        out.write(b"200," + b"y" * LONG + b"\n" if long else rows[200])
        out.write(b"".join(rows[201:]))
    return medium


@pytest.mark.parametrize("on_error", ["raise", "skip"])
def test_line_under_two_blocks_is_read_wherever_it_falls(tmp_path, on_error):
    """A record over one block but under two straddles only by where it starts: pyarrow fails, the retry reads it."""
    path = tmp_path / "medium.csv"
    medium = _text_file(path, long=False)
    ds = read_csv(path, on_error=on_error)
    got = collect(ds)
    order = np.argsort(got["id"])
    np.testing.assert_array_equal(got["id"][order], np.arange(300))
    assert got["text"][order][100] == medium.decode()
    assert ds.report.entries == []


def test_line_under_two_blocks_is_read_beside_a_refused_one(tmp_path):
    path = tmp_path / "text.csv"
    medium = _text_file(path, long=True)
    ds = read_csv(path, on_error="skip")
    got = collect(ds)
    order = np.argsort(got["id"])
    assert list(got["id"][order]) == [i for i in range(300) if i != 200]
    assert got["text"][order][100] == medium.decode()
    assert [(e.location, e.rows) for e in ds.report.entries] == [("line 202", 1)]
    with pytest.raises(sf.CorruptFileError, match=f"{path}, line 202"):
        collect(read_csv(path))


def test_long_line_after_a_ragged_row_reports_both(tmp_path):
    """The rows around a long line still go through the ragged-row handling, with their own lines."""
    path = tmp_path / "both.csv"
    with open(path, "wb") as out:
        out.write(b"a,b\n" + _good(range(10)) + b"10,5.0,extra\n")  # line 12 is ragged
        out.write(b"x" * LONG + b",1\n")  # line 13
        out.write(_good(range(11, 20)) + b"20\n")  # line 23 is ragged
    ds = read_csv(path, on_error="skip")
    got = collect(ds)
    np.testing.assert_array_equal(np.sort(got["a"]), [*range(10), *range(11, 20)])
    assert sorted(e.location for e in ds.report.entries) == ["line 12", "line 13", "line 23"]
    with pytest.raises(sf.DataError, match=f"{path}, line 12"):
        collect(read_csv(path))  # under "raise", the first bad line in the file is the one named


def test_bad_value_in_a_retried_line_names_its_line_and_column(tmp_path):
    """A 6 MiB text in a numeric column, in a fragment parsed around a 12 MiB line: the conversion message still
    names the line and column (finding it re-parses the fragment around the long line too)."""
    path = tmp_path / "value.csv"
    with open(path, "wb") as out:
        out.write(b"a,b\n" + _good(range(10)))
        out.write(b"z" * (6 * MIB) + b",1\n")  # line 12: not an int64
        out.write(b"x" * LONG + b",1\n" + _good(range(11, 20)))  # line 13
    with pytest.raises(sf.DataError) as excinfo:
        collect(read_csv(path))
    message = str(excinfo.value)
    assert f"{path}, line 12" in message and "Column 'a'" in message
    assert f"({6 * MIB:,} characters)" in message and len(message) < 1000  # the value is cut, not quoted whole


@pytest.mark.parametrize("name", ["multi.csv", "multi.csv.gz"])
def test_lines_after_a_multiline_long_record_are_counted_through_it(tmp_path, name):
    """The scan at open notes where the long record ends: a ragged row after it is named by its own line,
    on the first open and when the counts come from the row-count cache."""
    path = tmp_path / name
    value = _value(LONG, quoted=True)
    spans = 1 + value.count(b"\n")  # physical lines of the long record
    opener = gzip.open if name.endswith(".gz") else open
    with opener(path, "wb") as out:
        out.write(b"a,b\n" + _good(range(10)))  # lines 2-11
        out.write(value + b",1\n")  # lines 12 to 11 + spans
        out.write(_good(range(10, 15)) + b"15\n" + _good(range(16, 20)))  # "15" is ragged
    ragged = 12 + spans + 5
    for _ in range(2):  # the second open reads the counts from the cache
        ds = read_csv(path, on_error="skip", fragment_bytes=16 * MIB)
        got = collect(ds)
        np.testing.assert_array_equal(np.sort(got["a"]), [*range(15), *range(16, 20)])
        assert [e.location for e in ds.report.entries] == ["line 12", f"line {ragged}"]
    with pytest.raises(sf.CorruptFileError, match=f"{path}, line 12"):
        collect(read_csv(path))
