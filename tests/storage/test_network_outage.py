"""Network outages mid-epoch, injected by a loopback proxy between the reader and SeaweedFS.

The proxy resets every open connection and refuses new ones for the
outage's length, starting at the N-th ``GET`` of the epoch (so it always
lands mid-epoch). An outage shorter than the retry deadline must give the
exact epoch (the same rows as the local file) under both error policies; a
longer one must raise :class:`NetworkError` naming the object and the
deadline, under ``on_error="skip"`` too, with nothing recorded as bad input.
"""

from __future__ import annotations

import numpy as np
import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pytest
from _seaweed import KEY, REGION, SECRET
from _storage_data import numbered_table, storage_options

import streamfeed as sf

ROWS, ROW_GROUP, FILES = 20_000, 500, 2


@pytest.fixture
def remote_parquet(seaweed, bucket, tmp_path):
    """Two Parquet files (40 row groups), written locally and uploaded; returns (local dir, URI)."""
    local = tmp_path / "local"
    local.mkdir()
    client = seaweed.client()
    per_file = ROWS // FILES
    for index in range(FILES):
        path = local / f"part-{index}.parquet"
        pq.write_table(numbered_table(index * per_file, per_file), path, row_group_size=ROW_GROUP)
        client.put_object(Bucket=bucket, Key=f"data/{path.name}", Body=path.read_bytes())
    return local, f"s3://{bucket}/data/"


def _epoch_ids(dataset: sf.Dataset) -> np.ndarray:
    with dataset.shuffle(seed=3).batch(1000).iter_epoch(0) as epoch:
        return np.concatenate([batch["id"] for batch in epoch])


@pytest.mark.parametrize("on_error", ["raise", "skip"])
@pytest.mark.parametrize("seconds", [2, 6])
def test_an_outage_shorter_than_the_deadline_gives_the_exact_epoch(remote_parquet, proxy, on_error, seconds):
    local, uri = remote_parquet
    expected = _epoch_ids(sf.read_parquet(str(local)))
    data = sf.read_parquet(uri, storage_options=storage_options(proxy.endpoint, deadline=30), on_error=on_error)
    proxy.outage_at(get_number=5, seconds=seconds)  # after the listing and footers: the 5th row group read
    found = _epoch_ids(data)
    assert proxy.outages == 1  # the outage did happen mid-epoch
    np.testing.assert_array_equal(found, expected)
    assert data.report.entries == []


@pytest.mark.parametrize("on_error", ["raise", "skip"])
def test_an_outage_longer_than_the_deadline_raises_network_error_never_skipped(remote_parquet, proxy, on_error):
    _, uri = remote_parquet
    data = sf.read_parquet(uri, storage_options=storage_options(proxy.endpoint, deadline=1.5), on_error=on_error)
    proxy.outage_at(get_number=5, seconds=8)
    with pytest.raises(sf.NetworkError) as excinfo:
        _epoch_ids(data)
    message = str(excinfo.value)
    assert "data/part-" in message and "deadline of 1.5 s" in message and "Fix:" in message
    assert isinstance(excinfo.value, ConnectionError) and not isinstance(excinfo.value, sf.CorruptFileError)
    assert data.report.entries == []


def test_an_outage_while_opening_raises_network_error(remote_parquet, proxy):
    _, uri = remote_parquet
    proxy.outage(seconds=8)
    with pytest.raises(sf.NetworkError, match="deadline of 1 s"):
        sf.read_parquet(uri, storage_options=storage_options(proxy.endpoint, deadline=1), on_error="skip")


def test_pyarrow_s3_client_network_errors_are_not_skipped_as_corrupt(seaweed, remote_parquet, proxy):
    """Without storage_options (pyarrow's own S3 client, no retries here): a network failure is still
    a NetworkError, not a corrupt row group; before, ``skip`` "finished" this epoch with a fraction of the rows."""
    _, uri = remote_parquet
    filesystem = pafs.S3FileSystem(
        endpoint_override=f"127.0.0.1:{proxy.port}", scheme="http", access_key=KEY, secret_key=SECRET, region=REGION,
        connect_timeout=1, request_timeout=1, retry_strategy=pafs.AwsStandardS3RetryStrategy(max_attempts=1),
    )  # fmt: skip
    data = sf.read_parquet(uri.removeprefix("s3://"), filesystem=filesystem, on_error="skip")
    proxy.outage_at(get_number=3, seconds=5)
    with pytest.raises(sf.NetworkError, match="NETWORK_CONNECTION") as excinfo:
        _epoch_ids(data)
    assert "storage_options" in str(excinfo.value) and "data/part-" in str(excinfo.value)
    assert data.report.entries == []
