"""Runs a Keras driver script in a subprocess on one backend (Keras fixes its backend at import).

The driver takes one JSON argument and prints ``RESULT {json}`` as its last
result line; a failed run fails the test with the driver's stderr.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path


def run_driver(driver: Path, backend: str, payload: dict, *, timeout: float = 300, exit_code: int = 0) -> dict:
    """The driver's ``RESULT`` for ``payload``, run with ``KERAS_BACKEND=backend``; it must exit with ``exit_code``."""
    env = {**os.environ, "KERAS_BACKEND": backend, "TF_CPP_MIN_LOG_LEVEL": "2"}
    proc = subprocess.run(
        [sys.executable, str(driver), json.dumps(payload)], env=env, capture_output=True, text=True, timeout=timeout
    )
    assert proc.returncode == exit_code, proc.stderr[-4000:]
    results = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    if not results and exit_code != 0:  # a driver killed on purpose may print nothing
        return {}
    return json.loads(results[-1][len("RESULT ") :])
