"""A real ``fit`` of a small forecaster on windows over a stream, on TensorFlow, JAX and PyTorch.

Keras fixes its backend at import, so each fit runs in a subprocess
(``_windows_driver.py``). The series is learnable (a noisy sine per ticker),
so the loss must fall; Keras is told the exact steps before the first batch.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

pytestmark = pytest.mark.backend

DRIVER = Path(__file__).with_name("_windows_driver.py")
SERIES = {"a": 500, "b": 37, "c": 700, "d": 410}  # uneven series, across files and row groups
LENGTH, STRIDE = 16, 2  # the driver's settings


def _write(root: Path) -> int:
    """Writes the series and returns the windows Keras' definition gives (each series alone)."""
    root.mkdir()
    rng = np.random.default_rng(4)
    parts, expected = [], 0
    for number, (ticker, rows) in enumerate(SERIES.items()):
        t = np.arange(rows)
        price = np.sin(t / (5.0 + number)) + 0.05 * rng.normal(size=rows)
        parts.append(pa.table({"ticker": np.full(rows, ticker, dtype=object), "price": price}))
        expected += len(range(0, rows - LENGTH, STRIDE))  # the target is the row after the window
    table = pa.concat_tables(parts)
    pq.write_table(table.slice(0, 800), root / "a.parquet", row_group_size=90)
    pq.write_table(table.slice(800), root / "b.parquet", row_group_size=120)
    return expected


@pytest.mark.parametrize("backend", ["tensorflow", "jax", "torch"])
def test_a_forecaster_fits_on_windows(backend: str, tmp_path: Path):
    expected = _write(tmp_path / "series")
    env = {**os.environ, "KERAS_BACKEND": backend, "TF_CPP_MIN_LOG_LEVEL": "2"}
    proc = subprocess.run(
        [sys.executable, str(DRIVER), str(tmp_path / "series")],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    result = json.loads(next(line for line in proc.stdout.splitlines() if line.startswith("RESULT "))[7:])
    assert result["windows"] == expected
    assert result["steps"] == -(-expected // 32)
    assert result["served"] == 4 * result["steps"]  # every epoch served its steps, none ran out
    losses = result["loss"]
    assert all(np.isfinite(losses)) and losses[-1] < 0.5 * losses[0]
    assert np.isfinite(result["evaluate"]) and result["evaluate"] < losses[0]
