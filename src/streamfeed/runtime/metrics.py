"""Counters for the pipeline doctor: time, rows and bytes per stage.

Instrumentation lives here, outside the stages. When metrics are off (the
default) no :class:`StageMetrics` exists and the runtime takes the plain
path: no clock is read and nothing is counted. When on, the runtime times
its calls to the stages and wraps the user's ops (:meth:`StageMetrics.timed_op`).

Stages, and the thread they run in:

- ``read``: ``fragment.read()`` incl. decoding (read pool; also CPU time,
  to tell waiting on I/O from decoding);
- ``fragment_ops``: per-fragment ops (user ``map``/``filter``, Keras packing;
  read pool), with a breakdown per op name;
- ``read_wait``: the producer waiting for the next fragment in plan order;
- ``assemble``: window assembly and the shuffle gather (producer thread);
- ``batch``: cutting exact batches (producer thread);
- ``batch_ops``: per-batch ops (producer thread), per op name;
- ``put_wait``: the producer blocked on a full prefetch queue (the consumer is slower);
- ``wait``: the consumer blocked on an empty prefetch queue (the hand-off).

Utilisation of the read pool is busy time / (wall × threads).
"""

from __future__ import annotations

import threading
import time
from typing import Any, Callable

from ..core import Chunk, chunk_len

STAGES = ("read", "fragment_ops", "read_wait", "assemble", "batch", "batch_ops", "put_wait", "wait")
POOL_STAGES = ("read", "fragment_ops")
PRODUCER_STAGES = ("assemble", "batch", "batch_ops")


def chunk_bytes(chunk: Chunk) -> int:
    """Bytes held by a chunk's arrays."""
    return int(sum(getattr(column, "nbytes", 0) for column in chunk.values()))


class _Counter:
    __slots__ = ("seconds", "cpu_seconds", "calls", "rows", "bytes")

    def __init__(self) -> None:
        self.seconds = self.cpu_seconds = 0.0
        self.calls = self.rows = self.bytes = 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "seconds": self.seconds,
            "cpu_seconds": self.cpu_seconds,
            "calls": self.calls,
            "rows": self.rows,
            "bytes": self.bytes,
        }


class _Gauge:
    __slots__ = ("samples", "total", "peak")

    def __init__(self) -> None:
        self.samples = self.total = self.peak = 0

    def to_dict(self) -> dict[str, Any]:
        return {"mean": self.total / self.samples if self.samples else 0.0, "peak": self.peak, "samples": self.samples}


class StageMetrics:
    """A thread-safe accumulator of stage times, rows, bytes and queue levels.

    One object may span several epoch iterators (e.g. a Keras peek and the
    epoch after it): counters add up, and the wall clock runs from the first
    :meth:`start`. ``configure`` records the layout the pipeline chose.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._stages: dict[str, _Counter] = {name: _Counter() for name in STAGES}
        self._ops: dict[tuple[str, str], _Counter] = {}
        self._gauges: dict[str, _Gauge] = {}
        self._started: float | None = None
        self._cpu_started = 0.0
        self.layout: dict[str, Any] = {}
        self.memory_limit: int | None = None
        self._storage: Any = None  # an object with snapshot() -> {name: count}, and its counts at watch time
        self._storage_at: dict[str, int] = {}

    # ---------------------------------------------------------------- recording
    def watch_storage(self, counters: Any) -> None:
        """Reports the storage's requests, retries and bytes (``files/storage.StorageCounters``) from now on.

        The counters live on the filesystem, outside the stages: the
        snapshot's ``storage`` is what they counted since this call.
        """
        with self._lock:
            self._storage, self._storage_at = counters, counters.snapshot()

    def start(self, layout: dict[str, Any], memory_limit: int) -> None:
        with self._lock:
            if self._started is None:
                self._started, self._cpu_started = time.perf_counter(), time.process_time()
            self.layout, self.memory_limit = dict(layout), int(memory_limit)

    def add(
        self,
        stage: str,
        seconds: float,
        *,
        rows: int = 0,
        nbytes: int = 0,
        cpu_seconds: float = 0.0,
        op: str | None = None,
    ) -> None:
        with self._lock:
            targets = [self._stages[stage]]
            if op is not None:
                targets.append(self._ops.setdefault((stage, op), _Counter()))
            for counter in targets:
                counter.seconds += seconds
                counter.cpu_seconds += cpu_seconds
                counter.calls += 1
                counter.rows += rows
                counter.bytes += nbytes

    def gauge(self, name: str, value: int) -> None:
        """Records one sample of a level (queue occupancy, fragments in flight)."""
        with self._lock:
            gauge = self._gauges.setdefault(name, _Gauge())
            gauge.samples += 1
            gauge.total += value
            gauge.peak = max(gauge.peak, value)

    def timed_op(self, op: Callable[[Chunk], Chunk], stage: str) -> Callable[[Chunk], Chunk]:
        """``op`` recording its time and output rows under ``stage`` and its name."""
        name = getattr(op, "__name__", "op")

        def timed(chunk: Chunk) -> Chunk:
            started = time.perf_counter()
            out = op(chunk)
            self.add(stage, time.perf_counter() - started, rows=chunk_len(out), op=name)
            return out

        timed.__name__ = name
        return timed

    # ---------------------------------------------------------------- reading
    def snapshot(self) -> dict[str, Any]:
        """Everything counted so far, with wall time, utilisation and RSS."""
        from ..memory import peak_rss_bytes

        with self._lock:
            wall = 0.0 if self._started is None else time.perf_counter() - self._started
            cpu = 0.0 if self._started is None else time.process_time() - self._cpu_started
            stages = {name: counter.to_dict() for name, counter in self._stages.items()}
            ops = [{"stage": stage, "op": op, **counter.to_dict()} for (stage, op), counter in self._ops.items()]
            gauges = {name: gauge.to_dict() for name, gauge in self._gauges.items()}
            layout, limit = dict(self.layout), self.memory_limit
            storage = None
            if self._storage is not None:
                now = self._storage.snapshot()
                storage = {name: count - self._storage_at.get(name, 0) for name, count in now.items()}
        threads = max(1, int(layout.get("read_threads", 1)))
        pool_busy = sum(stages[name]["seconds"] for name in POOL_STAGES)
        producer_busy = sum(stages[name]["seconds"] for name in PRODUCER_STAGES)
        return {
            "wall_seconds": wall,
            "process_cpu_seconds": cpu,
            "stages": stages,
            "ops": sorted(ops, key=lambda entry: -entry["seconds"]),
            "queues": gauges,
            "utilisation": {
                "read_pool": pool_busy / (wall * threads) if wall else 0.0,
                "producer": producer_busy / wall if wall else 0.0,
                "consumer_waiting": stages["wait"]["seconds"] / wall if wall else 0.0,
            },
            "layout": layout,
            "memory_limit_bytes": limit,
            "peak_rss_bytes": peak_rss_bytes(),
            "storage": storage,
        }


def resolve(metrics: "StageMetrics | bool | None") -> "StageMetrics | None":
    """``True`` → a new accumulator; an accumulator → itself; falsy → None (off)."""
    if isinstance(metrics, StageMetrics):
        return metrics
    return StageMetrics() if metrics else None
