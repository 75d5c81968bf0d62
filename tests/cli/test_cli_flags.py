"""The library's options as flags of the real ``streamfeed`` script: columns, nulls, errors, seeds, sizes."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from _console import assert_short_failure, streamfeed


@pytest.fixture
def nulls_file(tmp_path):
    """60 rows; column ``a`` is null in every third row (20 nulls)."""
    path = tmp_path / "nulls.parquet"
    table = pa.table({"a": [1.0, None, 3.0] * 20, "b": np.arange(60), "y": np.arange(60) % 2})
    pq.write_table(table, path, row_group_size=20)
    return path


def _ok(proc):
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    return proc


@pytest.mark.parametrize(
    ("flags", "rows"),
    [
        (["--nulls", "drop"], 40),
        (["--nulls", "fill", "--fill", "0"], 60),
        (["--fill", "0"], 60),
        (["--columns", "b,y", "--memory-limit", "2G"], 60),
    ],
    ids=["drop", "fill", "fill-alone", "columns-without-a"],
)
def test_stats_reads_with_the_null_policy_and_columns(nulls_file, tmp_path, flags, rows):
    out = tmp_path / "s.json"
    _ok(streamfeed("stats", nulls_file, "-o", out, "--quiet", *flags))
    data = json.loads(out.read_text())
    assert data["rows"] == rows
    if "--columns" in flags:
        assert sorted(data["columns"]) == ["b", "y"]


def test_convert_projects_fills_and_shuffles_with_a_seed(nulls_file, tmp_path):
    def convert(destination, seed):
        args = ["convert", nulls_file, destination, "--columns", "a,b", "--nulls", "fill", "--fill", "-1"]
        proc = _ok(streamfeed(*args, "--seed", seed, "--json"))
        assert json.loads(proc.stdout)["rows"] == 60
        return pq.read_table(destination).to_pydict()

    first = convert(tmp_path / "one", 7)
    assert sorted(first) == ["a", "b"]
    assert sorted(first["b"]) == list(range(60)) and first["b"] != list(range(60))  # every row, shuffled
    assert first["a"].count(-1.0) == 20 and None not in first["a"]
    assert convert(tmp_path / "two", 7) == first  # the seed fixes the order


def test_bench_takes_columns_nulls_errors_seed_and_sizes(nulls_file):
    args = ["bench", nulls_file, "--columns", "a,y", "--nulls", "drop", "--on-error", "skip", "--seed", "3"]
    proc = _ok(streamfeed(*args, "--memory-limit", "64MB", "--batch-size", "8", "--max-batches", "3", "--json"))
    report = json.loads(proc.stdout)
    assert report["batches"] == 3 and report["rows"] == 24


def test_bench_model_takes_features_and_label(nulls_file):
    args = ["bench", nulls_file, "--model", "demo", "--label", "y", "--features", "b", "--max-batches", "2"]
    proc = _ok(streamfeed(*args, "--batch-size", "16", "--json", "--quiet"))
    report = json.loads(proc.stdout)  # "a" (with nulls) is never read: only the features and the label are
    assert report["batches"] >= 1


def test_inspect_takes_a_memory_limit_as_a_size(nulls_file):
    proc = _ok(streamfeed("inspect", nulls_file, "--memory-limit", "1GiB", "--json"))
    assert json.loads(proc.stdout)["rows"] == 60


@pytest.mark.parametrize(
    ("command", "message"),
    [
        (["--nulls", "fill"], "--fill"),
        (["--nulls", "drop", "--fill", "0"], "--fill"),
        (["--columns", "a,nope"], "nope"),
    ],
    ids=["fill-missing", "fill-without-fill-policy", "unknown-column"],
)
def test_flags_that_cannot_work_are_usage_errors(nulls_file, tmp_path, command, message):
    stderr = assert_short_failure(streamfeed("stats", nulls_file, "-o", tmp_path / "s.json", *command), 2)
    assert message in stderr


def test_a_null_policy_on_a_format_without_nulls_is_a_usage_error(tmp_path):
    np.save(tmp_path / "x.npy", np.arange(10.0))
    stderr = assert_short_failure(
        streamfeed("stats", tmp_path / "x.npy", "-o", tmp_path / "s.json", "--nulls", "drop"), 2
    )
    assert "--nulls" in stderr and "numpy" in stderr


@pytest.mark.parametrize(
    ("text", "size"),
    [
        ("512MB", 512 * 10**6),
        ("512MiB", 512 * 2**20),
        ("1GiB", 2**30),
        ("2G", 2 * 2**30),
        ("1.5GiB", 3 * 2**29),
        ("64k", 64 * 2**10),
        ("100kB", 100_000),
        ("536870912", 536870912),
        ("1 GiB", 2**30),
        ("2g", 2 * 2**30),
    ],
)
def test_sizes(text, size):
    from streamfeed.commands._options import parse_size

    assert parse_size(text) == size


@pytest.mark.parametrize("text", ["lots", "", "-1GB", "1XB", "0", "1.5"])
def test_not_sizes(text):
    import argparse

    from streamfeed.commands._options import parse_size

    with pytest.raises(argparse.ArgumentTypeError, match="512MB"):
        parse_size(text)
