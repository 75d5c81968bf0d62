"""Runs one Keras scenario on the backend named by ``KERAS_BACKEND``.

    KERAS_BACKEND=jax python _driver.py <scenario> '<json args>'

Keras fixes its backend at import, so ``test_backends.py`` runs this script
once per backend and scenario in a subprocess. The script writes the tiny
Parquet file it needs (if missing), runs real ``fit``/``evaluate``/
``predict`` calls and prints one line ``RESULT {json}`` with what it saw;
the tests assert on that. Checks that must happen inside the process (the
text of an exception) are reported as values, not asserted here, so every
part of a scenario reports even when another part fails.

Scenarios:
    basic   fit/evaluate/predict, dict inputs, validation messages,
            last_batch="pad", epochs of one and two batches, and the calls
            Keras makes on a plain PyDataset (peek_calls).
    resume  one training run of the resume test: ``full`` (uninterrupted),
            ``crash`` (checkpoints, then ``os._exit(17)`` at a given batch)
            or ``resume`` (a new process continuing from the checkpoint).
"""

from __future__ import annotations

import gc
import json
import os
import sys
import threading
import traceback
import warnings
from pathlib import Path

import numpy as np

ROWS, ROW_GROUP, BATCH = 3000, 250, 112  # 12 row groups; 27 batches, the last of 88 rows
FEATURES = ["f0", "f1", "f2", "f3"]
SEED, WINDOW = 7, 4
CRASH_CODE = 17


# --------------------------------------------------------------------- data
def write_data(path: str, rows: int = ROWS, row_group: int = ROW_GROUP) -> str:
    """Writes ``rows`` rows: id, four features, fid (= id as float), y (linear in the features)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    target = Path(path)
    if target.exists():
        return path
    rng = np.random.default_rng(0)
    features = rng.normal(size=(rows, len(FEATURES))).astype("float32")
    y = features @ np.array([1.0, -2.0, 0.5, 3.0], dtype="float32") + 0.1 * rng.normal(size=rows).astype("float32")
    columns = {"id": np.arange(rows, dtype="int64")}
    columns.update({name: features[:, i] for i, name in enumerate(FEATURES)})
    columns["fid"] = np.arange(rows, dtype="float32")
    columns["y"] = y.astype("float32")
    temporary = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    pq.write_table(pa.table(columns), temporary, row_group_size=row_group)
    os.replace(temporary, target)
    return path


def read_numpy(path: str) -> dict[str, np.ndarray]:
    """The whole file in memory, in source order (the reference for order checks)."""
    import pyarrow.parquet as pq

    table = pq.read_table(path)
    return {name: table.column(name).to_numpy() for name in table.column_names}


# ------------------------------------------------------------------- models
def dense_model(
    width: int = len(FEATURES),
    *,
    lr: float = 0.01,
    momentum: float = 0.9,
    steps_per_execution: int = 1,
    optimizer: str = "sgd",
):
    """A small seeded regression model, with SGD (momentum) or Adam (deterministic on CPU).

    Adam's update depends on ``optimizer.iterations`` (its bias correction),
    so a resumed run matches an uninterrupted one only if the iteration
    count was saved and restored exactly; SGD's does not.
    """
    import keras

    keras.utils.set_random_seed(0)
    inputs = keras.Input(shape=(width,), name="x")
    hidden = keras.layers.Dense(8, activation="tanh", name="hidden")(inputs)
    outputs = keras.layers.Dense(1, name="out")(hidden)
    model = keras.Model(inputs, outputs)
    if optimizer == "adam":
        update = keras.optimizers.Adam(learning_rate=lr)
    else:
        update = keras.optimizers.SGD(learning_rate=lr, momentum=momentum)
    model.compile(optimizer=update, loss="mse", steps_per_execution=steps_per_execution)
    return model


def weights_of(model) -> list[list[float]]:
    return [np.asarray(w, dtype="float64").ravel().tolist() for w in model.get_weights()]


def optimizer_state_of(model) -> dict:
    """The optimizer's variables by path (momenta, iteration count) and ``iterations``, exactly.

    float32 values are exact in float64, so JSON carries them bit for bit.
    """
    import keras

    optimizer = model.optimizer
    variables = {
        variable.path: np.asarray(keras.ops.convert_to_numpy(variable.value), dtype="float64").ravel().tolist()
        for variable in optimizer.variables
    }
    return {"iterations": int(keras.ops.convert_to_numpy(optimizer.iterations)), "variables": variables}


def recorder_class():
    """A callback recording, per Keras epoch, what the dataset served and trained."""
    import keras

    class Recorder(keras.callbacks.Callback):
        def __init__(self, dataset) -> None:
            super().__init__()
            self.dataset = dataset
            self.epochs: list[dict] = []
            self._steps: list[int] = []

        def on_epoch_begin(self, epoch, logs=None):
            self._steps = []

        def on_train_batch_end(self, batch, logs=None):
            self._steps.append(int(batch))

        def on_epoch_end(self, epoch, logs=None):
            self.epochs.append(
                {
                    "keras_epoch": int(epoch),
                    "data_epoch_after": int(self.dataset.epoch),
                    "steps": self._steps,
                    "ids": self.dataset.served_ids().astype("int64").tolist(),
                    "loss": float(logs["loss"]) if logs and "loss" in logs else None,
                }
            )

    return Recorder


def epoch_ids(dataset, epoch: int = 0, state=None) -> list[int]:
    """Ids of one epoch of a packed pipeline (from ``state`` if given), by iterating it directly."""
    from streamfeed.keras.packing import IDS

    with dataset.iter_epoch(epoch, state=state) as stream:
        return [int(i) for batch in stream for i in batch[IDS]]


def caught(fn):
    """Runs ``fn``; returns its result, or the exception's type and message."""
    try:
        return {"ok": True, "value": fn()}
    except Exception as exc:  # reported, asserted on by the test
        return {
            "ok": False,
            "type": type(exc).__name__,
            "module": type(exc).__module__,
            "message": str(exc),
            "traceback": traceback.format_exc()[-3000:],
        }


class Warnings:
    """Records Python warnings (Keras reports running out of data this way)."""

    def __enter__(self):
        self._context = warnings.catch_warnings(record=True)
        self.records = self._context.__enter__()
        warnings.simplefilter("always")
        return self

    def __exit__(self, *exc_info):
        self._context.__exit__(*exc_info)

    @property
    def messages(self) -> list[str]:
        """Distinct messages, in order of first appearance, with their category."""
        seen = [f"{record.category.__name__}: {record.message}" for record in self.records]
        return list(dict.fromkeys(seen))


# ------------------------------------------------------------------ basic
def scenario_basic(args: dict) -> dict:
    import keras

    path = write_data(args["data"])
    data = read_numpy(path)
    out: dict = {"backend": keras.backend.backend()}
    out["fit"] = caught(lambda: fit_evaluate_predict(path, data))
    out["dict_inputs"] = caught(lambda: dict_inputs(path, data))
    out["matrix_width"] = caught(lambda: wrong_width(path))
    out["dict_name"] = caught(lambda: wrong_dict_name(path))
    out["pad"] = caught(lambda: pad_weights(path))
    for rows in (2 * 64, 64):  # epochs of two batches and of one batch
        small = write_data(str(Path(args["data"]).with_name(f"small-{rows}.parquet")), rows=rows, row_group=rows // 8)
        out[f"tiny_{rows // 64}"] = caught(lambda small=small: tiny_epochs(small, batch=64))
    out["peek_calls"] = caught(lambda: keras_calls(batches=1, epochs=2))
    out["autotuned"] = caught(lambda: autotuned_fit(path))
    return out


def keras_calls(*, batches: int, epochs: int) -> list[str]:
    """What Keras calls on a plain ``PyDataset`` and on its callbacks while an unbuilt model fits.

    ``nb``: ``num_batches`` read; ``get<i>``: ``__getitem__(i)``; ``BEGIN``/``END``:
    ``PyDataset.on_epoch_begin``/``on_epoch_end``, ``END(reset)`` when
    :func:`streamfeed.keras._keras_internals.called_from_epoch_reset` saw
    Keras's ``EpochIterator.reset`` on the stack; ``begin<e>``,
    ``batch_end<b>``, ``epoch_end<e>``: Keras's callbacks. The evidence for
    (and canary of) the one Keras internal the adapter relies on.
    """
    import keras

    from streamfeed.keras._keras_internals import called_from_epoch_reset

    calls: list[str] = []

    class Probe(keras.utils.PyDataset):
        @property
        def num_batches(self):
            calls.append("nb")
            return batches

        def __getitem__(self, index):
            calls.append(f"get{index}")
            return np.ones((4, len(FEATURES)), "float32"), np.ones((4, 1), "float32")

        def on_epoch_begin(self):
            calls.append("BEGIN")

        def on_epoch_end(self):
            calls.append("END(reset)" if called_from_epoch_reset() else "END")

    class Calls(keras.callbacks.Callback):
        def on_epoch_begin(self, epoch, logs=None):
            calls.append(f"begin{epoch}")

        def on_train_batch_end(self, batch, logs=None):
            calls.append(f"batch_end{batch}")

        def on_epoch_end(self, epoch, logs=None):
            calls.append(f"epoch_end{epoch}")

    dense_model().fit(Probe(), epochs=epochs, verbose=0, callbacks=[Calls()])
    return calls


def fit_evaluate_predict(path: str, data: dict) -> dict:
    import keras

    import streamfeed as sf

    pipeline = sf.read_parquet(path)
    train = pipeline.shuffle(SEED, window=WINDOW).batch(BATCH).to_keras(features=FEATURES, label="y", ids="id")
    model = dense_model()
    recorder = recorder_class()(train)
    with Warnings() as caught_warnings:
        history = model.fit(train, epochs=3, verbose=0, callbacks=[recorder])  # shuffle=True (the default)
    gc.collect()
    threads_after_fit = sorted(t.name for t in threading.enumerate() if t.name.startswith("streamfeed-"))
    evaluation = pipeline.batch(BATCH).to_keras(features=FEATURES, label="y")
    loss = model.evaluate(evaluation, verbose=0)
    unshuffled = pipeline.batch(BATCH).to_keras(features=FEATURES, ids="id")
    predicted = np.asarray(model.predict(unshuffled, verbose=0))
    direct = keras.ops.convert_to_numpy(model(np.stack([data[name] for name in FEATURES], axis=1).astype("float32")))
    identity = identity_predictions(pipeline)
    return {
        "len": len(train),
        "epochs": recorder.epochs,
        "expected_ids": [epoch_ids(train.dataset, e) for e in range(3)],
        "epochs_started_early": train.epochs_started_early,
        "threads_after_fit": threads_after_fit,
        "data_epoch": train.epoch,
        "history_loss": [float(v) for v in history.history["loss"]],
        "evaluate_loss": float(loss),
        "predict_shape": list(predicted.shape),
        "predict_max_abs_diff": float(np.max(np.abs(predicted - direct))) if predicted.shape == direct.shape else None,
        "predict_ids": unshuffled.served_ids().astype("int64").tolist(),
        "identity": identity,
        "warnings": caught_warnings.messages,
    }


def identity_predictions(pipeline) -> list[float]:
    """Predictions of a fixed Dense layer that outputs the row's id (its ``fid`` feature)."""
    import keras

    inputs = keras.Input(shape=(1,), name="fid")
    layer = keras.layers.Dense(1, kernel_initializer="ones", bias_initializer="zeros")
    model = keras.Model(inputs, layer(inputs))
    predicted = model.predict(pipeline.batch(BATCH).to_keras(features=["fid"]), verbose=0)
    return np.asarray(predicted).ravel().tolist()


def dict_model():
    import keras

    keras.utils.set_random_seed(0)
    a = keras.Input(shape=(1,), name="f0")
    b = keras.Input(shape=(1,), name="f3")
    merged = keras.layers.Concatenate()([a, b])
    model = keras.Model({"f0": a, "f3": b}, keras.layers.Dense(1)(merged))
    model.compile(optimizer=keras.optimizers.SGD(0.05), loss="mse")
    return model


def dict_inputs(path: str, data: dict) -> dict:
    import keras

    import streamfeed as sf

    model = dict_model()
    reshape = lambda c: {**c, "f0": c["f0"].reshape(-1, 1), "f3": c["f3"].reshape(-1, 1)}  # noqa: E731
    pipeline = sf.read_parquet(path).map(reshape, name="columns_2d")
    train = (
        pipeline.shuffle(SEED, window=WINDOW)
        .batch(BATCH)
        .to_keras(features=["f0", "f3"], label="y", inputs="dict", model=model)
    )
    history = model.fit(train, epochs=2, verbose=0)
    with train:
        first = train[0]
    # The trained weights of f0 and f3 differ, so predictions tell if columns reach the right input.
    predicted = np.asarray(
        model.predict(pipeline.batch(BATCH).to_keras(features=["f0", "f3"], inputs="dict"), verbose=0)
    )
    direct = keras.ops.convert_to_numpy(model({name: data[name].reshape(-1, 1) for name in ("f0", "f3")}))
    return {
        "losses": [float(v) for v in history.history["loss"]],
        "x_keys": sorted(first[0]),
        "x_shapes": {name: list(first[0][name].shape) for name in first[0]},
        "predict_max_abs_diff": float(np.max(np.abs(predicted - direct))) if predicted.shape == direct.shape else None,
    }


def wrong_width(path: str) -> dict:
    import streamfeed as sf

    model = dense_model(width=3)
    train = sf.read_parquet(path).batch(BATCH).to_keras(features=FEATURES, label="y", model=model)
    model.fit(train, epochs=1, verbose=0)
    return {"fit": "completed"}


def wrong_dict_name(path: str) -> dict:
    import keras

    import streamfeed as sf

    keras.utils.set_random_seed(0)
    a = keras.Input(shape=(), name="f0")
    b = keras.Input(shape=(), name="height")
    merged = keras.layers.Concatenate()([keras.layers.Reshape((1,))(a), keras.layers.Reshape((1,))(b)])
    model = keras.Model({"f0": a, "height": b}, keras.layers.Dense(1)(merged))
    model.compile(optimizer="sgd", loss="mse")
    train = sf.read_parquet(path).batch(BATCH).to_keras(features=["f0", "f1"], label="y", inputs="dict", model=model)
    model.fit(train, epochs=1, verbose=0)
    return {"fit": "completed"}


def pad_weights(path: str) -> dict:
    import streamfeed as sf

    pipeline = sf.read_parquet(path).shuffle(SEED, window=WINDOW).batch(BATCH, last_batch="pad")
    inspect = pipeline.to_keras(features=FEATURES, label="y", ids="id")
    inspect.on_epoch_begin()
    batches = [inspect[i] for i in range(len(inspect))]
    inspect.on_epoch_end()
    weights = [np.asarray(batch[2]).astype("float64").tolist() for batch in batches]
    ids = [int(i) for i in inspect.served_ids()]
    train = pipeline.to_keras(features=FEATURES, label="y")
    model = dense_model()
    history = model.fit(train, epochs=2, verbose=0)
    return {
        "num_batches": len(batches),
        "batch_rows": [int(len(batch[0])) for batch in batches],
        "tuple_lengths": [len(batch) for batch in batches],
        "weights": weights,
        "ids": ids,
        "losses": [float(v) for v in history.history["loss"]],
        "data_epoch": train.epoch,
    }


def tiny_epochs(path: str, *, batch: int, epochs: int = 3) -> dict:
    import streamfeed as sf

    pipeline = sf.read_parquet(path).shuffle(SEED, window=2).batch(batch)
    train = pipeline.to_keras(features=FEATURES, label="y", ids="id")
    model = dense_model()
    recorder = recorder_class()(train)
    model.fit(train, epochs=epochs, verbose=0, callbacks=[recorder])
    return {
        "num_batches": len(train),
        "epochs": recorder.epochs,
        "data_epoch": train.epoch,
        "expected_ids": [epoch_ids(train.dataset, e) for e in range(epochs + 1)],
    }


def autotuned_fit(path: str, epochs: int = 3) -> dict:
    """``fit`` from an autotuned pipeline: what it trained, against the same pipeline without autotuning."""
    import streamfeed as sf

    plain = sf.read_parquet(path).shuffle(SEED, window=WINDOW).batch(BATCH)
    tuned = plain.with_options(autotune=True)
    train = tuned.to_keras(features=FEATURES, label="y", ids="id")
    recorder = recorder_class()(train)
    dense_model().fit(train, epochs=epochs, verbose=0, callbacks=[recorder])
    gc.collect()
    report = tuned.autotune.report()
    untuned = plain.to_keras(features=FEATURES, label="y", ids="id").dataset
    return {
        "ids": [record["ids"] for record in recorder.epochs],
        "expected_ids": [epoch_ids(untuned, e) for e in range(epochs)],
        "tuned": report is not None,
        "within_limit": report is not None and report.estimated_bytes <= report.memory_limit,
        "threads_after_fit": sorted(t.name for t in threading.enumerate() if t.name.startswith("streamfeed-")),
    }


# ------------------------------------------------------------------ resume
def scenario_resume(args: dict) -> dict:
    """One training run of the resume test.

    ``args``: data, epochs, spe (steps per execution), and optionally
    ``optimizer`` (``"sgd"``, the default, or ``"adam"``), ``checkpoint``
    (a directory for :class:`DataCheckpoint` with ``every``; resumed from
    if it holds a state) and ``crash`` ([epoch, batches]: exit
    with code 17 once that many batches of that Keras epoch were trained,
    after printing what was seen so far).
    """
    import keras

    import streamfeed as sf
    from streamfeed.keras import DataCheckpoint

    path = write_data(args["data"])
    train = (
        sf.read_parquet(path).shuffle(SEED, window=WINDOW).batch(BATCH).to_keras(features=FEATURES, label="y", ids="id")
    )
    model = dense_model(steps_per_execution=args["spe"], optimizer=args.get("optimizer", "sgd"))
    recorder = recorder_class()(train)
    callbacks: list = [recorder]
    out: dict = {"backend": keras.backend.backend(), "num_batches": len(train), "initial_epoch": 0}
    directory = args.get("checkpoint")
    if directory:
        state_path = Path(directory) / "data_state.json"
        if state_path.exists():  # resuming: where does the saved state point?
            state = json.loads(state_path.read_text())
            tail = epoch_ids(train.dataset, state=state["data"])
            out.update(
                saved_state=state, tail_from_state=tail, full_epoch=epoch_ids(train.dataset, state["data"]["epoch"])
            )
        ckpt = DataCheckpoint(train, directory, every=args["every"])
        callbacks.insert(0, ckpt)  # saves before the other callbacks see the batch
        out["initial_epoch"] = ckpt.initial_epoch
    caught_warnings = Warnings()

    def report() -> dict:
        return {
            **out,
            "epochs": recorder.epochs,
            "data_epoch": train.epoch,
            "weights": weights_of(model),
            "optimizer": optimizer_state_of(model),
            "warnings": caught_warnings.messages,
        }

    if args.get("crash"):
        callbacks.append(crasher(*args["crash"], recorder=recorder, report=report, directory=directory))
    with caught_warnings:
        model.fit(train, epochs=args["epochs"], initial_epoch=out["initial_epoch"], callbacks=callbacks, verbose=0)
    return report()


def crasher(epoch: int, after: int, *, recorder, report, directory: str):
    """A callback that kills the process once ``after`` batches of Keras epoch ``epoch`` were trained.

    Before dying it prints the result so far, with the steps and ids of the
    unfinished epoch and the checkpoint state on disk.
    """
    import keras

    class Crash(keras.callbacks.Callback):
        def __init__(self) -> None:
            super().__init__()
            self._epoch = -1

        def on_epoch_begin(self, e, logs=None):
            self._epoch = e

        def on_train_batch_end(self, batch, logs=None):
            if self._epoch == epoch and batch + 1 >= after:
                result = report()
                result["crashed"] = {
                    "keras_epoch": self._epoch,
                    "steps": list(recorder._steps),
                    "ids": recorder.dataset.served_ids().astype("int64").tolist(),
                    "state_on_disk": json.loads((Path(directory) / "data_state.json").read_text()),
                }
                print("RESULT " + json.dumps(result), flush=True)
                os._exit(CRASH_CODE)  # no cleanup, no callbacks: like a killed job

    return Crash()


SCENARIOS = {"basic": scenario_basic, "resume": scenario_resume}


def main() -> None:
    scenario, args = sys.argv[1], json.loads(sys.argv[2])
    result = SCENARIOS[scenario](args)
    print("RESULT " + json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
