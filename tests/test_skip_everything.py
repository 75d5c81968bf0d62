"""An epoch that ``on_error="skip"`` empties is an error, not an empty epoch (issue 23, item 3c).

Before, every row left out gave an epoch of no batch and no word: a
training run "finished" on nothing. Now the epoch's end raises
:class:`~streamfeed.errors.ErrorBudgetExceeded` naming how much was skipped
and the first reasons, through ``iter_epoch`` and through Keras ``fit``.
"""

from __future__ import annotations

import io
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
from PIL import Image

import streamfeed as sf
from streamfeed.errors import ErrorBudgetExceeded
from streamfeed.transforms.images import decode_images


def _truncated_jpeg(seed: int) -> bytes:
    out = io.BytesIO()
    pixels = np.random.default_rng(seed).integers(0, 256, (64, 64, 3), dtype=np.uint8)  # noise: most bytes are data
    Image.fromarray(pixels).save(out, "JPEG")
    data = out.getvalue()
    return data[: len(data) // 2]


@pytest.fixture
def bad_folder(tmp_path: Path) -> Path:
    """Two classes of JPEGs, every one cut in half (whole headers: the probe at open passes them)."""
    for label in ("a", "b"):
        (tmp_path / "imgs" / label).mkdir(parents=True)
        for index in range(5):
            (tmp_path / "imgs" / label / f"{index}.jpg").write_bytes(_truncated_jpeg(index))
    return tmp_path / "imgs"


@pytest.fixture
def bad_parquet(tmp_path: Path) -> Path:
    """Encoded images that none decodes, in two row groups."""
    table = pa.table({"image_bytes": pa.array([_truncated_jpeg(i) for i in range(6)]), "label": np.arange(6) % 2})
    path = tmp_path / "bad.parquet"
    pq.write_table(table, path, row_group_size=3)
    return path


def test_an_image_folder_whose_every_image_is_bad_raises_at_the_epoch_end(bad_folder: Path):
    dataset = sf.read_images(bad_folder, size=(8, 8), on_error="skip").batch(4)
    with pytest.raises(ErrorBudgetExceeded) as raised:
        with dataset.iter_epoch(0) as epoch:
            list(epoch)
    message = str(raised.value)
    assert "no row" in message and "Epoch 0" in message
    assert "10 unit(s), 10 row(s)" in message and "0.jpg" in message, message
    assert "Premature end" in message or "truncated" in message, message


def test_a_decode_op_that_skips_every_row_raises_too(bad_parquet: Path):
    dataset = sf.read_parquet(bad_parquet, on_error="skip").map(decode_images((8, 8)))
    with pytest.raises(ErrorBudgetExceeded, match="6 row"):
        with dataset.iter_epoch(0) as epoch:
            list(epoch)


def test_an_epoch_with_rows_left_is_not_an_error(bad_folder: Path):
    Image.fromarray(np.zeros((8, 8, 3), dtype=np.uint8)).save(bad_folder / "a" / "good.png")
    dataset = sf.read_images(bad_folder, size=(8, 8), on_error="skip")
    with dataset.iter_epoch(0) as epoch:
        assert sum(len(chunk["image"]) for chunk in epoch) == 1
    assert dataset.report.skipped_rows == 10


def test_an_iterator_closed_before_its_first_batch_does_not_raise(bad_folder: Path):
    epoch = sf.read_images(bad_folder, size=(8, 8), on_error="skip").iter_epoch(0)
    epoch.close()
    assert list(epoch) == []


_FIT = textwrap.dedent(
    """
    import json, sys
    import keras
    import streamfeed as sf
    from streamfeed.errors import ErrorBudgetExceeded
    model = keras.Sequential([keras.Input((8, 8, 3)), keras.layers.Flatten(), keras.layers.Dense(2)])
    model.compile("sgd", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    train = sf.read_images(sys.argv[1], size=(8, 8), on_error="skip").batch(4)
    try:
        history = model.fit(train.to_keras(features=["image"], label="label", model=model), epochs=2, verbose=0)
        result = {"raised": None, "history": {k: len(v) for k, v in history.history.items()}}
    except Exception as exc:
        result = {"raised": type(exc).__name__, "message": str(exc)}
    print("RESULT " + json.dumps(result))
    """
)


@pytest.mark.backend
def test_keras_fit_on_tensorflow_raises_instead_of_training_on_nothing(bad_folder: Path):
    env = {**os.environ, "KERAS_BACKEND": "tensorflow", "TF_CPP_MIN_LOG_LEVEL": "2"}
    proc = subprocess.run(
        [sys.executable, "-c", _FIT, str(bad_folder)], env=env, capture_output=True, text=True, timeout=300
    )
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    assert proc.returncode == 0 and lines, proc.stderr[-4000:]
    result = json.loads(lines[-1][len("RESULT ") :])
    assert result["raised"] == "ErrorBudgetExceeded", result
    assert "10 unit(s), 10 row(s)" in result["message"], result
