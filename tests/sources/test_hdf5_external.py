"""HDF5 datasets whose bytes live in another file: refused unless ``allow_external=True``.

External raw storage (h5py ``external=``) and virtual datasets mapping
another file would make a data file read whatever it names. They are
refused when the source opens (a per-file reject, skippable), ``inspect``
shows where they point without reading them, and external links stay
unfollowed. Every "outside" file here is a sibling of the data folder in
``tmp_path``, holding a marker value that must never come out.
"""

from __future__ import annotations

import json
from pathlib import Path

import h5py
import numpy as np
import pytest

import streamfeed as sf
from streamfeed.cli import main
from streamfeed.inspect import inspect
from streamfeed.readers import read_hdf5

MARKER = 987_654_321_123  # what the outside file holds


def _secret(tmp_path: Path) -> Path:
    path = tmp_path / "secret.bin"
    path.write_bytes(np.full(4, MARKER, dtype="<i8").tobytes())
    return path


def _data(tmp_path: Path) -> Path:
    root = tmp_path / "data"
    root.mkdir(exist_ok=True)
    with h5py.File(root / "a-good.h5", "w") as f:
        f["x"] = np.arange(4, dtype="<i8")
    return root


def _external(tmp_path: Path) -> Path:
    root = _data(tmp_path)
    with h5py.File(root / "b-external.h5", "w") as f:
        f.create_dataset("x", shape=(4,), dtype="<i8", external=[(str(_secret(tmp_path)), 0, 32)])
    return root / "b-external.h5"


def _virtual(tmp_path: Path) -> Path:
    root = _data(tmp_path)
    (tmp_path / "elsewhere").mkdir()
    source = tmp_path / "elsewhere" / "source.h5"
    with h5py.File(source, "w") as f:
        f["x"] = np.full(4, MARKER, dtype="<i8")
    layout = h5py.VirtualLayout(shape=(4,), dtype="<i8")
    layout[:] = h5py.VirtualSource(str(source), "x", shape=(4,))
    with h5py.File(root / "b-virtual.h5", "w") as f:
        f.create_virtual_dataset("x", layout)
    return root / "b-virtual.h5"


def _ids(ds) -> list[int]:
    return [int(value) for chunk in ds.iter_epoch(0) for value in chunk["x"]]


@pytest.mark.parametrize("make, found", [(_external, "secret.bin"), (_virtual, "source.h5")])
def test_data_stored_in_another_file_is_refused_naming_file_dataset_and_target(tmp_path, make, found):
    path = make(tmp_path)
    with pytest.raises(sf.CorruptFileError) as excinfo:
        read_hdf5(path)
    text = str(excinfo.value)
    assert str(path) in text and "/x" in text and found in text and "allow_external=True" in text
    ds = read_hdf5(path.parent, on_error="skip")  # a per-file reject, like any other
    assert _ids(ds) == [0, 1, 2, 3]
    assert [(Path(e.path).name, e.location) for e in ds.report.entries] == [(path.name, "file")]
    assert _ids(read_hdf5(path, allow_external=True)) == [MARKER] * 4  # the explicit opt-in


def test_a_virtual_dataset_over_its_own_file_is_read(tmp_path):
    root = _data(tmp_path)
    layout = h5py.VirtualLayout(shape=(4,), dtype="<i8")
    layout[:] = h5py.VirtualSource(".", "/stored", shape=(4,))
    with h5py.File(root / "self.h5", "w") as f:
        f["stored"] = np.arange(10, 14, dtype="<i8")
        f.create_virtual_dataset("x", layout)
    assert _ids(read_hdf5(root / "self.h5", columns={"x": "/x"})) == [10, 11, 12, 13]


def test_a_virtual_dataset_over_an_external_dataset_of_its_own_file_is_refused(tmp_path):
    root = _data(tmp_path)
    layout = h5py.VirtualLayout(shape=(4,), dtype="<i8")
    layout[:] = h5py.VirtualSource(".", "/hidden", shape=(4,))
    with h5py.File(root / "chain.h5", "w") as f:
        f.create_dataset("hidden", shape=(4,), dtype="<i8", external=[(str(_secret(tmp_path)), 0, 32)])
        f.create_virtual_dataset("x", layout)
    with pytest.raises(sf.CorruptFileError, match="secret.bin"):
        read_hdf5(root / "chain.h5", columns={"x": "/x"})


def test_only_the_chosen_columns_are_checked_and_external_links_stay_unfollowed(tmp_path):
    path = _external(tmp_path)
    with h5py.File(path, "a") as f:
        f["y"] = np.arange(4, dtype="<i8")
        f["link"] = h5py.ExternalLink(str(tmp_path / "data" / "a-good.h5"), "/x")
    assert [int(v) for chunk in read_hdf5(path, columns={"y": "/y"}).iter_epoch(0) for v in chunk["y"]] == [0, 1, 2, 3]
    with pytest.raises(sf.SchemaError, match="/link"):
        read_hdf5(path, columns={"y": "/link"}, allow_external=True)


@pytest.mark.parametrize("make", [_external, _virtual])
def test_inspect_shows_where_the_data_points_without_reading_it(tmp_path, capsys, make):
    path = make(tmp_path)
    report = inspect(path)
    assert "external_storage" in report.warning_codes
    (entry,) = [obj for obj in report.details["tree"][0]["objects"] if obj["path"] == "/x"]
    assert entry["storage"] in ("external", "virtual") and entry["external_files"]
    assert str(MARKER) not in json.dumps(report.to_dict())
    assert main(["inspect", str(path), "--json"]) == 0
    assert main(["inspect", str(path), "--quiet"]) == 0
    assert main(["inspect", str(path), "--full", "--quiet"]) == 0
    assert str(MARKER) not in capsys.readouterr().out
