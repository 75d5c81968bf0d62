"""``streamfeed convert``: any source to sharded Parquet that reads back identically."""

import json

import numpy as np
import pyarrow as pa
import pyarrow.dataset as pads
import pyarrow.parquet as pq
import pytest

import streamfeed as sf
from streamfeed.cli import main
from streamfeed.convert import chunk_to_table, convert_to_parquet


def _everything(dataset):
    with dataset.iter_epoch(0) as epoch:
        batches = list(epoch)
    return {name: np.concatenate([b[name] for b in batches]) for name in batches[0]}


def test_nd_columns_and_strings_round_trip_exactly(tmp_path):
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, (500, 6, 5, 3), dtype=np.uint8)
    source = {"id": np.arange(500), "image": images, "emb": rng.random((500, 4), dtype=np.float32),
              "name": np.array([f"n{i}" for i in range(500)], dtype=object)}
    pq.write_table(chunk_to_table(source), tmp_path / "in.parquet", row_group_size=77)
    summary = convert_to_parquet(sf.read_parquet(tmp_path / "in.parquet"), tmp_path / "out", shard_rows=200, row_group_rows=64)
    assert summary.rows == 500 and len(summary.files) == 3
    assert [pq.ParquetFile(f).metadata.num_rows for f in summary.files] == [200, 200, 100]
    back = _everything(sf.read_parquet(tmp_path / "out"))
    for name, values in source.items():
        assert back[name].shape == values.shape and back[name].dtype == values.dtype, name
        assert np.array_equal(back[name], values), name


def test_cli_converts_a_hive_tree_and_reports_skipped_files(tmp_path, capsys):
    ids = np.arange(300)
    pads.write_dataset(pa.table({"id": ids, "x": ids / 2, "day": ids % 3}), tmp_path / "hive", format="parquet",
                       partitioning=["day"], partitioning_flavor="hive")
    (tmp_path / "hive" / "day=9").mkdir()
    (tmp_path / "hive" / "day=9" / "broken.parquet").write_bytes(b"nope")
    code = main(["convert", str(tmp_path / "hive"), str(tmp_path / "out"), "--on-error", "skip", "--json", "--quiet"])
    assert code == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["rows"] == 300
    assert [e["path"].endswith("broken.parquet") for e in summary["skipped"]["entries"]] == [True]
    back = _everything(sf.read_parquet(tmp_path / "out"))
    order = np.argsort(back["id"])
    assert np.array_equal(back["id"][order], ids) and np.array_equal(back["day"][order], ids % 3)


def test_cli_refuses_an_unknown_format(tmp_path):
    (tmp_path / "data.xyz").write_text("?")
    with pytest.raises(ValueError, match="Cannot tell the format"):
        main(["convert", str(tmp_path / "data.xyz"), str(tmp_path / "out"), "--quiet"])
