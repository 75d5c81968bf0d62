"""An overwrite on object storage killed between two shards is refused by the reader, never served as a mix.

Object storage has no rename of a directory, so ``files/publish.py``
moves the shards of a remote output in one by one. A real writer process
(``_publish_driver.py``) overwriting a TFRecord set on a real S3 server
(SeaweedFS) is killed with SIGKILL after its second shard is moved: the old
and the new shards have the same names and sizes (ids of equal varint
width), so names and sizes cannot tell them apart. Reading must refuse the
directory, naming it, rather than serve two shards of each write.

Writing through ``pyarrow.fs.S3FileSystem`` needs a server that knows the
credentials: its uploads are signed, chunked and carry a trailing checksum,
which SeaweedFS refuses (signed, unknown key) or stores with the chunk
framing (anonymous) unless the key is one of its identities. So this module
runs its own server with one identity (``-s3.config``).
"""

from __future__ import annotations

import itertools
import json
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow.fs as pafs
import pytest
from _seaweed import KEY, REGION, SECRET, SeaweedServer

import streamfeed as sf
from streamfeed.errors import ManifestMismatchError

DRIVER = Path(__file__).with_name("_publish_driver.py")
ROWS, SHARD_ROWS = 400, 100  # four shards
OLD, NEW = 1_000, 5_000  # first ids: both sets' ids are two-byte varints, so every shard has one size


_buckets = itertools.count()


class _SignedSeaweed(SeaweedServer):
    """The test server with one identity (``KEY``/``SECRET``), so that signed multipart uploads are accepted."""

    def command(self) -> list[str]:
        config = self.directory / "s3.json"
        identity = {"name": "streamfeed", "credentials": [{"accessKey": KEY, "secretKey": SECRET}]}
        identity["actions"] = ["Admin", "Read", "Write", "List", "Tagging"]
        config.write_text(json.dumps({"identities": [identity]}))
        return [*super().command(), f"-s3.config={config}"]


@pytest.fixture(scope="module")
def seaweed(tmp_path_factory: pytest.TempPathFactory):
    server = _SignedSeaweed(tmp_path_factory.mktemp("seaweedfs-signed"))
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def bucket(seaweed) -> str:
    name = f"streamfeed-publish-{next(_buckets)}"
    seaweed.client().create_bucket(Bucket=name)
    return name


def _filesystem(seaweed) -> pafs.S3FileSystem:
    return pafs.S3FileSystem(
        endpoint_override=f"127.0.0.1:{seaweed.ports['s3']}", scheme="http", access_key=KEY, secret_key=SECRET,
        region=REGION,
    )  # fmt: skip


def _ids(directory: str, fs: pafs.FileSystem) -> np.ndarray:
    with sf.read_tfrecord(directory, filesystem=fs).iter_epoch(0) as epoch:
        return np.sort(np.concatenate([np.asarray(batch["id"]).reshape(-1) for batch in epoch]))


def _overwrite_in_a_process(seaweed, destination: str, first: int, die_after: int) -> int:
    args = {
        "endpoint": f"127.0.0.1:{seaweed.ports['s3']}",
        "destination": destination,
        "first": first,
        "rows": ROWS,
        "shard_rows": SHARD_ROWS,
        "die_after": die_after,
    }
    done = subprocess.run(
        [sys.executable, str(DRIVER), json.dumps(args)], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode in (0, -signal.SIGKILL), done.stderr
    return done.returncode


def test_an_overwrite_killed_between_shards_is_refused_naming_the_output(seaweed, bucket):
    fs = _filesystem(seaweed)
    directory = f"{bucket}/set"
    old = sf.write_tfrecord(
        {"id": np.arange(OLD, OLD + ROWS)}, f"{directory}/part", shard_rows=SHARD_ROWS, filesystem=fs
    )
    sizes = {path: fs.get_file_info(path).size for path in old}
    assert np.array_equal(_ids(directory, fs), np.arange(OLD, OLD + ROWS))

    assert _overwrite_in_a_process(seaweed, f"{directory}/part", NEW, die_after=2) == -signal.SIGKILL
    assert {path: fs.get_file_info(path).size for path in old} == sizes  # same names, same sizes: a mix

    with pytest.raises(ManifestMismatchError, match="interrupted") as refused:
        _ids(directory, fs)
    assert f"Where: {directory}." in str(refused.value)  # names the output

    # writing it again (overwrite) replaces the interrupted output whole
    assert _overwrite_in_a_process(seaweed, f"{directory}/part", NEW, die_after=0) == 0
    assert np.array_equal(_ids(directory, fs), np.arange(NEW, NEW + ROWS))


def test_a_completed_overwrite_reads_the_new_rows(seaweed, bucket):
    fs = _filesystem(seaweed)
    directory = f"{bucket}/set"
    sf.write_tfrecord({"id": np.arange(OLD, OLD + ROWS)}, f"{directory}/part", shard_rows=SHARD_ROWS, filesystem=fs)
    sf.write_tfrecord(
        {"id": np.arange(NEW, NEW + ROWS)}, f"{directory}/part", shard_rows=SHARD_ROWS, filesystem=fs, overwrite=True
    )
    assert np.array_equal(_ids(directory, fs), np.arange(NEW, NEW + ROWS))
