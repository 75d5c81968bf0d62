"""``streamfeed convert``: any source to sharded Parquet that reads back identically."""

import json
import os

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
    source = {
        "id": np.arange(500),
        "image": images,
        "emb": rng.random((500, 4), dtype=np.float32),
        "name": np.array([f"n{i}" for i in range(500)], dtype=object),
    }
    pq.write_table(chunk_to_table(source), tmp_path / "in.parquet", row_group_size=77)
    summary = convert_to_parquet(
        sf.read_parquet(tmp_path / "in.parquet"), tmp_path / "out", shard_rows=200, row_group_rows=64
    )
    assert summary.rows == 500 and len(summary.files) == 3
    assert [pq.ParquetFile(f).metadata.num_rows for f in summary.files] == [200, 200, 100]
    back = _everything(sf.read_parquet(tmp_path / "out"))
    for name, values in source.items():
        assert back[name].shape == values.shape and back[name].dtype == values.dtype, name
        assert np.array_equal(back[name], values), name


def test_cli_converts_a_hive_tree_and_reports_skipped_files(tmp_path, capsys):
    ids = np.arange(300)
    pads.write_dataset(
        pa.table({"id": ids, "x": ids / 2, "day": ids % 3}),
        tmp_path / "hive",
        format="parquet",
        partitioning=["day"],
        partitioning_flavor="hive",
    )
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


def test_image_folder_converts_to_encoded_bytes_that_decode_to_the_same_images(tmp_path, capsys):
    from PIL import Image

    from streamfeed.transforms import decode_images

    rng = np.random.default_rng(1)
    for label, name in enumerate(["ant", "bee"]):
        (tmp_path / "imgs" / name).mkdir(parents=True)
        for i in range(9 + 4 * label):
            pixels = rng.integers(0, 256, (30, 40, 3), dtype=np.uint8)
            suffix = ".jpg" if i % 2 else ".png"
            Image.fromarray(pixels).save(tmp_path / "imgs" / name / f"{i}{suffix}")
    assert main(["convert", str(tmp_path / "imgs"), str(tmp_path / "out"), "--json", "--quiet"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["rows"] == 22
    stored = pq.read_table(tmp_path / "out").schema
    assert stored.field("image_bytes").type == pa.binary() and "image" not in stored.names

    original = _everything(sf.read_images(tmp_path / "imgs", size=(16, 20)))
    converted = _everything(sf.read_parquet(tmp_path / "out").map(decode_images(size=(16, 20))))
    order = np.argsort(converted["path"])
    # paths are stored relative to the folder (test_convert_images_meta.py checks the rest of what is kept)
    assert list(converted["path"][order]) == [os.path.relpath(path, tmp_path / "imgs") for path in original["path"]]
    assert np.array_equal(converted["label"][order], original["label"])
    assert np.array_equal(converted["image"][order], original["image"])


def test_cli_converts_csv_to_tfrecord_that_reads_back_the_same_rows(tmp_path, capsys):
    import pandas as pd

    ids = np.arange(250)
    pd.DataFrame({"id": ids, "x": ids / 2}).to_csv(tmp_path / "in.csv", index=False)
    code = main(
        [
            "convert",
            str(tmp_path / "in.csv"),
            str(tmp_path / "out"),
            "--to",
            "tfrecord",
            "--shard-rows",
            "100",
            "--compression",
            "GZIP",
            "--json",
            "--quiet",
        ]
    )
    assert code == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["rows"] == 250 and len(summary["files"]) == 3
    assert all(path.endswith(".tfrecord.gz") for path in summary["files"])
    back = _everything(sf.read_tfrecord(tmp_path / "out"))
    assert np.array_equal(back["id"], ids)
    assert np.allclose(back["x"].reshape(-1), ids / 2)  # TFRecord floats are float32


def test_dates_and_timestamps_keep_their_types_through_a_conversion(tmp_path):
    """Sources yield dates as float64 seconds; the converted Parquet stores them as dates again."""
    source = tmp_path / "d.csv"
    source.write_text("day,at,x\n2026-01-02,2026-01-02T03:04:05Z,1\n2026-12-31,2026-12-31T23:59:59Z,2\n,,3\n")
    data = sf.read_csv(source, nulls="fill", fill={"day": float("nan"), "at": float("nan")})
    convert_to_parquet(data, tmp_path / "out")
    (shard,) = sorted((tmp_path / "out").glob("*.parquet"))
    table = pq.read_table(shard)
    assert pa.types.is_date32(table.schema.field("day").type)
    assert pa.types.is_timestamp(table.schema.field("at").type) and table.schema.field("at").type.tz == "UTC"
    assert [str(v) for v in table["day"].to_pylist()] == ["2026-01-02", "2026-12-31", "None"]
    back = next(iter(sf.read_parquet(tmp_path / "out", nulls="fill", fill=float("nan"))))
    original = next(iter(data))
    np.testing.assert_array_equal(back["day"], original["day"])
    np.testing.assert_array_equal(back["at"], original["at"])
