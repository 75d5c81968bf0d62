"""The local range cache under faults: a flipped byte in an entry, a cache that cannot write.

A cached range is the data: one bad byte in it is a wrong value served, so
every entry carries a checksum checked on read (a bad entry is fetched
again). A cache that cannot write (a full disk, a directory gone) must cost
only speed: the reads go to the network, with one warning, never a
"corrupt file" nor a skipped row group.
"""

from __future__ import annotations

import shutil
import subprocess
import warnings
from pathlib import Path
from typing import Iterator

import numpy as np
import pytest
from _storage_data import numbered_table, parquet_bytes, storage_options

import streamfeed as sf
from streamfeed.files.range_cache import RangeCacheWarning

ROWS, ROW_GROUP = 20_000, 500


@pytest.fixture
def uri(seaweed, bucket):
    table = numbered_table(0, ROWS, features=8)
    seaweed.client().put_object(Bucket=bucket, Key="data/part-0.parquet", Body=parquet_bytes(table, ROW_GROUP))
    return f"s3://{bucket}/data/"


def _rows(dataset: sf.Dataset) -> dict[str, np.ndarray]:
    with dataset.batch(1000).iter_epoch(0) as stream:
        batches = list(stream)
    return {name: np.concatenate([batch[name] for batch in batches]) for name in ("id", "f3")}


def _check(rows: dict[str, np.ndarray]) -> None:
    order = np.argsort(rows["id"])
    np.testing.assert_array_equal(rows["id"][order], np.arange(ROWS))
    np.testing.assert_array_equal(rows["f3"][order], (np.arange(ROWS) * 4).astype(np.float32))


def test_a_flipped_byte_in_a_cached_range_is_fetched_again_not_served(uri, proxy, tmp_path):
    directory = tmp_path / "cache"
    options = storage_options(proxy.endpoint, cache={"dir": str(directory), "max_bytes": 64 << 20})
    _check(_rows(sf.read_parquet(uri, storage_options=options)))
    entries = sorted(path for path in directory.iterdir() if path.is_file())
    assert len(entries) >= ROWS // ROW_GROUP
    for entry in entries:  # one byte in the middle of every entry: a value (or a page header) changes
        data = bytearray(entry.read_bytes())
        data[len(data) // 2] ^= 0x40
        entry.write_bytes(bytes(data))
    proxy.reset_counts()
    _check(_rows(sf.read_parquet(uri, storage_options=options)))
    assert proxy.requests["GET"] >= ROWS // ROW_GROUP  # each bad entry fetched again


@pytest.fixture
def full_disk(tmp_path) -> Iterator[Path]:
    """A real filesystem with room for a few ranges only: a 96 KiB tmpfs mounted for the test."""
    mount = tmp_path / "small"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=96k", "tmpfs", str(mount)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", str(mount)], check=True)


def _one_warning(caught: list[warnings.WarningMessage]) -> str:
    found = [str(item.message) for item in caught if issubclass(item.category, RangeCacheWarning)]
    assert len(found) == 1, found
    return found[0]


@pytest.mark.parametrize("on_error", ["raise", "skip"])
def test_a_full_cache_disk_degrades_to_the_network_with_one_warning(uri, proxy, full_disk, on_error):
    options = storage_options(proxy.endpoint, cache={"dir": str(full_disk / "cache"), "max_bytes": 64 << 20})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        data = sf.read_parquet(uri, storage_options=options, on_error=on_error)
        for _ in range(2):
            _check(_rows(data))
    assert data.report.skipped_units == 0
    assert str(full_disk) in _one_warning(caught)


@pytest.mark.parametrize("on_error", ["raise", "skip"])
def test_a_cache_directory_gone_mid_epoch_degrades_to_the_network(uri, proxy, tmp_path, on_error):
    directory = tmp_path / "cache"
    options = storage_options(proxy.endpoint, cache={"dir": str(directory), "max_bytes": 64 << 20})
    data = sf.read_parquet(uri, storage_options=options, on_error=on_error)
    shutil.rmtree(directory)
    directory.write_bytes(b"not a directory")  # nothing can be written below it any more
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _check(_rows(data))
    assert data.report.skipped_units == 0
    assert str(directory) in _one_warning(caught)
