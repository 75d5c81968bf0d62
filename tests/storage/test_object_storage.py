"""Parquet on a real S3 server (SeaweedFS on loopback) through pyarrow's own S3 filesystem.

Objects are uploaded with boto3 and read back through ``pyarrow.fs.S3FileSystem``,
given explicitly and from an ``s3://`` URI with the endpoint in the environment
(what works without ``storage_options``; ``test_storage_options.py`` covers those).
"""

import numpy as np
import pyarrow.fs as pafs
import pytest
from _seaweed import KEY, REGION, SECRET
from _storage_data import numbered_table, parquet_bytes

import streamfeed as sf


@pytest.fixture(scope="module")
def s3(seaweed):
    bucket = "streamfeed-object-storage"
    client = seaweed.client()
    client.create_bucket(Bucket=bucket)
    for index, name in enumerate(["data/part 0.parquet", "data/dé part 1.parquet"]):
        client.put_object(Bucket=bucket, Key=name, Body=parquet_bytes(numbered_table(index * 500, 500), 100))
    client.put_object(Bucket=bucket, Key="broken/good.parquet", Body=parquet_bytes(numbered_table(0, 300), 100))
    client.put_object(Bucket=bucket, Key="broken/bad.parquet", Body=b"id,x\n1,2\n")
    filesystem = pafs.S3FileSystem(
        endpoint_override=f"127.0.0.1:{seaweed.ports['s3']}", scheme="http", access_key=KEY, secret_key=SECRET,
        region=REGION,
    )  # fmt: skip
    return {"bucket": bucket, "endpoint": seaweed.endpoint, "filesystem": filesystem}


def test_directory_on_s3_streams_every_row_once(s3):
    data = sf.read_parquet(f"{s3['bucket']}/data/", filesystem=s3["filesystem"]).shuffle(seed=1).batch(64)
    assert len(data) == -(-1000 // 64)
    with data.iter_epoch(0) as epoch:
        ids = np.concatenate([batch["id"] for batch in epoch])
    assert sorted(ids.tolist()) == list(range(1000))


def test_s3_uri_with_spaces_and_non_ascii(s3, monkeypatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", KEY)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", s3["endpoint"])
    data = sf.read_parquet(f"s3://{s3['bucket']}/data/dé part 1.parquet")
    assert data.num_rows() == 500
    assert data.source.fragments[0].key.endswith("dé part 1.parquet#rg=0")


def test_corrupt_object_is_named_or_skipped(s3):
    with pytest.raises(sf.CorruptFileError, match="broken/bad.parquet"):
        sf.read_parquet(f"{s3['bucket']}/broken/", filesystem=s3["filesystem"])
    data = sf.read_parquet(f"{s3['bucket']}/broken/", filesystem=s3["filesystem"], on_error="skip")
    assert data.num_rows() == 300
    assert [entry.path for entry in data.report.entries] == [f"{s3['bucket']}/broken/bad.parquet"]


@pytest.mark.parametrize("path", ["no-such-bucket/data/", "no-such-bucket/data/*.parquet", "no-such-bucket"])
def test_a_missing_bucket_is_named_not_a_raw_storage_error(s3, path):
    with pytest.raises(sf.NotFoundError) as excinfo:
        sf.read_parquet(path, filesystem=s3["filesystem"])
    assert "no-such-bucket" in str(excinfo.value) and "Fix:" in str(excinfo.value)


def test_unreachable_storage_is_named_with_what_it_said():
    # Nothing listens on port 9 of loopback: the connection is refused at once.
    filesystem = pafs.S3FileSystem(
        endpoint_override="127.0.0.1:9", scheme="http", access_key="k", secret_key="s", region="us-east-1",
        connect_timeout=1, request_timeout=1, retry_strategy=pafs.AwsStandardS3RetryStrategy(max_attempts=1),
    )  # fmt: skip
    with pytest.raises(sf.StorageError) as excinfo:
        sf.read_parquet("some-bucket/data/*.parquet", filesystem=filesystem)
    assert "some-bucket/data" in str(excinfo.value) and "Found:" in str(excinfo.value)
    assert isinstance(excinfo.value, OSError)
