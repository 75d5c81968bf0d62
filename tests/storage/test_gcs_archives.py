"""Archives in object storage: a zip of class folders and WebDataset tar shards, in GCS (the emulator on
loopback) and S3 (SeaweedFS on loopback), read through ``storage_options`` as they read locally."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import webdataset as wds
from _gcs_emulator import BUCKET
from _storage_data import storage_options
from gcsfs.core import GCSFileSystem

import streamfeed as sf

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from factories.images import _write_tree  # noqa: E402 - the image factories, by path
from factories.zip import zip_folder  # noqa: E402

SHARDS, PER_SHARD = 3, 30


def _epoch(dataset: sf.Dataset, columns: tuple[str, ...]) -> dict[str, np.ndarray]:
    with dataset.shuffle(seed=4).batch(16).iter_epoch(1) as stream:
        batches = list(stream)
    return {name: np.concatenate([batch[name] for batch in batches]) for name in columns}


def _gcs_options(endpoint: str) -> dict:
    return {"endpoint_url": endpoint, "anon": True, "project": "test"}


def _shards(root: Path) -> list[Path]:
    root.mkdir(parents=True, exist_ok=True)
    paths = []
    for shard in range(SHARDS):
        path = root / f"shard-{shard:03d}.tar"
        with wds.TarWriter(str(path)) as writer:
            for i in range(shard * PER_SHARD, (shard + 1) * PER_SHARD):
                writer.write({"__key__": f"s{i:05d}", "npy": np.full(4, i, dtype=np.float32), "cls": i % 3})
        paths.append(path)
    return paths


def test_a_zip_archive_in_gcs_reads_as_it_reads_locally(gcs, gcs_proxy, tmp_path):
    _write_tree(tmp_path / "tree")
    archive = zip_folder(tmp_path / "tree", tmp_path / "images.zip", shuffled=True)
    client = GCSFileSystem(endpoint_url=gcs.endpoint, token="anon", project="test", skip_instance_cache=True)
    client.pipe(f"{BUCKET}/zips/images.zip", archive.read_bytes())
    local = _epoch(sf.read_images(archive, size=(8, 8), fragment_size=20), ("image", "label", "path"))
    remote_ds = sf.read_images(
        f"gs://{BUCKET}/zips/images.zip",
        size=(8, 8),
        fragment_size=20,
        storage_options=_gcs_options(gcs_proxy.endpoint),
    )
    assert len(remote_ds) == 270
    remote = _epoch(remote_ds, ("image", "label", "path"))
    np.testing.assert_array_equal(remote["image"], local["image"])
    np.testing.assert_array_equal(remote["label"], local["label"])


def test_webdataset_shards_in_gcs_read_as_they_read_locally(gcs, gcs_proxy, tmp_path):
    paths = _shards(tmp_path / "shards")
    client = GCSFileSystem(endpoint_url=gcs.endpoint, token="anon", project="test", skip_instance_cache=True)
    for path in paths:
        client.pipe(f"{BUCKET}/wds/{path.name}", path.read_bytes())
    expected = _epoch(sf.read_webdataset(tmp_path / "shards", fragment_samples=10), ("__key__", "npy", "cls"))
    remote = sf.read_webdataset(
        [f"gs://{BUCKET}/wds/{path.name}" for path in paths],
        fragment_samples=10,
        storage_options=_gcs_options(gcs_proxy.endpoint),
    )
    assert len(remote) == SHARDS * PER_SHARD
    found = _epoch(remote, ("__key__", "npy", "cls"))
    for name in expected:
        np.testing.assert_array_equal(found[name], expected[name], err_msg=name)


def test_webdataset_shards_in_s3_read_as_they_read_locally(seaweed, bucket, tmp_path):
    paths = _shards(tmp_path / "shards")
    for path in paths:
        seaweed.client().put_object(Bucket=bucket, Key=f"wds/{path.name}", Body=path.read_bytes())
    expected = _epoch(sf.read_webdataset(tmp_path / "shards", fragment_samples=10), ("__key__", "npy", "cls"))
    remote = sf.read_webdataset(
        [f"s3://{bucket}/wds/{path.name}" for path in paths],
        fragment_samples=10,
        storage_options=storage_options(seaweed.endpoint),
    )
    found = _epoch(remote, ("__key__", "npy", "cls"))
    for name in expected:
        np.testing.assert_array_equal(found[name], expected[name], err_msg=name)
