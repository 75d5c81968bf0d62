"""A real ``fit`` on packed rows: token lists packed into rows of 32 with segment ids and positions.

Each backend runs in its own process (Keras fixes its backend at import).
The model takes the packed tokens, their positions (a position embedding)
and their segment ids, from which it builds the attention mask that keeps
each packed sequence to itself (``segment_q == segment_k``); a per-token
weight of 0 on padding (a ``map`` after ``pack_sequences``) keeps the pad tokens out
of the loss. The per-token label is learnable from the tokens, so the loss
must fall on every backend, and every batch the model sees has the one
packed shape (``last_batch="drop"``: one shape, no short last batch).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import streamfeed as sf

SRC = str(Path(__file__).resolve().parents[2] / "src")
LENGTH, BATCH = 32, 8

_FIT = textwrap.dedent(
    """
    import json, sys
    import numpy as np
    import keras
    import streamfeed as sf

    path, length, batch = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])

    def weights(columns):
        return {**columns, "w": (columns["tok_segment_ids"] > 0).astype("float32")}

    ds = sf.read_parquet(path).pack_sequences(length, columns=["tok", "tgt"], max_segments=16, seed=0)
    ds = ds.map(weights, name="weights").shuffle(1, window=2).batch(batch, last_batch="drop")
    data = ds.to_keras(
        features=["tok", "tok_positions", "tok_segment_ids"], label="tgt", sample_weight="w",
        inputs="dict", dtype="int32",
    )
    served = set()
    data.add_batch_listener(
        lambda number, packed, ids: served.add(tuple(tuple(np.shape(x)) for x in packed[0].values()))
    )

    keras.utils.set_random_seed(0)
    tok = keras.Input(shape=(length,), dtype="int32", name="tok")
    positions = keras.Input(shape=(length,), dtype="int32", name="tok_positions")
    segments = keras.Input(shape=(length,), dtype="int32", name="tok_segment_ids")
    x = keras.layers.Embedding(100, 16)(tok) + keras.layers.Embedding(length, 16)(positions)
    same = keras.layers.Lambda(
        lambda s: keras.ops.equal(keras.ops.expand_dims(s, 2), keras.ops.expand_dims(s, 1))
    )(segments)
    x = x + keras.layers.MultiHeadAttention(num_heads=2, key_dim=8)(x, x, attention_mask=same)
    outputs = keras.layers.Dense(2, activation="softmax")(x)
    model = keras.Model({"tok": tok, "tok_positions": positions, "tok_segment_ids": segments}, outputs)
    model.compile(optimizer=keras.optimizers.Adam(0.01), loss="sparse_categorical_crossentropy")
    history = model.fit(data, epochs=3, verbose=0)
    print("RESULT " + json.dumps({
        "backend": keras.backend.backend(), "steps": len(data), "loss": history.history["loss"],
        "served": sorted(served),
    }))
    """
)


@pytest.fixture(scope="module")
def tokens(tmp_path_factory) -> Path:
    """600 token lists of lengths 1..24 (ids 1..99); the per-token label: whether the id is odd."""
    rng = np.random.default_rng(11)
    rows = [rng.integers(1, 100, size=int(n)).tolist() for n in rng.integers(1, 25, 600)]
    path = tmp_path_factory.mktemp("pack-fit") / "tokens.parquet"
    table = pa.table(
        {
            "tok": pa.array(rows, pa.list_(pa.int32())),
            "tgt": pa.array([[t % 2 for t in row] for row in rows], pa.list_(pa.int32())),
        }
    )
    pq.write_table(table, path, row_group_size=100)
    return path


@pytest.mark.parametrize("backend", ["jax", "tensorflow", "torch"])
def test_keras_fits_packed_rows_with_a_segment_attention_mask(tokens, backend):
    env = {**os.environ, "KERAS_BACKEND": backend, "TF_CPP_MIN_LOG_LEVEL": "2", "PYTHONPATH": SRC}
    proc = subprocess.run(
        [sys.executable, "-c", _FIT, str(tokens), str(LENGTH), str(BATCH)],
        env=env,
        capture_output=True,
        text=True,
        timeout=400,
        check=False,
    )
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    assert proc.returncode == 0 and lines, proc.stderr[-3000:]
    result = json.loads(lines[-1][len("RESULT ") :])
    packed = len(sf.read_parquet(tokens).pack_sequences(LENGTH, columns=["tok", "tgt"], max_segments=16))
    assert result["backend"] == backend
    assert packed < 600 / 2 and result["steps"] == packed // BATCH  # exact, known before the first batch
    assert result["served"] == [[[BATCH, LENGTH]] * 3]  # one packed shape for every input of every batch
    assert all(np.isfinite(result["loss"])) and result["loss"][-1] < result["loss"][0]
