"""A directory with nothing to read raises, as a glob matching nothing does.

An empty directory, or one holding only hidden files, crash leftovers of a
writer (``.name.streamfeed-tmp-<pid>-<token>/``), bookkeeping files or
files of other formats, is not a 0-row dataset to train on silently: every
reader raises :class:`~streamfeed.errors.NotFoundError` naming the
directory, what it looked for and what it found. An output published empty
(``write_tfrecord`` of no rows: one empty shard and its manifest) is still
a 0-row dataset: the writer said so with a file.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Callable

import h5py
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from PIL import Image

import streamfeed as sf
from streamfeed.errors import NotFoundError
from streamfeed.readers import read_csv, read_hdf5, read_images, read_parquet, read_tfrecord


def write_parquet(path: Path) -> None:
    pq.write_table(pa.table({"id": [1, 2]}), path)


def write_csv(path: Path) -> None:
    path.write_text("id\n1\n2\n")


def write_hdf5(path: Path) -> None:
    with h5py.File(path, "w") as f:
        f["id"] = np.arange(2)


def write_tfrecord(path: Path) -> None:
    staged = path.parent / "staged"
    (written,) = sf.write_tfrecord({"id": np.arange(2)}, staged / "x")
    Path(written).rename(path)
    shutil.rmtree(staged)  # its manifest, which would now list a missing shard


# (reader, suffix of a data file, how to write one, text the error's "Expected" names)
READERS = {
    "parquet": (read_parquet, ".parquet", write_parquet, ".parquet, .pq, .parq"),
    "csv": (read_csv, ".csv", write_csv, ".csv, .tsv, .psv, .txt, .dat"),
    "hdf5": (read_hdf5, ".h5", write_hdf5, ".h5, .hdf5, .hdf, .he5"),
    "tfrecord": (read_tfrecord, ".tfrecord", write_tfrecord, ""),
}


@pytest.fixture(params=list(READERS))
def reader(request) -> tuple[Callable, str, Callable[[Path], None], str]:
    return READERS[request.param]


def leftovers(directory: Path, suffix: str, write: Callable[[Path], None]) -> None:
    """What a crashed writer and a desktop leave: a hidden staging folder with a real shard in it, and litter."""
    staging = directory / ".train.streamfeed-tmp-4242-0123abcd"
    staging.mkdir(parents=True)
    write(staging / f"part-00000{suffix}")
    (directory / ".DS_Store").write_bytes(b"\0")
    (directory / "_SUCCESS").write_bytes(b"")


def raised(call: Callable[[], object]) -> str:
    with pytest.raises(NotFoundError) as excinfo:
        call()
    assert isinstance(excinfo.value, FileNotFoundError)  # the builtin, for callers who know no streamfeed
    return str(excinfo.value)


def test_an_empty_directory_raises_naming_it_and_what_was_looked_for(tmp_path, reader):
    read, suffix, write, expected = reader
    (tmp_path / "data").mkdir()
    text = raised(lambda: read(tmp_path / "data"))
    assert str(tmp_path / "data") in text and "no file" in text and expected in text


def test_a_directory_of_only_hidden_and_temporary_files_raises_counting_them(tmp_path, reader):
    read, suffix, write, expected = reader
    leftovers(tmp_path / "data", suffix, write)
    text = raised(lambda: read(tmp_path / "data"))
    assert str(tmp_path / "data") in text and "3 hidden or temporary files" in text and expected in text


def test_a_directory_of_only_other_files_raises_naming_them(tmp_path, reader):
    read, suffix, write, expected = reader
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "README.md").write_text("notes")
    text = raised(lambda: read(tmp_path / "data"))
    assert str(tmp_path / "data") in text and "1 other file (README.md)" in text


def test_an_empty_directory_in_a_list_raises_too(tmp_path, reader):
    read, suffix, write, expected = reader
    (tmp_path / "data").mkdir()
    write(tmp_path / f"good{suffix}")
    text = raised(lambda: read([str(tmp_path / f"good{suffix}"), str(tmp_path / "data")]))
    assert str(tmp_path / "data") in text


def test_an_empty_glob_raises_the_same_error(tmp_path, reader):
    read, suffix, write, expected = reader
    (tmp_path / "data").mkdir()
    text = raised(lambda: read(str(tmp_path / "data" / f"*{suffix}")))
    assert str(tmp_path / "data" / f"*{suffix}") in text


def test_data_beside_the_leftovers_is_read(tmp_path, reader):
    read, suffix, write, expected = reader
    leftovers(tmp_path / "data", suffix, write)
    write(tmp_path / "data" / f"part{suffix}")
    assert read(tmp_path / "data").num_rows() == 2


def test_a_manifest_listing_no_files_is_an_empty_directory(tmp_path):
    """No streamfeed writer publishes one (no rows still gives one empty shard); it reads like an empty folder."""
    (tmp_path / "data").mkdir()
    manifest = {"format": "streamfeed-manifest", "version": 1, "rows": 0, "files": []}
    (tmp_path / "data" / "_streamfeed_manifest.json").write_text(json.dumps(manifest))
    text = raised(lambda: read_tfrecord(tmp_path / "data"))
    assert "_streamfeed_manifest.json" in text


def test_an_output_published_empty_is_a_zero_row_dataset(tmp_path):
    sf.write_tfrecord({"id": np.arange(0)}, tmp_path / "out" / "x")
    assert read_tfrecord(tmp_path / "out", features={"id": ("int64", ())}).num_rows() == 0


# ------------------------------------------------------------------- read_images
def test_an_image_root_with_empty_class_folders_raises(tmp_path):
    for name in ("cat", "dog"):
        (tmp_path / "data" / name).mkdir(parents=True)
    text = raised(lambda: read_images(tmp_path / "data", size=(4, 4)))
    assert str(tmp_path / "data") in text and "2 class folders without images" in text and ".png" in text


def test_an_empty_image_root_raises(tmp_path):
    (tmp_path / "data").mkdir()
    for labels in ("inferred", None):
        text = raised(lambda: read_images(tmp_path / "data", size=(4, 4), labels=labels))  # noqa: B023
        assert str(tmp_path / "data") in text and "no image file" in text


def test_an_image_root_of_only_hidden_and_foreign_files_raises_counting_them(tmp_path):
    root = tmp_path / "data"
    (root / "cat" / ".thumbnails").mkdir(parents=True)
    Image.new("RGB", (4, 4)).save(root / "cat" / ".thumbnails" / "a.png")
    (root / "cat" / ".DS_Store").write_bytes(b"\0")
    (root / "cat" / "notes.txt").write_text("x")
    text = raised(lambda: read_images(root, size=(4, 4)))
    assert "2 hidden entries" in text and "1 file with another suffix" in text


def test_images_directly_in_the_root_are_named_as_the_reason(tmp_path):
    """Class folders are expected: images in the root itself are not read, and the error says what to do."""
    root = tmp_path / "data"
    root.mkdir()
    for number in range(3):
        Image.new("RGB", (4, 4)).save(root / f"{number}.png")
    text = raised(lambda: read_images(root, size=(4, 4)))
    assert "3 images outside class folders" in text and "labels=None" in text
    assert read_images(root, size=(4, 4), labels=None).num_rows() == 3


def test_a_folder_of_notes_and_unknown_files_is_no_data_not_a_zero_row_csv(tmp_path):
    """A readme.txt beside data.json was read as a CSV of 0 rows and every command exited 0 (issue 23 item 11)."""
    from streamfeed.sources.detect import detect_format

    (tmp_path / "readme.txt").write_text("the data is in data.json\n")
    (tmp_path / "data.json").write_text("{}\n")
    with pytest.raises(sf.NotFoundError) as excinfo:
        detect_format(tmp_path)
    assert "data.json" in str(excinfo.value) and "readme.txt" in str(excinfo.value)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(sf.NotFoundError) as excinfo:
        detect_format(empty)
    assert "an empty directory" in str(excinfo.value) and "--format" not in str(excinfo.value)
