"""``read_images(label_map=...)``: a dict or a JSON file, checked when the source opens.

A label is a sparse class index for Keras: an ``int`` (not a bool, not a
float even if integral, not a string) with ``0 <= label < 2**31``. Every
other value is a :class:`~streamfeed.errors.SchemaError` naming the class
and the value, whether the map is a dict or a file, before any image is read.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

import streamfeed as sf
from streamfeed.errors import NotFoundError
from streamfeed.readers import read_images

BAD = [-1, 2**31, 2**70, 3.0, 2.5, True, "1", None]
BAD_IDS = ["negative", "2**31", "2**70", "integral-float", "float", "bool", "string", "null"]


def folder(tmp_path: Path) -> Path:
    root = tmp_path / "data"
    for number, name in enumerate(["cat", "dog"]):
        (root / name).mkdir(parents=True)
        Image.new("RGB", (4, 4), (number * 100, 0, 0)).save(root / name / "a.png")
    return root


def labels(ds) -> dict[str, int]:
    """``{class folder: label}`` as read from the images."""
    out = {}
    for chunk in ds.iter_epoch(0):
        for path, label in zip(chunk["path"], chunk["label"]):
            out[Path(path).parent.name] = int(label)
    return out


def as_file(tmp_path: Path, mapping: dict) -> Path:
    path = tmp_path / "labels.json"
    path.write_text(json.dumps(mapping))
    return path


@pytest.mark.parametrize("form", ["dict", "file"])
@pytest.mark.parametrize("value", BAD, ids=BAD_IDS)
def test_a_bad_label_is_refused_at_open_naming_the_class_and_value(tmp_path, value, form):
    root = folder(tmp_path)
    mapping = {"cat": 0, "dog": value}
    given = mapping if form == "dict" else as_file(tmp_path, mapping)
    with pytest.raises(sf.SchemaError) as excinfo:
        read_images(root, size=(4, 4), label_map=given)
    text = str(excinfo.value)
    assert "'dog'" in text and repr(value) in text and "2**31" in text
    if form == "file":
        assert str(given) in text


def test_a_numpy_integer_is_a_label_but_a_numpy_float_or_bool_is_not(tmp_path):
    root = folder(tmp_path)
    ds = read_images(root, size=(4, 4), label_map={"cat": np.int64(1), "dog": np.uint8(0)})
    assert labels(ds) == {"cat": 1, "dog": 0}
    for value in (np.float64(1.0), np.bool_(True)):
        with pytest.raises(sf.SchemaError, match="'dog'"):
            read_images(root, size=(4, 4), label_map={"cat": 0, "dog": value})


@pytest.mark.parametrize("form", ["dict", "file"])
def test_a_good_map_labels_the_images(tmp_path, form):
    """Labels need not be 0..n-1: a map with gaps (a validation set of a 1000-class model) is fine."""
    root = folder(tmp_path)
    mapping = {"cat": 10**6, "dog": 0, "eel": 2**31 - 1}
    ds = read_images(root, size=(4, 4), label_map=mapping if form == "dict" else as_file(tmp_path, mapping))
    assert labels(ds) == {"cat": 10**6, "dog": 0}
    assert ds.source.label_map == mapping and ds.source.class_names == ["dog", "cat", "eel"]


def test_a_saved_map_reads_back(tmp_path):
    root = folder(tmp_path)
    source = read_images(root, size=(4, 4)).source
    source.save_label_map(tmp_path / "saved.json")
    assert read_images(root, size=(4, 4), label_map=tmp_path / "saved.json").source.label_map == {"cat": 0, "dog": 1}


def test_a_file_that_is_not_a_json_object_is_refused_naming_it(tmp_path):
    root = folder(tmp_path)
    for content in ('["cat", "dog"]', "{not json", ""):
        path = tmp_path / "labels.json"
        path.write_text(content)
        with pytest.raises(sf.SchemaError) as excinfo:
            read_images(root, size=(4, 4), label_map=path)
        assert str(path) in str(excinfo.value)
    with pytest.raises(sf.SchemaError, match="list"):
        read_images(root, size=(4, 4), label_map=["cat", "dog"])  # type: ignore[arg-type]


def test_a_missing_file_is_not_found_naming_it(tmp_path):
    root = folder(tmp_path)
    with pytest.raises(NotFoundError, match="nowhere.json"):
        read_images(root, size=(4, 4), label_map=tmp_path / "nowhere.json")


def test_two_classes_with_one_label_are_still_refused(tmp_path):
    with pytest.raises(sf.SchemaError, match="same label"):
        read_images(folder(tmp_path), size=(4, 4), label_map={"cat": 1, "dog": 1})
