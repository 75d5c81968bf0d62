"""A checkpoint is weights and data position together, or it is refused; saving never writes through a link.

Tampered or mismatched checkpoints (issue 9, item 8): a data state whose
weights file is missing or renamed, weights whose data state is gone, and
every field of ``data_state.json`` of the wrong type or out of range are
refused with a :class:`StateError` naming the file or field, before
training starts. Planted symlinks at the names a save writes are replaced,
never followed, and the save's order of writes, ``fsync`` and renames is
the one its crash-consistency argument needs.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import keras
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import streamfeed as sf
from streamfeed.errors import StateError
from streamfeed.keras import checkpoint

ROWS, BATCH, EVERY = 600, 50, 5  # 12 batches per epoch; saves after batches 5 and 10 and at the epoch end


@pytest.fixture
def data(tmp_path) -> Path:
    path = tmp_path / "d.parquet"
    rng = np.random.default_rng(0)
    pq.write_table(
        pa.table({"a": rng.random(ROWS, dtype=np.float32), "y": rng.random(ROWS, dtype=np.float32)}),
        path,
        row_group_size=100,
    )
    return path


def make_model():
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((1,)), keras.layers.Dense(1)])
    model.compile(keras.optimizers.Adam(0.01), "mse")
    return model


def loaded(path: Path):
    """A fresh model (its optimizer built, as DataCheckpoint does) with the weights at ``path``."""
    model = make_model()
    model.optimizer.build(model.trainable_variables)
    model.load_weights(path)
    return model


def make_train(data: Path):
    return sf.read_parquet(data).shuffle(seed=1).batch(BATCH).to_keras(label="y")


class Killed(Exception):
    """Stands for the process dying: raised from a callback, so Keras ends no epoch."""


class KillAfter(keras.callbacks.Callback):
    """Kills training after ``batches`` batches of the first epoch, after the checkpoint saved them."""

    def __init__(self, batches: int) -> None:
        super().__init__()
        self.batches = batches

    def on_train_batch_end(self, batch, logs=None):
        if batch + 1 >= self.batches:
            raise Killed


@pytest.fixture
def directory(tmp_path, data) -> Path:
    """A checkpoint saved mid-epoch 0 (after 10 of 12 batches), with its weights."""
    target = tmp_path / "ckpt"
    model, train = make_model(), make_train(data)
    with train, pytest.raises(Killed):
        callbacks = [checkpoint.DataCheckpoint(train, target, every=EVERY), KillAfter(10)]
        model.fit(train, epochs=1, verbose=0, callbacks=callbacks)
    state = json.loads((target / checkpoint.STATE_FILE).read_text())
    assert state["data"]["epoch"] == 0 and state["keras_epoch"] == 0 and (target / state["weights"]).is_file()
    return target


def saved(directory: Path) -> dict:
    return json.loads((directory / checkpoint.STATE_FILE).read_text())


def rewrite(directory: Path, **fields) -> None:
    state = saved(directory)
    for name, value in fields.items():
        if value is None:
            state.pop(name)
        else:
            state[name] = value
    (directory / checkpoint.STATE_FILE).write_text(json.dumps(state))


def refused(data: Path, directory: Path, *, save_model: bool = True) -> str:
    with pytest.raises(StateError) as info:
        checkpoint.DataCheckpoint(make_train(data), directory, every=EVERY, save_model=save_model)
    return str(info.value)


def assert_described(message: str) -> None:
    """The one error shape: what, then expected/found/fix."""
    assert "Expected:" in message and "Found:" in message and "Fix:" in message, message


# ------------------------------------------------------------ tampered state
def test_a_data_state_whose_weights_file_is_missing_is_refused_naming_it(data, directory):
    weights = saved(directory)["weights"]
    (directory / weights).unlink()
    message = refused(data, directory)
    assert weights in message and checkpoint.STATE_FILE in message, message
    assert_described(message)


@pytest.mark.parametrize(
    "edited",
    ["../elsewhere.weights.h5", "/tmp/elsewhere.weights.h5", "model-000001.weights.h5", "", 7, None],
    ids=["parent", "absolute", "another-save", "empty", "int", "absent"],
)
def test_a_data_state_naming_other_weights_or_none_is_refused(data, directory, edited):
    """The weights entry must be this save's own file in the directory (its path was edited)."""
    if edited == "model-000001.weights.h5":  # a weights file that exists, but of another save
        (directory / edited).write_bytes((directory / saved(directory)["weights"]).read_bytes())
    rewrite(directory, weights=edited)
    message = refused(data, directory)
    assert "'weights'" in message, message
    assert_described(message)


def test_weights_without_their_data_state_are_refused_naming_the_missing_file(data, directory):
    (directory / checkpoint.STATE_FILE).unlink()
    message = refused(data, directory)
    assert checkpoint.STATE_FILE in message and saved_weights_named(directory, message), message
    assert_described(message)


def saved_weights_named(directory: Path, message: str) -> bool:
    return any(path.name in message for path in directory.glob("model-*.weights.h5"))


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("keras_epoch", -5),
        ("keras_epoch", "3"),
        ("keras_epoch", True),
        ("keras_epoch", 1.5),
        ("keras_epoch", None),
        ("save_number", 0),
        ("save_number", -1),
        ("save_number", "2"),
        ("save_number", None),
        ("data", [1, 2]),
        ("data", None),
        ("unexpected", 1),
    ],
)
def test_every_field_of_the_checkpoint_is_type_and_range_checked(data, directory, field, value):
    rewrite(directory, **{field: value})
    message = refused(data, directory)
    assert f"'{field}'" in message, message
    assert_described(message)


@pytest.mark.parametrize("text", ["{not json", "[1, 2]", ""], ids=["garbled", "list", "empty"])
def test_a_state_file_that_is_not_a_json_object_is_refused(data, directory, text):
    (directory / checkpoint.STATE_FILE).write_text(text)
    message = refused(data, directory)
    assert checkpoint.STATE_FILE in message, message
    assert_described(message)


def test_the_data_state_is_checked_by_the_pipeline_before_training(data, directory):
    state = saved(directory)
    state["data"]["offset"] = -3
    (directory / checkpoint.STATE_FILE).write_text(json.dumps(state))
    assert "offset" in refused(data, directory)


def test_without_save_model_a_state_without_weights_resumes(data, tmp_path):
    target = tmp_path / "data-only"
    model, train = make_model(), make_train(data)
    model.fit(train, epochs=1, verbose=0, callbacks=[checkpoint.DataCheckpoint(train, target, save_model=False)])
    assert "weights" not in saved(target)
    assert checkpoint.DataCheckpoint(make_train(data), target, save_model=False).initial_epoch == 1
    assert "'weights'" in refused(data, target)  # but a checkpoint that must restore weights has none


# ------------------------------------------------------- crash consistency
def test_a_first_save_cut_short_leaves_nothing_that_looks_like_a_checkpoint(data, tmp_path, monkeypatch):
    """Killed while publishing the first state: no final-named weights file, and a restart starts afresh."""
    target = tmp_path / "ckpt"

    def crash(path, state):
        raise KeyboardInterrupt("killed while writing the state")

    monkeypatch.setattr(checkpoint, "_atomic_write_json", crash)
    model, train = make_model(), make_train(data)
    with pytest.raises(KeyboardInterrupt):
        model.fit(train, epochs=1, verbose=0, callbacks=[checkpoint.DataCheckpoint(train, target, every=EVERY)])
    train.close()
    monkeypatch.undo()
    assert list(target.glob("model-*")) == []  # no weights file that a state could seem to name
    assert not (target / checkpoint.STATE_FILE).exists()
    restarted = checkpoint.DataCheckpoint(make_train(data), target, every=EVERY)
    assert restarted.initial_epoch == 0


def test_a_state_published_before_its_weights_were_moved_in_place_rolls_forward(data, directory, monkeypatch):
    """Killed after the state names the new weights but before they got their final name."""
    train, model = make_train(data), make_model()
    ckpt = checkpoint.DataCheckpoint(train, directory, every=EVERY)
    model.fit(train, epochs=1, verbose=0, callbacks=[ckpt])  # the rest of epoch 0: a save at its end
    before = saved(directory)
    expected = [np.array(w) for w in model.get_weights()]

    def crash(pending: Path, final: Path) -> None:
        raise KeyboardInterrupt("killed before the weights were moved in place")

    monkeypatch.setattr(checkpoint, "_move_in_place", crash)
    with pytest.raises(KeyboardInterrupt):
        ckpt._save(keras_epoch=1, trained=0)
    monkeypatch.undo()
    state = saved(directory)
    assert state["save_number"] == before["save_number"] + 1
    assert not (directory / state["weights"]).exists()
    resumed = checkpoint.DataCheckpoint(make_train(data), directory, every=EVERY)  # completes the save
    assert (directory / state["weights"]).is_file()
    for got, want in zip(loaded(directory / state["weights"]).get_weights(), expected):
        np.testing.assert_array_equal(got, want)
    assert resumed.initial_epoch == 1


def test_a_save_syncs_and_renames_in_the_order_crash_consistency_needs(data, tmp_path, monkeypatch):
    """fsync(new weights), fsync(state temp) → rename onto the state → fsync(dir), then old weights go.

    Without the file syncs a power loss can leave the renamed state file (or
    the weights it names) empty; without the directory sync the rename may
    not be durable when the old weights are deleted, and the old state would
    come back naming deleted weights.
    """
    target = tmp_path / "ckpt"
    model, train = make_model(), make_train(data)
    ckpt = checkpoint.DataCheckpoint(train, target, every=EVERY)
    model.fit(train, epochs=1, verbose=0, callbacks=[ckpt])
    old_weights = saved(target)["weights"]
    events: list[tuple[str, str]] = []
    real_fsync, real_replace, real_unlink = os.fsync, os.replace, os.unlink

    def fsync(fd):
        events.append(("fsync", os.readlink(f"/proc/self/fd/{fd}")))
        return real_fsync(fd)

    def replace(source, destination, **kwargs):
        events.append(("replace", f"{os.fspath(source)} -> {os.fspath(destination)}"))
        return real_replace(source, destination, **kwargs)

    def unlink(path, **kwargs):
        events.append(("unlink", os.fspath(path)))
        return real_unlink(path, **kwargs)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    monkeypatch.setattr(os, "unlink", unlink)
    ckpt._save(keras_epoch=1, trained=0)
    monkeypatch.undo()
    new_weights = saved(target)["weights"]
    directory = str(target.resolve())

    def first(kind: str, test, after: int = -1) -> int:
        for position, (event, detail) in enumerate(events):
            if position > after and event == kind and test(detail):
                return position
        raise AssertionError(f"no {kind} event as expected in {events}")

    state_replace = first("replace", lambda d: d.endswith(" -> " + str(target / checkpoint.STATE_FILE)))
    state_temporary = str(Path(events[state_replace][1].split(" -> ")[0]).resolve())
    assert first("fsync", lambda d: d == state_temporary) < state_replace, events
    assert first("fsync", lambda d: d.endswith(new_weights)) < state_replace, events
    directory_sync = first("fsync", lambda d: d == directory, after=state_replace)
    assert directory_sync < first("unlink", lambda d: d.endswith(old_weights)), events
    # Nothing of the save is left but the state and the weights it names.
    left = sorted(path.name for path in target.iterdir() if path.name != checkpoint.LOCK_FILE)
    assert left == sorted([checkpoint.STATE_FILE, new_weights])


# ------------------------------------------------------------------ symlinks
@pytest.mark.parametrize("name", ["data_state.tmp", "next-weights"])
def test_a_symlink_planted_where_a_save_writes_is_not_followed(data, tmp_path, name):
    target = tmp_path / "ckpt"
    model, train = make_model(), make_train(data)
    ckpt = checkpoint.DataCheckpoint(train, target, every=EVERY)
    model.fit(train, epochs=1, verbose=0, callbacks=[ckpt])
    victim = tmp_path / "victim.txt"
    victim.write_bytes(b"precious")
    if name == "next-weights":  # the name the next save's weights get is predictable
        name = checkpoint.WEIGHTS_PATTERN.format(saved(target)["save_number"] + 1)
    link = target / name
    link.symlink_to(victim)
    ckpt._save(keras_epoch=1, trained=0)
    assert victim.read_bytes() == b"precious"
    assert not (target / checkpoint.STATE_FILE).is_symlink()
    assert not (target / saved(target)["weights"]).is_symlink()
    loaded(target / saved(target)["weights"])
