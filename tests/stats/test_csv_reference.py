"""The statistics of a CSV with strings, nulls and numbers match those of the implementation before issue 28's speed-up.

``data/csv_reference.json`` holds what ``compute_stats`` gave at commit
268efad (strings counted with ``collections.Counter`` over NumPy object
arrays, HyperLogLog over every integer value): vocabularies and their
counts, null/NaN counts, min/max, distinct counts and the quantile samples
must be the same (each column's kept as a digest of their JSON, so the file
is a few kilobytes, not the 410 KB of the statistics), moments equal to
rounding (kept as values). The CSV is written by pandas
from a seeded generator, read in several fragments, and a ``map`` puts
None into the string column and NaN into a float column (the readers raise
on nulls by default). Regenerate the reference only from an implementation
known to be right: ``python tests/stats/test_csv_reference.py``.
"""

from __future__ import annotations

import hashlib
import json
import math
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import streamfeed as sf

REFERENCE = Path(__file__).with_name("data") / "csv_reference.json"
ROWS = 30_000
CASES = {
    "defaults": {"label": "flag"},
    "categorical_user_all_distinct": {"label": "flag", "categorical": ["user"], "distinct": "all"},
    # a sample smaller than a fragment (positions pre-filtered by the merged threshold) and a
    # vocabulary past max_vocabulary (counts in the frequent-items sketch)
    "small_sample_and_vocabulary": {"quantile_sample": 5_000, "max_vocabulary": 200},
    # without the map: the pass reads the fragments with no per-fragment op (no None then)
    "without_map": {"label": "flag", "map": False},
}


def write_csv(path: Path) -> Path:
    """The test CSV: a 300-value string column (quoted and non-ASCII values among them), ints of a
    small and of a wide range, negative ints, floats, a 0/1 label, dates as text and a mostly-distinct
    text column."""
    rng = np.random.default_rng(28)
    cities = [f"city {i}" for i in range(290)] + ["São Paulo", "Zürich", 'say "hi"', "a,b", "Kraków"]
    cities += ["", " lead", "trail ", "ü" * 3, "日本"]
    pd.DataFrame(
        {
            "city": np.array(cities, dtype=object)[rng.zipf(1.3, ROWS) % len(cities)],
            "user": rng.integers(0, 2_000, ROWS),
            "big": rng.integers(-(2**62), 2**62, ROWS),
            "neg": rng.integers(-50, 5, ROWS),
            "price": np.round(rng.gamma(2.0, 10.0, ROWS), 3),
            "flag": rng.integers(0, 2, ROWS),
            "day": pd.to_datetime(rng.integers(0, 365, ROWS), unit="D", origin="2024-01-01").strftime("%Y-%m-%d"),
            "code": [f"id-{v:x}" for v in rng.integers(0, 10**9, ROWS)],
            "path": [f"images/{v}.jpg" for v in rng.integers(0, 500, ROWS)],  # an identifier by its name
        }
    ).to_csv(path, index=False)
    return path


def _missing(chunk: dict) -> dict:
    """None in ``city`` and NaN in ``price`` on rows picked by their values (the same wherever the fragments fall)."""
    city = chunk["city"].astype(object)
    city[chunk["user"] % 17 == 0] = None
    price = chunk["price"].astype(np.float64)
    price[chunk["big"] % 11 == 0] = np.nan
    return {**chunk, "city": city, "price": price}


def digest(value: object) -> str:
    """A field's JSON (keys sorted) as a short SHA-256 digest: what the reference keeps of it."""
    return "sha256:" + hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()[:32]


def kept(result: dict) -> dict:
    """What the reference keeps of a result: moments as values, every other field as its digest."""
    out: dict = {key: digest(value) for key, value in result.items() if key != "columns"}
    out["columns"] = {name: _kept_column(column) for name, column in result["columns"].items()}
    return out


def _kept_column(column: dict) -> dict:
    exact = {field: value for field, value in column.items() if field not in ("mean", "variance")}
    return {"exact": digest(exact), "mean": column.get("mean"), "variance": column.get("variance")}


def compute(path: Path, options: dict) -> dict:
    options = dict(options)
    data = sf.read_csv(path, strings_can_be_null=False, fragment_bytes=200_000)
    if options.pop("map", True):
        data = data.map(_missing)
    stats = sf.compute_stats(data, threads=2, **options)
    result = json.loads(stats.to_json())
    result.pop("source")
    return result


@pytest.fixture(scope="module")
def csv_path(tmp_path_factory) -> Path:
    return write_csv(tmp_path_factory.mktemp("csv") / "mixed.csv")


def test_the_csv_has_several_fragments(csv_path):
    assert len(sf.read_csv(csv_path, fragment_bytes=200_000).source.fragments) >= 5


@pytest.mark.parametrize("case", sorted(CASES))
def test_stats_match_the_reference(csv_path, case):
    expected = json.loads(REFERENCE.read_text())[case]
    found = kept(compute(csv_path, CASES[case]))
    assert found.keys() == expected.keys()
    for key in expected:
        if key != "columns":
            assert found[key] == expected[key], key
    assert list(found["columns"]) == list(expected["columns"])
    for name, column in expected["columns"].items():
        got = found["columns"][name]
        assert got["exact"] == column["exact"], f"{name}: a statistic other than the moments differs"
        for field in ("mean", "variance"):
            if column[field] is not None:
                assert math.isclose(got[field], column[field], rel_tol=1e-12), (name, field, got[field], column[field])
            else:
                assert got[field] is None, (name, field)


def test_the_reference_covers_the_fast_paths(csv_path):
    """The cases hold what the speed-up must keep: nulls among strings, a vocabulary with counts,
    an identifier-like column's short vocabulary, integer distinct counts and sampled quantiles
    (read off this code's results, which the test above holds equal to the reference)."""
    expected = {case: compute(csv_path, CASES[case]) for case in ("defaults", "categorical_user_all_distinct")}
    expected["small_sample_and_vocabulary"] = compute(csv_path, CASES["small_sample_and_vocabulary"])
    columns = expected["defaults"]["columns"]
    assert columns["city"]["nulls"] > 0 and len(columns["city"]["vocabulary"]) > 250
    assert columns["code"]["vocabulary_cap"] == 100 and columns["code"]["vocabulary_truncated"]
    assert columns["user"]["distinct"] and columns["neg"]["distinct"] and columns["big"]["distinct"]
    assert columns["price"]["nans"] > 0 and columns["price"]["quantile_points"]
    assert columns["path"]["vocabulary"] is None and columns["path"]["count"] == 30_000
    assert expected["categorical_user_all_distinct"]["columns"]["user"]["vocabulary"]
    small = expected["small_sample_and_vocabulary"]["columns"]
    assert small["price"]["quantile_sample_size"] == 5_000 and not small["city"]["vocabulary_exact"]


if __name__ == "__main__":  # regenerates the reference (see the module docstring)
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        source = write_csv(Path(folder) / "mixed.csv")
        REFERENCE.parent.mkdir(exist_ok=True)
        results = {case: kept(compute(source, CASES[case])) for case in sorted(CASES)}
        REFERENCE.write_text(json.dumps(results, indent=1) + "\n")
    sys.exit(0)
