"""Shared helpers for the benchmarks: data generation, timing, RSS, subprocesses.

Nothing here imports streamfeed, Keras or TensorFlow, so a worker process
pays only for the imports of the approach it measures.
"""

from __future__ import annotations

import json
import os
import resource
import shlex
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROW_GROUP = 65_536
ROWS_PER_FILE = 8 * ROW_GROUP  # 524 288 rows: 4 files at 2 M rows, 16 at 8 M
N_FEATURES = 32
FEATURES = [f"f{i}" for i in range(N_FEATURES)]
LABEL = "y"
COLUMNS = FEATURES + [LABEL]  # what every approach reads (never "id")
BATCH = 1024
DEFAULT_DATA_DIR = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "streamfeed" / "bench"


def data_path(data_dir: Path, rows: int) -> Path:
    return Path(data_dir) / f"tabular-{rows}rows-rg{ROW_GROUP}"


def generate(data_dir: Path, rows: int, seed: int = 0) -> Path:
    """Writes ``rows`` rows of f0..f31 (float32), y (float32) and id (int64), cached.

    Files of 8 row groups of 65 536 rows, snappy, no dictionary encoding
    (random floats). A ``_DONE`` marker makes a half-written directory
    regenerate instead of being used.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = data_path(data_dir, rows)
    if (path / "_DONE").exists():
        return path
    path.mkdir(parents=True, exist_ok=True)
    for stale in path.glob("*.parquet"):
        stale.unlink()
    rng = np.random.default_rng(seed)
    weights = rng.standard_normal(N_FEATURES).astype(np.float32)
    for index, start in enumerate(range(0, rows, ROWS_PER_FILE)):
        n = min(ROWS_PER_FILE, rows - start)
        x = rng.standard_normal((n, N_FEATURES), dtype=np.float32)
        y = x @ weights + 0.1 * rng.standard_normal(n, dtype=np.float32)
        arrays = [pa.array(x[:, i]) for i in range(N_FEATURES)]
        arrays += [pa.array(y.astype(np.float32)), pa.array(np.arange(start, start + n, dtype=np.int64))]
        table = pa.table(arrays, names=FEATURES + [LABEL, "id"])
        pq.write_table(
            table,
            path / f"part-{index:03d}.parquet",
            row_group_size=ROW_GROUP,
            use_dictionary=False,
            compression="snappy",
        )
    (path / "_DONE").write_text(json.dumps({"rows": rows, "row_group": ROW_GROUP, "seed": seed}))
    return path


def files(path: Path) -> list[str]:
    return sorted(str(p) for p in Path(path).glob("*.parquet"))


def warm_files(names) -> int:
    """Reads every named file once so that every approach starts with a warm page cache."""
    total = 0
    for name in names:
        with open(name, "rb") as handle:
            while block := handle.read(1 << 24):
                total += len(block)
    return total


def warm_cache(path: Path) -> int:
    """Warms the page cache for the Parquet files of a generated data set."""
    return warm_files(files(path))


def command_line() -> str:
    """How this benchmark was started, quoted for a shell."""
    return shlex.join([sys.executable, *sys.argv])


def peak_rss() -> int:
    """Peak RSS of this process so far, in bytes (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def rss() -> int:
    import psutil

    return psutil.Process().memory_info().rss


def now() -> float:
    return time.perf_counter()


def run_worker(script: str, args: list[str], timeout: float, env: dict | None = None) -> dict:
    """Runs ``python script --worker ...`` in a fresh process; returns its JSON result.

    The worker prints one line ``RESULT {json}``; anything else it prints
    (TensorFlow's log lines) is kept only for error messages.
    """
    full_env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "PYTHONWARNINGS": "ignore", **(env or {})}
    started = now()
    try:
        proc = subprocess.run(
            [sys.executable, script, "--worker", *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            env=full_env,
        )
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout:.0f} s"}
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            result = json.loads(line[len("RESULT ") :])
            result["wall_s"] = now() - started
            return result
    tail = (proc.stderr or proc.stdout).strip().splitlines()[-15:]
    return {"error": f"exit {proc.returncode}: " + " | ".join(tail)}


def emit(result: dict) -> None:
    print("RESULT " + json.dumps(result), flush=True)


def mib(value: float | None) -> str:
    return "-" if value is None else f"{value / 2**20:,.0f}"


def rate(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f}"


def table(headers: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(str(h)), *(len(str(r[i])) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]
    line = "  ".join(str(h).ljust(w) for h, w in zip(headers, widths))
    out = [line, "  ".join("-" * w for w in widths)]
    for r in rows:
        out.append("  ".join(str(c).rjust(w) if i else str(c).ljust(w) for i, (c, w) in enumerate(zip(r, widths))))
    return "\n".join(out)


THREAD_GROUPS = (
    ("MainThread", "main thread (Keras loop)"),
    ("streamfeed-read", "streamfeed reads"),
    ("streamfeed-epoch", "streamfeed producer"),
    ("streamfeed-units", "streamfeed producer"),
    ("streamfeed-tf-feed", "streamfeed TF feed"),
    ("streamfeed", "streamfeed other"),
    ("ThreadPoolExecutor", "Keras callback pool"),
    ("Dummy", "TF generator calls"),
)
"""Python thread-name prefixes -> the group a profile reports; any other thread is a native pool."""
NATIVE_GROUP = "native pools (TF, XLA, torch, Arrow)"


class ThreadCPU:
    """CPU seconds per thread of this process, grouped by what the thread does (Linux ``/proc``).

    Where a ``fit`` spends its CPU: the model's own loop, the framework's
    native pools, and each streamfeed stage. Python threads are named from
    ``threading``; native threads (no Python name) count as native pools.
    Threads that end between samples keep their last sampled time, so
    sample often (e.g. every 50 batches) for threads that live shortly.
    """

    def __init__(self) -> None:
        self._last: dict[int, tuple[str, float]] = {}  # tid -> (group, CPU seconds when last seen)

    def sample(self) -> dict[int, tuple[str, float]]:
        """Samples every live thread; returns every thread seen so far (ended ones at their last value)."""
        import threading

        tasks = os.listdir("/proc/self/task")
        names = {thread.native_id: thread.name for thread in threading.enumerate()}  # listed after the tasks
        tick = os.sysconf("SC_CLK_TCK")
        for task in tasks:
            try:
                with open(f"/proc/self/task/{task}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:  # the thread ended meanwhile
                continue
            tid = int(task)
            seconds = (int(fields[11]) + int(fields[12])) / tick  # utime + stime
            known = self._last.get(tid)
            # Named afresh: a thread seen before Python named it (still "native"), and a thread id the
            # kernel gave to a new thread (which starts again from less CPU).
            if known is not None and seconds >= known[1] and known[0] != NATIVE_GROUP:
                group = known[0]
            else:
                group = _thread_group(names.get(tid))
            self._last[tid] = (group, seconds)
        return dict(self._last)

    @staticmethod
    def between(before: dict[int, tuple[str, float]], after: dict[int, tuple[str, float]]) -> dict[str, float]:
        """CPU seconds per group spent between two samples."""
        groups: dict[str, float] = {}
        for tid, (group, seconds) in after.items():
            spent = seconds - before.get(tid, (group, 0.0))[1]
            if spent > 0:
                groups[group] = groups.get(group, 0.0) + spent
        return groups


def _thread_group(name: str | None) -> str:
    if name is None:
        return NATIVE_GROUP
    for prefix, group in THREAD_GROUPS:
        if name.startswith(prefix):
            return group
    return "other Python threads"


def environment(packages=("keras", "tensorflow-cpu", "jax", "pandas", "streamfeed")) -> dict:
    """The machine, the versions measured and the load average at start: the header every report prints."""
    import platform

    import numpy
    import pyarrow

    env = {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpu_count": os.cpu_count(),
        "numpy": numpy.__version__,
        "pyarrow": pyarrow.__version__,
        "pyarrow_cpu_count": pyarrow.cpu_count(),
        "pyarrow_io_threads": pyarrow.io_thread_count(),
        "loadavg_start": os.getloadavg(),
    }
    try:
        import subprocess

        root = Path(__file__).resolve().parent.parent
        head = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--", "src"], capture_output=True, text=True
        ).stdout.strip()
        env["streamfeed_commit"] = head + (" + uncommitted changes in src/" if dirty else "")
    except Exception:
        env["streamfeed_commit"] = None
    try:
        from importlib.metadata import version

        for name in packages:
            try:
                env[name] = version(name)
            except Exception:
                env[name] = None
    except Exception:
        pass
    return env
