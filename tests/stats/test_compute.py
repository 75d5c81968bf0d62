"""compute_stats over every source type, JSON round trip, staleness and thread-count independence."""

from __future__ import annotations

import json
import os

import h5py
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from PIL import Image

import streamfeed as sf
from streamfeed.errors import StreamfeedError
from streamfeed.stats import StaleStatsError, Stats, compute_stats

IDS = np.arange(700)


def _parquet(tmp_path):
    rng = np.random.default_rng(0)
    table = pa.table(
        {
            "id": IDS,
            "x": IDS / 2.0,
            "city": pa.array([["paris", "oslo", "lima"][i % 3] for i in IDS]),
            "y": IDS % 4 == 0,
            "v": pa.array(list(rng.standard_normal((700, 3))), pa.list_(pa.float64(), 3)),
        }
    )
    pq.write_table(table, tmp_path / "a.parquet", row_group_size=97)
    return sf.read_parquet(tmp_path / "a.parquet")


def _with_missing(chunk):
    """The readers raise on nulls by default; a map puts None and NaN back to count them."""
    city = chunk["city"].astype(object)
    city[chunk["id"] % 10 == 0] = None
    x = chunk["x"].copy()
    x[chunk["id"] % 7 == 1] = np.nan
    return {**chunk, "city": city, "x": x}


def _csv(tmp_path):
    pd.DataFrame({"id": IDS, "x": IDS / 2.0}).to_csv(tmp_path / "a.csv", index=False)
    return sf.read_csv(tmp_path / "a.csv")


def _hdf5(tmp_path):
    with h5py.File(tmp_path / "a.h5", "w") as f:
        f.create_dataset("x", data=IDS / 2.0, chunks=(97,))
        f.create_dataset("id", data=IDS, chunks=(97,))
    return sf.read_hdf5(tmp_path / "a.h5", columns={"x": "/x", "id": "/id"})


def _numpy(tmp_path):
    np.save(tmp_path / "x.npy", IDS / 2.0)
    np.save(tmp_path / "id.npy", IDS)
    return sf.read_numpy(tmp_path / "x.npy", arrays={"id": tmp_path / "id.npy"}, rows_per_fragment=97)


def _tfrecord(tmp_path):
    (tmp_path / "tf").mkdir()
    sf.write_tfrecord({"id": IDS, "x": (IDS / 2.0).astype(np.float32)}, tmp_path / "tf" / "part", shard_rows=300)
    return sf.read_tfrecord(tmp_path / "tf", features={"id": ("int64", ()), "x": ("float", ())})


@pytest.mark.parametrize("make", [_parquet, _csv, _hdf5, _numpy, _tfrecord], ids=lambda f: f.__name__[1:])
def test_every_tabular_source_gives_exact_counts_and_moments(tmp_path, make):
    dataset = make(tmp_path)
    stats = compute_stats(dataset, label="id" if make is not _parquet else "y", threads=2)
    assert stats.rows == 700
    x, ident = stats["x"], stats["id"]
    assert (x.kind, x.count, x.nulls, x.nans) == ("numeric", 700, 0, 0)
    assert (x.min, x.max, ident.min, ident.max) == (0.0, 349.5, 0, 699)
    assert x.mean == pytest.approx((IDS / 2.0).mean(), rel=1e-12)
    assert x.variance == pytest.approx((IDS / 2.0).var(), rel=1e-12)
    assert abs(x.quantile(0.5) - 174.75) <= 350 * x.quantile_rank_error + 0.5
    assert abs(ident.distinct - 700) < 0.1 * 700


def test_parquet_strings_nulls_lists_and_label(tmp_path):
    stats = compute_stats(_parquet(tmp_path).map(_with_missing), label="y", threads=3)
    x = stats["x"]
    finite = (IDS / 2.0)[IDS % 7 != 1]
    assert (x.nans, x.count, x.nulls) == (100, 600, 0)
    assert x.mean == pytest.approx(finite.mean(), rel=1e-12) and x.variance == pytest.approx(finite.var(), rel=1e-12)
    city = stats["city"]
    assert city.kind == "categorical" and city.nulls == 70 and city.count == 630
    assert city.vocabulary_exact and city.oov_count == 0
    truth = pd.Series([["paris", "oslo", "lima"][i % 3] for i in IDS if i % 10]).value_counts().to_dict()
    assert dict(city.vocabulary) == truth
    assert city.vocabulary == sorted(city.vocabulary, key=lambda pair: (-pair[1], pair[0]))
    assert stats.label_counts == {False: 525, True: 175}
    assert stats["v"].count == 2100  # fixed-size lists: all values


def test_images_give_per_channel_mean_and_std(tmp_path):
    root = tmp_path / "tree"
    pixels = []
    for name, count in (("ant", 5), ("bee", 9)):
        (root / name).mkdir(parents=True)
        for number in range(count):
            image = np.random.default_rng(number + 10 * count).integers(0, 256, (6, 6, 3), dtype=np.uint8)
            pixels.append(image)
            Image.fromarray(image).save(root / name / f"{number}.png")
    dataset = sf.read_images(root, size=(6, 6), fragment_size=4)
    stats = compute_stats(dataset, label="label", threads=2)
    image = stats["image"]
    everything = np.stack(pixels).reshape(-1, 3).astype(np.float64)
    assert image.kind == "image" and image.count == 14
    np.testing.assert_allclose(image.channel_mean, everything.mean(axis=0), rtol=1e-12)
    np.testing.assert_allclose(image.channel_std, everything.std(axis=0), rtol=1e-12)
    assert image.image_sizes is None  # decoded images all have the requested size
    assert sum(stats.label_counts.values()) == 14 and sorted(stats.label_counts.values()) == [5, 9]


def test_json_round_trip_keeps_values_types_and_quantiles(tmp_path):
    stats = compute_stats(_parquet(tmp_path), label="y", categorical=["id"], max_vocabulary=50)
    path = tmp_path / "stats.json"
    stats.save(path)
    data = json.loads(path.read_text())
    assert data["version"] == 1 and data["rows"] == 700 and data["source"]["fingerprint"]["format"] == "parquet"
    assert data["source"]["files"][0]["size"] == os.path.getsize(tmp_path / "a.parquet")
    again = Stats.load(path)
    assert again.to_dict() == stats.to_dict()
    assert again.label_counts == {False: 525, True: 175}
    assert again["id"].vocabulary_exact is False and all(type(v) is int for v, _ in again["id"].vocabulary)
    assert again["x"].quantiles(10) == stats["x"].quantiles(10)
    assert again["x"].std == pytest.approx(np.std(IDS / 2.0))


def test_a_rewritten_file_makes_the_stats_stale(tmp_path):
    dataset = _numpy(tmp_path)
    stats = compute_stats(dataset)
    stats.save(tmp_path / "s.json")
    Stats.load(tmp_path / "s.json").check_source(dataset)  # fresh: no error
    np.save(tmp_path / "x.npy", np.arange(800) / 2.0)
    with pytest.raises(StaleStatsError, match="x.npy changed size") as caught:
        Stats.load(tmp_path / "s.json").check_source(dataset)
    assert isinstance(caught.value, StreamfeedError) and isinstance(caught.value, ValueError)
    os.utime(tmp_path / "id.npy", ns=(0, 0))
    with pytest.raises(StaleStatsError, match="id.npy was modified"):
        stats.check_source(dataset)


def test_the_result_does_not_depend_on_the_thread_count(tmp_path):
    rng = np.random.default_rng(5)
    n = 3000
    a = rng.standard_normal(n) * 1e6 + 1e9
    table = pa.table({"a": a, "b": rng.integers(0, 50, n), "s": [f"k{i}" for i in rng.integers(0, 30, n)]})
    pq.write_table(table, tmp_path / "t.parquet", row_group_size=111)
    dataset = sf.read_parquet(tmp_path / "t.parquet").map(lambda c: {**c, "a": np.where(c["b"] == 7, np.nan, c["a"])})
    # a sample smaller than the data, so the position-hashed selection matters
    runs = [
        compute_stats(dataset, threads=t, categorical=["b"], max_vocabulary=20, quantile_sample=500).to_dict()
        for t in (1, 2, 4)
    ]
    assert runs[0]["columns"]["a"]["quantile_points"] and runs[0]["columns"]["a"]["quantile_sample_size"] == 500
    texts = [json.dumps(run, sort_keys=True) for run in runs]
    assert texts[0] == texts[1] == texts[2]  # everything, quantiles included


def test_quantiles_are_identical_between_thread_counts_and_within_the_bound(tmp_path):
    values = np.random.default_rng(2).standard_normal(60_000)
    pq.write_table(pa.table({"a": values, "i": np.arange(values.size)}), tmp_path / "q.parquet", row_group_size=4000)
    dataset = sf.read_parquet(tmp_path / "q.parquet").map(
        lambda c: {**c, "a": np.where(c["i"] % 97 == 0, np.nan, c["a"])}
    )
    values = np.where(np.arange(values.size) % 97 == 0, np.nan, values)
    one, four = (compute_stats(dataset, threads=t, quantile_sample=5000)["a"] for t in (1, 4))
    assert one.quantiles(100) == four.quantiles(100)
    finite = np.sort(values[~np.isnan(values)])
    bound = one.quantile_rank_error
    assert one.quantile_sample_size == 5000 and 0.02 < bound < 0.03  # DKW at n=5000, 99 %
    for q in np.linspace(0, 1, 101):
        value = one.quantile(float(q))
        low = np.searchsorted(finite, value, side="left") / finite.size
        high = np.searchsorted(finite, value, side="right") / finite.size
        assert low - bound <= q <= high + bound, (q, value, low, high)


def test_kll_quantiles_and_distinct_options(tmp_path):
    values = np.random.default_rng(4).standard_normal(20_000)
    pq.write_table(pa.table({"a": values, "i": np.arange(20_000) % 777}), tmp_path / "o.parquet", row_group_size=3000)
    dataset = sf.read_parquet(tmp_path / "o.parquet")
    default = compute_stats(dataset)
    assert default["a"].distinct is None and abs(default["i"].distinct - 777) < 0.1 * 777  # floats: opt-in
    # the sample is the whole column: only the stored 1024-point grid's error remains
    assert default["a"].quantile_rank_error == pytest.approx(1 / 2048 + 1 / 20_000)
    assert (
        default["a"].quantile(0.5) == np.sort(values)[10_000] and default["a"].quantile(0.25) == np.sort(values)[5_000]
    )
    everything = compute_stats(dataset, distinct="all", quantiles="kll")
    assert abs(everything["a"].distinct - 20_000) < 0.1 * 20_000
    assert everything["a"].kll and everything["a"].quantile_method == "kll"
    assert (
        abs(np.searchsorted(np.sort(values), everything["a"].quantile(0.5)) / 20_000 - 0.5)
        <= everything["a"].quantile_rank_error
    )
    bare = compute_stats(dataset, quantiles="none", distinct="none")
    assert bare["i"].distinct is None and bare["a"].mean == default["a"].mean
    with pytest.raises(ValueError, match="no quantile summary"):
        bare["a"].quantile(0.5)
    with pytest.raises(ValueError, match="quantiles must be"):
        compute_stats(dataset, quantiles="tdigest")
