"""Real Keras training on the TensorFlow, JAX and PyTorch backends.

Keras fixes its backend at import, so every run happens in a subprocess
(``_driver.py``) with ``KERAS_BACKEND`` set, and reports what it saw as
JSON. Runs are shared between the tests that look at them (one "basic"
process per backend, one chain of processes per resume test) to keep the
number of Keras start-ups small.

The resume test kills a training process with ``os._exit`` in the middle of
an epoch, resumes it in a new process — which is killed again right after
the last batch of a later epoch, before Keras ends that epoch — and resumes
once more. The result must equal an uninterrupted run: the same batches,
in the same order, and the same final weights; with Adam, whose update
reads the iteration count, bit for bit, with the same optimizer variables
and ``optimizer.iterations``. No resumed epoch makes Keras run out of data.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

pytestmark = pytest.mark.backend

HERE = Path(__file__).parent
DRIVER = HERE / "_driver.py"
BACKENDS = ["tensorflow", "jax", "torch"]
RUN_OUT = "Your input ran out of data"

_spec = importlib.util.spec_from_file_location("streamfeed_keras_driver", DRIVER)
driver = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(driver)  # only for its constants and write_data; Keras is not imported

ROWS, BATCH = driver.ROWS, driver.BATCH
NUM_BATCHES = math.ceil(ROWS / BATCH)
CRASH_CODE = driver.CRASH_CODE


# ------------------------------------------------------------------ running
def run_driver(backend: str, scenario: str, args: dict, *, code: int = 0) -> dict:
    """Runs the driver; returns its RESULT, checking the exit code is ``code``."""
    env = {**os.environ, "KERAS_BACKEND": backend, "TF_CPP_MIN_LOG_LEVEL": "2", "PYTHONUNBUFFERED": "1"}
    proc = subprocess.run(
        [sys.executable, str(DRIVER), scenario, json.dumps(args)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        cwd=HERE,
    )
    where = f"{backend} {scenario} {args}: exit {proc.returncode}\n{proc.stderr[-4000:]}"
    assert proc.returncode == code, where
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    assert lines, f"no RESULT line from {where}"
    return json.loads(lines[-1][len("RESULT ") :])


class Runs:
    """Driver results, each computed once per test module."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.data = driver.write_data(str(directory / "data.parquet"))
        self._results: dict = {}

    def once(self, key: tuple, compute):
        if key not in self._results:
            self._results[key] = compute()
        return self._results[key]

    def basic(self, backend: str) -> dict:
        return self.once(("basic", backend), lambda: run_driver(backend, "basic", {"data": self.data}))

    def resume_args(self, **extra) -> dict:
        return {"data": self.data, "epochs": 4, "spe": 1, "every": 1, **extra}

    def full(self, backend: str, optimizer: str = "sgd") -> dict:
        """The uninterrupted reference run (steps_per_execution=1)."""
        return self.once(
            ("full", backend, optimizer),
            lambda: run_driver(backend, "resume", self.resume_args(optimizer=optimizer)),
        )

    def crash_and_resume(
        self, backend: str, *, spe: int, every: int, crash_after: int, crash_end: bool, optimizer: str = "sgd"
    ) -> list[dict]:
        """A: killed mid-epoch 1; B: resumes (and, with ``crash_end``, is killed after epoch 2's last batch);
        C: resumes again."""
        directory = self.directory / f"ckpt-{backend}-{spe}-{optimizer}"

        def chain() -> list[dict]:
            common = self.resume_args(spe=spe, every=every, checkpoint=str(directory), optimizer=optimizer)
            with ThreadPoolExecutor(2) as pool:  # the reference run does not depend on the chain
                full = pool.submit(self.full, backend, optimizer)
                results = [run_driver(backend, "resume", {**common, "crash": [1, crash_after]}, code=CRASH_CODE)]
                full.result()
            if crash_end:
                results.append(run_driver(backend, "resume", {**common, "crash": [2, NUM_BATCHES]}, code=CRASH_CODE))
            results.append(run_driver(backend, "resume", common))
            return results

        return self.once(("chain", backend, spe, optimizer), chain)


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> Runs:
    return Runs(tmp_path_factory.mktemp("keras-backends"))


def part(result: dict, name: str) -> dict:
    """One check's value from a basic run, failing with its traceback if it raised."""
    outcome = result[name]
    assert outcome["ok"], f"{name} raised {outcome['type']}: {outcome['message']}\n{outcome['traceback']}"
    return outcome["value"]


def error(result: dict, name: str) -> dict:
    outcome = result[name]
    assert not outcome["ok"], f"{name} was expected to fail but returned {outcome['value']}"
    return outcome


def flat(weights: list[list[float]]) -> np.ndarray:
    return np.concatenate([np.asarray(w) for w in weights])


def unexpected_warnings(messages: list[str]) -> list[str]:
    """Keras UserWarnings other than running out of data (the resume tests assert that one away on its own)."""
    return [m for m in messages if m.startswith("UserWarning") and RUN_OUT not in m]


# ------------------------------------------------------------------- tests
@pytest.mark.parametrize("backend", BACKENDS)
def test_fit_evaluate_predict(runs, backend):
    fit = part(runs.basic(backend), "fit")
    assert fit["len"] == NUM_BATCHES == 27
    assert len(fit["epochs"]) == 3
    # The second and third epochs were read while the one before trained, and no epoch was started
    # past the last one fit runs.
    assert fit["epochs_started_early"] == 2
    assert fit["threads_after_fit"] == []
    for epoch, record in enumerate(fit["epochs"]):
        assert record["steps"] == list(range(NUM_BATCHES)), f"epoch {epoch}: Keras did not run every batch once"
        assert sorted(record["ids"]) == list(range(ROWS)), f"epoch {epoch}: some row missing or repeated"
        # Keras's shuffle=True is ignored: the pipeline's own seeded order is served.
        assert record["ids"] == fit["expected_ids"][epoch]
        assert record["data_epoch_after"] == epoch + 1
    assert fit["epochs"][0]["ids"] != fit["epochs"][1]["ids"] != list(range(ROWS))
    assert fit["data_epoch"] == 3
    assert all(math.isfinite(loss) for loss in fit["history_loss"])
    assert fit["history_loss"][1] < fit["history_loss"][0]
    assert math.isfinite(fit["evaluate_loss"])
    assert fit["predict_shape"] == [ROWS, 1]
    assert fit["predict_max_abs_diff"] is not None and fit["predict_max_abs_diff"] < 1e-4
    assert fit["predict_ids"] == list(range(ROWS))
    assert fit["identity"] == [float(i) for i in range(ROWS)], "predictions are not in source order"
    assert unexpected_warnings(fit["warnings"]) == []


@pytest.mark.parametrize("backend", BACKENDS)
def test_dict_inputs_reach_the_named_inputs(runs, backend):
    value = part(runs.basic(backend), "dict_inputs")
    assert value["x_keys"] == ["f0", "f3"]
    assert value["x_shapes"] == {"f0": [BATCH, 1], "f3": [BATCH, 1]}
    assert all(math.isfinite(loss) for loss in value["losses"]) and value["losses"][1] < value["losses"][0]
    assert value["predict_max_abs_diff"] is not None and value["predict_max_abs_diff"] < 1e-4


@pytest.mark.parametrize("backend", BACKENDS)
def test_mismatched_model_fails_naming_columns_and_input(runs, backend):
    result = runs.basic(backend)
    width = error(result, "matrix_width")
    assert (width["module"], width["type"]) == ("streamfeed.errors", "SchemaError"), width["traceback"]
    for text in ("model input 'x'", "(batch, 3)", "(batch, 4)", "['f0', 'f1', 'f2', 'f3']"):
        assert text in width["message"], width["message"]
    name = error(result, "dict_name")
    assert (name["module"], name["type"]) == ("streamfeed.errors", "SchemaError"), name["traceback"]
    for text in ("Model input 'height'", "['f0', 'f1']"):
        assert text in name["message"], name["message"]


@pytest.mark.parametrize("backend", BACKENDS)
def test_pad_gives_padding_rows_zero_weight(runs, backend):
    pad = part(runs.basic(backend), "pad")
    real_last = ROWS - (NUM_BATCHES - 1) * BATCH  # 88 rows in the last batch
    assert pad["num_batches"] == NUM_BATCHES
    assert pad["batch_rows"] == [BATCH] * NUM_BATCHES
    assert pad["tuple_lengths"] == [3] * NUM_BATCHES  # (x, y, sample_weight)
    for weights in pad["weights"][:-1]:
        assert weights == [1.0] * BATCH
    assert pad["weights"][-1] == [1.0] * real_last + [0.0] * (BATCH - real_last)
    ids = pad["ids"]
    assert sorted(ids[:ROWS]) == list(range(ROWS))
    assert ids[ROWS:] == ids[ROWS - real_last : ROWS - real_last + BATCH - real_last]  # padding repeats real rows
    assert all(math.isfinite(loss) for loss in pad["losses"])
    assert pad["data_epoch"] == 2


@pytest.mark.parametrize("backend", BACKENDS)
def test_autotuned_fit_trains_the_same_rows_in_the_same_order(runs, backend):
    """Autotuning moves threads and queues while Keras trains; the batches it serves must not move."""
    tuned = part(runs.basic(backend), "autotuned")
    assert tuned["tuned"] and tuned["within_limit"]
    assert tuned["ids"] == tuned["expected_ids"]
    assert all(sorted(ids) == list(range(ROWS)) for ids in tuned["ids"])
    assert tuned["threads_after_fit"] == []


@pytest.mark.parametrize("batches", [2, 1])
@pytest.mark.parametrize("backend", BACKENDS)
def test_epochs_of_one_or_two_batches_survive_keras_peeking(runs, backend, batches):
    """TF peeks at 2 batches to build its tf.data pipeline, JAX/torch at 1 for the symbolic build.

    A peek must not count as an epoch: Keras epoch ``e`` trains data epoch
    ``e`` (its own shuffled order), every row once, and the data epoch
    counter ends equal to the number of Keras epochs.
    """
    tiny = part(runs.basic(backend), f"tiny_{batches}")
    assert tiny["num_batches"] == batches
    assert len(tiny["epochs"]) == 3
    for epoch, record in enumerate(tiny["epochs"]):
        assert record["steps"] == list(range(batches))
        assert sorted(record["ids"]) == list(range(64 * batches))
        assert record["ids"] == tiny["expected_ids"][epoch], f"Keras epoch {epoch} trained another data epoch's order"
        assert record["data_epoch_after"] == epoch + 1
    assert tiny["data_epoch"] == 3


@pytest.mark.parametrize("backend", BACKENDS)
def test_canary_keras_resets_after_its_peek(runs, backend):
    """The Keras behaviour ``streamfeed.keras._keras_internals`` relies on, on each backend.

    An unbuilt model fitting a one-batch ``PyDataset`` for two epochs: Keras
    peeks, abandons the peek with ``EpochIterator.reset()`` (seen by the
    check) before its first epoch, then ends two trained epochs (not seen).
    """
    calls = part(runs.basic(backend), "peek_calls")
    assert [call for call in calls if call.startswith("END")] == ["END(reset)", "END", "END"], calls
    assert calls.index("END(reset)") < calls.index("begin0"), calls
    assert calls.count("batch_end0") == 2, calls
    print(f"{backend}: {' '.join(calls)}")


def check_resumed_epoch(resumed: dict, full: dict, *, trained_before: int, steps: list[int]) -> None:
    """The first epoch of a resumed run is the rest of the interrupted one, exactly."""
    state = resumed["saved_state"]
    assert state["keras_epoch"] == 1 == resumed["initial_epoch"]
    assert state["data"]["epoch"] == 1
    # Pipeline level: the saved position starts right after the trained batches.
    assert resumed["full_epoch"] == full["epochs"][1]["ids"]
    assert resumed["tail_from_state"] == resumed["full_epoch"][trained_before * BATCH :]
    # Keras level: the resumed epoch ran exactly the remaining batches, in order.
    epoch = resumed["epochs"][0]
    assert epoch["keras_epoch"] == 1
    assert epoch["steps"] == steps
    assert epoch["ids"] == full["epochs"][1]["ids"][trained_before * BATCH :]
    assert epoch["data_epoch_after"] == 2
    assert unexpected_warnings(resumed["warnings"]) == []


@pytest.mark.parametrize("backend", BACKENDS)
def test_resume_after_hard_crashes_equals_uninterrupted_run(runs, backend):
    trained_before = 12
    first, second, third = runs.crash_and_resume(backend, spe=1, every=1, crash_after=trained_before, crash_end=True)
    full = runs.full(backend)
    assert full["num_batches"] == NUM_BATCHES and full["data_epoch"] == 4
    assert [record["steps"] for record in full["epochs"]] == [list(range(NUM_BATCHES))] * 4

    # A was killed after 12 batches of epoch 1; its checkpoint says so.
    crash = first["crashed"]
    assert crash["keras_epoch"] == 1 and crash["steps"] == list(range(trained_before))
    assert crash["state_on_disk"]["keras_epoch"] == 1

    # B resumed mid-epoch 1, finished it, ran epoch 2 and was killed after its last batch.
    check_resumed_epoch(second, full, trained_before=trained_before, steps=list(range(NUM_BATCHES - trained_before)))
    crash = second["crashed"]
    assert crash["keras_epoch"] == 2 and crash["steps"] == list(range(NUM_BATCHES))
    assert crash["ids"] == full["epochs"][2]["ids"]
    # The epoch's data is done, so the checkpoint must resume at the next Keras epoch.
    assert crash["state_on_disk"]["keras_epoch"] == 3
    assert {k: crash["state_on_disk"]["data"][k] for k in ("epoch", "unit", "offset")} == {
        "epoch": 3,
        "unit": 0,
        "offset": 0,
    }

    # C resumed at epoch 3 and ran only that epoch.
    assert third["initial_epoch"] == 3
    assert [record["keras_epoch"] for record in third["epochs"]] == [3]
    assert third["epochs"][0]["ids"] == full["epochs"][3]["ids"]
    assert third["data_epoch"] == 4
    assert unexpected_warnings(third["warnings"]) == []
    assert not any(RUN_OUT in message for message in second["warnings"] + third["warnings"])
    # Same batches, same order, same optimizer state: the same model.
    np.testing.assert_allclose(flat(third["weights"]), flat(full["weights"]), rtol=1e-5, atol=1e-6)
    print(f"{backend}: resumed epoch warned {RUN_OUT!r}: {any(RUN_OUT in m for m in second['warnings'])}")


@pytest.mark.parametrize("backend", ["tensorflow", "jax"])  # PyTorch requires steps_per_execution=1
def test_resume_with_steps_per_execution(runs, backend):
    """Checkpoints every 4 batches with 4 steps per execution; 27 batches end in a short execution."""
    trained_before = 12
    first, second = runs.crash_and_resume(backend, spe=4, every=4, crash_after=trained_before, crash_end=False)
    full = runs.full(backend)  # steps_per_execution=1: the same batches give the same weights
    assert first["crashed"]["steps"] == [3, 7, 11]
    # 15 batches remain: executions ending at steps 3, 7, 11 and a short one numbered 15.
    check_resumed_epoch(second, full, trained_before=trained_before, steps=[3, 7, 11, 15])
    for record, reference in zip(second["epochs"][1:], full["epochs"][2:]):
        assert record["ids"] == reference["ids"]
        assert record["steps"] == [3, 7, 11, 15, 19, 23, 27]
    assert second["data_epoch"] == 4
    assert not any(RUN_OUT in message for message in second["warnings"])
    np.testing.assert_allclose(flat(second["weights"]), flat(full["weights"]), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("backend", BACKENDS)
def test_resume_with_adam_equals_uninterrupted_run_exactly(runs, backend):
    """Issue 9, item 9: Adam's update depends on ``optimizer.iterations`` (bias correction).

    Killed mid-epoch 1 (``os._exit``), resumed and killed after epoch 2's
    last batch, resumed again: the weights, every optimizer variable and
    the iteration count equal the uninterrupted run's bit for bit on CPU,
    and no resumed epoch makes Keras run out of data. Before the fix the
    TensorFlow run ended at 109 iterations instead of 108 (an extra,
    failed step at the end of the resumed epoch still counted) and every
    backend printed Keras's "ran out of data" warning.
    """
    trained_before = 12
    first, second, third = runs.crash_and_resume(
        backend, spe=1, every=1, crash_after=trained_before, crash_end=True, optimizer="adam"
    )
    full = runs.full(backend, "adam")
    assert [record["steps"] for record in full["epochs"]] == [list(range(NUM_BATCHES))] * 4
    assert full["optimizer"]["iterations"] == 4 * NUM_BATCHES
    # Each process's iteration count is the number of batches trained so far.
    assert first["optimizer"]["iterations"] == NUM_BATCHES + trained_before
    check_resumed_epoch(second, full, trained_before=trained_before, steps=list(range(NUM_BATCHES - trained_before)))
    assert second["optimizer"]["iterations"] == 3 * NUM_BATCHES
    assert [record["keras_epoch"] for record in third["epochs"]] == [3]
    assert third["epochs"][0]["ids"] == full["epochs"][3]["ids"]
    for run in (second, third):
        assert not any(RUN_OUT in message for message in run["warnings"]), run["warnings"]
    assert third["optimizer"]["iterations"] == full["optimizer"]["iterations"]
    assert third["optimizer"]["variables"] == full["optimizer"]["variables"]
    assert third["weights"] == full["weights"]
