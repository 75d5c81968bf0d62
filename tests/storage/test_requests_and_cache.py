"""Requests per epoch and the local range cache, counted by a loopback proxy in front of SeaweedFS.

The proxy counts the HTTP requests that really reach the server; the
library's own counters (``bench``'s ``storage`` line) must agree with it.
"""

from __future__ import annotations

import numpy as np
import pyarrow.parquet as pq
import pytest
from _storage_data import numbered_table, parquet_bytes, storage_options

import streamfeed as sf

ROW_GROUPS, ROW_GROUP = 40, 500


@pytest.fixture
def uri(seaweed, bucket, tmp_path):
    client = seaweed.client()
    for index in range(2):
        table = numbered_table(index * 10_000, 10_000, features=8)
        client.put_object(Bucket=bucket, Key=f"data/part-{index}.parquet", Body=parquet_bytes(table, ROW_GROUP))
    return f"s3://{bucket}/data/"


def _ids(dataset: sf.Dataset, epoch: int) -> np.ndarray:
    with dataset.shuffle(seed=1).batch(1000).iter_epoch(epoch) as stream:
        return np.concatenate([batch["id"] for batch in stream])


def test_one_request_per_row_group_and_bench_counts_them(uri, proxy):
    data = sf.read_parquet(uri, storage_options=storage_options(proxy.endpoint))
    proxy.reset_counts()
    report = sf.bench(data.batch(1000), max_batches=20)
    assert report.rows == 20_000
    assert proxy.requests["GET"] == ROW_GROUPS  # pyarrow's own S3 client made ~7 per row group
    assert report.storage is not None and report.storage["requests"] == ROW_GROUPS
    assert report.storage["retries"] == 0 and report.storage["bytes"] > 0


def test_the_cache_serves_epoch_two_without_requests(uri, proxy, tmp_path):
    options = storage_options(proxy.endpoint, cache={"dir": str(tmp_path / "cache"), "max_bytes": 64 << 20})
    data = sf.read_parquet(uri, storage_options=options)
    proxy.reset_counts()
    first = _ids(data, 0)
    assert proxy.requests["GET"] == ROW_GROUPS
    proxy.reset_counts()
    second = _ids(data, 1)
    assert proxy.requests["GET"] == 0
    assert sorted(first.tolist()) == sorted(second.tolist()) == list(range(20_000))
    # a new dataset (a new process would do the same) reads its row groups from the cache too
    again = sf.read_parquet(uri, storage_options=options)
    proxy.reset_counts()
    np.testing.assert_array_equal(_ids(again, 0), first)
    assert proxy.requests["GET"] == 0


# plain, uncompressed, no statistics: two files of other values with byte-identical layouts (same ranges)
SAME_LAYOUT = {"compression": "none", "use_dictionary": False, "write_statistics": False}


def test_a_changed_object_is_fetched_again_not_served_stale(seaweed, bucket, proxy, tmp_path):
    key = "data/part-0.parquet"
    before, after = (parquet_bytes(numbered_table(start, 2000), ROW_GROUP, **SAME_LAYOUT) for start in (0, 5000))
    assert len(before) == len(after)
    seaweed.client().put_object(Bucket=bucket, Key=key, Body=before)
    options = storage_options(proxy.endpoint, cache={"dir": str(tmp_path / "cache"), "max_bytes": 64 << 20})
    uri = f"s3://{bucket}/{key}"
    assert sorted(_ids(sf.read_parquet(uri, storage_options=options), 0).tolist()) == list(range(2000))
    # the same size and layout, other values: only the version (ETag) tells them apart
    seaweed.client().put_object(Bucket=bucket, Key=key, Body=after)
    proxy.reset_counts()
    changed = _ids(sf.read_parquet(uri, storage_options=options), 0)
    assert sorted(changed.tolist()) == list(range(5000, 7000))
    assert proxy.requests["GET"] >= 2000 // ROW_GROUP


def test_the_cache_stays_within_max_bytes(uri, proxy, tmp_path):
    directory = tmp_path / "cache"
    bound = 100_000  # a few row groups of the ~1 MB read
    options = storage_options(proxy.endpoint, cache={"dir": str(directory), "max_bytes": bound})
    data = sf.read_parquet(uri, storage_options=options)
    for epoch in range(2):
        assert sorted(_ids(data, epoch).tolist()) == list(range(20_000))
        assert 0 < sum(path.stat().st_size for path in directory.iterdir()) <= bound


def test_local_parquet_reads_are_unchanged(tmp_path):
    """No storage_options: local files keep pyarrow's local reads (no pre-buffering, no counters)."""
    pq.write_table(numbered_table(0, 1000), tmp_path / "a.parquet", row_group_size=ROW_GROUP)
    report = sf.bench(sf.read_parquet(str(tmp_path)).batch(100), max_batches=10)
    assert report.rows == 1000 and report.storage is None
