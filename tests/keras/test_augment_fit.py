"""Augmented images (``random_map``) reach a real ``fit`` identically on TensorFlow, JAX and PyTorch.

Each backend runs ``_augment_driver.py`` in a subprocess over one image
folder written here with PIL. The draws are NumPy in the read threads,
keyed on (seed, epoch, row): every backend must serve the same rows in the
same order with the same augmented pixels (hashes equal bit for bit), and
the loss ``fit`` reports for each epoch's first batch must be the NumPy
loss of that batch, so ``fit`` was given those pixels.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from _run_driver import run_driver
from PIL import Image

pytestmark = pytest.mark.backend

DRIVER = Path(__file__).parent / "_augment_driver.py"
BACKENDS = ["tensorflow", "jax", "torch"]
IMAGES = 30 + 37


def write_folder(root: Path) -> Path:
    rng = np.random.default_rng(0)
    for label, name in enumerate(["a", "b"]):
        (root / name).mkdir(parents=True)
        for i in range(30 + 7 * label):
            Image.fromarray(rng.integers(0, 256, (20, 24, 3), dtype=np.uint8)).save(root / name / f"{i}.png")
    return root


def run(backend: str, root: Path) -> dict:
    return run_driver(DRIVER, backend, {"root": str(root)})


def test_every_backend_fits_on_the_same_augmented_images(tmp_path):
    root = write_folder(tmp_path / "images")
    results = {backend: run(backend, root) for backend in BACKENDS}
    first = results[BACKENDS[0]]
    assert [r["backend"] for r in results.values()] == BACKENDS
    epochs = first["reference"]
    assert len(epochs) == 2 and all(len(epoch["hashes"]) == -(-IMAGES // 8) for epoch in epochs)
    assert epochs[0]["hashes"] != epochs[1]["hashes"]  # another epoch, other draws
    for backend, result in results.items():
        assert result["reference"] == epochs, backend  # the same pixels, rows and order, bit for bit
        assert result["fit_rows"] == first["fit_rows"], backend
        assert all(sorted(rows) == list(range(IMAGES)) for rows in result["fit_rows"]), backend
        for losses, epoch in zip(result["fit_losses"], epochs):
            assert len(losses) == len(epoch["hashes"]), backend
            assert losses[0] == pytest.approx(epoch["first_loss"], rel=1e-4), backend  # fit saw these pixels
        np.testing.assert_allclose(result["fit_losses"], first["fit_losses"], rtol=1e-4, err_msg=backend)
