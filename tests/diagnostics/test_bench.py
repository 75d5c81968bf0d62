"""The pipeline doctor: stage metrics, verdicts on deliberately slow stages, the CLI.

No timed assertions: the pipelines are made slow in one stage by orders of
magnitude (a ``time.sleep`` per fragment or per batch) and the tests check
which stage the verdict names, never how long anything took.
"""

from __future__ import annotations

import json
import time

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import streamfeed as sf
from streamfeed.cli import main
from streamfeed.diagnostics import MODEL_BOUND_WAIT_SHARE, bench
from streamfeed.runtime.metrics import StageMetrics

ROWS, ROW_GROUP, BATCH = 4000, 250, 128


@pytest.fixture
def parquet_path(tmp_path):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(ROWS, 2)).astype("float32")
    table = pa.table({"id": np.arange(ROWS), "f0": x[:, 0], "f1": x[:, 1], "y": (x[:, 0] - x[:, 1]).astype("float32")})
    path = tmp_path / "data.parquet"
    pq.write_table(table, path, row_group_size=ROW_GROUP)
    return path


def slow_map(columns):
    time.sleep(0.02)
    return columns


def test_metrics_off_by_default_creates_no_metrics_object(parquet_path):
    dataset = sf.read_parquet(parquet_path).shuffle(seed=1).batch(BATCH)
    with dataset.iter_epoch() as stream:
        next(stream)
        assert stream._metrics is None
        assert stream._background._metrics is None
        assert stream.metrics() is None


def test_metrics_count_every_row_once_per_stage(parquet_path):
    dataset = sf.read_parquet(parquet_path).map(slow_map).shuffle(seed=1).batch(BATCH).map(lambda c: c, name="identity")
    with dataset.iter_epoch(metrics=True) as stream:
        batches = list(stream)
        snap = stream.metrics()
    stages = snap["stages"]
    assert stages["read"]["rows"] == ROWS and stages["read"]["calls"] == ROWS // ROW_GROUP
    assert stages["read"]["bytes"] == ROWS * (8 + 4 + 4 + 4)
    assert stages["fragment_ops"]["rows"] == ROWS
    assert stages["assemble"]["rows"] == ROWS and stages["batch"]["rows"] == ROWS
    assert stages["batch_ops"]["calls"] == len(batches) == stages["wait"]["calls"] - 1  # the last take meets the end
    assert [op["op"] for op in snap["ops"]] == ["slow_map", "identity"]  # slowest first
    assert 0 < snap["utilisation"]["read_pool"] <= 1.5
    assert snap["queues"]["prefetch_queue"]["samples"] == len(batches) + 1
    assert snap["layout"]["read_threads"] >= 1 and snap["memory_limit_bytes"] > 0


def test_with_options_metrics_accumulates_across_epochs(parquet_path):
    shared = StageMetrics()
    dataset = sf.read_parquet(parquet_path).batch(BATCH).with_options(metrics=shared)
    for epoch in range(2):
        with dataset.iter_epoch(epoch) as stream:
            for _ in stream:
                pass
    assert shared.snapshot()["stages"]["read"]["rows"] == 2 * ROWS
    with dataset.iter_epoch(metrics=False) as stream:  # an explicit False wins over the dataset's setting
        assert stream.metrics() is None


def test_slow_fragment_map_is_named_the_bottleneck(parquet_path):
    dataset = sf.read_parquet(parquet_path).map(slow_map).shuffle(seed=1).batch(BATCH)
    report = bench(dataset, seconds=0, max_batches=25)
    assert report.bottleneck == "fragment_op:slow_map", report.verdict
    assert "slow_map" in report.verdict and report.advice
    assert report.batches == 25 and report.rows == 25 * BATCH


def test_slow_batch_map_is_named_the_bottleneck(parquet_path):
    dataset = sf.read_parquet(parquet_path).shuffle(seed=1).batch(BATCH).map(slow_map, name="slow_batch_map")
    report = bench(dataset, seconds=0, max_batches=15)
    assert report.bottleneck == "batch_op:slow_batch_map", report.verdict
    assert "before batch()" in report.advice[0]


def test_fast_pipeline_slow_model_is_model_bound_and_slow_pipeline_is_not(parquet_path):
    import keras

    class SlowStep(keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            time.sleep(0.1)  # far above a fast pipeline's batch time, even on a loaded machine

    def model():
        m = keras.Sequential([keras.Input((2,)), keras.layers.Dense(4), keras.layers.Dense(1)])
        m.compile(optimizer="sgd", loss="mse")
        return m

    fast = sf.read_parquet(parquet_path).shuffle(seed=1).batch(BATCH)
    report = bench(
        fast, seconds=0, max_batches=20, model=model(), label="y", features=["f0", "f1"], callbacks=[SlowStep()]
    )
    assert report.bottleneck == "model", report.verdict
    assert report.verdict == "the model is the limit — data waits"
    assert report.model["input_wait_share"] < 0.2 and report.model["steps"] == 20

    slow = fast.map(slow_map, name="slow_batch_map")
    report = bench(slow, seconds=0, max_batches=20, model=model(), label="y", features=["f0", "f1"])
    assert report.bottleneck == "batch_op:slow_batch_map", report.verdict
    # not model-bound by the verdict's own threshold (a share near 1 idle; 0.47 seen on a loaded machine)
    assert report.model["input_wait_share"] > MODEL_BOUND_WAIT_SHARE
    json.dumps(report.to_dict())


def test_cli_bench_json(parquet_path, capsys):
    code = main(
        ["bench", str(parquet_path), "--batch-size", "64", "--seconds", "0", "--max-batches", "7", "--json", "--quiet"]
    )
    assert code == 0
    report = json.loads(capsys.readouterr().out)
    assert report["batches"] == 7 and report["rows"] == 7 * 64
    assert report["bottleneck"] and report["verdict"] and report["model"] is None
    assert set(report["stages"]) >= {"read", "fragment_ops", "assemble", "batch", "batch_ops", "wait"}


def test_cli_bench_with_demo_model_renders_a_verdict(parquet_path, capsys):
    code = main(
        [
            "bench",
            str(parquet_path),
            "--label",
            "y",
            "--model",
            "demo",
            "--seconds",
            "0",
            "--max-batches",
            "6",
            "--quiet",
        ]
    )
    assert code == 0
    out = capsys.readouterr().out
    assert "streamfeed bench" in out and "verdict:" in out and "model: 6 steps" in out


def test_cli_bench_model_needs_label(parquet_path, capsys):
    assert main(["bench", str(parquet_path), "--model", "demo", "--quiet"]) == 2
    assert "--label" in capsys.readouterr().err


def test_reads_off_the_cpu_are_disk_bound_only_when_the_disk_served_their_bytes():
    """issue 23, item 4: a file in the page cache is not disk-limited, and only remote storage is network-limited."""
    from streamfeed.diagnostics import ReadEvidence, read_limit

    def limit(cpu: float, cores_busy: float, storage_share: float | None, remote: bool = False) -> str:
        return read_limit(ReadEvidence(10.0, cpu, cores_busy, storage_share, remote))

    assert limit(2.0, 0.3, storage_share=0.0) == "decode"  # off the CPU, bytes from the page cache: a lock or a core
    assert limit(2.0, 0.3, storage_share=0.9) == "disk"  # off the CPU, bytes from the device
    assert limit(2.0, 0.3, storage_share=None) == "disk"  # no I/O counters (not Linux): the CPU share alone
    assert limit(2.0, 0.3, storage_share=0.0, remote=True) == "network"
    assert limit(9.0, 0.5, storage_share=0.9) == "decode"  # on the CPU
    assert limit(2.0, 0.9, storage_share=0.9) == "decode"  # off the CPU while the process fills the cores
    assert read_limit(ReadEvidence(0.0, 0.0, 0.0, None, False)) == "decode"  # nothing read: no wait measured
