"""``doctor``'s cache verdict (issue 23, items 19 and 17): repeated measurements, their spread, one sentence.

The verdict is a pure function of the measurements (``cache_verdict``),
tested here with given numbers: a cache when both ratios' ranges over the
rounds clear the thresholds, none when either range lies below, and
neither way when a range straddles a threshold. The CLI test checks the shape of what a
real CSV's report says (a ratio with its range and the number of epochs,
the time budget), never how fast anything ran.
"""

from __future__ import annotations

import json
import math
import re

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pytest
from _console import streamfeed

from streamfeed.commands.doctor_cache import (
    CACHE_EPOCH_GAIN,
    CACHE_SHARE,
    CacheRun,
    cache_verdict,
    ratio_of,
    settled,
)


def _run(read_ratios, epoch_gains, source_format: str = "csv") -> CacheRun:
    rounds = len(read_ratios)
    return CacheRun(
        source_format=source_format,
        fragments=3,
        rows=300_000,
        source_seconds=0.3 * rounds,
        cache_read_seconds=0.3 * rounds / float(np.exp(np.mean(np.log(read_ratios)))),
        cache_write_seconds=0.1 * rounds,
        read_ratios=tuple(read_ratios),
        epoch_gains=tuple(epoch_gains),
        epoch_rows=300_000,
        source_rows_per_second=1e6,
        cache_rows_per_second=1e6 * float(np.exp(np.mean(np.log(epoch_gains)))),
        first_epoch_rows_per_second=8e5,
        seconds=2.9,
        budget=3.0,
    )


def test_a_ratio_is_its_rounds_median_with_an_interval_that_narrows_as_rounds_add_up():
    ratio = ratio_of([3.0, 2.0, 2.5])
    assert (ratio.value, ratio.low, ratio.high, ratio.samples) == (2.5, 2.0, 3.0, 3)
    assert ratio.interval("epochs") == "(2.0–3.0 over 3 epochs)"
    assert (ratio_of([1, 2, 3, 4, 5, 6, 7]).low, ratio_of([1, 2, 3, 4, 5, 6, 7]).high) == (1, 7)
    eight = ratio_of([1, 2, 3, 4, 5, 6, 7, 30])  # from 8 rounds, one slowed round no longer sets an end
    assert (eight.value, eight.low, eight.high) == (4.5, 2, 7)
    single = ratio_of([2.4])  # one measurement has no spread: it decides nothing
    assert single.value == pytest.approx(2.4) and single.low == 0 and single.high == math.inf


def test_a_cache_is_suggested_only_when_both_intervals_clear_the_thresholds():
    finding = cache_verdict(_run([7.1, 7.6, 7.9, 7.3], [4.2, 4.5, 4.4, 4.1]))
    assert finding.repair and finding.measured["decision"] == "cache"
    assert ".cache()" in finding.action
    assert re.search(r"later epochs 4\.3x as fast \(4\.\d–4\.\d over 4 epochs", finding.summary), finding.summary
    assert "in 2.9 s of a 3.0 s budget" in finding.summary


def test_no_cache_when_the_epochs_gain_too_little_says_why_in_one_coherent_sentence():
    # issue 23, item 17: "no cache needed: ... (4.7x less)" read as if the cache paid
    finding = cache_verdict(_run([4.5, 4.9, 4.7, 4.6], [1.2, 1.3, 1.25, 1.3]))
    assert not finding.repair and finding.measured["decision"] == "no cache"
    assert finding.summary.startswith("no cache needed: ")
    assert "x less" not in finding.summary
    assert "but later epochs were only 1.3x as fast" in finding.summary, finding.summary
    assert f"under the {CACHE_EPOCH_GAIN:g}x" in finding.summary


def test_no_cache_when_the_source_reads_as_fast_as_a_copy():
    finding = cache_verdict(_run([0.6, 0.7, 0.65], [2.9, 3.1, 3.0], "parquet"))
    assert not finding.repair and finding.measured["decision"] == "no cache"
    assert "a cached copy reads rows only 0.7x as fast as the parquet source" in finding.summary, finding.summary


def test_a_range_that_straddles_the_threshold_is_said_instead_of_flipping():
    # the CSV: epochs measured 1.5-2.5x around the 2x rule; one verdict either way would flip run to run
    finding = cache_verdict(_run([4.6, 4.8, 4.7, 4.9, 4.5], [1.6, 2.4, 1.9, 2.3, 2.1]))
    assert not finding.repair and finding.measured["decision"] == "uncertain"
    assert "no cache needed" not in finding.summary and "straddles the 2x rule" in finding.summary, finding.summary
    assert "--seconds 20" in finding.summary  # twice the default budget's 10 s, said as the flag
    low, high = finding.measured["epoch_speedup_low"], finding.measured["epoch_speedup_high"]
    assert low < CACHE_EPOCH_GAIN < high


def test_measuring_stops_when_the_spread_is_small_or_the_verdict_is_clear():
    assert not settled([4.5, 4.7], [4.1, 4.3])  # two rounds: too few, whatever they say
    assert settled([4.5, 4.7, 4.6], [4.1, 4.3, 4.2])  # clear and tight
    assert settled([0.6, 0.9, 0.7], [1.2, 3.1, 2.0])  # the per-row ratio alone rules a cache out
    assert not settled([4.6, 4.8, 4.7, 4.9], [1.6, 2.4, 1.9, 2.3])  # straddles, and still wide


def test_the_cli_says_the_epoch_ratio_with_its_range_and_its_budget_on_a_real_csv(tmp_path):
    rng = np.random.default_rng(0)
    rows = 60_000
    table = pa.table({f"f{i}": rng.normal(size=rows).astype(np.float32) for i in range(16)})
    path = tmp_path / "train.csv"
    pacsv.write_csv(table, path)
    proc = streamfeed("doctor", path, "--seconds", "3", "--json")
    assert proc.returncode == 0, proc.stderr[-3000:]
    (cache,) = [finding for finding in json.loads(proc.stdout)["findings"] if finding["kind"] == "cache"]
    measured = cache["measured"]
    assert measured["budget_seconds"] == pytest.approx(CACHE_SHARE * 3)
    assert measured["epoch_rounds"] >= 2 and len(measured["epoch_speedups"]) == measured["epoch_rounds"]
    assert measured["epoch_speedup_low"] <= measured["epoch_speedup"] <= measured["epoch_speedup_high"]
    assert measured["read_speedup_low"] <= measured["read_speedup"] <= measured["read_speedup_high"]
    assert measured["decision"] in ("cache", "no cache", "uncertain")
    assert cache["repair"] is (measured["decision"] == "cache")
    proc = streamfeed("doctor", path, "--seconds", "3", "--quiet")
    assert proc.returncode == 0, proc.stderr[-3000:]
    text = " ".join(proc.stdout.split())  # the report wraps its lines
    assert re.search(r"epochs [\d.]+x as fast \([\d.]+–[\d.]+ over \d+ epochs", text), text
    assert re.search(r"in [\d.]+ s of a 0\.9 s budget", text), text
