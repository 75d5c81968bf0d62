"""What the real ``streamfeed`` script prints, and where: results on stdout, everything else on stderr.

``--json`` output is the whole of stdout and parses; progress (Keras's,
the demo's generation bar) goes to stderr, live on a terminal; TensorFlow's
C++ start-up lines are not shown.
"""

from __future__ import annotations

import importlib.util
import json
import os
import pty
import select
import subprocess
import time

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from _console import SCRIPT, environment, streamfeed

FRAMEWORK_NOISE = ("absl::InitializeLog", "oneDNN", "cpu_feature_guard", "I0000", "W0000")
HAS_TENSORFLOW = importlib.util.find_spec("tensorflow") is not None
DEMO = ["demo", "--rows", "6000", "--features", "4", "--epochs", "1", "--batch-size", "512"]


def _run_with_stderr_on_a_terminal(args: list[str], env: dict[str, str], timeout: float = 300) -> tuple[int, str, str]:
    """Runs the script with stdout a pipe and stderr a pseudo-terminal (a user's ``streamfeed ... | jq``)."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [SCRIPT, *args], stdout=subprocess.PIPE, stderr=slave, stdin=subprocess.DEVNULL, env=env, close_fds=True
    )
    os.close(slave)
    chunks: list[bytes] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([master], [], [], 0.5)
        if ready:
            try:
                data = os.read(master, 65536)
            except OSError:  # the child closed the terminal
                break
            if not data:
                break
            chunks.append(data)
        elif proc.poll() is not None:
            break
    os.close(master)
    stdout, _ = proc.communicate(timeout=60)
    return proc.returncode, stdout.decode(), b"".join(chunks).decode(errors="replace")


@pytest.mark.skipif(not HAS_TENSORFLOW, reason="the noise is TensorFlow's; the default backend here")
def test_demo_first_run_says_what_it_generates_and_trains_with_a_live_bar(tmp_path):
    env = environment(KERAS_BACKEND="tensorflow", COLUMNS="120")
    args = [*DEMO, "--data-dir", str(tmp_path), "--json"]
    code, stdout, stderr = _run_with_stderr_on_a_terminal(args, env)
    assert code == 0 and "Traceback" not in stderr, stderr[-3000:]
    result = json.loads(stdout)  # the whole of stdout is the JSON
    assert result["rows"] == 6000
    # the first run says it generates the data, where, and about how big, with a bar while doing it
    assert "generating" in stderr.lower() and str(tmp_path) in stderr.replace("\r\n", "")
    assert "6,000 rows" in stderr and "MiB" in stderr
    assert "rows/s" in stderr  # the generation bar's rate column
    # Keras's live progress bar: redrawn in place (\r, \b) on the terminal, ending at 12/12 steps
    assert "12/12" in stderr and ("\x08" in stderr or "\r" in stderr)
    assert not [noise for noise in FRAMEWORK_NOISE if noise in stderr], stderr[:3000]


@pytest.mark.skipif(not HAS_TENSORFLOW, reason="the noise is TensorFlow's; the default backend here")
def test_demo_json_is_all_of_stdout_and_a_cached_run_generates_nothing(tmp_path):
    env = environment(KERAS_BACKEND="tensorflow")
    first = streamfeed(*DEMO, "--data-dir", tmp_path, "--json", env=env)
    second = streamfeed(*DEMO, "--data-dir", tmp_path, "--json", env=env)
    for proc in (first, second):
        assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
        assert json.loads(proc.stdout)["rows"] == 6000  # Keras's progress line is not on stdout
        assert not [noise for noise in FRAMEWORK_NOISE if noise in proc.stderr], proc.stderr[:3000]
    assert "generating" in first.stderr.lower()
    assert "generating" not in second.stderr.lower()


def test_json_is_the_whole_of_stdout_for_every_command(tmp_path):
    path = tmp_path / "d.parquet"
    pq.write_table(pa.table({"a": np.arange(100) * 1.0, "y": np.arange(100) % 2}), path, row_group_size=25)
    runs = {
        "inspect": streamfeed("inspect", path, "--json"),
        "bench": streamfeed("bench", path, "--max-batches", "2", "--batch-size", "10", "--json"),
        "convert": streamfeed("convert", path, tmp_path / "out", "--json"),
    }
    for name, proc in runs.items():
        assert proc.returncode == 0 and "Traceback" not in proc.stderr, (name, proc.stderr[-3000:])
        assert isinstance(json.loads(proc.stdout), dict), name
