"""A mixed-type table (numbers, a string category with empty values, dates) trained with dict inputs on every backend.

Keras fixes its backend at import, so each run is a subprocess
(``_categorical_driver.py``) reporting what it saw as JSON.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from _run_driver import run_driver

pytestmark = pytest.mark.backend

DRIVER = Path(__file__).parent / "_categorical_driver.py"


@pytest.mark.parametrize("backend", ["tensorflow", "jax", "torch"])
def test_a_mixed_table_trains_with_categorical_ids_and_standardized_numbers(backend, tmp_path):
    result = run_driver(DRIVER, backend, {"dir": str(tmp_path)})
    assert result["backend"] == backend
    assert result["sizes"] == {"city": 6}  # 4 cities + the empty string + id 0 (out of vocabulary, null)
    assert result["city_dtype"] == "int32" and result["day_dtype"] == "float32"
    assert all(math.isfinite(loss) for loss in result["loss"]) and len(result["loss"]) == 2
    assert abs(result["x_mean"]) < 0.2  # standardized in the pipeline (one shuffled batch of 64)
