"""``inspect`` on files written by the real writers of each format: the facts and the warnings."""

from __future__ import annotations

import json
import os

import h5py
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
from PIL import Image

import streamfeed as sf
from streamfeed.inspect import inspect


def _columns(report):
    return {column.name: column for column in report.columns}


def test_parquet_footers_row_groups_nulls_and_pandas_index(tmp_path):
    frame = pd.DataFrame({"x": np.arange(1000) / 2, "y": np.arange(1000) % 3}, index=pd.RangeIndex(1000) + 0)
    frame.loc[[3, 7], "x"] = np.nan
    frame.index = np.arange(1000)  # a real (non-range) index: pandas writes __index_level_0__
    frame.to_parquet(tmp_path / "data.parquet", row_group_size=300, compression="zstd")
    report = inspect(tmp_path / "data.parquet", sample_rows=3)
    assert (report.format, report.rows, report.rows_exact, report.file_count) == ("parquet", 1000, True, 1)
    assert report.details["row_groups"]["count"] == 4
    assert report.details["row_groups"]["rows"] == {"min": 100, "median": 300, "max": 300}
    assert report.details["compression"] == ["ZSTD"]
    columns = _columns(report)
    assert columns["x"].nulls == 2 and columns["x"].nulls_exact
    assert columns["y"].samples == [0, 1, 2]
    assert "index_column" in report.warning_codes
    assert any("__index_level_0__" in w.message for w in report.warnings)
    assert report.total_bytes == os.path.getsize(tmp_path / "data.parquet")
    json.dumps(report.to_dict())


def test_parquet_monotonic_integer_column_is_index_like_but_a_shuffled_one_is_not(tmp_path):
    pq.write_table(
        pa.table({"row": np.arange(500), "v": np.random.default_rng(0).permutation(500)}), tmp_path / "a.parquet"
    )
    report = inspect(tmp_path / "a.parquet")
    flagged = [w.message for w in report.warnings if w.code == "index_column"]
    assert len(flagged) == 1 and "'row'" in flagged[0]


def test_parquet_hive_partitions(tmp_path):
    table = pa.table({"city": ["paris", "rome"] * 50, "v": np.arange(100, dtype=np.float64)})
    pq.write_to_dataset(table, tmp_path / "hive", partition_cols=["city"])
    report = inspect(tmp_path / "hive")
    assert report.rows == 100 and report.file_count == 2
    assert report.details["partition_columns"] == {"city": ["paris", "rome"]}
    assert _columns(report)["city"].type == "partition"
    assert "schema_drift" not in report.warning_codes


def test_parquet_schema_drift_is_named(tmp_path):
    pq.write_table(pa.table({"a": np.arange(10), "b": np.ones(10)}), tmp_path / "part-0.parquet")
    pq.write_table(pa.table({"a": np.arange(10).astype(np.float64), "c": np.ones(10)}), tmp_path / "part-1.parquet")
    report = inspect(tmp_path)
    assert "schema_drift" in report.warning_codes
    (drift,) = report.details["schema_drift"]
    assert "part-1.parquet" in drift and "+c" in drift and "-b" in drift and "a: int64 -> double" in drift


def test_row_groups_too_large_for_a_small_memory_limit(tmp_path):
    pq.write_table(
        pa.table({"x": np.random.default_rng(1).random((20_000,))}), tmp_path / "big.parquet", row_group_size=20_000
    )
    assert "row_group_too_large" not in inspect(tmp_path / "big.parquet").warning_codes  # fits the 512 MiB default
    report = inspect(tmp_path / "big.parquet", memory_limit=64 * 1024)
    warning = next(w for w in report.warnings if w.code == "row_group_too_large")
    assert "row group 0" in warning.message and "smaller row groups" in warning.message


def test_many_tiny_files_and_size_histogram(tmp_path):
    for index in range(120):
        pq.write_table(pa.table({"x": [float(index)]}), tmp_path / f"part-{index:04d}.parquet")
    report = inspect(tmp_path)
    assert report.file_count == 120 and report.rows == 120
    assert "tiny_files" in report.warning_codes
    assert sum(row["files"] for row in report.size_histogram) == 120
    assert len(report.files) == 50  # listed files are capped; the count is not


def test_csv_dialect_counts_and_sample_nulls(tmp_path):
    frame = pd.DataFrame({"a": np.arange(200) * 1.5, "b": ["x;y" if i % 2 else "z" for i in range(200)]})
    frame.loc[4, "a"] = np.nan
    frame.to_csv(tmp_path / "data.csv", sep=";")  # the index as an unnamed first column
    report = inspect(tmp_path / "data.csv")
    dialect = report.details["dialect"]
    assert dialect["delimiter"] == ";" and dialect["header"] is True and dialect["quoting"] is True
    assert dialect["encoding"] == "ascii" and dialect["compression"] is None
    assert report.rows == 200 and report.rows_exact
    columns = _columns(report)
    assert columns["a"].nulls == 1 and columns["b"].samples[:2] == ["z", "x;y"]
    assert "index_column" in report.warning_codes
    full = inspect(tmp_path / "data.csv", full=True)
    assert _columns(full)["a"].nulls_exact


def test_csv_gzip(tmp_path):
    pd.DataFrame({"a": [1, 2, 3], "b": [4.0, 5.0, 6.0]}).to_csv(tmp_path / "d.csv.gz", index=False)
    report = inspect(tmp_path / "d.csv.gz")
    assert report.rows == 3 and report.details["dialect"]["compression"] == "gzip"
    assert report.warnings == []


def test_hdf5_tree_chunking_and_compression(tmp_path):
    with h5py.File(tmp_path / "data.h5", "w") as handle:
        group = handle.create_group("train")
        group.create_dataset(
            "x", data=np.zeros((64, 3), dtype="f4"), chunks=(16, 3), compression="gzip", compression_opts=4
        )
        group.create_dataset("y", data=np.arange(64) % 2)
    report = inspect(tmp_path / "data.h5")
    assert report.rows == 64
    objects = {obj["path"]: obj for obj in report.details["tree"][0]["objects"]}
    assert objects["/train"]["kind"] == "group" and objects["/train"]["members"] == 2
    assert objects["/train/x"] == {
        "path": "/train/x",
        "kind": "dataset",
        "shape": [64, 3],
        "dtype": "float32",
        "chunks": [16, 3],
        "compression": "gzip",
        "compression_opts": 4,
        "shuffle": False,
    }
    assert objects["/train/y"]["chunks"] is None
    assert _columns(report)["train/x"].shape == [3]
    assert "index_column" not in report.warning_codes  # 0, 1, 0, 1 is not an index


def test_numpy_headers(tmp_path):
    np.save(tmp_path / "x.npy", np.asfortranarray(np.ones((40, 2), dtype=np.float32)))
    np.savez_compressed(tmp_path / "more.npz", a=np.zeros((7, 5)), b=np.arange(7))
    report = inspect(tmp_path / "x.npy")
    (array,) = report.details["arrays"]
    assert (array["dtype"], array["shape"], array["fortran_order"], report.rows) == ("float32", [40, 2], True, 40)
    packed = inspect(tmp_path / "more.npz")
    assert {a["name"]: a["compressed"] for a in packed.details["arrays"]} == {"a": True, "b": True}
    assert packed.rows == 7 and "index_column" in packed.warning_codes


def test_tfrecord_counts_and_inferred_features(tmp_path):
    chunk = {
        "x": np.ones((25, 3), dtype=np.float32),
        "label": np.arange(25) % 4,
        "name": np.array([b"ab"] * 25, dtype=object),
    }
    sf.write_tfrecord([chunk], tmp_path / "data.tfrecord", shard_rows=10)
    report = inspect(tmp_path)
    assert report.format == "tfrecord" and report.rows == 25 and report.file_count == 3
    assert sorted(report.details["records_per_file"].values()) == [5, 10, 10]
    assert report.details["features"] == {
        "x": {"kind": "float", "shape": [3]},
        "label": {"kind": "int64", "shape": []},
        "name": {"kind": "bytes", "shape": []},
    }
    assert _columns(report)["name"].samples[0] == "ab"


def _image_folder(root):
    rng = np.random.default_rng(0)
    (root / "cat").mkdir(parents=True)
    (root / "dog").mkdir()
    for index in range(12):
        Image.fromarray(rng.integers(0, 255, (20, 30, 3), dtype=np.uint8)).save(root / "cat" / f"{index}.jpg")
    Image.fromarray(rng.integers(0, 65535, (20, 30), dtype=np.uint16)).save(root / "dog" / "deep.png")
    Image.new("CMYK", (30, 20), (0, 0, 0, 0)).save(root / "dog" / "print.jpg")
    (root / "dog" / "notes.txt").write_text("not an image")
    (root / "dog" / "broken.jpg").write_bytes(b"\xff\xd8 this is not a jpeg")
    return root


def test_image_folder_classes_modes_and_bad_files(tmp_path):
    root = _image_folder(tmp_path / "images")
    report = inspect(root)
    details = report.details
    assert report.format == "images" and report.rows == 14
    assert details["classes"] == {"cat": 12, "dog": 2}
    assert details["modes"] == {"RGB": 12, "I;16": 1, "CMYK": 1}
    assert details["formats"] == {"JPEG": 13, "PNG": 1}
    assert details["image_sizes"] == {"30x20": 14}
    assert details["not_images"] == [str(root / "dog" / "notes.txt")]
    assert [bad["path"] for bad in details["undecodable"]] == [str(root / "dog" / "broken.jpg")]
    codes = report.warning_codes
    assert {"rare_class", "unreadable_files", "not_images", "mixed_image_modes"} <= set(codes)
    rare = next(w for w in report.warnings if w.code == "rare_class")
    assert "dog: 2" in rare.message and "cat" not in rare.message


def test_full_image_scan_finds_a_truncated_image_whose_header_is_fine(tmp_path):
    root = tmp_path / "flat"
    root.mkdir()
    Image.fromarray(np.random.default_rng(2).integers(0, 255, (64, 64, 3), dtype=np.uint8)).save(root / "ok.png")
    data = (root / "ok.png").read_bytes()
    (root / "cut.png").write_bytes(data[: len(data) // 2])
    assert inspect(root).details["undecodable"] == []
    full = inspect(root, full=True)
    assert [bad["path"] for bad in full.details["undecodable"]] == [str(root / "cut.png")]
    assert full.rows == 1 and full.rows_exact
