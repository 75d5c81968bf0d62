"""Padded, bucketed, windowed and augmented pipelines through ``fit``, killed mid-epoch and resumed from
``DataCheckpoint``: bit-exact on every backend (issue 24's fourth item; packed rows: test_packing_resume.py).

Three processes per backend and pipeline (``_sequence_resume_driver.py``; Keras fixes its backend at
import): two epochs uninterrupted; a run checkpointing every batch, killed after the third batch of the
second epoch; and a new process resuming it. The resumed run must end with the uninterrupted run's
weights, bit for bit, and its optimizer step count: the same batches, in the same order, with the same
per-row random draws, and nothing trained twice.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from _run_driver import run_driver

from factories.images import _write_tree

pytestmark = pytest.mark.backend

DRIVER = Path(__file__).parent / "_sequence_resume_driver.py"
CRASH = 17


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("sequence-resume")
    rng = np.random.default_rng(3)
    rows = [rng.integers(1, 100, size=int(n)).tolist() for n in rng.integers(1, 13, 240)]
    y = np.array([float(np.mean(row)) / 100 for row in rows], dtype=np.float32)
    pq.write_table(
        pa.table({"tok": pa.array(rows, pa.list_(pa.int32())), "y": y}), root / "tokens.parquet", row_group_size=40
    )
    steps = np.cumsum(rng.normal(size=(2, 150)), axis=1).astype(np.float32)
    series = pa.table({"ticker": np.repeat(["a", "b"], 150), "price": steps.ravel()})
    pq.write_table(series, root / "series.parquet", row_group_size=50)
    _write_tree(root / "images")
    return root


KINDS = ["padded", "bucketed", "windows", "augmented"]


@pytest.mark.parametrize("backend", ["jax", "tensorflow", "torch"])
def test_a_fit_killed_mid_epoch_resumes_bit_exactly(data, backend, tmp_path):
    """Every kind on ``backend``: one process runs them all uninterrupted, one process per kind is killed
    mid-epoch, and one process resumes them all."""
    payload = {"kinds": KINDS, "data": str(data), "dir": str(tmp_path / "ckpt")}
    full = run_driver(DRIVER, backend, {**payload, "mode": "full", "dir": str(tmp_path / "unused")})
    for kind in KINDS:
        run_driver(DRIVER, backend, {**payload, "kinds": [kind], "mode": "crash"}, exit_code=CRASH)
        assert json.loads((tmp_path / "ckpt" / kind / "data_state.json").read_text())["keras_epoch"] == 1, kind
    resumed = run_driver(DRIVER, backend, {**payload, "mode": "resume"})
    for kind in KINDS:
        assert full[kind]["backend"] == backend and full[kind]["steps"] > 3, kind
        assert resumed[kind]["initial_epoch"] == 1, kind
        assert resumed[kind]["iterations"] == full[kind]["iterations"] == 2 * full[kind]["steps"], kind
        assert resumed[kind]["weights"] == full[kind]["weights"], kind  # bit-exact
