"""Hard-example sampling in a real ``fit`` on every backend, killed mid-epoch and resumed exactly.

Keras fixes its backend at import, so each run is a subprocess
(``_hard_driver.py``): an uninterrupted run, a run killed after 12
batches of epoch 1 (checkpointing every 5, the checkpoint callback before
the miner), and a new process resuming it.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from _run_driver import run_driver

pytestmark = pytest.mark.backend

DRIVER = Path(__file__).parent / "_hard_driver.py"
ROWS, BATCH, EVERY, CRASH_AFTER = 1200, 48, 5, 12
HARD = np.arange(ROWS) % 10 == 0  # the flipped labels


@pytest.mark.parametrize("backend", ["tensorflow", "jax", "torch"])
def test_hard_rows_are_drawn_more_and_a_killed_run_resumes_exactly(backend, tmp_path):
    full = run_driver(DRIVER, backend, {"dir": str(tmp_path / "full"), "mode": "full"})
    assert full["backend"] == backend
    epochs = [np.asarray(full["served"][str(e)]) for e in range(3)]
    assert [len(ids) for ids in epochs] == [ROWS] * 3  # the exact epoch length
    assert np.array_equal(np.sort(epochs[0]), np.arange(ROWS))  # no scores yet: every row once
    # from epoch 1 on the flipped rows (10 %) are drawn by their loss, and no row is drawn less than its floor
    for ids in epochs[1:]:
        assert HARD[ids].mean() > 0.2
        assert len(np.unique(ids[~HARD[ids]])) >= 0.3 * (~HARD).sum()
    assert full["report"]["samples"] == ROWS and full["table"]["epoch"] == 3  # frozen for the next epoch
    assert len(full["table"]["hashes"]) == ROWS
    assert full["started_early"] == 0  # epoch e + 1 is drawn from e's scores: never read before e ends

    crash_dir = tmp_path / "crash"
    crash = run_driver(DRIVER, backend, {"dir": str(crash_dir), "mode": "crash"}, exit_code=17)
    assert crash["served"]["0"] == full["served"]["0"]
    resumed = run_driver(DRIVER, backend, {"dir": str(crash_dir), "mode": "resume"})
    assert resumed["initial_epoch"] == 1
    # the resumed epoch serves what the uninterrupted one served after the checkpoint's 10 batches,
    # and epoch 2, drawn from scores half measured before the kill and half after, is the same draw
    saved = (CRASH_AFTER // EVERY) * EVERY * BATCH
    assert resumed["served"]["1"] == full["served"]["1"][saved:]
    assert resumed["served"]["2"] == full["served"]["2"]
    assert resumed["table"]["hashes"] == full["table"]["hashes"]
    np.testing.assert_allclose(resumed["table"]["losses"], full["table"]["losses"], rtol=1e-5, atol=1e-6)
    flat = [np.concatenate([np.asarray(w) for w in run["weights"]]) for run in (resumed, full)]
    np.testing.assert_allclose(flat[0], flat[1], rtol=1e-5, atol=1e-6)
