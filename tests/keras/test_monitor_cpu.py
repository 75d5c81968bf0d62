"""The input-stall monitor reports the pipeline's share of the cores beside the wait (issue 28, item 3).

On 2 cores a Parquet ``fit`` ran at 0.37-0.47x the model's in-memory rate
while the monitor reported 0.0-0.4 % input wait: the pipeline took the CPU
from the model instead of making it wait. The monitor now also measures
the CPU time of the pipeline's own threads per epoch and says when the
cores are the limit. The rule is a pure function, checked here from given
numbers; a real ``fit`` on the TensorFlow backend (a subprocess: Keras
fixes its backend at import) with a per-fragment ``map`` that burns CPU in
a read thread checks the fields and that the share is measured, never how
large it is.

    KERAS_BACKEND=tensorflow python tests/keras/test_monitor_cpu.py '<json args>'

runs the fit itself and prints ``RESULT {json}``.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time

import pytest

ROWS, ROW_GROUP, BATCH, EPOCHS = 16_000, 1_000, 500, 2
BURN_SECONDS = 0.03  # CPU per fragment in a read thread: 16 fragments, about 0.5 CPU s per epoch


def test_the_cores_are_the_limit_when_the_pipeline_takes_a_large_share_of_busy_cores():
    from streamfeed.runtime.cpu import cores_verdict

    verdict = cores_verdict(wait_share=0.004, pipeline_share=0.45, process_share=0.97, cores=2)
    assert verdict is not None
    assert "the input pipeline uses 45 % of the cores the model could use" in verdict
    assert "2 cores" in verdict


@pytest.mark.parametrize("case", ["pipeline takes little", "cores idle", "training waits", "not measured"])
def test_no_cores_verdict_otherwise(case):
    from streamfeed.runtime.cpu import CORES_SATURATED, PIPELINE_CORES_SHARE, cores_verdict

    wait_share, pipeline_share, process_share = {
        "pipeline takes little": (0.004, PIPELINE_CORES_SHARE - 0.01, 0.99),  # the model's own CPU is the limit
        "cores idle": (0.004, 0.45, CORES_SATURATED - 0.01),  # cores left idle: the cores are not the limit
        "training waits": (0.6, 0.45, 0.99),  # the wait already says the pipeline is the limit
        "not measured": (0.004, math.nan, 0.99),  # no /proc: no verdict
    }[case]
    assert (
        cores_verdict(wait_share=wait_share, pipeline_share=pipeline_share, process_share=process_share, cores=2)
        is None
    )


def test_the_rule_holds_at_its_thresholds():
    from streamfeed.runtime.cpu import CORES_SATURATED, PIPELINE_CORES_SHARE, cores_verdict

    at = cores_verdict(wait_share=0.0, pipeline_share=PIPELINE_CORES_SHARE, process_share=CORES_SATURATED, cores=4)
    assert at is not None and "4 cores" in at


@pytest.mark.backend
def test_monitor_reports_the_pipelines_cpu_share_in_a_real_tensorflow_fit(tmp_path):
    env = {**os.environ, "KERAS_BACKEND": "tensorflow", "TF_CPP_MIN_LOG_LEVEL": "2", "PYTHONUNBUFFERED": "1"}
    proc = subprocess.run(
        [sys.executable, __file__, json.dumps({"path": str(tmp_path / "data.parquet")})],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, f"exit {proc.returncode}\n{proc.stderr[-4000:]}"
    result = json.loads([line for line in proc.stdout.splitlines() if line.startswith("RESULT ")][-1][7:])
    assert result["backend"] == "tensorflow"
    assert len(result["epochs"]) == EPOCHS
    for epoch in result["epochs"]:
        assert {"pipeline_cpu_seconds", "pipeline_cpu_share", "process_cpu_share", "cores", "cores_limit"} <= set(epoch)
        # no more than the process used; an epoch read ahead while the one before trained (the adapter's early
        # start) may show none of its own: its reads' CPU fell in the epoch before (seen in a full-suite run)
        assert 0 <= epoch["pipeline_cpu_share"] <= epoch["process_cpu_share"] + 1e-6, epoch
        assert isinstance(epoch["cores_limit"], bool)
    # 16 fragments an epoch burning 0.03 CPU s each in the read pool. The first epoch's reads may all fall before
    # its on_epoch_begin (the adapter starts it as fit sets up), so the epochs' sum is sure to hold the reads of
    # EPOCHS - 1 epochs only: 0.49 s was measured in a full-suite run. /proc counts a thread's time in 10 ms ticks.
    burned_an_epoch = ROWS // ROW_GROUP * BURN_SECONDS
    assert result["epochs"][0]["pipeline_cpu_seconds"] > 0.1, result["epochs"]
    counted = sum(epoch["pipeline_cpu_seconds"] for epoch in result["epochs"])
    assert counted > (EPOCHS - 1) * burned_an_epoch - 0.05, result["epochs"]
    # the line beside the wait, every epoch
    assert len(result["infos"]) == EPOCHS, result["infos"]
    assert all("input pipeline" in line and "% of the" in line and "cores" in line for line in result["infos"])


def _write(path: str) -> None:
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(0)
    x = rng.normal(size=(ROWS, 2)).astype("float32")
    table = pa.table({"f0": x[:, 0], "f1": x[:, 1], "y": x.sum(axis=1)})
    pq.write_table(table, path, row_group_size=ROW_GROUP)


def burn(columns):
    """Spends CPU in the read thread that runs it (a sleep would cost none)."""
    deadline = time.thread_time() + BURN_SECONDS
    while time.thread_time() < deadline:
        pass
    return columns


def _fit(args: dict) -> dict:
    import logging

    import keras

    import streamfeed as sf
    from streamfeed.keras.monitor import InputStallMonitor

    _write(args["path"])
    lines: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if record.levelno == logging.INFO:
                lines.append(record.getMessage())

    logger = logging.getLogger("streamfeed")
    logger.addHandler(Collect())
    logger.setLevel(logging.INFO)
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(4), keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse")
    train = sf.read_parquet(args["path"]).map(burn).shuffle(seed=0).batch(BATCH).to_keras(label="y")
    monitor = InputStallMonitor(train, verbose=False)
    with train:
        model.fit(train, epochs=EPOCHS, verbose=0, callbacks=[monitor])
    return {
        "backend": keras.backend.backend(),
        "epochs": monitor.history,
        "infos": [line for line in lines if "input wait" in line],
    }


if __name__ == "__main__":
    print("RESULT " + json.dumps(_fit(json.loads(sys.argv[1]))), flush=True)
