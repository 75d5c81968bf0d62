"""``storage_options`` on every reader that takes URIs, against SeaweedFS on loopback.

Each format is written locally by a real writer, uploaded, read back through
``s3://`` with ``storage_options`` and compared row for row with the local
read of the same file. ``read_hdf5`` and ``read_numpy`` read local files only
(h5py, NumPy memory maps), so they take no ``storage_options``; ``read_images``
takes them for a zip archive (``test_zip_s3.py``), image folders being local.
"""

from __future__ import annotations

import numpy as np
import pyarrow.csv as pacsv
import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pytest
from _storage_data import numbered_table, storage_options

import streamfeed as sf


def _rows(dataset: sf.Dataset) -> dict[str, np.ndarray]:
    with dataset.batch(128).iter_epoch(0) as epoch:
        batches = list(epoch)
    return {name: np.concatenate([batch[name] for batch in batches]) for name in batches[0]}


def _upload(seaweed, bucket: str, local_dir, prefix: str) -> None:
    client = seaweed.client()
    for path in sorted(local_dir.iterdir()):
        if path.is_file():
            client.put_object(Bucket=bucket, Key=f"{prefix}/{path.name}", Body=path.read_bytes())


def _write(kind: str, directory) -> None:
    directory.mkdir()
    table = numbered_table(0, 1000)
    if kind == "parquet":
        for part in range(2):
            pq.write_table(table.slice(part * 500, 500), directory / f"part-{part}.parquet", row_group_size=100)
    elif kind == "csv":
        pacsv.write_csv(table, directory / "rows.csv")
    else:
        sf.write_tfrecord([table.to_pydict() | {name: table[name].to_numpy() for name in table.column_names}],
                          str(directory / "rows-{shard:05d}-of-{shards:05d}.tfrecord"), shard_rows=400)  # fmt: skip


READERS = {"parquet": sf.read_parquet, "csv": sf.read_csv, "tfrecord": sf.read_tfrecord}


@pytest.mark.parametrize("kind", sorted(READERS))
def test_each_reader_reads_s3_as_it_reads_local_files(seaweed, bucket, tmp_path, kind):
    local = tmp_path / kind
    _write(kind, local)
    _upload(seaweed, bucket, local, f"data/{kind}")
    read = READERS[kind]
    expected = _rows(read(str(local)))
    remote = read(f"s3://{bucket}/data/{kind}/", storage_options=storage_options(seaweed.endpoint))
    assert remote.num_rows() == len(expected["id"]) == 1000
    found = _rows(remote)
    assert sorted(found) == sorted(expected)
    for name in expected:
        np.testing.assert_array_equal(found[name], expected[name], err_msg=name)


def test_unknown_storage_options_are_refused_by_name(seaweed):
    with pytest.raises(sf.ArgumentError, match="'endpoint'.*'retry'|'retry'.*'endpoint'") as excinfo:
        sf.read_parquet("s3://any/data/", storage_options={"endpoint": "x", "retry": 3, "key": "k"})
    assert "endpoint_url" in str(excinfo.value)  # what it accepts


@pytest.mark.parametrize(
    "options",
    [{"deadline": 0}, {"deadline": "60"}, {"cache": {"dir": "x"}}, {"cache": {"dir": "x", "max_bytes": -1}}],
)
def test_bad_storage_option_values_are_refused(options):
    with pytest.raises(sf.ArgumentError, match="storage_options"):
        sf.read_parquet("s3://any/data/", storage_options=options)


def test_storage_options_need_uris_and_no_filesystem(tmp_path):
    with pytest.raises(sf.ArgumentError, match="URIs"):
        sf.read_parquet(str(tmp_path), storage_options={"key": "k"})
    with pytest.raises(sf.ArgumentError, match="Both filesystem and storage_options"):
        sf.read_parquet("s3://any/data/", storage_options={"key": "k"}, filesystem=pafs.LocalFileSystem())
