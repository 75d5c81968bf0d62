"""read_webdataset over loopback HTTP with injected faults: the network's failures, not the data's.

Shards are written by ``webdataset.TarWriter`` and served by the storage
tests' range server (``tests/storage/_http_server.py``, started and stopped
by pid). Faults within the deadline (503s, dropped connections, a slow and a
trickling answer) must give the exact epoch the local shards give; an outage
longer than the deadline is a ``NetworkError`` naming the shard, never a
skipped unit; a shard rewritten after the open is an ``ObjectChangedError``.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np
import pytest
import webdataset as wds

import streamfeed as sf

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "storage"))
from _http_server import HttpServer  # noqa: E402 - the storage tests' server, by path

SHARDS, PER_SHARD = 3, 30


def _write(root: Path, offset: int = 0) -> list[str]:
    root.mkdir(parents=True, exist_ok=True)
    names = []
    for shard in range(SHARDS):
        name = f"shard-{shard:03d}.tar"
        with wds.TarWriter(str(root / name)) as writer:
            for i in range(shard * PER_SHARD, (shard + 1) * PER_SHARD):
                writer.write({"__key__": f"s{i:05d}", "npy": np.full(4, i + offset, dtype=np.float32), "cls": i % 3})
        names.append(name)
    return names


def _epoch(dataset: sf.Dataset) -> dict[str, np.ndarray]:
    with dataset.shuffle(seed=4).batch(8).iter_epoch(0) as stream:
        batches = list(stream)
    return {name: np.concatenate([batch[name] for batch in batches]) for name in ("__key__", "npy", "cls")}


@pytest.mark.parametrize("on_error", ["raise", "skip"])
def test_faults_within_the_deadline_give_the_exact_epoch_of_the_local_shards(tmp_path, on_error):
    names = _write(tmp_path / "www")
    expected = _epoch(sf.read_webdataset(tmp_path / "www", fragment_samples=10))
    with HttpServer(tmp_path / "www") as server:
        server.configure(
            faults=[
                {"kind": "503", "on": "HEAD", "count": 2},
                {"kind": "503", "on": "GET", "after": 2, "count": 2},
                {"kind": "drop", "on": "GET", "after": 5, "count": 2},
                {"kind": "slow", "on": "GET", "after": 8, "count": 1, "seconds": 3},
                {"kind": "trickle", "on": "GET", "after": 9, "count": 1, "seconds": 0.02},
            ]
        )
        data = sf.read_webdataset(
            [f"{server.url}/{name}" for name in names],
            fragment_samples=10,
            storage_options={"deadline": 30, "read_timeout": 1},
            on_error=on_error,
        )
        found = _epoch(data)
        hits = [fault.get("hits", 0) for fault in server.faults()]
    assert hits == [2, 2, 2, 1, 1]  # each fault did happen
    for name in expected:
        np.testing.assert_array_equal(found[name], expected[name], err_msg=name)
    assert data.report.entries == []


@pytest.mark.parametrize("on_error", ["raise", "skip"])
def test_an_outage_longer_than_the_deadline_is_a_network_error_naming_the_shard(tmp_path, on_error):
    names = _write(tmp_path / "www")
    with HttpServer(tmp_path / "www") as server:
        data = sf.read_webdataset(
            [f"{server.url}/{name}" for name in names],
            fragment_samples=10,
            storage_options={"deadline": 1.5},
            on_error=on_error,
        )
        server.configure(faults=[{"kind": "drop", "on": "GET", "after": 2, "count": -1, "seconds": 30}])
        with pytest.raises(sf.NetworkError) as raised:
            _epoch(data)
    message = str(raised.value)
    assert "127.0.0.1" in message and "shard-" in message and ".tar" in message and "deadline of 1.5 s" in message
    assert data.report.entries == []  # the network's failure is never a skipped unit


def test_a_shard_rewritten_after_the_open_is_an_object_changed_error_and_no_new_sample_is_served(tmp_path):
    """Rewritten between the open (which indexed the tars) and the reads: deterministic, whatever the read-ahead."""
    names = _write(tmp_path / "www")
    _write(tmp_path / "new", offset=1000)  # same members, same sizes, other values
    assert os.path.getsize(tmp_path / "new" / names[0]) == os.path.getsize(tmp_path / "www" / names[0])
    with HttpServer(tmp_path / "www") as server:
        data = sf.read_webdataset([f"{server.url}/{name}" for name in names], fragment_samples=10)
        for name in names:
            os.replace(tmp_path / "new" / name, tmp_path / "www" / name)
        values: list[float] = []
        with pytest.raises(sf.ObjectChangedError) as raised, data.batch(10).iter_epoch(0) as stream:
            for batch in stream:
                values.extend(batch["npy"][:, 0].tolist())
    assert all(value < 1000 for value in values)  # never a sample of the new version
    assert ".tar" in str(raised.value) and "Fix:" in str(raised.value)
