"""Stored vocabularies are capped (most frequent values kept, the cap recorded, a warning given), a
mostly-distinct text column (a date kept as text, an identifier) is not stored whole, and
distinct counts are integers."""

from __future__ import annotations

import datetime as dt
import json
import logging

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

import streamfeed as sf
from streamfeed.stats import Stats, compute_stats
from streamfeed.stats.accumulate import IDENTIFIER_VOCABULARY, VOCABULARY_CAP, looks_like_dates


def _dates_as_text(path, n: int = 2780) -> None:
    """~87 KB: dates written as text in a format no CSV reader takes for a date."""
    rng = np.random.default_rng(1)
    start = dt.datetime(2021, 1, 1)
    lines = ["date,value,city"]
    for i in range(n):
        moment = start + dt.timedelta(minutes=37 * i)
        lines.append(f"{moment:%m/%d/%Y %H:%M},{rng.random():.6f},{['paris', 'lyon', 'nice'][i % 3]}")
    path.write_text("\n".join(lines) + "\n")


def test_a_date_kept_as_text_gets_a_truncated_vocabulary_and_a_hint(tmp_path, caplog):
    _dates_as_text(tmp_path / "d.csv")
    assert 80_000 < (tmp_path / "d.csv").stat().st_size < 90_000
    with caplog.at_level(logging.WARNING, logger="streamfeed"):
        stats = compute_stats(sf.read_csv(tmp_path / "d.csv"))
    column = stats["date"]
    assert column.kind == "categorical" and column.distinct == 2780
    assert column.vocabulary_truncated is True and column.vocabulary_cap == IDENTIFIER_VOCABULARY
    assert len(column.vocabulary) == IDENTIFIER_VOCABULARY and column.oov_count == 2780 - IDENTIFIER_VOCABULARY
    city = stats["city"]
    assert city.vocabulary_truncated is False and dict(city.vocabulary) == {"paris": 927, "lyon": 927, "nice": 926}
    warning = next(w for w in stats.warnings if "'date'" in w)
    assert "2,780 distinct values in 2,780" in warning and "looks like dates" in warning and "column_types" in warning
    assert "not in ISO 8601" in warning  # column_types alone would not parse 01/31/2021: the hint says so
    assert not any("'city'" in w for w in stats.warnings)
    assert any("'date'" in record.getMessage() for record in caplog.records)
    stats.save(tmp_path / "s.json")
    size = (tmp_path / "s.json").stat().st_size
    # 157,134 bytes (103,365 for "date") when the whole column was stored as a vocabulary; what is
    # left is mostly the exact quantile sample of "value" (every value, base64: ~30 KB)
    assert size < 40_000, size
    assert len(json.dumps(json.loads((tmp_path / "s.json").read_text())["columns"]["date"], indent=1)) < 6_000
    loaded = Stats.load(tmp_path / "s.json")
    assert loaded.warnings == stats.warnings and loaded["date"].vocabulary_cap == IDENTIFIER_VOCABULARY
    assert loaded.to_dict() == stats.to_dict()


def test_iso_dates_kept_as_text_get_the_column_types_hint(tmp_path):
    start = dt.datetime(2021, 1, 1)
    text = [(start + dt.timedelta(minutes=37 * i)).isoformat() for i in range(2000)]
    pq.write_table(pa.table({"at": text}), tmp_path / "t.parquet")
    stats = compute_stats(sf.read_parquet(tmp_path / "t.parquet"))
    (warning,) = stats.warnings
    assert "looks like dates (e.g. '2021-" in warning and "column_types={'at': 'timestamp[s]'}" in warning
    assert "not in ISO" not in warning and stats["at"].vocabulary_truncated


def test_looks_like_dates():
    for text in (
        "2021-01-31",
        "01/31/2021 12:00",
        "31.01.2021",
        "2021-01-31T12:00:00+01:00",
        "Jan 31, 2021",
        "31 Jan 2021",
    ):
        assert looks_like_dates([text]) == text, text
    for text in ("user-12", "12.5", "paris", "2021", "1/2"):
        assert looks_like_dates([text]) is None, text


def test_a_column_past_the_cap_keeps_its_most_frequent_values(tmp_path):
    values = np.repeat(np.arange(300), np.arange(300) + 1)  # value v appears v + 1 times
    rng = np.random.default_rng(2)
    pq.write_table(pa.table({"k": rng.permutation(values)}), tmp_path / "k.parquet", row_group_size=5000)
    stats = compute_stats(sf.read_parquet(tmp_path / "k.parquet"), categorical=["k"], vocabulary_cap=50)
    column = stats["k"]
    assert [value for value, _ in column.vocabulary] == list(range(299, 249, -1))
    assert [count for _, count in column.vocabulary] == list(range(300, 250, -1))
    assert column.vocabulary_truncated is True and column.vocabulary_cap == 50 and column.vocabulary_exact is True
    assert column.oov_count == len(values) - sum(range(251, 301)) and column.distinct == 300
    kept = sum(range(251, 301)) / len(values)
    warning = next(w for w in stats.warnings if "'k'" in w)
    assert "300 distinct values" in warning and "50 most frequent" in warning and f"{kept:.1%}" in warning


def test_the_default_cap_and_named_categorical_columns(tmp_path):
    n = 4000
    ids = np.array([f"user-{i}" for i in range(n)], dtype=object)  # every value distinct
    pq.write_table(pa.table({"u": ids, "v": ids}), tmp_path / "u.parquet")
    stats = compute_stats(sf.read_parquet(tmp_path / "u.parquet"), categorical=["v"])
    assert VOCABULARY_CAP == 10_000
    assert len(stats["u"].vocabulary) == IDENTIFIER_VOCABULARY and stats["u"].vocabulary_truncated
    assert len(stats["v"].vocabulary) == n and stats["v"].vocabulary_truncated is False  # named: kept up to the cap
    assert stats["v"].vocabulary_cap == VOCABULARY_CAP
    assert not any("looks like dates" in w for w in stats.warnings)


def test_small_mostly_distinct_columns_are_kept_whole(tmp_path):
    names = np.array([f"n{i % 600}" for i in range(1000)], dtype=object)  # 600 distinct of 1,000: below the floor
    pq.write_table(pa.table({"name": names}), tmp_path / "s.parquet")
    column = compute_stats(sf.read_parquet(tmp_path / "s.parquet"))["name"]
    assert len(column.vocabulary) == 600 and column.vocabulary_truncated is False


def test_distinct_counts_are_integers(tmp_path):
    n = 5000
    rng = np.random.default_rng(3)
    pq.write_table(
        pa.table({"i": rng.integers(0, 777, n), "f": rng.random(n), "s": rng.choice(["a", "b"], n)}),
        tmp_path / "p.parquet",
    )
    for mode in ("categorical", "all"):
        stats = compute_stats(sf.read_parquet(tmp_path / "p.parquet"), distinct=mode)
        assert type(stats["i"].distinct) is int and type(stats["s"].distinct) is int and stats["s"].distinct == 2
        assert stats["f"].distinct is None if mode == "categorical" else type(stats["f"].distinct) is int
        data = json.loads(stats.to_json())
        assert type(data["columns"]["i"]["distinct"]) is int
    old = stats.to_dict()
    old["columns"]["i"]["distinct"] = 776.4  # files written before distinct counts were integers
    assert Stats.from_dict(old)["i"].distinct == 776
