"""A real ``fit`` of an ``Embedding(mask_zero=True)`` + ``GRU`` model on batches bucketed by length.

Each backend runs in its own process (Keras fixes its backend at import).
The driver counts the distinct input shapes the model was fed (the
adapter's batch listener sees every ``(x, y, w)`` served) and, where the
model's ``call`` runs with concrete shapes (JAX traces once per new shape,
torch runs eagerly), the shapes the model itself saw: with
``last_batch="pad"`` there is exactly one shape per boundary, so XLA
compiles ``len(boundaries)`` programs instead of one per batch length.
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

SRC = str(Path(__file__).resolve().parents[2] / "src")
BOUNDARIES, SIZES = (8, 16, 32), (32, 16, 8)

_FIT = textwrap.dedent(
    """
    import json, sys
    import numpy as np
    import keras
    import streamfeed as sf

    path, boundaries, sizes = sys.argv[1], tuple(json.loads(sys.argv[2])), tuple(json.loads(sys.argv[3]))
    ds = sf.read_parquet(path).shuffle(1, window=3)
    ds = ds.batch(bucket=sf.Bucket("tok", boundaries, sizes), last_batch="pad")
    data = ds.to_keras(features=["tok"], label="y", dtype="int32")
    served, called, training_began = set(), set(), False
    data.add_batch_listener(lambda number, packed, ids: served.add(tuple(np.shape(packed[0]))))

    class Shapes(keras.layers.Layer):
        '''Records each concrete input shape its call sees (traces under jit, every batch eagerly).'''

        def __init__(self):
            super().__init__()
            self.supports_masking = True

        def call(self, x, mask=None):
            shape = tuple(x.shape)
            if training_began and all(isinstance(d, int) for d in shape):
                called.add(shape)
            return x

    keras.utils.set_random_seed(0)
    model = keras.Sequential([
        keras.Input(shape=(None,), dtype="int32"),
        Shapes(),
        keras.layers.Embedding(1000, 16, mask_zero=True),
        keras.layers.GRU(16),
        keras.layers.Dense(1, activation="sigmoid"),
    ])
    model.compile(optimizer=keras.optimizers.Adam(0.01), loss="binary_crossentropy")
    class Began(keras.callbacks.Callback):
        def on_train_begin(self, logs=None):
            global training_began
            training_began = True  # before: Keras builds the model on placeholder shapes (torch: 83, 89)

    history = model.fit(data, epochs=3, verbose=0, callbacks=[Began()])
    print("RESULT " + json.dumps({
        "backend": keras.backend.backend(), "steps": len(data), "loss": history.history["loss"],
        "served": sorted(served), "called": sorted(called),
    }))
    """
)


@pytest.fixture(scope="module")
def tokens(tmp_path_factory) -> tuple[Path, list[list[int]]]:
    """Token lists of lengths 1..32; label: whether the row holds more ids above 500 than below (learnable)."""
    rng = np.random.default_rng(7)
    lengths = np.minimum(1 + (rng.pareto(1.0, 600) * 5).astype(int), 32)
    rows = [rng.integers(1, 1000, size=int(n)).tolist() for n in lengths]
    labels = np.array([float(np.mean(np.array(row) > 500) > 0.5) for row in rows], dtype=np.float32)
    path = tmp_path_factory.mktemp("bucket-fit") / "tokens.parquet"
    pq.write_table(pa.table({"tok": pa.array(rows, pa.list_(pa.int32())), "y": labels}), path, row_group_size=80)
    return path, rows


@pytest.mark.parametrize("backend", ["jax", "tensorflow", "torch"])
def test_keras_fits_bucketed_sequences_with_one_shape_per_boundary(tokens, backend):
    path, rows = tokens
    env = {**os.environ, "KERAS_BACKEND": backend, "TF_CPP_MIN_LOG_LEVEL": "2", "PYTHONPATH": SRC}
    proc = subprocess.run(
        [sys.executable, "-c", _FIT, str(path), json.dumps(BOUNDARIES), json.dumps(SIZES)],
        env=env,
        capture_output=True,
        text=True,
        timeout=400,
        check=False,
    )
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    assert proc.returncode == 0 and lines, proc.stderr[-3000:]
    result = json.loads(lines[-1][len("RESULT ") :])
    counts = [sum(1 for row in rows if low < len(row) <= high) for low, high in zip((0, *BOUNDARIES), BOUNDARIES)]
    assert result["backend"] == backend
    assert result["steps"] == sum(-(-count // size) for count, size in zip(counts, SIZES))
    expected = sorted([size, boundary] for size, boundary in zip(SIZES, BOUNDARIES))
    assert result["served"] == expected  # every batch is one of len(boundaries) shapes, all of them served
    if backend in ("jax", "torch"):  # TensorFlow traces once with the dimensions unknown: nothing concrete
        assert result["called"] == expected
    assert all(np.isfinite(result["loss"])) and result["loss"][-1] < result["loss"][0]
