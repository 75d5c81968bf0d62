"""``batch(..., pad=Pad(...))``: ragged list columns padded into rectangular batches, with lengths or a mask.

The input is a Parquet file written by pyarrow (token lists, some empty,
a long tail); every padded batch is compared with the rows pyarrow reads
back, padded by hand here. The Keras test trains a real
``Embedding(mask_zero=True)`` + ``GlobalAveragePooling1D`` model on every
backend, each in its own process (Keras fixes its backend at import):
about 40 s each on a loaded 2-core machine, most of it importing.
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

ROWS, ROW_GROUP, BATCH = 400, 60, 32
SRC = str(Path(__file__).resolve().parents[1] / "src")


def write_tokens(path: Path, rows: int = ROWS) -> dict[int, list[int]]:
    """Token lists of ids 1..999 (a fifth empty, lengths up to 60), label y = mean token > 500; the truth by id."""
    rng = np.random.default_rng(5)
    lengths = np.where(rng.random(rows) < 0.2, 0, np.minimum(1 + (rng.pareto(1.3, rows) * 5).astype(int), 60))
    tokens = [rng.integers(1, 1000, size=int(n)).tolist() for n in lengths]
    labels = np.array([float(np.mean(row) > 500) if row else 0.0 for row in tokens], dtype=np.float32)
    table = pa.table({"id": np.arange(rows), "tok": pa.array(tokens, pa.list_(pa.int32())), "y": labels})
    pq.write_table(table, path, row_group_size=ROW_GROUP)
    return {row["id"]: row["tok"] for row in pq.read_table(path).to_pylist()}


@pytest.fixture(scope="module")
def tokens(tmp_path_factory) -> tuple[Path, dict[int, list[int]]]:
    path = tmp_path_factory.mktemp("pad") / "tokens.parquet"
    return path, write_tokens(path)


def by_hand(row: list[int], width: int, truncate: str, value: int) -> list[int]:
    kept = row[-width:] if truncate == "start" and len(row) > width else row[:width]
    return kept + [value] * (width - len(kept))


def batches(ds: sf.Dataset) -> list[dict[str, np.ndarray]]:
    with ds.iter_epoch(0) as it:
        return list(it)


def test_pads_to_the_longest_row_of_each_batch_with_lengths(tokens):
    path, truth = tokens
    out = batches(sf.read_parquet(path).shuffle(2, window=3).batch(BATCH, pad=sf.Pad(value=0)))
    seen = []
    for batch in out:
        ids = batch["id"].tolist()
        width = max(len(truth[i]) for i in ids)
        assert batch["tok"].shape == (len(ids), width) and batch["tok"].dtype == np.int32
        assert batch["tok"].tolist() == [by_hand(truth[i], width, "error", 0) for i in ids]
        assert batch["tok_length"].tolist() == [len(truth[i]) for i in ids] and batch["tok_length"].dtype == np.int32
        seen += ids
    assert sorted(seen) == sorted(truth) and len({b["tok"].shape[1] for b in out}) > 1


@pytest.mark.parametrize("truncate", ["end", "start"])
def test_pads_and_cuts_to_a_fixed_length_with_a_mask(tokens, truncate):
    path, truth = tokens
    pad = sf.Pad(length=12, value=-1, truncate=truncate, mark="mask")
    out = batches(sf.read_parquet(path).batch(BATCH, pad=pad))
    assert any(len(truth[i]) > 12 for i in truth)  # some rows are cut
    for batch in out:
        ids = batch["id"].tolist()
        assert batch["tok"].shape == (len(ids), 12)
        assert batch["tok"].tolist() == [by_hand(truth[i], 12, truncate, -1) for i in ids]
        mask = batch["tok_mask"]
        assert mask.dtype == bool and mask.sum(axis=1).tolist() == [min(len(truth[i]), 12) for i in ids]
        assert (batch["tok"][~mask] == -1).all() and "tok_length" not in batch


def test_a_row_longer_than_the_length_raises_under_truncate_error(tokens):
    path, truth = tokens
    with pytest.raises(sf.DataError) as excinfo:
        batches(sf.read_parquet(path).batch(BATCH, pad=sf.Pad(length=3)))
    text = str(excinfo.value)
    assert "'tok'" in text and "longer than the pad length" in text and "truncate" in text


def test_a_padded_last_batch_and_resume_keep_the_padding(tokens):
    path, truth = tokens
    ds = (
        sf.read_parquet(path).shuffle(8, window=2).batch(BATCH, last_batch="pad", pad=sf.Pad(length=16, truncate="end"))
    )
    full = batches(ds)
    with ds.iter_epoch(0) as it:
        for _ in range(5):
            next(it)
        state = it.get_state()
    with ds.iter_epoch(0, state=state) as it:
        rest = list(it)
    assert len(rest) == len(full) - 5
    for a, b in zip(rest, full[5:]):
        assert a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)
    assert full[-1]["tok"].shape == (BATCH, 16)


def test_the_padding_is_in_the_fingerprint(tokens):
    path, _ = tokens
    base = sf.read_parquet(path).batch(BATCH, pad=sf.Pad(length=16, truncate="end"))
    with base.iter_epoch(0) as it:
        next(it)
        state = it.get_state()
    for other in (
        sf.Pad(length=17, truncate="end"),
        sf.Pad(length=16, truncate="start"),
        sf.Pad(length=16, truncate="end", value=3),
    ):
        with pytest.raises(sf.StateError):
            sf.read_parquet(path).batch(BATCH, pad=other).iter_epoch(0, state=state).close()
    with sf.read_parquet(path).batch(BATCH, pad=sf.Pad(length=16, truncate="end")).iter_epoch(0, state=state) as it:
        assert next(it)["tok"].shape == (BATCH, 16)


@pytest.mark.parametrize(
    "settings",
    [{"length": -1}, {"truncate": "middle"}, {"mark": "weights"}, {"value": "x"}, {"columns": "tok"}],
)
def test_invalid_pad_settings_are_described(settings):
    with pytest.raises(sf.ArgumentError):
        sf.Pad(**settings)


_FIT = textwrap.dedent(
    """
    import json, sys
    import numpy as np
    import keras
    import streamfeed as sf

    path, length = sys.argv[1], (None if sys.argv[2] == "longest" else int(sys.argv[2]))
    # An empty row masks every step: the masked average would divide by zero (NaN loss), so empty rows are left out.
    ds = sf.read_parquet(path).filter(lambda c: c["tok"].lengths() > 0, name="nonempty").shuffle(1, window=3)
    ds = ds.batch(32, pad=sf.Pad(length=length, truncate="end"))
    data = ds.to_keras(features=["tok"], label="y", dtype="int32")
    keras.utils.set_random_seed(0)
    model = keras.Sequential([
        keras.Input(shape=(length,), dtype="int32"),
        keras.layers.Embedding(1000, 8, mask_zero=True),
        keras.layers.GlobalAveragePooling1D(),
        keras.layers.Dense(1, activation="sigmoid"),
    ])
    model.compile(optimizer="adam", loss="binary_crossentropy")
    history = model.fit(data, epochs=3, verbose=0)
    predicted = model.predict(data, verbose=0)
    print("RESULT " + json.dumps({
        "backend": keras.backend.backend(), "steps": len(data), "loss": history.history["loss"],
        "predicted": list(predicted.shape),
    }))
    """
)


@pytest.mark.parametrize("length", ["24", "longest"])  # one shape, or each batch's longest row (its own shape)
@pytest.mark.parametrize("backend", ["jax", "tensorflow", "torch"])
def test_keras_fits_padded_sequences_with_a_masking_embedding(tokens, backend, length):
    path, truth = tokens
    env = {**os.environ, "KERAS_BACKEND": backend, "TF_CPP_MIN_LOG_LEVEL": "2", "PYTHONPATH": SRC}
    proc = subprocess.run(
        [sys.executable, "-c", _FIT, str(path), length],
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    assert proc.returncode == 0 and lines, proc.stderr[-3000:]
    result = json.loads(lines[-1][len("RESULT ") :])
    nonempty = sum(1 for row in truth.values() if row)
    assert result["backend"] == backend and result["steps"] == -(-nonempty // 32)
    assert result["predicted"] == [nonempty, 1]
    assert all(np.isfinite(result["loss"])) and result["loss"][-1] < result["loss"][0]
