"""The checkpoint's files stay consistent even if a save is cut short."""

import json

import keras
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import streamfeed as sf
from streamfeed.keras import checkpoint


@pytest.fixture
def trained(tmp_path):
    path = tmp_path / "d.parquet"
    rng = np.random.default_rng(0)
    pq.write_table(
        pa.table({"a": rng.random(600, dtype=np.float32), "y": rng.random(600, dtype=np.float32)}),
        path,
        row_group_size=100,
    )
    model = keras.Sequential([keras.Input((1,)), keras.layers.Dense(1)])
    model.compile("sgd", "mse")
    train = sf.read_parquet(path).shuffle(seed=1).batch(50).to_keras(label="y")
    ckpt = checkpoint.DataCheckpoint(train, tmp_path / "ckpt", every=5)
    model.fit(train, epochs=1, verbose=0, callbacks=[ckpt])
    return ckpt, model, tmp_path / "ckpt"


def test_state_names_the_weights_saved_with_it_and_old_weights_are_removed(trained):
    _, _, directory = trained
    state = json.loads((directory / checkpoint.STATE_FILE).read_text())
    weights = sorted(p.name for p in directory.glob("*.weights.h5"))
    assert weights == [state["weights"]]
    assert state["keras_epoch"] == 1 and state["data"]["epoch"] == 1


def test_a_save_cut_short_leaves_the_previous_checkpoint_whole(trained, monkeypatch):
    ckpt, model, directory = trained
    before = json.loads((directory / checkpoint.STATE_FILE).read_text())

    def crash(path, data):
        raise KeyboardInterrupt("killed while writing the state")

    monkeypatch.setattr(checkpoint, "_atomic_write_json", crash)
    with pytest.raises(KeyboardInterrupt):
        ckpt._save(keras_epoch=5, trained=3)
    after = json.loads((directory / checkpoint.STATE_FILE).read_text())
    assert after == before
    assert (directory / before["weights"]).exists()  # the weights this state names are still there
    model.load_weights(directory / before["weights"])
