"""What is left of the pipeline when ``fit`` returns: nothing, and nothing read for an epoch never run.

Issue 28 item 1: on data larger than memory, ``fit`` returned 13-42 s after
its last epoch ended, idle, in the teardown of its own frame. Item 6: a
one-epoch ``fit`` read up to 67 row groups of an epoch that never came. The
adapter starts each epoch's reads while the one before is served; it must
not start one past the last epoch ``fit`` runs, and nothing of the pipeline
may be left for ``fit``'s teardown to stop.

Each run is a real ``fit`` in a subprocess (Keras fixes its backend at
import), over a Parquet file written by pyarrow: 12 row groups, shuffled in
units of 4, 27 batches per epoch. The observables, none timed:

- ``reads``: a per-fragment ``map`` counts the fragments ``fit`` reads
  (from its call: ``to_keras`` reads a batch before); after
  ``fit(epochs=N)`` it is exactly ``N`` epochs' fragments, at
  ``on_train_end`` and after ``fit`` returned.
- the threads named ``streamfeed-*`` alive at ``on_train_end`` and after
  ``fit`` returned (no ``gc.collect()``: teardown must not wait for the
  collector), and the unit buffers still reachable.
- from ``on_train_end`` until ``fit`` returns, a profile function on the
  main thread records every ``Thread.join`` of a streamfeed thread still
  running (Keras's own callback executor, on JAX and PyTorch, is joined
  there too: not ours) and
  every ``Condition.wait`` (what ``Event``, ``Queue`` and joins with a
  timeout wait in) that returned because its timeout expired: ``fit``'s
  return then waits for nothing of streamfeed's.
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

pytestmark = pytest.mark.backend

BACKENDS = ["tensorflow", "jax", "torch"]
ROWS, ROW_GROUP, WINDOW, BATCH = 3000, 250, 4, 112
FRAGMENTS = ROWS // ROW_GROUP  # 12 row groups; 3 units of 4

_CHILD = textwrap.dedent(
    """
    import gc, json, sys, threading

    import keras
    import numpy as np

    import streamfeed as sf
    from streamfeed.runtime.shuffle import UnitBuffers

    path, epochs, window, batch = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    reads = []

    def counted(columns):
        reads.append(len(columns["x0"]))  # one call per fragment read, in the read threads
        return columns

    def streamfeed_threads():
        return sorted(t.name for t in threading.enumerate() if t.name.startswith("streamfeed-") and t.is_alive())

    waits = {"joined_running": [], "expired": []}
    join_code, wait_code = threading.Thread.join.__code__, threading.Condition.wait.__code__

    def watch(frame, event, arg):
        joined = frame.f_locals.get("self") if event == "call" and frame.f_code is join_code else None
        if joined is not None and joined.name.startswith("streamfeed-") and joined.is_alive():
            waits["joined_running"].append(frame.f_locals["self"].name)
        elif event == "return" and frame.f_code is wait_code and arg is False:
            waits["expired"].append(frame.f_locals.get("timeout"))

    out = {}

    class Watch(keras.callbacks.Callback):
        def on_train_end(self, logs=None):
            out["threads_at_train_end"] = streamfeed_threads()
            out["reads_at_train_end"] = len(reads)
            sys.setprofile(watch)  # the main thread, from here until fit has returned

    keras.utils.set_random_seed(0)
    inputs = keras.Input(shape=(4,), name="x")
    model = keras.Model(inputs, keras.layers.Dense(1)(keras.layers.Dense(8, activation="tanh")(inputs)))
    model.compile(optimizer="sgd", loss="mse")
    train = (
        sf.read_parquet(path).map(counted, name="counted").shuffle(1, window=window).batch(batch)
        .to_keras(features=["x0", "x1", "x2", "x3"], label="y")
    )
    reads.clear()  # to_keras read a batch to learn the served columns: count what fit reads
    model.fit(train, epochs=epochs, verbose=0, callbacks=[Watch()])
    sys.setprofile(None)
    out["waits_in_teardown"] = waits
    out["threads_after_fit"] = streamfeed_threads()
    out["reads_after_fit"] = len(reads)
    out["rows_read"] = sum(reads)
    out["unit_buffers_alive"] = sum(isinstance(o, UnitBuffers) for o in gc.get_objects())
    out["epochs_started_early"] = train.epochs_started_early
    train.close()
    print("RESULT " + json.dumps(out), flush=True)
    """
)


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("teardown") / "data.parquet"
    rng = np.random.default_rng(0)
    columns = {f"x{i}": rng.normal(size=ROWS).astype("float32") for i in range(4)}
    columns["y"] = rng.normal(size=ROWS).astype("float32")
    pq.write_table(pa.table(columns), path, row_group_size=ROW_GROUP)
    return str(path)


_RUNS: dict[tuple[str, int], dict] = {}


def fit(backend: str, data: str, epochs: int) -> dict:
    """What one ``fit(epochs=epochs)`` in a fresh process saw (run once, shared by the tests below)."""
    if (backend, epochs) in _RUNS:
        return _RUNS[backend, epochs]
    env = {**os.environ, "KERAS_BACKEND": backend, "TF_CPP_MIN_LOG_LEVEL": "2", "PYTHONUNBUFFERED": "1"}
    proc = subprocess.run(
        [sys.executable, "-c", _CHILD, data, str(epochs), str(WINDOW), str(BATCH)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        cwd=Path(__file__).parent,
    )
    assert proc.returncode == 0, f"{backend} fit(epochs={epochs}): exit {proc.returncode}\n{proc.stderr[-4000:]}"
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    assert lines, proc.stderr[-4000:]
    _RUNS[backend, epochs] = result = json.loads(lines[-1][len("RESULT ") :])
    return result


@pytest.mark.parametrize("epochs", [1, 2])
@pytest.mark.parametrize("backend", BACKENDS)
def test_fit_reads_exactly_the_epochs_it_runs(data, backend, epochs):
    """Item 6: not one fragment of the epoch after the last one ``fit`` runs is read."""
    result = fit(backend, data, epochs)
    assert result["reads_at_train_end"] == epochs * FRAGMENTS
    assert result["reads_after_fit"] == epochs * FRAGMENTS
    assert result["rows_read"] == epochs * ROWS
    # Every epoch after the first is still read while the one before is trained.
    assert result["epochs_started_early"] == epochs - 1


@pytest.mark.parametrize("epochs", [1, 2])
@pytest.mark.parametrize("backend", BACKENDS)
def test_nothing_of_the_pipeline_outlives_the_last_epoch(data, backend, epochs):
    """Item 1: at ``on_train_end`` nothing runs, so ``fit``'s return stops and waits for nothing of ours."""
    result = fit(backend, data, epochs)
    assert result["threads_at_train_end"] == []
    assert result["waits_in_teardown"] == {"joined_running": [], "expired": []}
    assert result["threads_after_fit"] == []
    assert result["unit_buffers_alive"] == 0
