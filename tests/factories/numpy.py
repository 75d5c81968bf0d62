"""Contract-test factories for the NumPy source: np.save, np.savez, np.savez_compressed."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from streamfeed.readers import read_numpy


def _feature(ids: np.ndarray) -> np.ndarray:
    """A Fortran-ordered (n, 3) matrix whose rows are (id, 2 id, 3 id)."""
    return np.asfortranarray(np.stack([ids, 2 * ids, 3 * ids], axis=1).astype(np.float32))


def numpy_npy_pair(tmp_path: Path):
    """x.npy (C order) and id.npy, 700 rows in fragments of 97."""
    ids = np.arange(700)
    np.save(tmp_path / "x.npy", ids / 2.0)
    np.save(tmp_path / "id.npy", ids)
    return read_numpy(tmp_path / "x.npy", arrays={"id": tmp_path / "id.npy"}, rows_per_fragment=97), ids


def numpy_npy_fortran_shards(tmp_path: Path):
    """Two shards of (x, id, F-ordered feature) .npy files, 260 and 390 rows."""
    shards = {"x": [], "id": [], "feature": []}
    for number, (lo, hi) in enumerate([(0, 260), (260, 650)]):
        ids = np.arange(lo, hi)
        for name, values in (("x", ids / 2.0), ("id", ids), ("feature", _feature(ids))):
            np.save(tmp_path / f"{name}-{number}.npy", values)
            shards[name].append(tmp_path / f"{name}-{number}.npy")
    return read_numpy(
        shards["x"], arrays={"id": shards["id"], "feature": shards["feature"]}, rows_per_fragment=111
    ), np.arange(650)


def numpy_npz_stored(tmp_path: Path):
    """np.savez (members stored uncompressed: memory-mapped by offset)."""
    ids = np.arange(600)
    np.savez(tmp_path / "data.npz", id=ids, x=ids / 2.0, feature=_feature(ids))
    return read_numpy(tmp_path / "data.npz", rows_per_fragment=83), ids


def numpy_npz_compressed(tmp_path: Path):
    """np.savez_compressed (members streamed through deflate with checkpoints)."""
    ids = np.arange(600)
    np.savez_compressed(tmp_path / "data.npz", id=ids, x=ids / 2.0, feature=np.ascontiguousarray(_feature(ids)))
    return read_numpy(tmp_path / "data.npz", rows_per_fragment=77), ids


FACTORIES = [
    pytest.param(numpy_npy_pair, id="numpy-npy-pair"),
    pytest.param(numpy_npy_fortran_shards, id="numpy-npy-fortran-shards"),
    pytest.param(numpy_npz_stored, id="numpy-npz-stored"),
    pytest.param(numpy_npz_compressed, id="numpy-npz-compressed"),
]


def numpy_zero_length_npy(tmp_path: Path):
    np.save(tmp_path / "x.npy", np.zeros(0))
    np.save(tmp_path / "id.npy", np.zeros(0, dtype=np.int64))
    return read_numpy(tmp_path / "x.npy", arrays={"id": tmp_path / "id.npy"}), np.arange(0)


def numpy_zero_length_npz(tmp_path: Path):
    np.savez_compressed(tmp_path / "empty.npz", id=np.zeros(0, dtype=np.int64), x=np.zeros(0))
    return read_numpy(tmp_path / "empty.npz"), np.arange(0)


EMPTY_FACTORIES = [
    pytest.param(numpy_zero_length_npy, id="numpy-zero-length-npy"),
    pytest.param(numpy_zero_length_npz, id="numpy-zero-length-npz"),
]
