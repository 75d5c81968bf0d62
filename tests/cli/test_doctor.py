"""``streamfeed doctor DATA`` through the real console script, on files written by real writers.

Assertions are on the findings' kinds and on their numbers being measured
(positive, and consistent with one another), never on how fast anything
ran. The cache decision on CSV and Parquet rests on ratios measured with
wide margins, in repeated rounds: later epochs 3.7-6.2x as fast from the
cache for the CSV rows here, 1.0-1.5x for the same rows as Parquet (whose
rows also read back from a copy no more than 2x faster), against the
doctor's threshold of 2 (``test_doctor_cache.py`` tests that decision).
"""

from __future__ import annotations

import json
import math
import os
import statistics
import time

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest
from _console import assert_short_failure, environment, streamfeed
from PIL import Image, ImageFilter

import streamfeed as sf

ROWS = 60_000
SECONDS = "2"


def _table(rows: int = ROWS) -> pa.Table:
    rng = np.random.default_rng(0)
    columns = {f"f{i}": rng.normal(size=rows).astype(np.float32) for i in range(16)}
    columns["y"] = rng.integers(0, 2, size=rows)
    return pa.table(columns)


def _doctor(*args: object) -> dict:
    proc = streamfeed("doctor", *args, "--seconds", SECONDS, "--json")
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout)


def _kinds(result: dict, *, repair: bool) -> set[str]:
    return {finding["kind"] for finding in result["findings"] if finding["repair"] is repair}


def _finding(result: dict, kind: str) -> dict:
    (finding,) = [finding for finding in result["findings"] if finding["kind"] == kind]
    return finding


def _assert_pipeline_measured(result: dict) -> None:
    measured = _finding(result, "pipeline")["measured"]
    assert measured["rows"] > 0 and measured["seconds"] > 0 and measured["read_threads"] >= 1
    assert measured["rows_per_second"] == pytest.approx(measured["rows"] / measured["seconds"])
    assert 0 < measured["estimated_bytes"] <= measured["memory_limit_bytes"]


def _assert_cache_measured(measured: dict) -> None:
    assert measured["fragments"] >= 1 and measured["rows"] > 0 and measured["probe_rounds"] >= 2
    assert measured["source_seconds"] > 0 and measured["cache_read_seconds"] > 0
    assert measured["read_speedup"] == pytest.approx(statistics.median(measured["read_speedups"]))
    assert measured["read_speedup_low"] <= measured["read_speedup"] <= measured["read_speedup_high"]
    assert measured["source_seconds_per_million_rows"] == pytest.approx(
        1e6 * measured["source_seconds"] / (measured["rows"] * measured["probe_rounds"])
    )
    assert measured["epoch_rows"] > 0 and measured["first_epoch_rows_per_second"] > 0
    assert measured["source_rows_per_second"] > 0 and measured["cache_rows_per_second"] > 0
    assert measured["epoch_speedup"] == pytest.approx(statistics.median(measured["epoch_speedups"]))
    assert measured["epoch_speedup_low"] <= measured["epoch_speedup"] <= measured["epoch_speedup_high"]
    assert measured["epoch_rounds"] == len(measured["epoch_speedups"]) >= 2


def test_a_csv_is_decode_bound_and_a_cache_is_suggested_with_its_measured_speedup(tmp_path):
    """A cache, measured as paying; on a machine too loaded for the rounds to agree, the doubt said, never "no cache".

    Rounds of these CSV rows measured 2.0-15.5x (median 4-10x) on two cores
    shared with five other test runs: a slowed round can reach below the 2x
    rule, and the doctor then says that the interval straddles it (issue 23,
    item 19) rather than deciding either way.
    """
    path = tmp_path / "train.csv"
    pacsv.write_csv(_table(), path)
    result = _doctor(path, "--read-threads", str(os.cpu_count() or 1))
    assert result["format"] == "csv" and result["rows"] > 0
    cache = _finding(result, "cache")
    _assert_cache_measured(cache["measured"])
    assert cache["measured"]["decision"] in ("cache", "uncertain"), cache["summary"]
    assert cache["measured"]["read_speedup_high"] >= 2 and cache["measured"]["epoch_speedup_high"] >= 2
    if cache["measured"]["decision"] == "cache":
        assert cache["repair"] and ".cache()" in cache["action"] and "decode is the limit" in cache["summary"]
    else:
        assert not cache["repair"] and "measure longer to decide (--seconds" in cache["summary"]
    assert _kinds(result, repair=True) == ({"cache"} if cache["repair"] else set()), result["findings"]
    assert result["repairs"] == int(cache["repair"])
    _assert_pipeline_measured(result)
    quality = _finding(result, "quality")  # the clean data was checked, every row of it
    assert quality["measured"] == {"scanned": ROWS, "of": ROWS}


def test_a_parquet_file_needs_no_cache_and_the_text_report_closes_with_nothing_to_repair(tmp_path):
    """Robust to the machine's load, still able to fail: the two verdicts that measured noise used to flip are fixed.

    The cache's verdict repeats its rounds and, when their range straddles a
    threshold, says so rather than suggesting a cache (issue 23, item 19): a
    cache suggested for this Parquet file is a defect, whatever the load.
    The read threads are given as the core count, so no autotuning moves
    them under load and "more read threads" has no room: the pipeline
    finding is then a repair only by a defect too.
    """
    path = tmp_path / "train.parquet"
    pq.write_table(_table(), path)
    threads = ("--read-threads", str(os.cpu_count() or 1))
    result = _doctor(path, *threads)
    assert _kinds(result, repair=True) == set()
    assert _kinds(result, repair=False) == {"pipeline", "cache", "quality"}
    cache = _finding(result, "cache")
    _assert_cache_measured(cache["measured"])
    assert cache["measured"]["decision"] in ("no cache", "uncertain"), cache["summary"]
    _assert_pipeline_measured(result)
    proc = streamfeed("doctor", path, "--seconds", SECONDS, *threads)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.strip().splitlines()
    assert lines[0].startswith("streamfeed doctor") and "parquet" in lines[0]
    assert lines[-1] == "nothing to repair"
    assert any("rows/s" in line and "read thread" in line for line in lines)


def test_quality_findings_name_the_columns_with_nulls_the_sorted_time_and_the_constant(tmp_path):
    rows = 20_000
    table = _table(rows)
    values = table.column("f0").to_numpy().astype(np.float64)
    mask = np.arange(rows) % 10 == 3  # exactly 10 % nulls
    table = table.set_column(0, "f0", pa.array(values, mask=mask))
    table = table.append_column("t", pa.array(np.arange(rows) * 1_000_000, pa.timestamp("us")))
    table = table.append_column("c", pa.array(np.full(rows, 7.0)))
    table = table.append_column("index", pa.array(np.arange(rows)))  # in row order, but not "sorted data"
    path = tmp_path / "events.parquet"
    pq.write_table(table, path)
    result = _doctor(path, "--nulls", "drop", "--label", "y")
    assert {"nulls", "row_order", "constant"} <= _kinds(result, repair=True)
    nulls = _finding(result, "nulls")
    assert nulls["measured"]["columns"] == {"f0": {"null_rate": pytest.approx(0.1)}}
    assert "--nulls drop" in nulls["action"] and "streamfeed inspect" in nulls["action"]
    order = _finding(result, "row_order")
    assert order["measured"]["spearman_rho"]["t"] == pytest.approx(1.0) and "time-sorted" in order["summary"]
    assert "index" not in order["measured"]["spearman_rho"]
    assert _finding(result, "index_column")["measured"]["columns"] == ["index"]
    assert _finding(result, "constant")["measured"]["columns"] == ["c"]
    assert "duplicates" not in _kinds(result, repair=True)


def test_duplicate_rows_are_found_and_counted_within_the_sketch_range(tmp_path):
    unique = _table(15_000)
    table = pa.concat_tables([unique, unique.slice(0, 5_000)])  # 5,000 rows written twice
    path = tmp_path / "twice.parquet"
    pq.write_table(table, path)
    result = _doctor(path)
    duplicates = _finding(result, "duplicates")
    assert duplicates["repair"] and duplicates["measured"]["scanned"] == 20_000
    low, high = duplicates["measured"]["range_95"]
    assert 0 < low <= duplicates["measured"]["estimated"] <= high
    assert "imbalance" not in _kinds(result, repair=True)  # y is 0/1 at random


def test_an_image_folder_gets_blur_and_exposure_findings(tmp_path):
    rng = np.random.default_rng(1)
    for label in ("cat", "dog"):
        (tmp_path / "images" / label).mkdir(parents=True)
        for index in range(12):
            image = Image.fromarray(rng.integers(0, 256, size=(48, 48, 3), dtype=np.uint8))
            if label == "cat" and index < 2:
                image = image.filter(ImageFilter.GaussianBlur(4))
            if label == "dog" and index == 0:
                image = Image.fromarray(np.full((48, 48, 3), 3, dtype=np.uint8))
            if label == "dog" and index == 1:
                image = Image.fromarray(np.full((48, 48, 3), 252, dtype=np.uint8))
            image.save(tmp_path / "images" / label / f"{index}.png")
    result = _doctor(tmp_path / "images")
    assert result["format"] == "images" and result["files"] == 24
    assert {"blur", "exposure"} <= _kinds(result, repair=True)
    exposure = _finding(result, "exposure")["measured"]
    assert (exposure["near_black"], exposure["near_white"]) == (1, 1)
    assert exposure["scanned"] == exposure["of"] == 24
    blur = _finding(result, "blur")
    assert blur["measured"]["blurry"] >= 2 and blur["measured"]["median_blur"] > 0
    assert any("/cat/0.png" in path or "/cat/1.png" in path for path in blur["measured"]["examples"])
    assert "--html" in blur["action"]
    cache = _finding(result, "cache")["measured"]  # measured, whatever it decided for tiny PNGs
    assert cache["rows"] > 0 and math.isfinite(cache["read_speedup"])
    _assert_pipeline_measured(result)


def test_a_missing_path_is_a_two_line_usage_error(tmp_path):
    missing = tmp_path / "nowhere" / "train.csv"
    stderr = assert_short_failure(streamfeed("doctor", missing), 2)
    assert str(missing) in stderr and "no such file or directory" in stderr.lower()


def test_a_budget_that_is_not_positive_is_a_usage_error(tmp_path):
    path = tmp_path / "train.parquet"
    pq.write_table(_table(100), path)
    stderr = assert_short_failure(streamfeed("doctor", path, "--seconds", "0"), 2)
    assert "--seconds" in stderr


def _slow_decode(chunk: dict) -> dict:
    time.sleep(0.02)  # per fragment: a decoder that waits (I/O, or C code without the GIL)
    return chunk


def test_the_pipeline_finding_reports_what_autotuning_changed(tmp_path):
    """A decode-bound pipeline: the doctor's run autotunes, and the finding names the settings it reached."""
    from streamfeed.commands.doctor_pipeline import tuning_finding

    path = tmp_path / "slow.parquet"
    pq.write_table(_table(64 * 256), path, row_group_size=256)
    dataset = sf.read_parquet(path).map(_slow_decode).shuffle(seed=1, window=8).batch(256)
    finding = tuning_finding(dataset, 4.0)
    tuning = finding.measured["autotune"]
    assert tuning["final"]["read_threads"] > tuning["initial"]["read_threads"]
    assert tuning["estimated_bytes"] <= tuning["memory_limit"]
    assert finding.repair and "autotune=True" in finding.action
    assert f"read_threads={tuning['final']['read_threads']}" in finding.action
    assert "autotuning changed" in finding.summary


def test_explicit_read_threads_are_not_tuned(tmp_path):
    from streamfeed.commands.doctor_pipeline import tuning_finding

    path = tmp_path / "data.parquet"
    pq.write_table(_table(4096), path, row_group_size=256)
    finding = tuning_finding(sf.read_parquet(path).with_options(read_threads=1).batch(256), 0.5)
    assert "autotune" not in finding.measured
    assert finding.measured["read_threads"] == 1


def test_only_moved_reads_are_offered_as_a_repair():
    from streamfeed.commands.doctor_pipeline import reads_retuned
    from streamfeed.runtime.autotune import Settings, TuningReport

    def tuning(initial: Settings, final: Settings) -> TuningReport:
        return TuningReport(initial, final, (), 1, 2, 8, False)

    assert reads_retuned(tuning(Settings(2, 4, 8), Settings(4, 8, 8)))
    assert reads_retuned(tuning(Settings(2, 2, 8), Settings(2, 4, 8)))
    assert not reads_retuned(tuning(Settings(2, 14, 8), Settings(2, 14, 32)))  # a deeper queue alone


def test_file_and_column_names_with_escape_sequences_never_reach_the_terminal_raw(tmp_path):
    # issue 22, item 14: a file named "x\x1b[2J" cleared the user's terminal when doctor printed its name.
    table = _table(5_000).append_column("c\x1b[31m", pa.array(np.full(5_000, 7.0)))  # a constant: a finding names it
    path = tmp_path / "x\x1b[2J.parquet"
    pq.write_table(table, path)
    proc = streamfeed("doctor", path, "--seconds", SECONDS, "--quiet")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "\x1b" not in proc.stdout
    assert "x\\x1b[2J.parquet" in proc.stdout and "c\\x1b[31m" in proc.stdout  # shown, as visible characters


def test_a_cache_published_by_dataset_cache_is_seen_as_published(tmp_path):
    """doctor looks for the cache under the key Dataset.cache() keeps it under (a CSV's is keyed by its content)."""
    import streamfeed as sf

    path = tmp_path / "train.csv"
    pacsv.write_csv(_table(), path)
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o700)
    with sf.read_csv(path).cache(cache).iter_epoch(0) as epoch:  # the first epoch publishes the cache
        for _ in epoch:
            pass
    proc = streamfeed("doctor", path, "--seconds", SECONDS, "--json", env=environment(STREAMFEED_CACHE_DIR=str(cache)))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert _finding(json.loads(proc.stdout), "cache")["measured"]["published_cache"] is True
