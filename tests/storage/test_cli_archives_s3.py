"""The commands on a zip archive of class folders and on WebDataset shards in S3 (SeaweedFS on loopback), issue 26.

The real ``streamfeed`` script (``tests/cli/_console.py``) is given the
endpoint and the credentials as a user's shell gives them
(``AWS_ENDPOINT_URL``, ``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``):
``inspect`` of ``s3://bucket/images.zip`` reads the central directory and
the members' headers by range, and ``convert`` writes the table it writes
for the local archive.
"""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
from _seaweed import KEY, REGION, SECRET
from PIL import Image

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "cli"))
from _console import environment, streamfeed  # noqa: E402 - the CLI tests' runner, by path

from factories.zip import zip_folder  # noqa: E402


def _env(seaweed) -> dict[str, str]:
    return environment(
        AWS_ENDPOINT_URL=seaweed.endpoint,
        AWS_ACCESS_KEY_ID=KEY,
        AWS_SECRET_ACCESS_KEY=SECRET,
        AWS_DEFAULT_REGION=REGION,
        AWS_REGION=REGION,
    )


def _ok(env: dict[str, str], *args: object):
    proc = streamfeed(*args, env=env)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    return proc


def test_a_zip_in_s3_is_inspected_and_converted_as_the_local_archive(seaweed, bucket, tmp_path):
    rng = np.random.default_rng(1)
    for name, count in (("cat", 3), ("dog", 2)):
        (tmp_path / "folder" / name).mkdir(parents=True)
        for index in range(count):
            pixels = rng.integers(0, 255, (8, 8, 3), dtype=np.uint8)
            Image.fromarray(pixels).save(tmp_path / "folder" / name / f"{index}.png")
    archive = zip_folder(tmp_path / "folder", tmp_path / "images.zip")
    seaweed.client().put_object(Bucket=bucket, Key="data/images.zip", Body=archive.read_bytes())
    env = _env(seaweed)
    uri = f"s3://{bucket}/data/images.zip"
    report = json.loads(_ok(env, "inspect", uri, "--json", "--quiet").stdout)
    assert report["format"] == "zip" and report["rows"] == 5 and report["details"]["classes"] == {"cat": 3, "dog": 2}
    assert report["total_bytes"] == archive.stat().st_size
    _ok(env, "convert", uri, tmp_path / "from-s3", "--quiet")
    _ok(env, "convert", archive, tmp_path / "from-local", "--quiet")
    remote = pq.read_table(tmp_path / "from-s3" / "part-00000.parquet").to_pydict()
    local = pq.read_table(tmp_path / "from-local" / "part-00000.parquet").to_pydict()
    assert remote == local and remote["path"][0] == "cat/0.png"


def test_webdataset_shards_in_s3_are_inspected_with_exact_counts(seaweed, bucket, tmp_path):
    import webdataset as wds

    for shard in range(2):
        buffer = io.BytesIO()
        with wds.TarWriter(buffer) as out:
            for i in range(4):
                png = io.BytesIO()
                Image.fromarray(np.full((8, 8, 3), i, np.uint8)).save(png, format="PNG")
                out.write({"__key__": f"s{shard}_{i}", "png": png.getvalue(), "cls": i % 2})
        seaweed.client().put_object(Bucket=bucket, Key=f"shards/shard-{shard}.tar", Body=buffer.getvalue())
    env = _env(seaweed)
    report = json.loads(_ok(env, "inspect", f"s3://{bucket}/shards/", "--format", "webdataset", "--json").stdout)
    assert report["rows"] == 8 and report["rows_exact"] and report["file_count"] == 2
    shard = json.loads(_ok(env, "inspect", f"s3://{bucket}/shards/shard-1.tar", "--json").stdout)
    assert shard["format"] == "webdataset" and shard["columns"][0]["samples"][:2] == ["s1_0", "s1_1"]
