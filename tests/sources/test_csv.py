"""The CSV source on files written by pandas and Python's csv module, and damaged copies.

Every error test checks that the message names the file and the physical
line; skip-mode tests check yielded + reported == total and the exact
report entries.
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import os
import random
import threading

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.csv  # noqa: F401  (pa.csv in the fast-path tests)
import pytest

import streamfeed as sf
from streamfeed.readers import read_csv
from streamfeed.sources.csv.scan import Scanner, UnbalancedQuote, record_lines, scan_stream


@pytest.fixture(autouse=True)
def _cache_in_tmp(tmp_path, monkeypatch):
    """Row-count caches go to the test's directory, never the user's."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))


def frame(ids) -> pd.DataFrame:
    ids = np.asarray(ids, dtype=np.int64)
    return pd.DataFrame({"id": ids, "x": ids / 2.0, "name": [f"n{i % 5}" for i in ids]})


def collect(ds: sf.Dataset) -> dict[str, np.ndarray]:
    with ds.iter_epoch(0) as it:
        chunks = list(it)
    if not chunks:
        return {}
    return {name: np.concatenate([c[name] for c in chunks]) for name in chunks[0]}


def assert_frame(got: dict, want: pd.DataFrame) -> None:
    order = np.argsort(got["id"])
    for name in want.columns:
        np.testing.assert_array_equal(got[name][order], want[name].to_numpy(), err_msg=name)


# ------------------------------------------------------------- real writers
@pytest.mark.parametrize(
    "options",
    [
        {},
        {"sep": ";"},
        {"sep": "\t"},
        {"sep": "|"},
        {"lineterminator": "\r\n"},
        {"encoding": "utf-8-sig"},  # BOM
        {"compression": "gzip", "suffix": ".csv.gz"},
        {"compression": "bz2", "suffix": ".csv.bz2"},
    ],
    ids=["comma", "semicolon", "tab", "pipe", "crlf", "bom", "gzip", "bz2"],
)
def test_pandas_files_round_trip_with_sniffed_delimiter(tmp_path, options):
    options = dict(options)
    path = tmp_path / f"data{options.pop('suffix', '.csv')}"
    want = frame(np.arange(500))
    want.to_csv(path, index=False, **options)
    ds = read_csv(path, fragment_bytes=1000)
    assert ds.source.delimiter == options.get("sep", ",")
    assert len(ds) == 500 and ds.source.column_names == ["id", "x", "name"]
    whole = options.get("compression") == "bz2"  # bz2 cannot be entered mid-stream; gzip is cut like a plain file
    assert len(ds.source.fragments) == 1 if whole else len(ds.source.fragments) > 3
    got = collect(ds)
    assert got["id"].dtype == np.int64 and got["x"].dtype == np.float64 and got["name"].dtype == object
    assert_frame(got, want)


def test_zstd_file_is_one_fragment(tmp_path):
    want = frame(np.arange(300))
    with pa.CompressedOutputStream(str(tmp_path / "data.csv.zst"), "zstd") as out:
        out.write(want.to_csv(index=False).encode())
    ds = read_csv(tmp_path / "data.csv.zst", fragment_bytes=100)
    assert [f.num_rows for f in ds.source.fragments] == [300]
    assert_frame(collect(ds), want)


def test_gzip_file_is_read_in_byte_ranges_from_checkpoints(tmp_path):
    """A pandas gzip file with quoted delimiters and newlines, cut into many ranges; counts cached or not."""
    want = frame(np.arange(6000))
    want["name"] = [f"n{i},\nz" if i % 5 == 0 else f"n{i % 7}" for i in range(6000)]  # record boundaries need quotes
    path = tmp_path / "data.csv.gz"
    want.to_csv(path, index=False, compression="gzip")
    for attempt in ("cold", "cached"):  # the second open takes the counts from the cache and only indexes
        ds = read_csv(path, fragment_bytes=3000)
        fragments = ds.source.fragments
        assert len(ds) == 6000 and len(fragments) > 30 and sum(f.num_rows for f in fragments) == 6000, attempt
        assert [f.start for f in fragments[1:]] == [f.end for f in fragments[:-1]]
        points = fragments[0]._checkpoints
        assert 3 < len(points) <= len(fragments) and all(
            points.before(f.start).out_offset <= f.start for f in fragments
        )
        assert_frame(collect(ds), want)
        got = [fragment.read() for fragment in reversed(fragments)]  # random access: no fragment needs the one before
        assert_frame({name: np.concatenate([chunk[name] for chunk in got]) for name in want.columns}, want)


def test_bz2_file_larger_than_a_fragment_warns_that_it_is_read_whole(tmp_path, caplog):
    want = frame(np.arange(300))
    want.to_csv(tmp_path / "data.csv.bz2", index=False, compression="bz2")
    with caplog.at_level("WARNING", logger="streamfeed"):
        ds = read_csv(tmp_path / "data.csv.bz2", fragment_bytes=1000)
    assert [f.num_rows for f in ds.source.fragments] == [300]
    assert "read as one fragment" in caplog.text and str(tmp_path / "data.csv.bz2") in caplog.text
    assert_frame(collect(ds), want)


_MEASURE_GZIP = """
import resource, sys
import streamfeed.pipeline
from streamfeed.readers import read_csv

def read(path):
    ds = read_csv(path, fragment_bytes=1 << 20, count_cache=False).with_options(read_threads=1)
    rows = 0
    with ds.iter_epoch(0) as it:
        for chunk in it:
            assert (chunk["x"] == chunk["id"] / 2).all()
            rows += len(chunk["id"])
    return rows, len(ds.source.fragments)

read(sys.argv[1])  # warm-up: imports, allocator pools and a few fragments in flight are the baseline
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
rows, fragments = read(sys.argv[2])
print(rows, fragments, (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) * 1024)
"""


def _write_wide(path, rows: int):
    ids = np.arange(rows)
    words = "the quick brown fox jumps over the lazy dog, " * 3
    text = [f"{words[i % 11 :]}{i}" for i in ids]
    pd.DataFrame({"id": ids, "x": ids / 2.0, "text": text}).to_csv(
        path, index=False, compression={"method": "gzip", "compresslevel": 1}
    )
    return path


def test_reading_a_large_gzip_file_holds_a_fragment_not_the_file(tmp_path):
    """~47 MiB decompressed, 1 MiB fragments, in a fresh process: peak RSS grows by far less than the file.

    Reading it whole (one fragment, as before checkpoints) grew RSS by ~150 MiB.
    """
    import subprocess
    import sys

    small = _write_wide(tmp_path / "small.csv.gz", 32_000)
    large = _write_wide(tmp_path / "large.csv.gz", 320_000)
    decompressed = len(gzip.decompress(large.read_bytes()))
    assert decompressed > 45 * 2**20
    out = subprocess.run(
        [sys.executable, "-c", _MEASURE_GZIP, str(small), str(large)], capture_output=True, text=True, check=True
    )
    rows, fragments, grown = map(int, out.stdout.split())
    assert rows == 320_000 and fragments >= 45
    assert grown < decompressed / 4, f"peak RSS grew by {grown / 2**20:.1f} MiB reading {decompressed / 2**20:.1f} MiB"


def test_latin1_file_with_encoding(tmp_path):
    want = pd.DataFrame({"id": [1, 2, 3], "city": ["São Paulo", "Zürich", "Orléans"]})
    want.to_csv(tmp_path / "latin.csv", index=False, encoding="latin-1")
    got = collect(read_csv(tmp_path / "latin.csv", encoding="latin-1"))
    assert list(got["city"]) == ["São Paulo", "Zürich", "Orléans"]


def test_csv_module_quoted_delimiters_and_newlines_across_byte_ranges(tmp_path):
    rows = [[i, f'say "hi", {i}\nsecond line' if i % 3 == 0 else f"plain{i}", i * 1.5] for i in range(400)]
    with open(tmp_path / "quoted.csv", "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["id", "text", "x"])
        writer.writerows(rows)
    ds = read_csv(tmp_path / "quoted.csv", fragment_bytes=700)
    assert len(ds.source.fragments) > 5 and len(ds) == 400
    got = collect(ds)
    assert list(got["text"]) == [row[1] for row in rows]
    np.testing.assert_array_equal(got["x"], [row[2] for row in rows])


def test_header_false_column_names_types_and_projection(tmp_path):
    frame(np.arange(50)).to_csv(tmp_path / "data.csv", index=False, header=False)
    ds = read_csv(
        tmp_path / "data.csv",
        header=False,
        column_names=["id", "x", "name"],
        column_types={"x": "float32"},
        columns=["x", "id"],
    )
    got = collect(ds)
    assert list(got) == ["x", "id"] and got["x"].dtype == np.float32
    np.testing.assert_array_equal(got["x"], np.arange(50) / 2)
    auto = read_csv(tmp_path / "data.csv", header=False)
    assert auto.source.column_names == ["f0", "f1", "f2"] and len(auto) == 50


# -------------------------------------------------------------- null tokens
def test_string_column_keeps_na_by_default_and_numbers_follow_the_policy(tmp_path):
    want = pd.DataFrame({"id": [0, 1, 2, 3], "code": ["NA", "US", "NA", "null"], "x": [0.5, np.nan, 1.5, 2.0]})
    want.to_csv(tmp_path / "na.csv", index=False)  # pandas writes NaN as an empty field
    path = tmp_path / "na.csv"
    with pytest.raises(sf.DataError) as excinfo:
        collect(read_csv(path))
    assert f"{path}, line 3" in str(excinfo.value) and "'x'" in str(excinfo.value)
    filled = collect(read_csv(path, nulls="fill", fill={"x": -1.0}))
    assert list(filled["code"]) == ["NA", "US", "NA", "null"]  # Namibia stays
    np.testing.assert_array_equal(filled["x"], [0.5, -1.0, 1.5, 2.0])
    dropped = read_csv(path, nulls="drop")
    assert list(collect(dropped)["id"]) == [0, 2, 3] and len(dropped) == 3
    with pytest.raises(sf.DataError) as excinfo:  # the user asks for NA to be null in strings too
        collect(read_csv(path, columns=["id", "code"], strings_can_be_null=True))
    assert f"{path}, line 2" in str(excinfo.value) and "'code'" in str(excinfo.value)
    only_empty = collect(read_csv(path, columns=["code"], null_values=[""], strings_can_be_null=True))
    assert list(only_empty["code"]) == ["NA", "US", "NA", "null"]


# -------------------------------------------------------- damaged: ragged rows
def _ragged(tmp_path):
    """10 rows; the second spans lines 3-4 (a quoted newline); lines 7 and 11 are ragged."""
    path = tmp_path / "ragged.csv"
    path.write_text('id,x\n0,0.0\n"1\n",0.5\n"2",1.0\n3,1.5\n4,2.0,extra\n5,2.5\n6,3.0\n7,3.5\n8\n9,4.5\n')
    return path


def test_ragged_row_raises_naming_the_physical_line(tmp_path):
    path = _ragged(tmp_path)
    with pytest.raises(sf.DataError) as excinfo:
        collect(read_csv(path, column_types={"id": "string"}))
    message = str(excinfo.value)
    assert f"{path}, line 7" in message and "3 fields" in message and "4,2.0,extra" in message


@pytest.mark.parametrize("fragment_bytes", [1 << 20, 20], ids=["one-fragment", "byte-ranges"])
def test_ragged_rows_skipped_and_reported_exactly(tmp_path, fragment_bytes):
    path = _ragged(tmp_path)
    report_path = tmp_path / "report.jsonl"
    ds = read_csv(
        path, column_types={"id": "string"}, on_error="skip", report_path=report_path, fragment_bytes=fragment_bytes
    )
    assert ds.report.total_rows == 10
    assert len(ds) == 8  # counted once, after skipping
    got = collect(ds.batch(3))
    assert sorted(got["id"]) == ["0", "1\n", "2", "3", "5", "6", "7", "9"]
    assert len(got["id"]) + ds.report.skipped_rows == ds.report.total_rows
    assert sorted((e.path, e.location, e.rows) for e in ds.report.entries) == [
        (str(path), "line 11", 1),
        (str(path), "line 7", 1),
    ]
    assert {json.loads(line)["location"] for line in report_path.read_text().splitlines()} == {"line 7", "line 11"}


def test_ragged_rows_over_the_budget_stop_the_run(tmp_path):
    ds = read_csv(_ragged(tmp_path), column_types={"id": "string"}, on_error="skip", max_bad_count=1)
    with pytest.raises(sf.ErrorBudgetExceeded):
        collect(ds)


# ------------------------------------------------- damaged: delimiter, encoding
def test_semicolon_file_read_with_comma_raises_naming_the_delimiter(tmp_path):
    frame(np.arange(5)).to_csv(tmp_path / "semi.csv", index=False, sep=";")
    with pytest.raises(sf.SchemaError) as excinfo:
        read_csv(tmp_path / "semi.csv", delimiter=",")
    message = str(excinfo.value)
    assert f"{tmp_path / 'semi.csv'}, line 1" in message and "delimiter=';'" in message


def test_semicolon_file_among_comma_files_raises_with_the_sniffed_delimiter(tmp_path):
    frame(np.arange(5)).to_csv(tmp_path / "a.csv", index=False)
    frame(np.arange(5, 9)).to_csv(tmp_path / "b.csv", index=False, sep=";")
    with pytest.raises(sf.SchemaError) as excinfo:
        read_csv(tmp_path)
    assert f"{tmp_path / 'b.csv'}, line 1" in str(excinfo.value) and "';'" in str(excinfo.value)


def test_latin1_file_read_as_utf8_names_file_and_line(tmp_path):
    ids = np.arange(20)
    names = ["plain"] * 20
    names[13] = "café"
    pd.DataFrame({"id": ids, "name": names}).to_csv(tmp_path / "latin.csv", index=False, encoding="latin-1")
    with pytest.raises(sf.DataError) as excinfo:
        read_csv(tmp_path / "latin.csv")
    message = str(excinfo.value)
    assert f"{tmp_path / 'latin.csv'}, line 15" in message and "encoding='latin-1'" in message


def test_bad_bytes_in_a_later_byte_range_name_their_line(tmp_path):
    """Beyond the first MiB (which is checked when the source opens): found when read."""
    lines = [f"{i},word{i}\n".encode() for i in range(100_000)]
    lines[99_000] = b"99000,caf\xe9\n"
    (tmp_path / "late.csv").write_bytes(b"id,name\n" + b"".join(lines))
    ds = read_csv(tmp_path / "late.csv", fragment_bytes=200_000)
    with pytest.raises(sf.DataError) as excinfo:
        collect(ds)
    assert f"{tmp_path / 'late.csv'}, line 99002" in str(excinfo.value)


def test_value_that_does_not_fit_the_inferred_type_names_line_and_column(tmp_path):
    rows = "".join(f"{i},{i}\n" for i in range(300)) + "300,3.5\n"
    (tmp_path / "types.csv").write_text("id,count\n" + rows)
    ds = read_csv(tmp_path / "types.csv", column_types={"count": "int64"}, fragment_bytes=400)
    with pytest.raises(sf.DataError) as excinfo:
        collect(ds)
    message = str(excinfo.value)
    assert f"{tmp_path / 'types.csv'}, line 302" in message and "'count'" in message and "'3.5'" in message


def test_quote_inside_an_unquoted_field_names_the_line(tmp_path):
    (tmp_path / "inch.csv").write_text('id,item\n1,tv\n2,5" screen\n3,radio\n')
    with pytest.raises(sf.DataError) as excinfo:
        read_csv(tmp_path / "inch.csv")
    assert f"{tmp_path / 'inch.csv'}, line 3" in str(excinfo.value) and "quote_char=None" in str(excinfo.value)
    assert list(collect(read_csv(tmp_path / "inch.csv", quote_char=None))["item"]) == ["tv", '5" screen', "radio"]


# ----------------------------------------------------- damaged: whole files
def test_truncated_gzip_raises_or_is_skipped(tmp_path):
    frame(np.arange(100)).to_csv(tmp_path / "good.csv.gz", index=False, compression="gzip")
    whole = gzip.compress(frame(np.arange(100, 5000)).to_csv(index=False).encode())
    (tmp_path / "bad.csv.gz").write_bytes(whole[: len(whole) // 2])
    with pytest.raises(sf.CorruptFileError) as excinfo:
        read_csv(tmp_path)
    assert str(tmp_path / "bad.csv.gz") in str(excinfo.value)
    ds = read_csv(tmp_path, on_error="skip")
    assert [(e.path, e.location, e.rows) for e in ds.report.entries] == [(str(tmp_path / "bad.csv.gz"), "file", None)]
    assert sorted(collect(ds)["id"]) == list(range(100))


def test_zero_byte_file_raises_or_is_skipped(tmp_path):
    frame(np.arange(10)).to_csv(tmp_path / "a.csv", index=False)
    (tmp_path / "b.csv").write_bytes(b"")
    with pytest.raises(sf.CorruptFileError) as excinfo:
        read_csv(tmp_path)
    assert str(tmp_path / "b.csv") in str(excinfo.value) and "header" in str(excinfo.value)
    ds = read_csv(tmp_path, on_error="skip")
    assert [(e.path, e.rows) for e in ds.report.entries] == [(str(tmp_path / "b.csv"), 0)]
    assert len(ds) == 10 and list(collect(ds)["id"]) == list(range(10))


def test_header_only_file_is_an_empty_dataset_with_columns(tmp_path):
    frame(np.arange(0)).to_csv(tmp_path / "empty.csv", index=False)
    ds = read_csv(tmp_path / "empty.csv")
    assert len(ds) == 0 and ds.source.column_names == ["id", "x", "name"] and collect(ds) == {}


def test_files_with_different_columns_raise_naming_both(tmp_path):
    frame(np.arange(5)).to_csv(tmp_path / "a.csv", index=False)
    frame(np.arange(5)).rename(columns={"x": "y"}).to_csv(tmp_path / "b.csv", index=False)
    with pytest.raises(sf.SchemaError) as excinfo:
        read_csv(tmp_path)
    assert str(tmp_path / "a.csv") in str(excinfo.value) and str(tmp_path / "b.csv") in str(excinfo.value)


# ------------------------------------------------------------- counts, cache
def test_row_count_is_cached_by_path_size_and_mtime(tmp_path):
    path = tmp_path / "data.csv"
    frame(np.arange(40)).to_csv(path, index=False)
    assert len(read_csv(path)) == 40
    caches = list((tmp_path / "cache" / "streamfeed" / "csv-counts").glob("*.json"))
    assert len(caches) == 1
    entry = json.loads(caches[0].read_text())
    entry["scan"]["rows"] = entry["scan"]["splits"][0][2] = 39  # tamper: proves the cache is what is read
    caches[0].write_text(json.dumps(entry))
    assert len(read_csv(path)) == 39
    frame(np.arange(41)).to_csv(path, index=False)  # new size and mtime: scanned again
    os.utime(path, ns=(1, 1))
    assert len(read_csv(path)) == 41


def test_scan_agrees_with_the_csv_module_on_random_files():
    rng = random.Random(0)
    values = ["a", "b,c", "x\ny", 'q""z', "", "r\r\ns", "long" * 9]
    for trial in range(60):
        rows = [[rng.choice(values) for _ in range(3)] for _ in range(rng.randint(0, 30))]
        buffer = io.StringIO(newline="")
        writer = csv.writer(buffer, lineterminator=rng.choice(["\n", "\r\n"]))
        writer.writerow(["h1", "h2", "h3"])
        writer.writerows(rows)
        data = buffer.getvalue().encode() + rng.choice([b"", b"\n\n"])
        reader = csv.reader(io.StringIO(data.decode(), newline=""))
        starts, previous = [], 0
        for record in reader:
            if record:
                starts.append(previous + 1)
            previous = reader.line_num
        for block in (1, 5, 4096):
            scanner = scan_stream(
                io.BytesIO(data).read, Scanner(quote=ord('"'), delimiter=ord(","), split_bytes=40), block
            )
            assert scanner.rows == len(rows), (trial, data)
            assert sum(split.rows for split in scanner.splits) == len(rows)
            assert [split.first_line for split in scanner.splits] == [
                1 + data[: s.start].count(b"\n") for s in scanner.splits
            ]
        body = data[scanner.header_end :]
        lines = record_lines(
            body, quote=ord('"'), delimiter=ord(","), first_line=1 + data[: scanner.header_end].count(b"\n")
        )
        assert list(lines) == starts[1:]


def test_a_decimal_comma_is_sniffed_with_the_semicolon_and_read_as_numbers(tmp_path):
    """European exports: ';'-separated, '25,04'. Read as floats, not as a column of strings."""
    path = tmp_path / "eu.csv"
    path.write_text("price;qty;name\n25,04;1;a\n3,5;2;b\n-0,25;3;c\n", encoding="utf-8")
    data = read_csv(path)
    assert (data.source.delimiter, data.source.decimal) == (";", ",")
    with data.iter_epoch(0) as stream:
        chunk = next(stream)
    np.testing.assert_array_equal(chunk["price"], [25.04, 3.5, -0.25])
    np.testing.assert_array_equal(chunk["qty"], [1, 2, 3])
    assert read_csv(path, decimal=".").source.schema.field("price").type == pa.string()  # as asked


def test_a_point_decimal_file_with_semicolons_keeps_the_point(tmp_path):
    path = tmp_path / "points.csv"
    path.write_text("a;b\n1.5;2,5\n", encoding="utf-8")  # a point anywhere: not a decimal-comma file
    assert read_csv(path).source.decimal == "."


# ------------------------------------------------- fast paths (benchmarks/csv_read.py)
def _scan_fields(scanner: Scanner) -> tuple:
    return (
        scanner.rows,
        [split.to_list() for split in scanner.splits],
        scanner.header_end,
        scanner.quoted_newlines,
        scanner.lines_before,
    )


def _scan_both(data: bytes, block: int, **options) -> tuple:
    """(full quote pass, source's scan) of ``data``: their fields, or the line of the quote error each raised.

    Blocks given as memoryviews always take the quote pass (``Scanner.feed``
    skips it only for bytes without a quote character, outside quotes).
    """
    results = []
    for wrap in (memoryview, bytes):
        scanner = Scanner(quote=ord('"'), delimiter=ord(","), split_bytes=60, **options)
        stream = io.BytesIO(data)
        try:
            scan_stream(lambda size, stream=stream, wrap=wrap: wrap(stream.read(size)), scanner, block)
            results.append(_scan_fields(scanner))
        except UnbalancedQuote as exc:
            results.append(("UnbalancedQuote", exc.line, str(exc)))
    return tuple(results)


def test_scan_fast_path_agrees_with_the_plain_scan():
    """Blocks without a quote skip the quote pass: same counts, splits and quote errors as the plain scan."""
    rng = random.Random(1)
    quoted_values = ['"a\nb"', '"x,y"', '"say ""hi"""', '"' + "long " * 30 + '\nvalue"']
    bad = ['5" screen']  # a quote opening in the middle of an unquoted field
    plain_values = ["1.5", "-2", "abc", ""]
    seen = {"fast": 0, "quote error": 0}
    for trial in range(200):
        lines = [b"h1,h2,h3"]
        for _ in range(rng.randint(0, 40)):
            pool = plain_values + (quoted_values if rng.random() < 0.15 else []) + (bad if rng.random() < 0.01 else [])
            lines.append(",".join(rng.choice(pool) for _ in range(3)).encode())
        ending = rng.choice([b"\n", b"\r\n"])
        data = ending.join(lines) + rng.choice([b"", ending, ending * 2])
        for block in (1, 7, 64, 4096):
            plain, fast = _scan_both(data, block)
            assert fast == plain, (trial, block, data)
            seen["quote error"] += plain[0] == "UnbalancedQuote"
            seen["fast"] += b'"' not in data[block : 2 * block] and block < len(data)
    assert seen["fast"] > 100 and seen["quote error"] > 0  # both paths were exercised


def test_scan_read_ahead_leaves_no_thread_when_the_scan_raises():
    data = b"a,b\n" + b"1,2\n" * 1000 + b'3,4" inch\n'
    scanner = Scanner(quote=ord('"'), delimiter=ord(","))
    with pytest.raises(UnbalancedQuote):
        scan_stream(io.BytesIO(data).read, scanner, 64)
    assert not [thread for thread in threading.enumerate() if thread.name.startswith("streamfeed-csv-scan")]


def _numbers_with_tokens(path, tokens_from: int, rows: int = 3000) -> list:
    """id,x,k: x a float with null tokens (and a NaN that is not one) only from row ``tokens_from`` on.

    For 500 rows the tokens are only those that read as NaN without the
    tokens (``NaN``, ``-nan``), then all kinds.
    """
    tokens = ["NA", "", "NaN", "null", "-nan", "#N/A"]
    values = []
    with open(path, "w") as handle:
        handle.write("id,x,k\n")
        for i in range(rows):
            if tokens_from <= i < tokens_from + 500 and i % 7 == 0:
                x = ["NaN", "-nan"][(i // 7) % 2]
            elif i >= tokens_from and i % 7 == 0:
                x = tokens[(i // 7) % len(tokens)]
            elif i >= tokens_from and i % 11 == 0:
                x = "NAN"  # not a token: a NaN value under every policy
            else:
                x = f"{i / 4}"
            k = "-999" if i % 5 == 0 else str(i)
            handle.write(f"{i},{x},{k}\n")
            values.append((x, k))
    return values


def test_fragments_skip_null_tokens_only_while_none_is_met(tmp_path):
    """A parse without the null tokens gives the same nulls and NaNs as the parse with them.

    The tokens start in a later byte range: the ranges before it take the
    fast parse (the shared flag stays set until then), the first with
    tokens (NaN-like ones, which convert) sends it and the rest to the
    parse with the tokens, and the values agree with pyarrow's own reading
    of the file. Ranges are read in order, as a single read thread would.
    """
    path = tmp_path / "tokens.csv"
    values = _numbers_with_tokens(path, tokens_from=2000)
    want = pa.csv.read_csv(path)
    ds = read_csv(path, nulls="mask", fragment_bytes=4096)
    assert len(ds.source.fragments) > 10
    hints = ds.source.fragments[0]._hints
    assert all(fragment._hints is hints for fragment in ds.source.fragments)
    chunks = []
    for fragment in ds.source.fragments:
        chunks.append(fragment.read())
        if fragment.first_row + fragment.num_rows <= 2000:
            assert hints.skip_null_tokens  # the fast parse was taken, and agreed: nothing asked for the tokens
    assert not hints.skip_null_tokens  # a token was met: later ranges parse with the tokens
    x = np.ma.concatenate([chunk["x"] for chunk in chunks])  # np.concatenate would drop the masks
    assert len(collect(ds)["x"]) == len(x) == 3000
    np.testing.assert_array_equal(np.ma.getmaskarray(x), want["x"].is_null().to_numpy(zero_copy_only=False))
    np.testing.assert_array_equal(x.filled(0.5), want["x"].fill_null(0.5).to_numpy())  # NAN stays NaN
    assert np.isnan(x.filled(0.5)).sum() == sum(v == "NAN" for v, _ in values) > 0
    # a clean file: every range takes the fast parse
    clean = tmp_path / "clean.csv"
    _numbers_with_tokens(clean, tokens_from=10**9)
    ds = read_csv(clean, fragment_bytes=4096)
    assert len(collect(ds)["x"]) == 3000 and ds.source.fragments[0]._hints.skip_null_tokens


def test_user_null_tokens_that_are_numbers_stay_null(tmp_path):
    """``null_values=["-999"]`` in an integer column: a parse without tokens would read -999; it must not run."""
    path = tmp_path / "tokens.csv"
    values = _numbers_with_tokens(path, tokens_from=10**9)
    ds = read_csv(path, null_values=["-999"], nulls="fill", fill={"k": 0}, fragment_bytes=4096)
    got = collect(ds)
    np.testing.assert_array_equal(got["k"], [0 if k == "-999" else int(k) for _, k in values])
    assert not ds.source.fragments[0]._hints.skip_null_tokens
