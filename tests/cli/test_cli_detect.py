"""``streamfeed inspect`` through the real script: a folder of several formats, and exact row counts."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from _console import assert_short_failure, streamfeed
from PIL import Image

from streamfeed.errors import ArgumentError
from streamfeed.sources.detect import detect_format


def _images(root, count: int = 3):
    (root / "cat").mkdir(parents=True)
    for index in range(count):
        Image.fromarray(np.full((8, 8, 3), index, dtype=np.uint8)).save(root / "cat" / f"{index}.png")
    return root


@pytest.fixture
def mixed(tmp_path):
    """Three images in a class folder beside one Parquet and one CSV file."""
    root = _images(tmp_path / "mixed")
    pq.write_table(pa.table({"a": np.arange(60) * 1.0}), root / "a.parquet")
    (root / "b.csv").write_text("a\n1\n2\n")
    return root


def test_a_folder_of_several_formats_names_them_and_asks_which(mixed):
    stderr = assert_short_failure(streamfeed("inspect", mixed), 2)
    for name in ("images", "parquet", "csv", "--format"):
        assert name in stderr
    assert "3 images" in stderr or "images (3" in stderr or "images: 3" in stderr


def test_format_chooses_in_a_mixed_folder(mixed):
    proc = streamfeed("inspect", mixed, "--format", "parquet", "--quiet")
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert "parquet" in proc.stdout


def test_detection_refuses_several_formats_and_ignores_notes(mixed, tmp_path):
    with pytest.raises(ArgumentError, match="several formats"):
        detect_format(mixed)
    data = tmp_path / "data"
    data.mkdir()
    pq.write_table(pa.table({"a": [1.0]}), data / "part-0.parquet")
    (data / "README.txt").write_text("notes about the data\n")  # .txt is read as CSV only where nothing else is
    (data / "_SUCCESS").write_text("")
    assert detect_format(data) == "parquet"


def test_an_image_folder_says_its_exact_row_count(tmp_path):
    root = _images(tmp_path / "images", count=6)
    proc = streamfeed("inspect", root, "--quiet")
    assert proc.returncode == 0, proc.stderr[-3000:]
    (line,) = [line for line in proc.stdout.splitlines() if " rows " in f" {line} "]
    assert "6" in line and "estimate" not in line
