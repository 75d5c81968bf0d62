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


def test_per_token_sample_weights_take_the_padding_mask_of_a_padded_last_batch(tmp_path):
    """A (rows, tokens) weight (packed or padded sequences) times the (rows,) mask of last_batch="pad"."""
    path = tmp_path / "a.parquet"
    pq.write_table(pa.table({"x": np.arange(10, dtype="float32"), "y": np.arange(10) % 2}), path)

    def per_token(chunk: dict) -> dict:
        tokens = np.repeat(chunk["x"][:, None], 3, axis=1)
        return {**chunk, "w": np.full((len(chunk["x"]), 3), 0.5, dtype="float32"), "f": tokens}

    per_token.new_columns = ("w", "f")  # type: ignore[attr-defined]
    train = sf.read_parquet(path).map(per_token, name="w").batch(4, last_batch="pad")
    keras_data = train.to_keras(features=["f"], label="y", sample_weight="w")
    with keras_data:
        last = [keras_data[i] for i in range(len(keras_data))][-1]
    weight = np.asarray(last[2])
    assert weight.shape == (4, 3)
    np.testing.assert_array_equal(weight, [[0.5] * 3, [0.5] * 3, [0.0] * 3, [0.0] * 3])  # 2 real rows, 2 padded
