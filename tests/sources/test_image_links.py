"""Symbolic links in image folders: every file is resolved to its real path.

A file (or folder) reachable under two classes is an error naming both
paths; a link whose target is outside the root is not followed unless
``follow_links="all"``; a file reached twice in one class is read once.
The link to ``/`` is created inside ``tmp_path`` and never followed: the
tests only check that nothing behind it is listed.
"""

from __future__ import annotations

import inspect as inspect_module
import os
from pathlib import Path

import pytest
from PIL import Image

import streamfeed as sf
from streamfeed.inspect import inspect
from streamfeed.readers import read_images
from streamfeed.sources.images.listing import list_images


def _png(path: Path, value: int = 0) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("L", (2, 2), value).save(path, "PNG")


def _classes(root: Path) -> Path:
    for name, count in (("cat", 2), ("dog", 3)):
        for number in range(count):
            _png(root / name / f"{name}{number}.png", number)
    return root


def test_a_folder_aliased_into_another_class_is_an_error_naming_both_paths(tmp_path):
    root = _classes(tmp_path / "root")
    (root / "cat" / "dogalias").symlink_to(Path("..") / "dog", target_is_directory=True)
    with pytest.raises(sf.SchemaError) as excinfo:
        read_images(root, size=(2, 2))
    text = str(excinfo.value)
    assert str(root / "cat" / "dogalias") in text and str(root / "dog") in text
    assert "'cat'" in text and "'dog'" in text


def test_a_file_linked_into_another_class_is_an_error_naming_both_paths(tmp_path):
    root = _classes(tmp_path / "root")
    (root / "cat" / "not-a-cat.png").symlink_to(root / "dog" / "dog1.png")
    with pytest.raises(sf.SchemaError) as excinfo:
        read_images(root, size=(2, 2), follow_links="all")
    text = str(excinfo.value)
    assert str(root / "cat" / "not-a-cat.png") in text and str(root / "dog" / "dog1.png") in text


def test_a_link_to_the_filesystem_root_is_not_followed(tmp_path):
    # Checked first, so that a reader that follows every link never starts walking "/".
    assert inspect_module.signature(read_images).parameters["follow_links"].default == "inside"
    assert inspect_module.signature(list_images).parameters["follow_links"].default == "inside"
    root = _classes(tmp_path / "root")
    (root / "dog" / "slash").symlink_to("/", target_is_directory=True)
    (root / "bird").symlink_to("/", target_is_directory=True)  # a whole "class" outside the root
    _png(tmp_path / "outside" / "o.png")
    (root / "cat" / "o.png").symlink_to(tmp_path / "outside" / "o.png")
    ds = read_images(root, size=(2, 2))
    assert ds.source.class_counts == {"cat": 2, "dog": 3}
    assert all(str(tmp_path / "root") in path and "slash" not in path for path in ds.source.files)
    assert ds.source.summary()["links"] == {"outside_root": 3, "repeated_file": 0}
    listing = list_images(str(root), "inferred")
    assert listing.links["outside_root"] == [
        str(root / "bird"),
        str(root / "cat" / "o.png"),
        str(root / "dog" / "slash"),
    ]
    report = inspect(root)
    assert "links_outside_root" in report.warning_codes and report.details["classes"] == {"cat": 2, "dog": 3}


def test_follow_links_all_reads_outside_the_root_when_asked(tmp_path):
    root = _classes(tmp_path / "root")
    _png(tmp_path / "outside" / "bird" / "b.png")
    (root / "bird").symlink_to(tmp_path / "outside" / "bird", target_is_directory=True)
    assert read_images(root, size=(2, 2)).source.class_counts == {"cat": 2, "dog": 3}
    ds = read_images(root, size=(2, 2), follow_links="all")
    assert ds.source.class_counts == {"bird": 1, "cat": 2, "dog": 3}
    with pytest.raises(sf.ArgumentError):
        read_images(root, size=(2, 2), follow_links="none")  # type: ignore[arg-type]


def test_links_inside_one_class_read_each_file_once(tmp_path):
    root = _classes(tmp_path / "root")
    (root / "dog" / "again.png").symlink_to("dog0.png")
    (root / "dog" / "sub").mkdir()
    (root / "dog" / "sub" / "up").symlink_to(Path(".."), target_is_directory=True)  # a cycle
    (root / "dog" / "mirror").symlink_to(Path("sub"), target_is_directory=True)
    ds = read_images(root, size=(2, 2))
    assert ds.source.class_counts == {"cat": 2, "dog": 3}
    assert sorted(os.path.basename(path) for path in ds.source.files) == sorted(
        ["cat0.png", "cat1.png", "dog0.png", "dog1.png", "dog2.png"]
    )
    summary = ds.source.summary()
    assert summary["links"] == {"outside_root": 0, "repeated_file": 1}
    assert summary["ignored"]["repeated_directory"] == 2  # sub/up (the cycle) and mirror (sub again)


def test_a_root_that_is_itself_a_link_is_inside_itself(tmp_path):
    real = _classes(tmp_path / "real")
    (real / "dog" / "also.png").symlink_to(real / "dog" / "dog0.png")
    (tmp_path / "alias").symlink_to(real, target_is_directory=True)
    ds = read_images(tmp_path / "alias", size=(2, 2))
    assert ds.source.class_counts == {"cat": 2, "dog": 3}
    assert ds.source.summary()["links"] == {"outside_root": 0, "repeated_file": 1}


def test_without_labels_a_file_reached_twice_is_read_once(tmp_path):
    root = tmp_path / "flat"
    _png(root / "a" / "x.png")
    (root / "b").mkdir()
    (root / "b" / "y.png").symlink_to(root / "a" / "x.png")
    ds = read_images(root, size=(2, 2), labels=None)
    assert [os.path.relpath(path, root) for path in ds.source.files] == [os.path.join("a", "x.png")]
