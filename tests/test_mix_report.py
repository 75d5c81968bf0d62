"""``MixedDataset.mixing_report``: what an epoch of a mixture realised, counted from the rows actually served."""

from __future__ import annotations

import collections

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import streamfeed as sf
from streamfeed.errors import ArgumentError


@pytest.fixture
def parts(tmp_path):
    """Components of 600, 210 and 90 rows; ids ``base + row`` say which component a row came from."""
    out = {}
    for i, (name, rows) in enumerate({"a": 600, "b": 210, "c": 90}.items()):
        path = tmp_path / f"{name}.parquet"
        pq.write_table(pa.table({"id": np.arange(rows, dtype="int64") + 10_000 * i}), path, row_group_size=50)
        out[name] = sf.read_parquet(path).shuffle(seed=i + 1)
    return out


def _by_component(batches) -> dict[str, int]:
    counts = collections.Counter((np.concatenate([b["id"] for b in batches]) // 10_000).tolist())
    return {name: counts[i] for i, name in enumerate("abc")}


def test_the_report_counts_what_was_served_part_way_and_at_the_end_of_an_epoch(parts):
    mixed = sf.mix(parts, weights={"a": 0.5, "b": 0.3, "c": 0.2}, samples_per_epoch=1000, seed=4).batch(64)
    with pytest.raises(ArgumentError, match="before any epoch"):
        mixed.mixing_report()
    with mixed.iter_epoch(1) as stream:
        first = [next(stream) for _ in range(5)]
        part = mixed.mixing_report()
        rest = list(stream)
    assert part["epoch"] == 1 and part["served_rows"] == 320 and not part["complete"]
    assert {n: c["served"] for n, c in part["components"].items()} == _by_component(first)
    report = mixed.mixing_report(1)
    assert report["complete"] and report["served_rows"] == report["rows"] == 1000
    assert {n: c["served"] for n, c in report["components"].items()} == _by_component(first + rest)
    assert {n: c["quota"] for n, c in report["components"].items()} == mixed.quotas(1) == {"a": 500, "b": 300, "c": 200}
    c = report["components"]["c"]
    assert c["target_share"] == pytest.approx(0.2) and c["served_share"] == pytest.approx(0.2)
    assert c["component_rows"] == 90 and c["passes"] == pytest.approx(200 / 90)
    # Epoch 0 took 200 of c's rows (its epochs 0, 1 and 20 rows of 2); epoch 1 reads on from row 20 of c's epoch 2.
    assert c["component_epochs"] == [2, 4]
    assert mixed.mixing_report(0)["served_rows"] == 0  # never served in this run: nothing realised yet


def test_a_resumed_epoch_reports_its_rows_once_however_often_it_was_restarted(parts):
    mixed = sf.mix(parts, weights={"a": 1, "b": 1, "c": 1}, samples_per_epoch=300, seed=2).batch(50)
    with mixed.iter_epoch(0) as stream:
        next(stream), next(stream)
        state = stream.get_state()
    for _ in range(2):  # resumed twice from the same state: the rows after it are served twice, counted once
        with mixed.iter_epoch(0, state=state) as stream:
            list(stream)
    report = mixed.mixing_report(0)
    assert report["served_rows"] == 300 and sum(c["served"] for c in report["components"].values()) == 300
    assert {n: c["served"] for n, c in report["components"].items()} == mixed.quotas(0)
    assert mixed.with_weights({"a": 1, "b": 0, "c": 1}).mixing_report(0)["served_rows"] == 0  # another mixture
