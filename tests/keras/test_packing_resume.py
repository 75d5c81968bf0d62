"""Packed rows through ``fit``, killed mid-epoch and resumed from ``DataCheckpoint``: bit-exact on every backend.

Three processes per backend (Keras fixes its backend at import): an
uninterrupted run of two epochs; a run checkpointing every batch that is
killed with ``os._exit`` after the third batch of the second epoch (no
cleanup, like a killed job); and a new process resuming from that
checkpoint. Packing runs per fragment in the read threads, so the resumed
epoch re-packs its read unit and skips what was trained, with nothing
replayed: the resumed run must end with exactly the uninterrupted run's
weights and optimizer step count.
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
CRASH = 17

_RUN = textwrap.dedent(
    """
    import json, os, sys
    import numpy as np
    import keras
    import streamfeed as sf
    from streamfeed.keras import DataCheckpoint

    path, mode, directory = sys.argv[1], sys.argv[2], sys.argv[3]
    ds = sf.read_parquet(path).pack_sequences(24, max_segments=8, seed=2).shuffle(5, window=2).batch(4)
    train = ds.to_keras(features=["tok", "tok_segment_ids"], label="y", inputs="dict", dtype="int32")

    keras.utils.set_random_seed(0)
    tok = keras.Input(shape=(24,), dtype="int32", name="tok")
    segments = keras.Input(shape=(24,), dtype="int32", name="tok_segment_ids")
    x = keras.layers.Embedding(100, 8)(tok) + keras.layers.Embedding(9, 8)(segments)
    x = keras.layers.Dense(8)(keras.layers.GlobalAveragePooling1D()(x))
    model = keras.Model({"tok": tok, "tok_segment_ids": segments}, keras.layers.Dense(8)(x))
    model.compile(optimizer=keras.optimizers.Adam(0.01), loss="mse")

    class Crash(keras.callbacks.Callback):
        def on_epoch_begin(self, epoch, logs=None):
            self.epoch = epoch

        def on_train_batch_end(self, batch, logs=None):
            if mode == "crash" and self.epoch == 1 and batch == 2:
                os._exit(17)

    callbacks, initial = [Crash()], 0
    if mode != "full":
        checkpoint = DataCheckpoint(train, directory, every=1)
        callbacks.insert(0, checkpoint)  # saves before the crash
        initial = checkpoint.initial_epoch
    model.fit(train, epochs=2, initial_epoch=initial, callbacks=callbacks, verbose=0)
    print("RESULT " + json.dumps({
        "backend": keras.backend.backend(), "initial_epoch": initial, "steps": len(train),
        "iterations": int(keras.ops.convert_to_numpy(model.optimizer.iterations)),
        "weights": [np.asarray(w, dtype="float64").ravel().tolist() for w in model.get_weights()],
    }))
    """
)


@pytest.fixture(scope="module")
def tokens(tmp_path_factory) -> Path:
    """300 token lists of lengths 1..12 (ids 1..99); y: the mean id over 100, which packing carries per segment."""
    rng = np.random.default_rng(13)
    rows = [rng.integers(1, 100, size=int(n)).tolist() for n in rng.integers(1, 13, 300)]
    path = tmp_path_factory.mktemp("pack-resume") / "tokens.parquet"
    y = np.array([float(np.mean(row)) / 100 for row in rows], dtype=np.float32)
    pq.write_table(pa.table({"tok": pa.array(rows, pa.list_(pa.int32())), "y": y}), path, row_group_size=60)
    return path


def run(backend: str, path: Path, mode: str, directory: Path) -> tuple[int, dict | None]:
    env = {**os.environ, "KERAS_BACKEND": backend, "TF_CPP_MIN_LOG_LEVEL": "2", "PYTHONPATH": SRC}
    proc = subprocess.run(
        [sys.executable, "-c", _RUN, str(path), mode, str(directory)],
        env=env,
        capture_output=True,
        text=True,
        timeout=400,
        check=False,
    )
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    assert proc.returncode in (0, CRASH), proc.stderr[-3000:]
    return proc.returncode, json.loads(lines[-1][len("RESULT ") :]) if lines else None


@pytest.mark.parametrize("backend", ["jax", "tensorflow", "torch"])
def test_packed_fit_killed_mid_epoch_resumes_bit_exactly(tokens, backend, tmp_path):
    code, full = run(backend, tokens, "full", tmp_path / "unused")
    assert code == 0 and full is not None and full["backend"] == backend
    code, crashed = run(backend, tokens, "crash", tmp_path / "ckpt")
    assert code == CRASH and crashed is None  # killed in epoch 1, after its third batch
    assert json.loads((tmp_path / "ckpt" / "data_state.json").read_text())
    code, resumed = run(backend, tokens, "resume", tmp_path / "ckpt")
    assert code == 0 and resumed is not None and resumed["initial_epoch"] == 1
    assert resumed["iterations"] == full["iterations"] == 2 * full["steps"]
    assert resumed["weights"] == full["weights"]  # bit-exact: the same batches, in the same order, after resume
