"""The CPU time of the pipeline's own threads against the whole process's, and what it says.

Why: a pipeline that takes the cores from the model never makes it wait,
so the input-wait share cannot show it (issue 28: on 2 cores a Parquet
``fit`` ran at 0.37-0.47x the model's in-memory rate with 0.0-0.4 % input
wait). What shows it is the CPU time of the threads streamfeed starts,
all named ``streamfeed-...`` (``streamfeed-read_0``, ``streamfeed-epoch``,
``streamfeed-units``, ``streamfeed-tf-feed``, ...).

How: Linux's ``/proc/self/task/<tid>/stat`` gives each thread's CPU time
(utime + stime, in clock ticks of 10 ms) and start time; ``threading``
gives the Python name of each thread by its ``native_id``. The kernel's own
name (``comm``) is the fallback: CPython 3.11 leaves it as the program's
name ("python3"), later versions set it to the Python name truncated to 15
bytes ("streamfeed-read"), which the prefix still matches. A thread is
keyed by (tid, start time), so a tid the kernel reuses is a new thread.

What it misses, so the share is a lower bound: the work streamfeed does on
the caller's thread (handing batches to JAX and PyTorch on the training
thread, to TensorFlow on tf.data's threads), and a thread born and ended
between two samples (:class:`PipelineCPU`; sample every fraction of a
second while threads come and go).
Where ``/proc`` is absent (macOS, Windows) :func:`thread_cpu` returns None
and so does :meth:`PipelineCPU.sample`: not measured, never a zero.
"""

from __future__ import annotations

import math
import os
import threading
import time
from dataclasses import dataclass

PIPELINE_PREFIX = "streamfeed-"  # the name of every thread streamfeed starts
# The rule of :func:`cores_verdict`. The process keeps this share of the cores busy: they are all in use, and what
# the pipeline's threads take the model's cannot have. Measured on 2 cores (issue 28): Parquet fit at 0.37-0.47x the
# in-memory rate with the process at ~100 % of the cores.
CORES_SATURATED = 0.9
PIPELINE_CORES_SHARE = 0.25  # the pipeline's threads take at least this share of the cores: a quarter, or more
WAIT_LIMITS = 0.3  # above this input-wait share the wait itself names the pipeline (the monitor's warn_above)
TASKS = "/proc/self/task"


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity where the OS has one, else all)."""
    affinity = getattr(os, "sched_getaffinity", None)
    return len(affinity(0)) if affinity is not None else (os.cpu_count() or 1)


def _stat(path: str) -> tuple[str, list[str]]:
    """A ``stat`` file's name (``comm``) and the fields after it (the name may hold spaces and parentheses)."""
    with open(path) as handle:
        comm, rest = handle.read().split(" (", 1)[1].rsplit(")", 1)
    return comm, rest.split()  # rest[0] is stat's 3rd field (state): utime is rest[11], stime rest[12], start rest[19]


def thread_cpu() -> dict[tuple[int, int], tuple[str, float]] | None:
    """Every live thread of this process: (tid, start time in ticks) -> (name, CPU seconds so far).

    The name is the Python thread's where there is one, else the kernel's
    (``comm``; a native thread of TensorFlow or Arrow). None where
    ``/proc/self/task`` is absent or unreadable (not Linux).
    """
    try:
        tasks = os.listdir(TASKS)
    except OSError:
        return None
    names = {thread.native_id: thread.name for thread in threading.enumerate()}  # listed after the tasks
    tick = os.sysconf("SC_CLK_TCK")
    threads: dict[tuple[int, int], tuple[str, float]] = {}
    for task in tasks:
        try:
            comm, fields = _stat(f"{TASKS}/{task}/stat")
        except (OSError, IndexError, ValueError):  # the thread ended meanwhile
            continue
        tid = int(task)
        threads[(tid, int(fields[19]))] = (names.get(tid) or comm, (int(fields[11]) + int(fields[12])) / tick)
    return threads


def _process_ticks_seconds() -> float | None:
    """The whole process's CPU seconds in the threads' unit (clock ticks), ended threads included."""
    try:
        _, fields = _stat("/proc/self/stat")
    except (OSError, IndexError, ValueError):
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class CPUSample:
    """CPU seconds so far of the pipeline's threads and of the whole process, at ``wall`` (``perf_counter``)."""

    pipeline_seconds: float
    process_seconds: float
    wall: float


class PipelineCPU:
    """Accumulates the CPU time of the pipeline's threads (named ``streamfeed-...``) across samples.

    A thread that ended keeps its time, so the total never goes down; a
    thread once seen with a pipeline name stays the pipeline's (it may be
    listed before Python names it). The time a thread spent between the
    last sample and its end is recovered from the process's total, which
    keeps ended threads' time: what ended threads used beyond their last
    sampled times goes to the pipeline in proportion to the pipeline's
    share of those that ended (a read pool ending with its epoch: all of
    it). A thread born and ended between two samples is not seen: not the
    pipeline's. The process's CPU time is ``time.process_time()``.
    """

    def __init__(self, prefix: str = PIPELINE_PREFIX) -> None:
        self.prefix = prefix
        self._threads: dict[tuple[int, int], tuple[bool, float]] = {}  # live key -> (the pipeline's, CPU seconds)
        self._ended = 0.0  # the pipeline's CPU seconds in threads that ended
        self._dead: float | None = None  # the process's CPU seconds outside its live threads, at the last sample
        self._lock = threading.Lock()
        self._last = -math.inf

    def sample(self) -> CPUSample | None:
        """The totals now; None where per-thread CPU time cannot be read (no ``/proc``)."""
        wall, process = time.perf_counter(), time.process_time()
        threads = thread_cpu()
        total = _process_ticks_seconds()
        if threads is None or total is None:
            return None
        with self._lock:
            live: dict[tuple[int, int], tuple[bool, float]] = {}
            for key, (name, seconds) in threads.items():
                known = self._threads.get(key)
                live[key] = (name.startswith(self.prefix) or (known is not None and known[0]), seconds)
            ended = [self._threads[key] for key in self._threads.keys() - live.keys()]
            dead = max(0.0, total - sum(seconds for _, seconds in live.values()))
            if ended:
                last = sum(seconds for _, seconds in ended)
                ours = sum(seconds for mine, seconds in ended if mine)
                after_last = max(0.0, dead - (self._dead or 0.0) - last)  # ended threads' time since they were seen
                share = ours / last if last > 0 else sum(mine for mine, _ in ended) / len(ended)
                self._ended += ours + after_last * share
            self._threads, self._dead, self._last = live, dead, wall
            pipeline = self._ended + sum(seconds for mine, seconds in live.values() if mine)
        return CPUSample(pipeline, process, wall)

    def sample_every(self, seconds: float) -> None:
        """Samples when ``seconds`` have passed since the last sample: cheap to call per batch."""
        if time.perf_counter() - self._last >= seconds:
            self.sample()


@dataclass(frozen=True)
class CPUShare:
    """Between two samples: the pipeline's and the process's CPU as shares of (wall time x cores)."""

    pipeline_seconds: float  # NaN: not measured
    process_seconds: float
    wall_seconds: float
    cores: int

    @property
    def pipeline_share(self) -> float:
        return self.pipeline_seconds / max(self.wall_seconds * self.cores, 1e-9)

    @property
    def process_share(self) -> float:
        return self.process_seconds / max(self.wall_seconds * self.cores, 1e-9)


def share_between(
    before: CPUSample | None, after: CPUSample | None, wall_seconds: float, cores: int | None = None
) -> CPUShare:
    """The CPU spent between two samples over ``wall_seconds``; the pipeline's NaN when either is None."""
    cores = cores or usable_cores()
    if before is None or after is None:
        process = after.process_seconds - before.process_seconds if before and after else math.nan
        return CPUShare(math.nan, process, wall_seconds, cores)
    pipeline = max(0.0, after.pipeline_seconds - before.pipeline_seconds)
    return CPUShare(pipeline, max(0.0, after.process_seconds - before.process_seconds), wall_seconds, cores)


def cores_verdict(*, wait_share: float, pipeline_share: float, process_share: float, cores: int) -> str | None:
    """The sentence saying the cores are the limit and the pipeline's share of them; None when they are not.

    The rule: training waits for input at most :data:`WAIT_LIMITS` of the
    time (above, the wait already names the pipeline), the process keeps at
    least :data:`CORES_SATURATED` of the cores busy (none left idle) and the
    pipeline's threads take at least :data:`PIPELINE_CORES_SHARE` of them.
    Then a cheaper pipeline would give the model those cores: the model
    runs slower than it could although it never waits. Shares are of
    (wall time x cores); a NaN share (not measured) gives no verdict.
    """
    if any(math.isnan(value) for value in (wait_share, pipeline_share, process_share)):
        return None
    if wait_share > WAIT_LIMITS or process_share < CORES_SATURATED or pipeline_share < PIPELINE_CORES_SHARE:
        return None
    return (
        f"the cores are the limit: the input pipeline uses {100 * pipeline_share:.0f} % of the cores the model "
        f"could use ({100 * process_share:.0f} % of {cores} cores busy, input wait {100 * wait_share:.1f} %)"
    )
