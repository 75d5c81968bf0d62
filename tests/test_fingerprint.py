"""A saved state is restored only into a pipeline whose row stream it describes.

The fingerprint is taken when the data is opened and covers everything that
changes the row stream: file contents as far as metadata tells (size and
modification time), the null policy, and the user's ops by name and version.
"""

from __future__ import annotations

import os

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import streamfeed as sf


def _later(path) -> None:
    """Moves ``path``'s modification time 2 s ahead, as a rewrite a moment later does.

    Explicit because a rewrite within the same clock tick of a coarse
    filesystem keeps its time: that limit is documented, not tested.
    """
    stat = os.stat(path)
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 2_000_000_000))


def _refused(pipeline: sf.Dataset, state: dict, what: str) -> None:
    with pytest.raises(sf.StateError, match=what):
        pipeline.iter_epoch(state=state)


def _state(pipeline: sf.Dataset) -> dict:
    with pipeline.iter_epoch(0) as stream:
        next(stream)
        return stream.get_state()


def test_a_same_size_rewrite_of_a_npy_file_is_refused(tmp_path):
    path = tmp_path / "x.npy"
    np.save(path, np.arange(100, dtype=np.float32))
    state = _state(sf.read_numpy(str(path)).batch(10))
    np.save(path, np.arange(100, dtype=np.float32)[::-1].copy())  # same size, other rows
    _later(path)
    _refused(sf.read_numpy(str(path)).batch(10), state, "source")


def test_a_same_size_rewrite_of_a_parquet_file_is_refused(tmp_path):
    path = tmp_path / "d.parquet"
    write = {"use_dictionary": False, "compression": "none", "write_statistics": False}
    pq.write_table(pa.table({"id": np.arange(100)}), path, **write)
    state = _state(sf.read_parquet(path).batch(10))
    size = path.stat().st_size
    pq.write_table(pa.table({"id": np.arange(100)[::-1]}), path, **write)
    assert path.stat().st_size == size
    _later(path)
    _refused(sf.read_parquet(path).batch(10), state, "source")


def test_a_changed_null_policy_is_refused(tmp_path):
    path = tmp_path / "d.parquet"
    pq.write_table(pa.table({"v": [1.0, None, 3.0] * 10}), path)
    state = _state(sf.read_parquet(path, nulls="fill", fill=0.0).batch(4))
    _refused(sf.read_parquet(path, nulls="drop").batch(4), state, "source")
    _refused(sf.read_parquet(path, nulls="fill", fill=1.0).batch(4), state, "source")


def test_a_changed_csv_null_policy_is_refused(tmp_path):
    path = tmp_path / "d.csv"
    path.write_text("v\n1\n\n3\n" + "4\n" * 20)
    state = _state(sf.read_csv(path, nulls="fill", fill=0).batch(4))
    _refused(sf.read_csv(path, nulls="drop").batch(4), state, "source")


def test_an_added_user_op_is_refused(tmp_path):
    path = tmp_path / "d.parquet"
    pq.write_table(pa.table({"id": np.arange(100)}), path)
    plain = sf.read_parquet(path)
    state = _state(plain.batch(10))
    _refused(plain.filter(lambda c: c["id"] % 2 == 0).batch(10), state, "ops")
    _refused(plain.map(lambda c: c).batch(10), state, "ops")
    _refused(plain.batch(10).map(lambda c: c), state, "ops")


def test_a_user_op_is_matched_by_name_and_version(tmp_path):
    path = tmp_path / "d.parquet"
    pq.write_table(pa.table({"id": np.arange(100)}), path)

    def even(columns):
        return columns["id"] % 2 == 0

    def odd(columns):
        return columns["id"] % 2 == 1

    plain = sf.read_parquet(path)
    state = _state(plain.filter(even, version="1").batch(10))
    reopened = sf.read_parquet(path)
    # The same function, the same version: the restart of a training script.
    with reopened.filter(even, version="1").batch(10).iter_epoch(state=state) as stream:
        assert next(stream)["id"].tolist() == list(range(20, 40, 2))
    _refused(reopened.filter(even, version="2").batch(10), state, "ops")
    _refused(reopened.filter(odd, version="1").batch(10), state, "ops")


def test_the_fingerprint_is_taken_when_the_data_is_opened(tmp_path):
    path = tmp_path / "d.csv"
    path.write_text("v\n" + "1\n" * 50)
    opened = sf.read_csv(path).batch(10)
    with open(path, "a") as handle:  # appended after open, before any state
        handle.write("2\n" * 50)
    state = opened.initial_state()
    # The state describes the 50 rows opened; a pipeline opened now sees 100.
    _refused(sf.read_csv(path).batch(10), state, "source")


@pytest.mark.parametrize("version", [3, "", "x" * 300])
def test_a_version_must_be_a_short_string(tmp_path, version):
    path = tmp_path / "d.parquet"
    pq.write_table(pa.table({"id": np.arange(10)}), path)
    with pytest.raises(sf.ArgumentError, match="version"):
        sf.read_parquet(path).map(lambda c: c, version=version)
