"""Parquet on S3-compatible storage: a real S3 server (moto's) on loopback.

Objects are uploaded with boto3 (moto's multipart upload trips pyarrow's
writer) and read back through pyarrow's S3 filesystem, both given
explicitly and from an ``s3://`` URI with the endpoint in the environment.
"""

import io

import boto3
import moto.server as moto_server
import numpy as np
import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pytest

import streamfeed as sf

BUCKET = "streamfeed-test"


@pytest.fixture(scope="module")
def s3():
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    client = boto3.client(
        "s3", endpoint_url=endpoint, aws_access_key_id="key", aws_secret_access_key="secret", region_name="us-east-1"
    )
    client.create_bucket(Bucket=BUCKET)
    for index, name in enumerate(["data/part 0.parquet", "data/dé part 1.parquet"]):
        buffer = io.BytesIO()
        ids = np.arange(index * 500, (index + 1) * 500)
        pq.write_table(pa.table({"id": ids, "x": ids.astype("float32")}), buffer, row_group_size=100)
        client.put_object(Bucket=BUCKET, Key=name, Body=buffer.getvalue())
    client.put_object(Bucket=BUCKET, Key="broken/good.parquet", Body=_parquet_bytes(300))
    client.put_object(Bucket=BUCKET, Key="broken/bad.parquet", Body=b"id,x\n1,2\n")
    filesystem = pafs.S3FileSystem(
        endpoint_override=f"{host}:{port}", scheme="http", access_key="key", secret_key="secret", region="us-east-1"
    )
    yield {"endpoint": endpoint, "filesystem": filesystem}
    server.stop()


def _parquet_bytes(rows):
    buffer = io.BytesIO()
    pq.write_table(pa.table({"id": np.arange(rows)}), buffer, row_group_size=100)
    return buffer.getvalue()


def test_directory_on_s3_streams_every_row_once(s3):
    data = sf.read_parquet(f"{BUCKET}/data/", filesystem=s3["filesystem"]).shuffle(seed=1).batch(64)
    assert len(data) == -(-1000 // 64)
    with data.iter_epoch(0) as epoch:
        ids = np.concatenate([batch["id"] for batch in epoch])
    assert sorted(ids.tolist()) == list(range(1000))


def test_s3_uri_with_spaces_and_non_ascii(s3, monkeypatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "key")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", s3["endpoint"])
    data = sf.read_parquet(f"s3://{BUCKET}/data/dé part 1.parquet")
    assert data.num_rows() == 500
    assert data.source.fragments[0].key.endswith("dé part 1.parquet#rg=0")


def test_corrupt_object_is_named_or_skipped(s3):
    with pytest.raises(sf.CorruptFileError, match="broken/bad.parquet"):
        sf.read_parquet(f"{BUCKET}/broken/", filesystem=s3["filesystem"])
    data = sf.read_parquet(f"{BUCKET}/broken/", filesystem=s3["filesystem"], on_error="skip")
    assert data.num_rows() == 300
    assert [entry.path for entry in data.report.entries] == [f"{BUCKET}/broken/bad.parquet"]


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
