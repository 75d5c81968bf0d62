"""An HDF5 column is one name everywhere: inspect lists what the reader serves, and its path spelling is accepted too.

Before, ``inspect digits.h5`` listed ``/images`` and ``/labels`` while the
reader serves ``images`` and ``labels``, and ``stats digits.h5 --label
/labels`` said there was no column ``/labels``. The CLI cases go through the
real ``streamfeed`` script; the file is written by h5py.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import h5py
import numpy as np
import pytest

import streamfeed as sf
from streamfeed.stats import compute_stats

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "cli"))
from _console import streamfeed  # noqa: E402

ROWS = 200


@pytest.fixture
def digits(tmp_path: Path) -> Path:
    path = tmp_path / "digits.h5"
    with h5py.File(path, "w") as handle:
        handle["images"] = np.arange(ROWS * 64, dtype=np.float32).reshape(ROWS, 8, 8) % 255
        handle["labels"] = np.arange(ROWS) % 10
        handle["meta/weight"] = np.ones(ROWS)
    return path


def test_inspect_lists_the_names_the_reader_serves(digits):
    done = streamfeed("inspect", digits, "--json")
    assert done.returncode == 0, done.stderr[-3000:]
    listed = [column["name"] for column in json.loads(done.stdout)["columns"]]
    assert listed == sf.read_hdf5(digits).column_names == ["images", "labels", "meta/weight"]


@pytest.mark.parametrize("label", ["labels", "/labels"])
def test_cli_stats_takes_either_spelling_of_the_label(digits, tmp_path, label):
    out = tmp_path / "s.json"
    done = streamfeed("stats", digits, "--label", label, "-o", out, "--quiet")
    assert done.returncode == 0, done.stderr[-3000:]
    saved = json.loads(out.read_text())
    assert saved["label"] == "labels"
    assert sum(count for _, count in saved["label_counts"]) == ROWS


@pytest.mark.parametrize("label", ["labels", "/labels"])
def test_cli_stats_columns_and_inspect_quality_take_either_spelling(digits, tmp_path, label):
    out = tmp_path / "s.json"
    done = streamfeed("stats", digits, "--columns", "/meta/weight", "--label", label, "-o", out, "--quiet")
    assert done.returncode == 0, done.stderr[-3000:]
    assert sorted(json.loads(out.read_text())["columns"]) == ["labels", "meta/weight"]
    done = streamfeed("inspect", digits, "--quality", "--label", label, "--json")
    assert done.returncode == 0, done.stderr[-3000:]


def test_python_label_and_columns_take_either_spelling(digits):
    dataset = sf.read_hdf5(digits)
    by_path = compute_stats(dataset, columns=["/meta/weight"], label="/labels")
    by_name = compute_stats(dataset, columns=["meta/weight"], label="labels")
    assert by_path.label == by_name.label == "labels"
    assert by_path.label_counts == by_name.label_counts
    assert sorted(by_path.columns) == sorted(by_name.columns) == ["labels", "meta/weight"]
    train = dataset.batch(50).to_keras(features=["/images"], label="/labels")
    assert train.features == ["images"] and train.labels == ["labels"]
    x, y = train[0]
    assert np.asarray(x).shape == (50, 8, 8) and np.asarray(y).tolist() == (np.arange(50) % 10).tolist()


def test_a_name_that_is_neither_is_still_refused(digits, tmp_path):
    done = streamfeed("stats", digits, "--label", "/label", "-o", tmp_path / "s.json")
    assert done.returncode == 2 and "'/label'" in done.stderr, done.stderr


def test_cli_bench_takes_the_path_spelling_of_label_and_features(digits):
    done = streamfeed(
        "bench", digits, "--model", "demo", "--label", "/labels", "--features", "/meta/weight", "--max-batches", "2",
        "--json", "--quiet",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout)["batches"] == 2
