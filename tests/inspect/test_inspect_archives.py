"""Detection and inspection of zip archives of class folders and WebDataset shards, in-process (issue 26).

The CLI's tests (``tests/cli/test_cli_zip.py``, ``test_cli_webdataset.py``)
run the console script; these check the library calls under it: the format
told by suffix and by first bytes, one listing for a folder and the archive
holding it, and the quality pass of a ``read_images`` dataset on a zip.
"""

from __future__ import annotations

import io
import shutil
import tarfile
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

import streamfeed as sf
from factories.zip import zip_folder
from streamfeed.inspect import inspect
from streamfeed.inspect.image_files import image_files
from streamfeed.inspect.quality import quality_report
from streamfeed.sources.detect import detect_format


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    rng = np.random.default_rng(2)
    for name, count in (("ant", 2), ("bee", 3)):
        (tmp_path / "folder" / name).mkdir(parents=True)
        for index in range(count):
            pixels = rng.integers(0, 255, (9, 7, 3), dtype=np.uint8)
            Image.fromarray(pixels).save(tmp_path / "folder" / name / f"{index}.png")
    return tmp_path / "folder"


def _tar(path: Path) -> Path:
    with tarfile.open(path, "w") as out:
        for name, data in (("a.cls", b"1"), ("a.txt", b"hello")):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            out.addfile(info, io.BytesIO(data))
    return path


def test_formats_are_told_by_suffix_and_by_first_bytes(folder, tmp_path):
    archive = zip_folder(folder, tmp_path / "images.zip")
    (tmp_path / "shards").mkdir()
    shard = _tar(tmp_path / "shards" / "part.tar")
    assert detect_format(archive) == "zip" and detect_format(shard) == "webdataset"
    assert detect_format(tmp_path / "shards") == "webdataset"  # a directory of shards
    assert detect_format("s3://bucket/images.zip") == "zip" and detect_format("https://host/x.tar") == "webdataset"
    for source, name in ((archive, "images.cbz"), (shard, "shard.bin")):
        shutil.copyfile(source, tmp_path / name)
    assert detect_format(tmp_path / "images.cbz") == "zip" and detect_format(tmp_path / "shard.bin") == "webdataset"
    (tmp_path / "notes.bin").write_bytes(b"neither")
    with pytest.raises(sf.errors.ArgumentError, match="first bytes"):
        detect_format(tmp_path / "notes.bin")


def test_a_folder_and_the_zip_holding_it_list_the_same_images(folder, tmp_path):
    archive = zip_folder(folder, tmp_path / "images.zip")
    listed, members = image_files(folder), image_files(archive, "zip")
    assert [listed.relative(f) for f in listed.files] == [members.relative(f) for f in members.files]
    assert listed.classes == members.classes and listed.folders == members.folders == ["ant", "bee"]
    for file, member in zip(listed.files, members.files):
        with open(file, "rb") as on_disk, members.open(member) as inflated:
            assert on_disk.read() == inflated.read()
    folder_report, zip_report = inspect(folder), inspect(archive)
    for key in ("classes", "formats", "modes", "image_sizes"):
        assert folder_report.details[key] == zip_report.details[key], key
    assert zip_report.rows == folder_report.rows == 5 and zip_report.details["image_sizes"] == {"7x9": 5}


def test_the_quality_pass_of_a_zip_dataset_measures_its_members(folder, tmp_path):
    archive = zip_folder(folder, tmp_path / "images.zip")
    report = quality_report(sf.read_images(archive, size=(4, 4)))
    by_folder = quality_report(folder)
    assert report.images["files"] == 5 and report.duplicates["estimated"] == 0
    blur = sorted(m["blur"] for m in report.images["per_image"])
    assert blur == sorted(m["blur"] for m in by_folder.images["per_image"])  # the same pixels measured
