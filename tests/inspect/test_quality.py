"""The quality report's numbers against NumPy on small data written by real writers."""

from __future__ import annotations

import shutil

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import scipy.ndimage
import scipy.stats
from PIL import Image, ImageFilter

import streamfeed as sf
from streamfeed.inspect.image_quality import laplacian_variance
from streamfeed.inspect.quality import (
    HLL_LG_K,
    average_ranks,
    column_hash,
    quality_report,
    row_hash,
    spearman_with_order,
)


def test_null_nan_inf_rates_and_constant_columns_match_numpy(tmp_path):
    rng = np.random.default_rng(0)
    n = 3000
    x = rng.random(n)
    x[rng.choice(n, 30, replace=False)] = np.nan
    x[rng.choice(n, 12, replace=False)] = np.inf
    null_mask = rng.random(n) < 0.05
    ints = pa.array(rng.integers(0, 9, n), mask=null_mask)
    table = pa.table({"x": pa.array(x, from_pandas=False), "k": ints, "same": np.full(n, 7.5), "tag": ["a"] * n})
    pq.write_table(table, tmp_path / "q.parquet", row_group_size=700)
    report = quality_report(tmp_path / "q.parquet")
    columns = report.columns
    assert report.rows == n
    assert columns["x"]["nan_rate"] == pytest.approx(np.isnan(x).sum() / n)
    assert columns["x"]["inf_rate"] == pytest.approx(np.isinf(x).sum() / n)
    assert columns["x"]["null_rate"] == 0
    assert columns["k"]["null_rate"] == pytest.approx(null_mask.sum() / n) and columns["k"]["nan_rate"] == 0
    assert [name for name, column in columns.items() if column["constant"]] == ["same", "tag"]
    assert any("'same' is constant" in warning for warning in report.warnings)


def test_duplicate_estimate_is_within_the_sketch_error(tmp_path):
    rng = np.random.default_rng(1)
    distinct = rng.random((15_000, 2))
    repeated = distinct[rng.choice(15_000, 5_000)]  # 5,000 exact copies of earlier rows
    data = np.concatenate([distinct, repeated])
    data = data[rng.permutation(len(data))]
    pq.write_table(pa.table({"a": data[:, 0], "b": data[:, 1]}), tmp_path / "d.parquet", row_group_size=4096)
    duplicates = quality_report(tmp_path / "d.parquet").duplicates
    error = 1.04 / np.sqrt(2**HLL_LG_K) * 15_000  # one standard error of the distinct count
    assert abs(duplicates["estimated"] - 5_000) <= 4 * error
    low, high = duplicates["range_95"]
    assert low <= 5_000 <= high
    unique = quality_report(tmp_path / "d.parquet", max_rows=15_000)  # no copies among the first rows? count them
    first = data[:15_000]
    exact = 15_000 - len(np.unique(first, axis=0))
    assert abs(unique.duplicates["estimated"] - exact) <= 4 * error


def test_duplicates_of_array_rows_through_a_dataset(tmp_path):
    rows = np.arange(200 * 12, dtype=np.float32).reshape(200, 3, 4)
    rows[150:] = rows[:50]  # 50 duplicates
    np.save(tmp_path / "x.npy", rows)
    report = quality_report(sf.read_numpy(tmp_path / "x.npy"))
    assert report.rows == 200 and report.duplicates["estimated"] == 50  # exact at this size (the sketch's list mode)


def test_row_hash_tells_rows_apart_and_equal_rows_alike():
    chunk = {"s": np.array(["ab", "ab", "ba", "ab"], dtype=object), "v": np.array([1.0, 1.0, 1.0, -0.0])}
    h = row_hash(chunk)
    assert h[0] == h[1] and len({int(h[0]), int(h[2]), int(h[3])}) == 3
    assert column_hash(np.array([0.0]))[0] == column_hash(np.array([-0.0]))[0]


def test_average_ranks_and_spearman_match_scipy():
    values = np.random.default_rng(3).integers(0, 5, 300).astype(np.float64)
    assert np.allclose(average_ranks(values), scipy.stats.rankdata(values) - 1)
    assert spearman_with_order(values) == pytest.approx(scipy.stats.spearmanr(values, np.arange(300)).statistic)


def test_a_file_sorted_by_label_is_flagged_and_a_shuffled_one_is_not(tmp_path):
    rng = np.random.default_rng(4)
    label = np.repeat([0, 1, 2], 2000)
    feature = rng.normal(size=6000) + label  # correlated with the label, hence with the row order when sorted
    noise = rng.normal(size=6000)
    pq.write_table(
        pa.table({"f": feature, "noise": noise, "y": label}), tmp_path / "sorted.parquet", row_group_size=1000
    )
    order = rng.permutation(6000)
    pq.write_table(
        pa.table({"f": feature[order], "noise": noise[order], "y": label[order]}),
        tmp_path / "shuffled.parquet",
        row_group_size=1000,
    )
    ordered = quality_report(tmp_path / "sorted.parquet", label="y")
    shuffled = quality_report(tmp_path / "shuffled.parquet", label="y")
    assert ordered.row_order["y"] > 0.8 and ordered.row_order["f"] > 0.3 and abs(ordered.row_order["noise"]) < 0.1
    assert max(abs(rho) for rho in shuffled.row_order.values()) < 0.1
    assert any("'y' follows the row order" in w for w in ordered.warnings)
    assert not any("row order" in w for w in shuffled.warnings)
    assert ordered.label["counts"] == {0: 2000, 1: 2000, 2: 2000} and ordered.label["imbalance_ratio"] == 1.0


def test_label_imbalance_ratio(tmp_path):
    label = np.array([0] * 900 + [1] * 90 + [2] * 10)
    pq.write_table(pa.table({"y": label, "x": np.ones(1000)}), tmp_path / "imb.parquet")
    report = quality_report(tmp_path / "imb.parquet", label="y")
    keys, counts = np.unique(label, return_counts=True)
    assert report.label["counts"] == dict(zip(keys.tolist(), counts.tolist()))
    assert report.label["imbalance_ratio"] == pytest.approx(90.0)
    assert any("imbalanced" in w for w in report.warnings)


def test_csv_nulls_are_counted_before_any_null_policy(tmp_path):
    (tmp_path / "d.csv").write_text("a;b\n1;x\n;y\n3;\n4;z\n")
    report = quality_report(tmp_path / "d.csv")
    assert report.columns["a"]["null_rate"] == pytest.approx(0.25)
    assert report.rows == 4


def test_laplacian_variance_matches_scipy():
    image = np.random.default_rng(5).integers(0, 255, (40, 50)).astype(np.float64)
    assert laplacian_variance(image) == pytest.approx(scipy.ndimage.laplace(image)[1:-1, 1:-1].var())


def test_image_quality_blur_exposure_duplicates_and_bad_files(tmp_path):
    rng = np.random.default_rng(6)
    root = tmp_path / "imgs"
    root.mkdir()
    checker = (np.indices((64, 64)).sum(axis=0) // 4 % 2 * 255).astype(np.uint8)
    sharp = Image.fromarray(np.stack([checker] * 3, axis=-1))
    sharp.save(root / "sharp.png")
    sharp.filter(ImageFilter.GaussianBlur(3)).save(root / "blurred.png")
    for index in range(4):
        Image.fromarray(rng.integers(60, 200, (64, 64, 3), dtype=np.uint8)).save(root / f"normal{index}.png")
    Image.fromarray(np.full((64, 64, 3), 3, dtype=np.uint8)).save(root / "dark.png")
    Image.fromarray(np.full((64, 64), 252, dtype=np.uint8)).save(root / "white.png")  # mode L among RGB
    Image.fromarray(rng.integers(0, 255, (300, 300, 3), dtype=np.uint8)).save(root / "huge.png")
    shutil.copy(root / "normal0.png", root / "copy.png")
    (root / "bad.png").write_bytes(b"\x89PNG\r\n\x1a\n broken")
    report = quality_report(root)
    images = report.images
    blur = {m["path"].rsplit("/", 1)[-1]: m["blur"] for m in images["per_image"]}
    assert blur["sharp.png"] > 5 * blur["blurred.png"]
    assert images["near_black"] == [str(root / "dark.png")]
    assert images["near_white"] == [str(root / "white.png")]
    assert images["mode_outliers"] == [str(root / "white.png")]
    assert images["size_outliers"] == [str(root / "huge.png")]
    assert [bad["path"] for bad in images["undecodable"]] == [str(root / "bad.png")]
    assert report.duplicates["estimated"] == 1
    assert sorted(report.duplicates["groups"][0]) == [str(root / "copy.png"), str(root / "normal0.png")]
    assert report.rows == 10 and images["files"] == 11


def test_a_continuous_label_gets_moments_not_value_counts(tmp_path):
    rng = np.random.default_rng(3)
    y = rng.normal(2.0, 0.5, 5000)
    pq.write_table(pa.table({"f": rng.random(5000), "y": y}), tmp_path / "r.parquet", row_group_size=700)
    report = sf.quality_report(str(tmp_path / "r.parquet"), label="y")
    assert report.label["kind"] == "continuous" and "counts" not in report.label
    assert report.label["mean"] == pytest.approx(y.mean()) and report.label["std"] == pytest.approx(y.std())
    assert (report.label["min"], report.label["max"]) == (y.min(), y.max())


def test_image_counts_are_of_every_image_not_of_the_examples_kept(tmp_path):
    """Examples are capped at 50; counts (warnings, table, doctor) are of all (issue 23: "50 ... not RGB" of 408)."""
    root = tmp_path / "imgs"
    root.mkdir()
    for index in range(10):
        Image.fromarray(np.full((16, 16, 3), 120, dtype=np.uint8)).save(root / f"rgb{index}.png")
    for index in range(3):
        Image.fromarray(np.full((16, 16, 3), 120 + index, dtype=np.uint8)).save(root / f"rgb-extra{index}.png")
    gray = 60
    for index in range(gray):
        Image.fromarray(np.full((16, 16), 100 + index % 50, dtype=np.uint8)).save(root / f"gray{index}.png")
    for index in range(gray + 20):
        Image.fromarray(np.full((16, 16, 4), 120, dtype=np.uint8)).save(root / f"rgba{index}.png")
    report = quality_report(root)
    images = report.images
    assert images["modes"]["RGBA"] == gray + 20
    assert images["counts"]["mode_outliers"] == gray + 13 and len(images["mode_outliers"]) == 50
    assert any(warning.startswith(f"{gray + 13} image(s) are not RGBA like most") for warning in report.warnings)
