"""The input-stall monitor in a real ``fit`` on each backend (one subprocess each).

The same pipeline runs with and without a known injected stall (a
per-batch ``map`` that sleeps); each step also sleeps a little in a
callback, standing in for the model's compute. The monitor must report a
wait share that is high with the stall and low without — compared as
ordering and rough proportion, never as absolute times — and warn only in
the stalled run, pointing to ``streamfeed bench``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.backend

DRIVER = Path(__file__).parent / "_monitor_driver.py"
DELAY = 0.08  # per batch: several times a step (the stand-in sleep plus the real step)


def run(backend: str, path: Path, delay: float) -> dict:
    env = {**os.environ, "KERAS_BACKEND": backend, "TF_CPP_MIN_LOG_LEVEL": "2", "PYTHONUNBUFFERED": "1"}
    proc = subprocess.run(
        [sys.executable, str(DRIVER), json.dumps({"path": str(path), "delay": delay})],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, f"{backend} delay={delay}: exit {proc.returncode}\n{proc.stderr[-4000:]}"
    line = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")][-1]
    return json.loads(line[len("RESULT ") :])


@pytest.mark.parametrize("backend", ["tensorflow", "jax", "torch"])
def test_monitor_sees_an_injected_input_stall(backend, tmp_path):
    path = tmp_path / "data.parquet"
    stalled, smooth = run(backend, path, DELAY), run(backend, path, 0.0)
    assert stalled["backend"] == smooth["backend"] == backend
    last_stalled, last_smooth = stalled["epochs"][-1], smooth["epochs"][-1]  # past the first step's compile
    assert last_stalled["input_wait_share"] > 0.5, stalled
    assert last_stalled["input_wait_share"] > 3 * last_smooth["input_wait_share"], (stalled, smooth)
    assert last_stalled["steps"] == last_smooth["steps"] == 25
    assert last_stalled["rows_per_second"] < last_smooth["rows_per_second"]
    # a readable line per epoch, not a raw float in History; the warning only where the input is the bottleneck
    assert "input_wait_share" not in stalled["history_keys"] and stalled["history_share"] is None
    assert all("% of step time" in message for message in stalled["infos"])
    assert stalled["warnings"] and all("streamfeed bench" in message for message in stalled["warnings"])
    assert not smooth["warnings"], smooth["warnings"]
    assert len(stalled["infos"]) == len(stalled["epochs"]) == 2
