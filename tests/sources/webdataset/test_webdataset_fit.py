"""A real Keras fit from tar shards (written by ``webdataset.TarWriter``) on TensorFlow, JAX and torch."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import webdataset as wds

SAMPLES, SHARDS = 96, 3
DRIVER = Path(__file__).with_name("_wds_fit_driver.py")


def _write(root: Path) -> list[str]:
    """Bright and dark 8x8 PNGs, class 1 and 0: learnable, so the loss must fall."""
    root.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(1)
    keys = []
    for shard in range(SHARDS):
        with wds.TarWriter(str(root / f"shard-{shard:03d}.tar")) as writer:
            for i in range(shard * SAMPLES // SHARDS, (shard + 1) * SAMPLES // SHARDS):
                label = i % 2
                image = rng.integers(150, 256, (8, 8, 3)) if label else rng.integers(0, 100, (8, 8, 3))
                writer.write({"__key__": f"img{i:04d}", "png": image.astype(np.uint8), "cls": label})
                keys.append(f"img{i:04d}")
    return keys


@pytest.mark.parametrize("backend", ["tensorflow", "jax", "torch"])
def test_fit_on_tar_shards(backend: str, tmp_path: Path):
    keys = _write(tmp_path / "shards")
    run = subprocess.run(
        [sys.executable, str(DRIVER), str(tmp_path / "shards")],
        capture_output=True,
        text=True,
        timeout=240,
        env={**os.environ, "KERAS_BACKEND": backend, "CUDA_VISIBLE_DEVICES": ""},
    )
    lines = [line for line in run.stdout.splitlines() if line.startswith("RESULT ")]
    assert run.returncode == 0 and lines, run.stderr[-3000:]
    result = json.loads(lines[-1][len("RESULT ") :])
    assert result["steps"] == SAMPLES // 16 and result["keys"] == sorted(keys)
    assert result["loss"][-1] < result["loss"][0] / 2, result["loss"]
    assert result["accuracy"] > 0.9, result
