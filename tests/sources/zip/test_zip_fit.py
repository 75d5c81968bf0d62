"""A real Keras fit of a tiny CNN from read_images on a zip archive: TensorFlow, JAX and torch, a subprocess each."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

IMAGES = 90
DRIVER = Path(__file__).with_name("_fit_driver.py")


def _archive(tmp_path: Path) -> tuple[Path, list[str]]:
    """Dark images are class ``dark``, bright ones ``light`` (learnable: the loss must fall), written by zipfile."""
    rng = np.random.default_rng(2)
    archive = tmp_path / "images.zip"
    names = []
    with zipfile.ZipFile(archive, "w", compression=zipfile.ZIP_DEFLATED) as out:
        for i in range(IMAGES):
            label = ("dark", "light")[i % 2]
            base = 40 if label == "dark" else 200
            pixels = np.clip(rng.normal(base, 25, (14, 14, 3)), 0, 255).astype(np.uint8)
            path = tmp_path / f"{i}.png"
            Image.fromarray(pixels).save(path)
            out.write(path, f"{label}/{i:03d}.png")
            names.append(f"{archive}/{label}/{i:03d}.png")
    return archive, sorted(names)


@pytest.mark.parametrize("backend", ["tensorflow", "jax", "torch"])
def test_fit(backend: str, tmp_path: Path):
    archive, names = _archive(tmp_path)
    run = subprocess.run(
        [sys.executable, str(DRIVER), str(archive)],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "KERAS_BACKEND": backend, "CUDA_VISIBLE_DEVICES": ""},
    )
    lines = [line for line in run.stdout.splitlines() if line.startswith("RESULT ")]
    assert run.returncode == 0 and lines, run.stderr[-3000:]
    result = json.loads(lines[-1][len("RESULT ") :])
    assert result["steps"] == -(-IMAGES // 16) and result["paths"] == names
    assert result["loss"][-1] < result["loss"][0], result["loss"]
    assert result["accuracy"][-1] > 0.9, result["accuracy"]
