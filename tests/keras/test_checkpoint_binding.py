"""A checkpoint's data state is bound to its weights, and one directory has one checkpointing process (issue 22, 12).

The state records the SHA-256 of the weights file saved with it: weights of
another model of the same architecture, or newer weights under a rolled-back
state's name, are refused naming both files. A second process checkpointing
into a directory another one holds (a lock file, ``flock``) is refused naming
the directory and the holder's pid; a holder killed with ``kill -9`` leaves
no lock behind. Real training (Keras ``fit`` on the in-process backend) and
real second processes.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import keras
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import streamfeed as sf
from streamfeed.errors import StateError
from streamfeed.keras import checkpoint

ROWS, BATCH, EVERY = 600, 50, 5


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


def make_model(seed: int = 0):
    keras.utils.set_random_seed(seed)
    model = keras.Sequential([keras.Input((1,)), keras.layers.Dense(1)])
    model.compile(keras.optimizers.Adam(0.01), "mse")
    return model


def make_train(data: Path):
    return sf.read_parquet(data).shuffle(seed=1).batch(BATCH).to_keras(label="y")


def train(data: Path, directory: Path, *, seed: int = 0, epochs: int = 1) -> checkpoint.DataCheckpoint:
    model, feed = make_model(seed), make_train(data)
    ckpt = checkpoint.DataCheckpoint(feed, directory, every=EVERY)
    model.fit(feed, epochs=epochs, verbose=0, callbacks=[ckpt])
    return ckpt


def saved(directory: Path) -> dict:
    return json.loads((directory / checkpoint.STATE_FILE).read_text())


def refused(data: Path, directory: Path) -> str:
    with pytest.raises(StateError) as info:
        checkpoint.DataCheckpoint(make_train(data), directory, every=EVERY)
    message = str(info.value)
    assert "Expected:" in message and "Found:" in message and "Fix:" in message, message
    return message


# ------------------------------------------------------------ the binding
def test_the_state_records_the_digest_of_the_weights_saved_with_it(data, tmp_path):
    import hashlib

    directory = tmp_path / "ckpt"
    train(data, directory)
    state = saved(directory)
    assert state["weights_sha256"] == hashlib.sha256((directory / state["weights"]).read_bytes()).hexdigest()


def test_weights_of_another_model_of_the_same_architecture_are_refused_naming_both_files(data, tmp_path):
    ours, theirs = tmp_path / "ours", tmp_path / "theirs"
    train(data, ours, seed=0)
    train(data, theirs, seed=7)
    name = saved(ours)["weights"]
    assert name == saved(theirs)["weights"]  # same save number, same name: only the content tells them apart
    shutil.copyfile(theirs / name, ours / name)
    message = refused(data, ours)
    assert str(ours / checkpoint.STATE_FILE) in message and str(ours / name) in message, message
    assert saved(ours)["weights_sha256"] in message, message


def test_a_rolled_back_data_state_with_newer_weights_is_refused(data, tmp_path):
    directory = tmp_path / "ckpt"
    train(data, directory)
    backup = (directory / checkpoint.STATE_FILE).read_text()  # the state after epoch 1
    ckpt = checkpoint.DataCheckpoint(make_train(data), directory, every=EVERY)
    model = make_model()
    model.fit(ckpt.dataset, epochs=2, initial_epoch=ckpt.initial_epoch, verbose=0, callbacks=[ckpt])
    newer = directory / saved(directory)["weights"]
    del ckpt
    (directory / checkpoint.STATE_FILE).write_text(backup)  # rolled back ...
    os.replace(newer, directory / json.loads(backup)["weights"])  # ... with the newer weights under its name
    message = refused(data, directory)
    assert json.loads(backup)["weights"] in message and checkpoint.STATE_FILE in message, message


def test_the_digest_field_is_type_checked(data, tmp_path):
    directory = tmp_path / "ckpt"
    train(data, directory)
    state = saved(directory)
    state["weights_sha256"] = 12
    (directory / checkpoint.STATE_FILE).write_text(json.dumps(state))
    assert "'weights_sha256'" in refused(data, directory)


def test_a_matching_checkpoint_still_resumes_and_its_weights_load(data, tmp_path):
    directory = tmp_path / "ckpt"
    train(data, directory)
    resumed = checkpoint.DataCheckpoint(make_train(data), directory, every=EVERY)
    assert resumed.initial_epoch == 1
    model = make_model(3)
    model.fit(resumed.dataset, epochs=2, initial_epoch=1, verbose=0, callbacks=[resumed])
    assert saved(directory)["keras_epoch"] == 2


# ------------------------------------------------------------ one process per directory
HOLDER = textwrap.dedent(
    """
    import sys
    import streamfeed as sf
    from streamfeed.keras import checkpoint

    feed = sf.read_parquet(sys.argv[1]).batch(50).to_keras(label="y")
    ckpt = checkpoint.DataCheckpoint(feed, sys.argv[2], every=5)
    print("HOLDING", flush=True)
    sys.stdin.read()  # holds the checkpoint until the test closes stdin (or kills it)
    """
)


def start_holder(data: Path, directory: Path) -> subprocess.Popen:
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(data), str(directory)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env,
    )
    assert holder.stdout is not None and holder.stdout.readline().strip() == "HOLDING"
    return holder


def test_a_second_process_checkpointing_into_the_same_directory_is_refused_naming_the_holder(data, tmp_path):
    directory = tmp_path / "ckpt"
    holder = start_holder(data, directory)
    try:
        message = refused(data, directory)
        assert str(directory) in message and str(holder.pid) in message, message
    finally:
        holder.communicate("")  # stdin closed: the holder exits and its lock goes with it
    assert holder.returncode == 0
    train(data, directory)  # the directory is free again
    assert saved(directory)["keras_epoch"] == 1
    assert not (directory / checkpoint.LOCK_FILE).exists()  # training ended: the lock and its file are gone


def test_a_holder_killed_with_sigkill_leaves_no_lock_behind(data, tmp_path):
    directory = tmp_path / "ckpt"
    holder = start_holder(data, directory)
    os.kill(holder.pid, signal.SIGKILL)
    holder.communicate()
    assert holder.returncode == -signal.SIGKILL
    train(data, directory)  # the kernel released the flock with the process
    assert saved(directory)["keras_epoch"] == 1


def test_a_link_planted_at_the_lock_file_is_refused_not_followed(data, tmp_path):
    directory = tmp_path / "ckpt"
    directory.mkdir()
    victim = tmp_path / "victim"
    victim.write_bytes(b"precious")
    (directory / checkpoint.LOCK_FILE).symlink_to(victim)
    message = refused(data, directory)
    assert checkpoint.LOCK_FILE in message, message
    assert victim.read_bytes() == b"precious"


def test_the_same_process_may_make_a_new_checkpoint_on_a_directory_after_an_interrupted_fit(data, tmp_path):
    """A notebook: fit interrupted (no on_train_end), the cell run again with a new DataCheckpoint."""
    directory = tmp_path / "ckpt"

    class Interrupt(keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            if batch == 6:
                raise KeyboardInterrupt

    model, feed = make_model(), make_train(data)
    first = checkpoint.DataCheckpoint(feed, directory, every=EVERY)
    with pytest.raises(KeyboardInterrupt):
        model.fit(feed, epochs=1, verbose=0, callbacks=[first, Interrupt()])
    again = checkpoint.DataCheckpoint(make_train(data), directory, every=EVERY)  # first is still alive
    assert again.initial_epoch == 0 and saved(directory)["save_number"] == 1
