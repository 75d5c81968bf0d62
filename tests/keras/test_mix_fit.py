"""A mixture trained with a real ``fit`` on every backend, and resumed mid-epoch through Keras.

Keras fixes its backend at import, so each run is a subprocess
(``_mix_driver.py``) reporting what it saw as JSON.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from _run_driver import run_driver

pytestmark = pytest.mark.backend

DRIVER = Path(__file__).parent / "_mix_driver.py"


@pytest.mark.parametrize("backend", ["tensorflow", "jax", "torch"])
def test_a_mixture_trains_with_its_quotas_and_resumes_mid_epoch(backend, tmp_path):
    result = run_driver(DRIVER, backend, {"dir": str(tmp_path)})
    assert result["backend"] == backend
    assert len(result["loss"]) == 2 and all(math.isfinite(loss) for loss in result["loss"])
    first, second = result["epoch_ids"]
    # epoch 0 at 1:1 and epoch 1 at 3:1 of 300 rows, each row of a component once (a: 400 rows, b: 200)
    assert [sum(i < 10_000 for i in ids) for ids in (first, second)] == [150, 225]
    # a's 375 rows all differ; b's 225 are its whole epoch 0 and 25 rows of its epoch 1
    assert len(first) == len(second) == 300 and len(set(first) | set(second)) == 375 + 200
    assert result["state_weights"] == {"a": 3.0, "b": 1.0}
    assert result["resumed_batches"] == math.ceil(300 / 32) - 4
    assert result["resumed_ids"] == second[4 * 32 :]
