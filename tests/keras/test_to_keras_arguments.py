"""``to_keras`` refuses what it does not know rather than guessing (a misspelt ``inputs=`` gave dict inputs)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import streamfeed as sf


@pytest.mark.parametrize("inputs", ["dicts", "xyz", None, "Matrix"])
def test_an_unknown_inputs_value_is_refused_naming_the_valid_ones(tmp_path, inputs):
    pq.write_table(pa.table({"x": np.arange(10.0), "y": np.arange(10.0)}), tmp_path / "d.parquet")
    data = sf.read_parquet(tmp_path / "d.parquet").batch(4)
    with pytest.raises(sf.ArgumentError) as excinfo:
        data.to_keras(label="y", inputs=inputs)
    assert "'matrix'" in str(excinfo.value) and "'dict'" in str(excinfo.value) and repr(inputs) in str(excinfo.value)
