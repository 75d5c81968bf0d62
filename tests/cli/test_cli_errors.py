"""A user's mistake through the real ``streamfeed`` script: one or two lines, exit 2 (usage) or 1 (data), no traceback.

Each message says what went wrong, where, and the fix in the CLI's own
flags (``--nulls drop``, ``--batch-size``), not the library's keywords.
``--debug`` (or ``STREAMFEED_DEBUG=1``) shows the traceback.
"""

from __future__ import annotations

import os

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from _console import assert_short_failure, environment, streamfeed
from PIL import Image


@pytest.fixture
def nulls_file(tmp_path):
    path = tmp_path / "nulls.parquet"
    pq.write_table(pa.table({"a": [1.0, None, 3.0] * 20, "b": np.arange(60), "y": np.arange(60) % 2}), path)
    return path


@pytest.fixture
def plain_file(tmp_path):
    path = tmp_path / "plain.parquet"
    pq.write_table(pa.table({"a": np.arange(60) * 1.0, "y": np.arange(60) % 2}), path)
    return path


def write_image_folder(root, per_class: int = 3, size: int = 16):
    for label in ("cat", "dog"):
        (root / label).mkdir(parents=True)
        for index in range(per_class):
            image = np.full((size, size, 3), index * 40, dtype=np.uint8)
            Image.fromarray(image).save(root / label / f"{index}.png")
    return root


@pytest.mark.parametrize(
    "command",
    [
        ["inspect", "{missing}"],
        ["inspect", "{missing}.parquet"],
        ["stats", "{missing}.parquet", "-o", "{tmp}/s.json"],
        ["convert", "{missing}.csv", "{tmp}/out"],
        ["bench", "{missing}.parquet"],
    ],
    ids=["inspect-no-suffix", "inspect", "stats", "convert", "bench"],
)
def test_a_missing_path_is_a_usage_error_that_names_it(tmp_path, command):
    missing = tmp_path / "no-such-dir" / "data"
    args = [part.format(missing=missing, tmp=tmp_path) for part in command]
    stderr = assert_short_failure(streamfeed(*args), 2)
    assert str(missing) in stderr
    assert "no such file or directory" in stderr.lower()
    assert "Cannot tell the format" not in stderr  # the path is missing: its suffix is not the problem


def test_a_file_of_unknown_format_asks_for_format(tmp_path):
    path = tmp_path / "data.weird"
    path.write_text("a,b\n1,2\n")
    stderr = assert_short_failure(streamfeed("inspect", path), 2)
    assert "--format" in stderr and str(path) in stderr


def test_an_unknown_format_name_is_a_usage_error(plain_file, tmp_path):
    stderr = assert_short_failure(streamfeed("stats", plain_file, "-o", tmp_path / "s.json", "--format", "xls"), 2)
    assert "--format" in stderr and "parquet" in stderr


def test_a_null_names_the_cli_flags_that_fix_it(nulls_file, tmp_path):
    stderr = assert_short_failure(streamfeed("stats", nulls_file, "-o", tmp_path / "s.json"), 1)
    assert "Column 'a'" in stderr and str(nulls_file) in stderr
    assert "--nulls drop" in stderr and "--fill" in stderr and "--columns" in stderr
    assert "nulls='drop'" not in stderr and "columns=[" not in stderr  # no library keywords


def test_a_null_met_while_keras_trains_is_still_one_message(tmp_path):
    """Keras on TensorFlow wraps an error raised in the data thread, traceback and all, in its own error."""
    values = np.arange(400.0).tolist()
    values[350] = None  # in row group 7: read while fit runs, after the first-batch check
    path = tmp_path / "late.parquet"
    pq.write_table(pa.table({"a": values, "y": np.arange(400) % 2}), path, row_group_size=50)
    args = ["bench", path, "--model", "demo", "--label", "y", "--batch-size", "16", "--no-shuffle", "--seconds", "60"]
    stderr = assert_short_failure(streamfeed(*args), 1)
    assert "Column 'a'" in stderr and "row 350" in stderr and "--nulls drop" in stderr


def test_a_memory_refusal_names_the_batch_size(tmp_path):
    folder = write_image_folder(tmp_path / "images")
    stderr = assert_short_failure(streamfeed("bench", folder, "--batch-size", "1024", "--max-batches", "1"), 1)
    assert "--batch-size" in stderr and "--memory-limit" in stderr
    assert "memory_limit" not in stderr


def test_an_image_bench_picks_a_batch_that_fits_the_memory_limit(tmp_path):
    folder = write_image_folder(tmp_path / "images")
    proc = streamfeed("bench", folder, "--max-batches", "1", "--seconds", "5", "--json", "--quiet")
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert "--batch-size" in proc.stderr  # it says which batch it chose, and the flag that sets it


def test_a_permission_problem_is_one_line(plain_file, tmp_path):
    if os.geteuid() == 0:  # root writes anywhere but in sysfs
        target = "/sys/streamfeed-test-stats.json"
    else:
        locked = tmp_path / "locked"
        locked.mkdir(mode=0o500)
        target = str(locked / "stats.json")
    stderr = assert_short_failure(streamfeed("stats", plain_file, "-o", target), 1)
    assert target in stderr
    assert "Permission denied" in stderr or "Read-only file system" in stderr


def test_a_bad_size_is_a_usage_error_with_examples(plain_file):
    stderr = assert_short_failure(streamfeed("bench", plain_file, "--memory-limit", "lots"), 2)
    assert "--memory-limit" in stderr and "512MB" in stderr


@pytest.mark.parametrize("where", ["before", "after", "env"])
def test_debug_shows_the_traceback(tmp_path, where):
    missing = tmp_path / "nothing.parquet"
    if where == "before":
        proc = streamfeed("--debug", "inspect", missing)
    elif where == "after":
        proc = streamfeed("inspect", missing, "--debug")
    else:
        proc = streamfeed("inspect", missing, env=environment(STREAMFEED_DEBUG="1"))
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert "Traceback" in proc.stderr and "NotFoundError" in proc.stderr
