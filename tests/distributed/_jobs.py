"""Running a multi-process training job on loopback for the tests: start, wait under a deadline, collect, kill.

Each worker process writes its result as JSON to ``<out>.<index>``; a worker
that has not finished by the deadline fails the test naming the hang, and
every process still running is killed by pid, also when the test fails.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Callable

import pytest


def free_ports(count: int) -> list[int]:
    """``count`` distinct free loopback ports (all bound at once, then released)."""
    sockets = [socket.socket() for _ in range(count)]
    try:
        for sock in sockets:
            sock.bind(("127.0.0.1", 0))
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def run_workers(
    worker: Path,
    count: int,
    arguments: Callable[[int], list[str]],
    out: Path,
    *,
    deadline: float,
    env: dict[str, str] | None = None,
) -> list[tuple[int, dict]]:
    """Runs ``python worker *arguments(index)`` for each index; returns (exit code, result) per worker.

    A result is the worker's JSON file with the tail of its stderr added
    (``"stderr"``), or only that tail when it wrote none (it crashed).
    """
    environment = {**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}
    procs = [
        subprocess.Popen(
            [sys.executable, str(worker), *arguments(index)],
            env=environment,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        for index in range(count)
    ]
    results = []
    try:
        for index, proc in enumerate(procs):
            try:
                _, err = proc.communicate(timeout=deadline)
            except subprocess.TimeoutExpired:
                pytest.fail(f"worker {index} of {count} did not finish in {deadline} s: the job hangs")
            path = Path(f"{out}.{index}")
            result = json.loads(path.read_text()) if path.exists() else {}
            result["stderr"] = err[-3000:]
            results.append((proc.returncode, result))
    finally:
        for proc in procs:  # stopped by pid, also when a worker hung
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
    return results
