"""``streamfeed inspect ckpt/``: a DataCheckpoint directory's training state, read as a user's shell runs it.

The state is made by the real parts: a hard-example mixture of scores
recorded as the miner records them, taken by ``KerasDataset.get_state``
and committed by ``commit_checkpoint`` (no model: the weights are not
what is inspected).
"""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from _console import assert_short_failure, streamfeed

import streamfeed as sf
from streamfeed.keras.checkpoint import commit_checkpoint

ROWS = 600


def test_a_hard_example_checkpoint_shows_its_score_distribution(tmp_path):
    path = tmp_path / "data.parquet"
    pq.write_table(pa.table({"id": np.arange(ROWS), "x": np.arange(ROWS) * 1.0, "y": np.arange(ROWS) % 2}), path)
    hard = sf.read_parquet(path).shuffle(seed=1).hard_examples("id")
    losses = np.linspace(0.0, 3.0, ROWS) ** 2
    hard.sampler.scores.record(np.arange(ROWS), losses)
    hard.sampler.scores.freeze(1)
    hard.sampler.scores.record(np.arange(7), np.ones(7))  # measured in epoch 1, not merged yet
    train = hard.batch(50).to_keras(features=["x"], label="y", ids="id")
    train.set_state(train.dataset.initial_state(1) | {"row_scores": hard.sampler.scores.state(1)})
    commit_checkpoint(tmp_path / "ckpt", {"keras_epoch": 1, "data": train.get_state(), "save_number": 3})
    train.close()

    proc = streamfeed("inspect", tmp_path / "ckpt", "--json")
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout)
    assert (summary["keras_epoch"], summary["data_epoch"], summary["save_number"]) == (1, 1, 3)
    hard_summary = summary["hard_examples"]
    assert hard_summary["rows_scored"] == ROWS and hard_summary["table_epoch"] == 1
    assert hard_summary["pending_measurements"] == 7
    assert np.isclose(hard_summary["loss_quantiles"]["0.5"], np.quantile(losses, 0.5))
    assert np.isclose(hard_summary["top_tenth_loss_share"], np.sort(losses)[-60:].sum() / losses.sum())
    assert "mixture" not in summary

    text = streamfeed("inspect", tmp_path / "ckpt")
    assert text.returncode == 0 and f"{ROWS} rows scored" in text.stdout and "7 measurements" in text.stdout


def test_a_mixture_checkpoint_shows_the_weights_in_force(tmp_path):
    for name in ("a", "b"):
        pq.write_table(pa.table({"id": np.arange(100), "x": np.arange(100.0)}), tmp_path / f"{name}.parquet")
    parts = {name: sf.read_parquet(tmp_path / f"{name}.parquet") for name in ("a", "b")}
    mixed = sf.mix(parts, weights={"a": 3, "b": 1}, seed=1).batch(10)
    with mixed.iter_epoch(0) as stream:
        next(stream)
        next(stream)
        state = stream.get_state()
    commit_checkpoint(tmp_path / "ckpt", {"keras_epoch": 0, "data": state, "save_number": 1})
    summary = json.loads(streamfeed("inspect", tmp_path / "ckpt" / "data_state.json", "--json").stdout)
    assert summary["mixture"] == {"weights": {"a": 3.0, "b": 1.0}, "rows_served": 20}


def test_a_damaged_state_is_a_short_error_naming_the_file(tmp_path):
    (tmp_path / "ckpt").mkdir()
    (tmp_path / "ckpt" / "data_state.json").write_text('{"keras_epoch": 1}')
    message = assert_short_failure(streamfeed("inspect", tmp_path / "ckpt"), 1)
    assert "data_state.json" in message and "DataCheckpoint" in message
