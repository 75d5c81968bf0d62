"""A real Keras fit from read_sql on each backend: PostgreSQL through ADBC (TensorFlow) and through SQLAlchemy
(every backend), SQLite (JAX and torch)."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from _postgres import PostgresServer

ROWS = 300
DRIVER = Path(__file__).with_name("_fit_driver.py")


def _rows() -> list[tuple[int, float, float, float]]:
    rng = np.random.default_rng(5)
    f = rng.normal(size=(ROWS, 2))
    y = 2 * f[:, 0] - f[:, 1]  # learnable: the loss must fall
    return [(i, float(f[i, 0]), float(f[i, 1]), float(y[i])) for i in range(ROWS)]


@pytest.mark.parametrize(
    ("backend", "path"),
    [
        ("tensorflow", "adbc"),
        ("jax", "sqlite"),
        ("torch", "sqlite"),
        # PostgreSQL through SQLAlchemy + psycopg (a URL of another scheme), on every backend
        ("tensorflow", "sqlalchemy"),
        ("jax", "sqlalchemy"),
        ("torch", "sqlalchemy"),
    ],
)
def test_fit(backend: str, path: str, pg: PostgresServer, tmp_path: Path):
    if path != "sqlite":
        pg.load("fit", "id int PRIMARY KEY, f0 real, f1 real, y real", _rows())
        connection = pg.url if path == "adbc" else pg.url.replace("postgresql://", "postgresql+psycopg://", 1)
    else:
        connection = str(tmp_path / "fit.db")
        with sqlite3.connect(connection) as handle:
            handle.execute("CREATE TABLE fit (id INTEGER PRIMARY KEY, f0 REAL, f1 REAL, y REAL)")
            handle.executemany("INSERT INTO fit VALUES (?, ?, ?, ?)", _rows())
        handle.close()
    run = subprocess.run(
        [sys.executable, str(DRIVER), connection, "fit"],
        capture_output=True,
        text=True,
        timeout=240,
        env={**os.environ, "KERAS_BACKEND": backend, "CUDA_VISIBLE_DEVICES": ""},
    )
    lines = [line for line in run.stdout.splitlines() if line.startswith("RESULT ")]
    assert run.returncode == 0 and lines, run.stderr[-3000:]
    result = json.loads(lines[-1][len("RESULT ") :])
    assert result["steps"] == -(-ROWS // 32) and result["ids"] == list(range(ROWS))
    assert result["loss"][-1] < result["loss"][0] / 2, result["loss"]
