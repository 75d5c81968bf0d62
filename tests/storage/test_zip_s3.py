"""``read_images`` on a zip archive in S3 (SeaweedFS on loopback), through ``storage_options``, as read locally."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
from _storage_data import storage_options

import streamfeed as sf

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from factories.images import _write_tree  # noqa: E402 - the image factories, by path
from factories.zip import zip_folder  # noqa: E402


def _epoch(dataset: sf.Dataset) -> dict[str, np.ndarray]:
    with dataset.batch(32).iter_epoch(0) as epoch:
        batches = list(epoch)
    return {name: np.concatenate([batch[name] for batch in batches]) for name in batches[0]}


def test_a_zip_archive_on_s3_reads_as_it_reads_locally(seaweed, bucket, tmp_path):
    _write_tree(tmp_path / "tree")
    archive = zip_folder(tmp_path / "tree", tmp_path / "images.zip", shuffled=True)
    seaweed.client().put_object(Bucket=bucket, Key="zips/images.zip", Body=archive.read_bytes())
    local = _epoch(sf.read_images(archive, size=(8, 8), fragment_size=20).shuffle(2))
    remote_ds = sf.read_images(
        f"s3://{bucket}/zips/images.zip",
        size=(8, 8),
        fragment_size=20,
        storage_options=storage_options(seaweed.endpoint),
    )
    assert len(remote_ds) == 270 and remote_ds.source.label_map == {"ant": 0, "bee": 1, "cat": 2, "dog": 3, "eel": 4}
    remote = _epoch(remote_ds.shuffle(2))
    np.testing.assert_array_equal(remote["image"], local["image"])
    np.testing.assert_array_equal(remote["label"], local["label"])
    client = seaweed.client()
    client.put_object(Bucket=bucket, Key="zips/images.zip", Body=archive.read_bytes()[:-1] + b"!")  # same size
    again = sf.read_images(
        f"s3://{bucket}/zips/images.zip",
        size=(8, 8),
        fragment_size=20,
        storage_options=storage_options(seaweed.endpoint),
    )
    assert again.source.fingerprint() != remote_ds.source.fingerprint()  # the object's ETag is the archive's identity
