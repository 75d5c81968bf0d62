"""Contract-test factories for the TFRecord source (see ``tests/factories/__init__.py``).

The sharded set is written by TensorFlow's own ``tf.io.TFRecordWriter``
(imported only when a factory runs, so collecting the contract tests stays
fast); the GZIP set and the empty file by streamfeed's writer, whose output
``tests/sources/test_tfrecord.py`` checks against TensorFlow's reader.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from streamfeed.readers import read_tfrecord
from streamfeed.writers.tfrecord import write_tfrecord

FEATURES = {"id": ("int64", ()), "x": ("float", ())}


def _tf_write(path: Path, ids: np.ndarray) -> None:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import tensorflow as tf

    with tf.io.TFRecordWriter(str(path)) as writer:
        for i in ids.tolist():
            feature = {
                "id": tf.train.Feature(int64_list=tf.train.Int64List(value=[i])),
                "x": tf.train.Feature(float_list=tf.train.FloatList(value=[i / 2])),
            }
            writer.write(tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString())


def tfrecord_sharded(tmp_path: Path):
    """Three shards of 230, 410 and 95 records cut into record ranges of ~700 bytes (uneven)."""
    root = tmp_path / "shards"
    root.mkdir()
    bounds = [0, 230, 640, 735]
    for number in range(3):
        _tf_write(root / f"train-{number:05d}-of-00003", np.arange(bounds[number], bounds[number + 1]))
    ds = read_tfrecord(root, features=FEATURES, fragment_bytes=700)
    assert len(ds.source.fragments) > 6
    return ds, np.arange(735)


def tfrecord_gzip(tmp_path: Path):
    """A GZIP set of four files (150, 150, 150, 60 records), each cut into record ranges of ~700 decompressed bytes."""
    ids = np.arange(510)
    write_tfrecord({"id": ids, "x": ids / 2.0}, tmp_path / "gz" / "part", shard_rows=150, compression="GZIP")
    ds = read_tfrecord(str(tmp_path / "gz" / "part-*.tfrecord.gz"), features=FEATURES, fragment_bytes=700)
    assert len(ds.source.fragments) > 8
    return ds, ids


FACTORIES = [
    pytest.param(tfrecord_sharded, id="tfrecord-sharded"),
    pytest.param(tfrecord_gzip, id="tfrecord-gzip"),
]


def tfrecord_zero_records(tmp_path: Path):
    """A file with no records (what TFRecordWriter leaves when nothing is written: 0 bytes)."""
    _tf_write(tmp_path / "empty.tfrecord", np.arange(0))
    assert (tmp_path / "empty.tfrecord").stat().st_size == 0
    return read_tfrecord(tmp_path / "empty.tfrecord", features=FEATURES), np.arange(0)


def tfrecord_zero_records_gzip(tmp_path: Path):
    """streamfeed's writer given no rows: one GZIP file holding no records."""
    paths = write_tfrecord([], tmp_path / "none", compression="GZIP")
    return read_tfrecord(paths, features=FEATURES), np.arange(0)


EMPTY_FACTORIES = [
    pytest.param(tfrecord_zero_records, id="tfrecord-zero-records"),
    pytest.param(tfrecord_zero_records_gzip, id="tfrecord-zero-records-gzip"),
]
