"""``inspect``, ``inspect --quality`` and ``bench`` on one small file of every format.

Each file is written by the format's real writer; the commands run
in-process through ``main(argv)`` with ``--json`` and must report the rows
that were written.
"""

import json

import h5py
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from PIL import Image

import streamfeed as sf
from streamfeed.cli import main

ROWS = 240


def _columns():
    rng = np.random.default_rng(0)
    return {"id": np.arange(ROWS), "f0": rng.random(ROWS).astype("float32"), "y": (np.arange(ROWS) % 3).astype("int64")}


def parquet(tmp_path):
    pq.write_table(pa.table(_columns()), tmp_path / "d.parquet", row_group_size=60)
    return tmp_path / "d.parquet"


def csv(tmp_path):
    pd.DataFrame(_columns()).to_csv(tmp_path / "d.csv", index=False)
    return tmp_path / "d.csv"


def hdf5(tmp_path):
    with h5py.File(tmp_path / "d.h5", "w") as out:
        for name, values in _columns().items():
            out.create_dataset(name, data=values, chunks=(60,))
    return tmp_path / "d.h5"


def numpy(tmp_path):
    np.savez(tmp_path / "d.npz", **_columns())
    return tmp_path / "d.npz"


def tfrecord(tmp_path):
    sf.write_tfrecord(_columns(), tmp_path / "tf" / "d", shard_rows=100)
    return tmp_path / "tf"


def images(tmp_path):
    rng = np.random.default_rng(1)
    for label in ("a", "b", "c"):
        (tmp_path / "img" / label).mkdir(parents=True)
        for i in range(ROWS // 3):
            Image.fromarray(rng.integers(0, 256, (12, 12, 3), dtype=np.uint8)).save(
                tmp_path / "img" / label / f"{i}.png"
            )
    return tmp_path / "img"


FORMATS = [parquet, csv, hdf5, numpy, tfrecord, images]


@pytest.mark.parametrize("write", FORMATS, ids=[f.__name__ for f in FORMATS])
def test_inspect_quality_and_bench_work_on_every_format(write, tmp_path, capsys):
    path = str(write(tmp_path))

    assert main(["inspect", path, "--json", "--quiet"]) == 0
    inspected = json.loads(capsys.readouterr().out)
    assert inspected["format"] == write.__name__
    assert inspected["rows"] == ROWS

    assert main(["inspect", path, "--quality", "--json", "--quiet"]) == 0
    quality = json.loads(capsys.readouterr().out)
    assert quality["quality"], "the quality section is missing"

    assert main(["bench", path, "--json", "--quiet", "--max-batches", "3", "--batch-size", "32"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["rows"] == 3 * 32
    assert report["verdict"]
