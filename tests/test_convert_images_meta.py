"""Converted images keep their meaning: class names, label map and paths relative to the source root.

An image folder converted to Parquet (``convert_to_parquet`` or ``streamfeed
convert``) records its label map and class names in every shard's schema
metadata (key ``streamfeed``, never an absolute path) and stores ``path``
relative to the folder; ``read_parquet`` gives them back as
``dataset.source.label_map`` / ``class_names`` / ``save_label_map``, as an
image source has them, and ``inspect`` shows them.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from PIL import Image

import streamfeed as sf
from streamfeed.cli import main
from streamfeed.convert import convert_to_parquet
from streamfeed.inspect import inspect
from streamfeed.sources.parquet import STREAMFEED_METADATA
from streamfeed.transforms import decode_images

CLASSES = {"ant": 5, "bee": 9, "cat bird": 7}  # a name with a space; uneven classes
LABEL_MAP = {"ant": 4, "bee": 0, "cat bird": 2}  # not the sorted order, with a gap


def _folder(root: Path) -> Path:
    """Pillow-written PNGs and JPEGs in three class folders, one image in a nested folder."""
    rng = np.random.default_rng(3)
    for name, count in CLASSES.items():
        for number in range(count):
            folder = root / name / ("deeper" if number == 2 else "")
            folder.mkdir(parents=True, exist_ok=True)
            pixels = rng.integers(0, 256, (12, 10, 3), dtype=np.uint8)
            Image.fromarray(pixels).save(folder / f"{number}.{'jpg' if number % 2 else 'png'}")
    return root


def _everything(dataset) -> dict[str, np.ndarray]:
    with dataset.iter_epoch(0) as epoch:
        batches = list(epoch)
    return {name: np.concatenate([batch[name] for batch in batches]) for name in batches[0]}


def _by_path(columns: dict[str, np.ndarray], root: Path | None = None) -> dict[str, dict]:
    """``{relative path: {column: value}}`` (paths made relative to ``root`` when given)."""
    out = {}
    for index, path in enumerate(columns["path"]):
        key = Path(os.path.relpath(path, root)).as_posix() if root is not None else path
        out[key] = {name: values[index] for name, values in columns.items() if name != "path"}
    return out


def _metadata(path: Path) -> dict:
    return json.loads(pq.read_schema(path).metadata[STREAMFEED_METADATA])


@pytest.fixture
def images(tmp_path) -> Path:
    return _folder(tmp_path / "imgs")


def test_converted_folder_keeps_its_label_map_class_names_and_labels_per_relative_path(tmp_path, images):
    source = sf.read_images(images, decode=False, label_map=LABEL_MAP)
    summary = convert_to_parquet(source, tmp_path / "out", shard_rows=8, row_group_rows=4)
    assert summary.rows == 21 and len(summary.files) == 3

    converted = sf.read_parquet(tmp_path / "out")
    assert converted.source.label_map == LABEL_MAP == source.source.label_map
    assert converted.source.class_names == ["bee", "cat bird", "ant"] == source.source.class_names
    assert converted.source.converted_from == {"format": "images", "root": "imgs"}

    original, back = _everything(source), _everything(converted)
    paths = list(back["path"])
    assert all(not os.path.isabs(path) and "\\" not in path for path in paths)
    assert "cat bird/deeper/2.png" in paths
    expected = _by_path(original, images)
    found = _by_path(back)
    assert sorted(found) == sorted(expected)
    for path, row in expected.items():
        assert found[path]["label"] == row["label"], path
        assert found[path]["image_bytes"] == row["image_bytes"], path

    for shard in summary.files:  # every shard carries the same metadata, and no absolute path
        assert _metadata(Path(shard)) == {
            "version": 1,
            "source": {"format": "images", "root": "imgs"},
            "label_column": "label",
            "label_map": LABEL_MAP,
            "class_names": ["bee", "cat bird", "ant"],
        }
        assert str(tmp_path) not in json.dumps(_metadata(Path(shard)))


def test_the_console_script_converts_a_folder_that_reads_back_with_its_classes(tmp_path, images):
    script = shutil.which("streamfeed")
    command = [script] if script else [sys.executable, "-m", "streamfeed.cli"]
    done = subprocess.run(
        [*command, "convert", str(images), str(tmp_path / "out"), "--json", "--quiet"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["rows"] == 21

    original = sf.read_images(images, decode=False)
    converted = sf.read_parquet(tmp_path / "out")
    assert converted.source.label_map == {"ant": 0, "bee": 1, "cat bird": 2} == original.source.label_map
    assert converted.source.class_names == original.source.class_names
    found, expected = _by_path(_everything(converted)), _by_path(_everything(original), images)
    assert {path: int(row["label"]) for path, row in found.items()} == {
        path: int(row["label"]) for path, row in expected.items()
    }


def test_cli_main_convert_then_inspect_shows_the_classes_and_label_map(tmp_path, images, capsys):
    assert main(["convert", str(images), str(tmp_path / "out"), "--json", "--quiet"]) == 0
    capsys.readouterr()

    report = inspect(tmp_path / "out")
    assert report.format == "parquet"
    assert report.details["class_names"] == ["ant", "bee", "cat bird"]
    assert report.details["label_map"] == {"ant": 0, "bee": 1, "cat bird": 2}
    assert report.details["converted_from"] == {"format": "images", "root": "imgs"}
    path_column = next(column for column in report.columns if column.name == "path")
    assert all(not os.path.isabs(sample) for sample in path_column.samples)

    assert main(["inspect", str(tmp_path / "out"), "--quiet"]) == 0
    shown = capsys.readouterr().out
    assert "class names" in shown and "cat bird" in shown and "label map" in shown
    assert main(["inspect", str(tmp_path / "out"), "--json", "--quiet"]) == 0
    assert json.loads(capsys.readouterr().out)["details"]["class_names"] == ["ant", "bee", "cat bird"]


def test_decode_images_after_read_parquet_gives_the_images_read_images_gives(tmp_path, images):
    convert_to_parquet(sf.read_images(images, decode=False), tmp_path / "out")
    decoded = _everything(sf.read_parquet(tmp_path / "out").map(decode_images(size=(6, 5))))
    original = _everything(sf.read_images(images, size=(6, 5)))
    found, expected = _by_path(decoded), _by_path(original, images)
    assert sorted(found) == sorted(expected)
    for path, row in expected.items():
        assert np.array_equal(found[path]["image"], row["image"]), path
        assert found[path]["label"] == row["label"], path


def test_the_saved_label_map_of_a_converted_set_is_reused_by_read_images(tmp_path, images):
    convert_to_parquet(sf.read_images(images, decode=False, label_map=LABEL_MAP), tmp_path / "out")
    sf.read_parquet(tmp_path / "out").source.save_label_map(tmp_path / "labels.json")
    assert json.loads((tmp_path / "labels.json").read_text()) == LABEL_MAP
    again = sf.read_images(images, decode=False, label_map=tmp_path / "labels.json")
    assert again.source.label_map == LABEL_MAP


def test_converting_a_converted_set_again_keeps_its_metadata(tmp_path, images):
    convert_to_parquet(sf.read_images(images, decode=False, label_map=LABEL_MAP), tmp_path / "once")
    convert_to_parquet(sf.read_parquet(tmp_path / "once"), tmp_path / "twice", shard_rows=10)
    twice = sf.read_parquet(tmp_path / "twice")
    assert twice.source.label_map == LABEL_MAP
    assert twice.source.converted_from == {"format": "images", "root": "imgs"}
    assert _by_path(_everything(twice)).keys() == _by_path(_everything(sf.read_parquet(tmp_path / "once"))).keys()


def test_a_folder_read_without_labels_stores_relative_paths_and_no_label_map(tmp_path, images):
    convert_to_parquet(sf.read_images(images, decode=False, labels=None), tmp_path / "out")
    converted = sf.read_parquet(tmp_path / "out")
    assert converted.source.label_map == {} and converted.source.class_names == []
    assert converted.source.converted_from == {"format": "images", "root": "imgs"}
    paths = set(_everything(converted)["path"])
    assert "cat bird/deeper/2.png" in paths and not any(os.path.isabs(path) for path in paths)
    assert "label_map" not in inspect(tmp_path / "out").details


def test_plain_parquet_has_no_label_map_and_is_written_without_metadata(tmp_path):
    pq.write_table(pa.table({"x": np.arange(10)}), tmp_path / "in.parquet")
    summary = convert_to_parquet(sf.read_parquet(tmp_path / "in.parquet"), tmp_path / "out")
    assert STREAMFEED_METADATA not in (pq.read_schema(summary.files[0]).metadata or {})
    converted = sf.read_parquet(tmp_path / "out")
    assert converted.source.label_map == {} and converted.source.class_names == []
    assert converted.source.converted_from is None
    assert "class_names" not in inspect(tmp_path / "out").details


def test_files_with_different_label_maps_are_refused_naming_both(tmp_path, images):
    convert_to_parquet(sf.read_images(images, decode=False), tmp_path / "a")
    convert_to_parquet(sf.read_images(images, decode=False, label_map=LABEL_MAP), tmp_path / "b")
    first, second = tmp_path / "a" / "part-00000.parquet", tmp_path / "b" / "part-00000.parquet"
    with pytest.raises(sf.SchemaError) as excinfo:
        sf.read_parquet([first, second])
    text = str(excinfo.value)
    assert str(first) in text and str(second) in text and "label map" in text


def test_a_file_without_the_label_map_among_files_with_one_is_refused_naming_both(tmp_path, images):
    convert_to_parquet(sf.read_images(images, decode=False), tmp_path / "a")
    labelled = tmp_path / "a" / "part-00000.parquet"
    table = pq.read_table(labelled)
    plain = tmp_path / "plain.parquet"
    pq.write_table(table.replace_schema_metadata(None), plain)
    with pytest.raises(sf.SchemaError) as excinfo:
        sf.read_parquet([labelled, plain])
    assert str(labelled) in str(excinfo.value) and str(plain) in str(excinfo.value)


def test_files_converted_separately_with_one_label_map_read_together(tmp_path, images):
    convert_to_parquet(sf.read_images(images, decode=False, label_map=LABEL_MAP), tmp_path / "train")
    other = _folder(tmp_path / "val")
    convert_to_parquet(sf.read_images(other, decode=False, label_map=LABEL_MAP), tmp_path / "valset")
    both = sf.read_parquet([tmp_path / "train" / "part-00000.parquet", tmp_path / "valset" / "part-00000.parquet"])
    assert both.source.label_map == LABEL_MAP
    assert both.source.converted_from is None  # two different roots: neither is the source of all
    assert both.num_rows() == 42


@pytest.mark.parametrize("label_map", [{"ant": -1, "bee": 1}, {"ant": 1, "bee": 1}, {"ant": "1"}, ["ant"]], ids=str)
def test_a_file_whose_label_map_is_not_one_is_refused_naming_it(tmp_path, label_map):
    table = pa.table({"label": np.arange(3)}).replace_schema_metadata(
        {STREAMFEED_METADATA: json.dumps({"version": 1, "label_map": label_map}).encode()}
    )
    pq.write_table(table, tmp_path / "bad.parquet")
    with pytest.raises(sf.SchemaError, match="label map") as excinfo:
        sf.read_parquet(tmp_path / "bad.parquet")
    assert str(tmp_path / "bad.parquet") in str(excinfo.value)


def test_labels_changed_by_a_map_outside_the_label_map_refuse_the_conversion(tmp_path, images):
    def shift(chunk):
        return {**chunk, "label": chunk["label"] + 10}

    dataset = sf.read_images(images, decode=False).map(shift)
    with pytest.raises(sf.SchemaError, match="label map"):
        convert_to_parquet(dataset, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_inspect_warns_where_files_carry_different_label_maps(tmp_path, images):
    convert_to_parquet(sf.read_images(images, decode=False), tmp_path / "a")
    convert_to_parquet(sf.read_images(images, decode=False, label_map=LABEL_MAP), tmp_path / "b")
    (tmp_path / "mixed").mkdir()
    shutil.copy(tmp_path / "a" / "part-00000.parquet", tmp_path / "mixed" / "one.parquet")
    shutil.copy(tmp_path / "b" / "part-00000.parquet", tmp_path / "mixed" / "two.parquet")
    report = inspect(tmp_path / "mixed")
    assert "label_map_mismatch" in report.warning_codes and "label_map" not in report.details
    (warning,) = [warning for warning in report.warnings if warning.code == "label_map_mismatch"]
    assert str(tmp_path / "mixed" / "two.parquet") in warning.message
