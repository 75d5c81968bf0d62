"""Keras layers from stats, and class weights, on the TensorFlow, JAX and PyTorch backends.

One ``_layers_driver.py`` process per backend (Keras fixes its backend at
import) reports every check; the tests below assert on its report.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytestmark = pytest.mark.backend

HERE = Path(__file__).parent
DRIVER = HERE / "_layers_driver.py"
BACKENDS = ["tensorflow", "jax", "torch"]
ROWS = 1200


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    directory = tmp_path_factory.mktemp("layers")
    cache: dict[str, dict] = {}

    def run(backend: str) -> dict:
        if backend not in cache:
            env = {**os.environ, "KERAS_BACKEND": backend, "TF_CPP_MIN_LOG_LEVEL": "2"}
            proc = subprocess.run(
                [sys.executable, str(DRIVER), json.dumps({"dir": str(directory / backend)})],
                env=env,
                capture_output=True,
                text=True,
                timeout=600,
                cwd=HERE,
            )
            assert proc.returncode == 0, f"{backend}: exit {proc.returncode}\n{proc.stderr[-4000:]}"
            line = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")][-1]
            cache[backend] = json.loads(line[len("RESULT ") :])
            assert cache[backend]["backend"] == backend
        return cache[backend]

    for backend in BACKENDS:
        (directory / backend).mkdir()
    return run


def ok(report: dict, name: str):
    outcome = report[name]
    assert outcome["ok"], f"{name} raised {outcome['type']}: {outcome['message']}\n{outcome['traceback']}"
    return outcome["value"]


@pytest.mark.parametrize("backend", BACKENDS)
def test_normalization_equals_adapted(reports, backend):
    value = ok(reports(backend), "normalization")
    assert value["max_diff"] < 1e-4 and value["single_max_diff"] < 1e-4


@pytest.mark.parametrize("backend", BACKENDS)
def test_discretization_matches_adapted_within_rank_error(reports, backend):
    value = ok(reports(backend), "discretization")
    assert len(value["boundaries"]) == 3
    # The sketch (k = 4 x rows) holds all 1200 values, so its boundaries are
    # exact quantiles, well inside the bound it states.
    assert value["rank_error"] < 0.01
    for rank, target in zip(value["boundary_ranks"], (0.25, 0.5, 0.75)):
        assert abs(rank - target) <= 1 / ROWS
    # Keras's adapt is itself approximate (epsilon 0.001): boundaries within a few ranks.
    for ours, theirs in zip(value["boundary_ranks"], value["adapted_ranks"]):
        assert abs(ours - theirs) <= 0.001 + 3 / ROWS
    assert value["agreement"] >= 0.99
    assert all(abs(count - ROWS / 4) <= 2 for count in value["bin_counts"])


@pytest.mark.parametrize("backend", BACKENDS)
def test_integer_lookup_equals_adapted(reports, backend):
    value = ok(reports(backend), "integer_lookup")
    assert value["vocabulary"] == [11, 4, 27, 8, 3]  # by frequency
    assert value["ours"] == value["adapted"] == [1, 2, 3, 4, 5, 0, 0, 1]
    assert value["capped"] == value["capped_adapted"]


def test_string_lookup_equals_adapted_on_tensorflow(reports):
    value = ok(reports("tensorflow"), "string_lookup")
    assert value["ours"] == value["adapted"] == [1, 2, 3, 4, 0]


@pytest.mark.parametrize("backend", ["jax", "torch"])
def test_string_lookup_refuses_other_backends_clearly(reports, backend):
    outcome = reports(backend)["string_lookup"]
    assert not outcome["ok"] and outcome["type"] == "BackendError"  # a RuntimeError
    for text in ("TensorFlow backend", backend, "vocabulary_lookup"):
        assert text in outcome["message"]


@pytest.mark.parametrize("backend", BACKENDS)
def test_model_with_normalization_and_discretization_trains_and_reloads(reports, backend):
    value = ok(reports(backend), "numeric_model")
    losses = value["losses"]
    assert all(math.isfinite(loss) for loss in losses) and losses[-1] < losses[0]
    assert value["reload_max_diff"] < 1e-6


@pytest.mark.parametrize("backend", ["tensorflow", "torch"])
def test_model_with_integer_lookup_trains_and_reloads(reports, backend):
    for name in ("lookup_model", "lookup_model_eager"):
        value = ok(reports(backend), name)
        assert value["losses"][-1] < value["losses"][0]
        assert value["reload_max_diff"] < 1e-6


def test_integer_lookup_inside_a_jax_model_fails_as_documented(reports):
    """Keras's IntegerLookup runs TensorFlow on its input; a traced JAX array cannot go there.

    If a Keras release lifts this, this test fails: update the table in
    ``streamfeed/keras/layers.py``.
    """
    for name in ("lookup_model", "lookup_model_eager"):
        assert not reports("jax")[name]["ok"]


def test_string_lookup_serves_a_model_trained_on_pipeline_ids(reports):
    value = ok(reports("tensorflow"), "string_model")
    assert value["losses"][-1] < value["losses"][0]
    assert value["serving_vs_ids_max_diff"] == 0.0  # the layer and vocabulary_lookup give the same ids
    assert value["reload_max_diff"] < 1e-6


@pytest.mark.parametrize("backend", BACKENDS)
def test_class_weight_reaches_fit_on_every_backend(reports, backend):
    value = ok(reports(backend), "class_weight")
    assert value["weights"]["2"] > 5 * value["weights"]["0"]
    # fit(class_weight=) on a KerasDataset trains exactly like the pipeline's per-row weights...
    assert value["class_vs_sample_max_diff"] < 1e-6
    np.testing.assert_allclose(value["losses"]["class_weight"], value["losses"]["sample_weight"], rtol=1e-6)
    # ...and differently from no weights at all (so the weights were not ignored).
    assert value["class_vs_plain_max_diff"] > 1e-3
