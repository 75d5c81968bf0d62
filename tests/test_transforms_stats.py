"""Transforms from stats (standardize, min-max, clip, vocabulary ids) against NumPy."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import streamfeed as sf
from _stats_reference import ExactStats, stats_of
from streamfeed.transforms.stats import clip_to_quantiles, min_max_scale, standardize, vocabulary_ids, vocabulary_lookup

ROWS = 1000


@pytest.fixture
def data(tmp_path):
    rng = np.random.default_rng(3)
    columns = {
        "a": rng.normal(5.0, 3.0, ROWS),
        "b": rng.integers(-50, 50, ROWS).astype("int32"),
        "const": np.full(ROWS, 7.5),
        "city": np.array(["paris", "rome", "oslo", "lima", "kyiv"], dtype=object)[
            rng.choice(5, ROWS, p=[0.4, 0.25, 0.2, 0.1, 0.05])
        ],
        "code": rng.choice([3, 11, 42, 7], ROWS, p=[0.1, 0.2, 0.3, 0.4]).astype("int64"),
    }
    path = tmp_path / "data.parquet"
    pq.write_table(pa.table(columns), path, row_group_size=128)
    return path, columns


def run(dataset) -> dict[str, np.ndarray]:
    with dataset.iter_epoch(0) as stream:
        chunks = list(stream)
    return {name: np.concatenate([chunk[name] for chunk in chunks]) for name in chunks[0]}


def test_standardize_and_min_max_match_numpy(data):
    path, columns = data
    dataset = sf.read_parquet(path)
    stats = stats_of(dataset, categorical=["city", "code"])
    out = run(dataset.map(standardize(stats, ["a", "b"])).map(min_max_scale(stats, "const")))
    for name in ("a", "b"):
        raw = columns[name].astype("float64")
        expected = (raw - raw.mean()) / raw.std()
        assert out[name].dtype == np.float32
        np.testing.assert_allclose(out[name], expected, rtol=1e-4, atol=1e-5)
    # A constant column (std 0, min == max) maps to 0 rather than dividing by zero.
    assert out["const"].dtype == np.float32 and np.all(out["const"] == 0)
    out = run(dataset.map(min_max_scale(stats, ["a", "b"])).map(standardize(stats, "const")))
    for name in ("a", "b"):
        raw = columns[name].astype("float64")
        np.testing.assert_allclose(out[name], (raw - raw.min()) / (raw.max() - raw.min()), rtol=1e-4, atol=1e-6)
        assert out[name].min() == pytest.approx(0.0, abs=1e-6) and out[name].max() == pytest.approx(1.0, abs=1e-6)
    assert np.all(out["const"] == 0)
    # Untouched columns pass through unchanged.
    assert out["city"].tolist() == columns["city"].tolist()


def test_nan_stays_nan():
    stats = ExactStats({"x": np.array([np.nan, 0.0, 1.0, 2.0, 3.0, 4.0])})
    chunk = {"x": np.array([np.nan, 1.0, 9.0])}
    assert np.isnan(standardize(stats, "x")(chunk)["x"][0])
    assert np.isnan(min_max_scale(stats, "x")(chunk)["x"][0])
    clipped = clip_to_quantiles(stats, "x", 0.0, 0.5)(chunk)["x"]
    assert np.isnan(clipped[0]) and clipped[1:].tolist() == [1.0, 2.0]


def test_clip_to_quantiles_uses_the_stats_bounds(data):
    path, columns = data
    dataset = sf.read_parquet(path)
    stats = stats_of(dataset, categorical=["city", "code"])
    out = run(dataset.map(clip_to_quantiles(stats, ["a", "b"], low=0.05, high=0.9)))
    for name in ("a", "b"):
        raw = columns[name].astype("float64")
        low, high = stats[name].quantile(0.05), stats[name].quantile(0.9)
        np.testing.assert_allclose(out[name], np.clip(raw, low, high).astype("float32"))
        # The bounds are within the sketch's rank error of the true quantiles.
        slack = stats[name].quantile_rank_error + 2 / ROWS
        assert abs(np.mean(raw <= low) - 0.05) <= slack + np.mean(raw == low)
        assert abs(np.mean(raw <= high) - 0.9) <= slack + np.mean(raw == high)
        assert out[name].dtype == np.float32
    with pytest.raises(ValueError):
        clip_to_quantiles(stats, "a", low=0.9, high=0.1)


def test_vocabulary_lookup_gives_stable_ids_in_frequency_order(data, tmp_path):
    path, columns = data
    dataset = sf.read_parquet(path)
    stats = stats_of(dataset, categorical=["city", "code"])
    assert [v for v, _ in stats["city"].vocabulary] == ["paris", "rome", "oslo", "lima", "kyiv"]
    out = run(dataset.map(vocabulary_lookup(stats, "city")).map(vocabulary_lookup(stats, "code", output="code_id")))
    ids = {"paris": 1, "rome": 2, "oslo": 3, "lima": 4, "kyiv": 5}
    assert out["city"].dtype == np.int64
    assert out["city"].tolist() == [ids[c] for c in columns["city"]]
    code_ids = {7: 1, 42: 2, 11: 3, 3: 4}
    assert out["code_id"].tolist() == [code_ids[c] for c in columns["code"]]
    assert out["code"].tolist() == columns["code"].tolist()
    # Values the stats never saw, and those beyond max_tokens, get the OOV id.
    other = tmp_path / "other.parquet"
    pq.write_table(pa.table({"city": ["rome", "berlin", None, "kyiv", "paris"]}), other)
    out = run(sf.read_parquet(other, nulls="fill", fill="").map(vocabulary_lookup(stats, "city", max_tokens=3, oov=-1)))
    assert out["city"].tolist() == [2, -1, -1, -1, 1]


def test_vocabulary_ids_against_a_dict_lookup():
    rng = np.random.default_rng(0)
    vocabulary = [f"w{i}" for i in rng.permutation(500)]
    words = np.array([f"w{i}" for i in rng.integers(0, 700, 5000)], dtype=object)
    words[::97] = None
    expected = {word: i + 1 for i, word in enumerate(vocabulary)}
    got = vocabulary_ids(vocabulary)(words)
    assert got.tolist() == [expected.get(word, 0) for word in words]
    as_bytes = np.array([w.encode() if w else b"" for w in words], dtype="S")
    assert vocabulary_ids(vocabulary)(as_bytes).tolist() == [expected.get(w, 0) if w else 0 for w in words]
    numbers = vocabulary_ids([5.5, -1.0, 3.0])(np.array([3.0, np.nan, 5.5, 2.0]))
    assert numbers.tolist() == [3, 0, 1, 0]
