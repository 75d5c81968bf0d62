"""The pipeline doctor: run a pipeline briefly, measure every stage, name the slow one.

:func:`bench` runs ``dataset`` with stage metrics on (``runtime/metrics.py``)
for a bounded time or number of batches — alone, or feeding a real
``model.fit`` step loop with an :class:`InputStallMonitor` attached — and
returns a :class:`BenchReport`: throughput, per-stage time and utilisation,
queue occupancy, peak RSS against the memory limit, and a verdict with
advice drawn from those numbers.

How the verdict is reached. Each side of the pipeline needs a certain
time for what was delivered: the read pool (``read`` + per-fragment ops,
divided by its threads, since they run in parallel), the producer thread
(window assembly, batching, per-batch ops, one after another) and, with a
model, the training step (wall time minus the time it waited for input).
The side needing the most time sets the pace; within it the largest
component is named. With a model, a small input-wait share means the
model is the limit and the data waits. When the reads set the pace,
:func:`read_limit` says whether they wait on decoding, the disk or the
network (the reads' CPU share, the cores the process keeps busy, and how
many of the bytes read the storage device served rather than the page
cache); ``doctor`` says the same from the same function.

Beside the stages, the CPU (``runtime/cpu.py``): the CPU time of the
pipeline's own threads as a share of the run's wall time x the cores, and
the process's. With a model whose training barely waits, the pipeline may
still be what slows it, by taking the cores: when the process keeps the
cores busy and the pipeline takes a large share of them
(``runtime.cpu.cores_verdict``) the verdict is that the cores are the
limit, with the pipeline's share of them.
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Sequence

from .core import chunk_len
from .errors import ArgumentError, describe
from .files.storage import is_remote, storage_counters
from .inspect.progress import Advance
from .inspect.progress import progress as progress_bar
from .runtime.cpu import CPUSample, PipelineCPU, cores_verdict, share_between, usable_cores
from .runtime.metrics import StageMetrics

logger = logging.getLogger("streamfeed")
MODEL_BOUND_WAIT_SHARE = 0.2  # below this share of step time waiting, the model sets the pace
IO_BOUND_CPU_RATIO = 0.5  # reads using less CPU than this share of their wall time wait on I/O
CPU_SAMPLE_SECONDS = 0.25  # how often the pipeline's threads' CPU time is sampled while batches are drained
CORES_BUSY = 0.6  # above this share of all cores used by the process, reads wait for CPU rather than I/O
# Reads off the CPU wait on the disk only when the disk served their bytes: of what the process read during the
# run (/proc/self/io rchar), the share fetched from the device (read_bytes). A file just written or read is in the
# page cache: 0 of its 80 MB came from the device, against 50 MB for the same file after posix_fadvise(DONTNEED).
FROM_STORAGE_SHARE = 0.2
SMALL_FRAGMENT_ROWS = 16_384
MIB = 2**20


@dataclass
class BenchReport:
    """What :func:`bench` measured and concluded; ``to_dict()`` for JSON."""

    seconds: float  # the measured run: the pipeline's, or training's with a model
    pipeline_seconds: float  # since the pipeline started: what stage times are shares of
    batches: int
    rows: int
    read_bytes: int
    rows_per_second: float
    mb_per_second: float
    batches_per_second: float
    read_threads: int
    cpu_count: int
    stages: dict[str, dict[str, float]]
    ops: list[dict[str, Any]]
    utilisation: dict[str, float]
    queues: dict[str, dict[str, float]]
    layout: dict[str, Any]
    peak_rss_bytes: int
    memory_limit_bytes: int
    bottleneck: str
    verdict: str
    advice: list[str] = field(default_factory=list)
    model: dict[str, float] | None = None
    storage: dict[str, int] | None = None  # object storage opened with storage_options: requests, retries, bytes
    read_limit: str | None = None  # with reads the limit: "decode", "disk" or "network" (:func:`read_limit`)
    storage_share: float | None = None  # of the bytes read, the share the storage device served (None: unknown)
    # CPU over (the run's wall time x cpu_count): the pipeline's own threads' (None: not measured, no /proc) and the
    # whole process's (with a model, over training's epochs: runtime/cpu.py)
    pipeline_cpu_seconds: float | None = None
    pipeline_cpu_share: float | None = None
    process_cpu_share: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def render(self) -> Any:
        """A rich renderable: throughput, a stage table, queues, memory and the verdict."""
        from rich.console import Group
        from rich.table import Table
        from rich.text import Text

        head = Text.assemble(
            ("streamfeed bench", "bold"),
            f"  {self.batches:,} batches, {self.rows:,} rows in {self.seconds:,.1f} s: "
            f"{self.rows_per_second:,.0f} rows/s, {self.mb_per_second:,.1f} MB/s, "
            f"{self.batches_per_second:,.1f} batches/s",
        )
        table = Table(title=f"stages ({self.read_threads} read threads, {self.cpu_count} cores)", title_justify="left")
        for column in ("stage", "thread", "seconds", "share of wall", "calls", "ms/call"):
            table.add_column(column, justify="left" if column in ("stage", "thread") else "right")
        threads = {
            "read": "read pool",
            "fragment_ops": "read pool",
            "read_wait": "producer",
            "assemble": "producer",
            "batch": "producer",
            "batch_ops": "producer",
            "put_wait": "producer",
            "wait": "consumer",
        }
        for name, stage in self.stages.items():
            if not stage["calls"]:
                continue
            share = stage["seconds"] / (
                self.pipeline_seconds * (self.read_threads if threads[name] == "read pool" else 1) or 1
            )
            table.add_row(
                _STAGE_LABELS[name],
                threads[name],
                f"{stage['seconds']:.2f}",
                f"{share:.0%}",
                f"{stage['calls']:,}",
                f"{1000 * stage['seconds'] / stage['calls']:.2f}",
            )
            for op in self.ops:
                if op["stage"] == name:
                    table.add_row(
                        f"  {_op_label(op['op'])}",
                        "",
                        f"{op['seconds']:.2f}",
                        "",
                        f"{op['calls']:,}",
                        f"{1000 * op['seconds'] / max(1, op['calls']):.2f}",
                    )
        util = self.utilisation
        lines = [
            f"utilisation: read pool {util['read_pool']:.0%}, producer thread {util['producer']:.0%}, "
            f"consumer waiting {util['consumer_waiting']:.0%}",
            "queues: " + ", ".join(f"{name} mean {q['mean']:.1f} peak {q['peak']}" for name, q in self.queues.items()),
            f"memory: peak RSS {self.peak_rss_bytes / MIB:,.0f} MiB (whole process) vs memory_limit "
            f"{self.memory_limit_bytes / MIB:,.0f} MiB for the pipeline's buffers "
            f"(estimated {self.layout.get('estimated_bytes', 0) / MIB:,.0f} MiB)",
        ]
        if self.storage is not None:
            lines.append(
                f"storage: {self.storage['requests']:,} requests ({self.storage['retries']:,} retries), "
                f"{self.storage['bytes'] / MIB:,.1f} MiB fetched, {self.storage['cache_hits']:,} ranges from the cache"
            )
        lines.append(self.cpu_line())
        if self.model is not None:
            lines.append(
                f"model: {self.model['steps']:.0f} steps, "
                f"waited for input {self.model['input_wait_share']:.0%} of step time, "
                f"{self.model['rows_per_second']:,.0f} rows/s"
            )
        verdict = Text.assemble(("verdict: ", "bold"), (self.verdict, "bold yellow"))
        advice = [Text(f"  - {line}") for line in self.advice]
        return Group(head, table, *[Text(line) for line in lines], verdict, *advice)

    def cpu_line(self) -> str:
        """The pipeline's and the process's CPU as shares of the cores, in one line."""
        process = "" if self.process_cpu_share is None else f"; the whole process {self.process_cpu_share:.0%}"
        if self.pipeline_cpu_share is None:
            return f"CPU: the pipeline's threads not measured (needs Linux /proc){process} of {self.cpu_count} cores"
        return (
            f"CPU: the pipeline's threads kept {self.pipeline_cpu_share:.0%} of the {self.cpu_count} cores busy "
            f"({self.pipeline_cpu_seconds:,.1f} CPU s){process}"
        )


_STAGE_LABELS = {
    "read": "read + decode",
    "fragment_ops": "per-fragment ops",
    "read_wait": "waiting for reads",
    "assemble": "window assembly/shuffle",
    "batch": "batching",
    "batch_ops": "per-batch ops",
    "put_wait": "blocked on full queue",
    "wait": "hand-off wait",
}


def _op_label(name: str) -> str:
    return "Keras packing" if name == "pack_for_keras" else f"op {name!r}"


def bench(
    dataset: Any,
    *,
    seconds: float = 10.0,
    max_batches: int | None = None,
    model: Any = None,
    label: str | None = None,
    features: list[str] | None = None,
    callbacks: Sequence[Any] = (),
    progress: bool | None = False,
) -> BenchReport:
    """Runs ``dataset`` for about ``seconds`` (or ``max_batches``) and diagnoses it.

    With ``model`` (a compiled Keras model) and ``label`` (and optionally
    ``features``, default all other columns; extra Keras ``callbacks``), the batches feed
    ``model.fit`` (after a two-step warm-up that compiles the step) with an
    :class:`~streamfeed.keras.InputStallMonitor`; otherwise they are taken
    off the queue as fast as possible, so the pipeline's own ceiling is measured.
    ``progress``: a bar of batches with their rate (None: on a terminal).
    """
    if seconds <= 0 and not max_batches:
        raise ArgumentError(
            describe("bench needs a bound", expected="seconds > 0 or max_batches", found=f"seconds={seconds}")
        )
    metrics = StageMetrics()
    counters = storage_counters(dataset.source.info.filesystem)
    if counters is not None:
        metrics.watch_storage(counters)
    io_before = process_io()
    cpu, run_cpu = PipelineCPU(), None
    with progress_bar(max_batches, "bench", unit="batches", enabled=progress) as advance:
        if model is None:
            cpu_before = cpu.sample()
            batches, rows, model_stats = (*_drain(dataset, metrics, seconds, max_batches, advance, cpu), None)
            run_cpu = _run_cpu(cpu_before, cpu.sample())
        else:
            if label is None:
                raise ArgumentError(describe("bench(model=...) needs the label column", fix="pass label=..."))
            bounds = (seconds, max_batches, advance)
            batches, rows, model_stats = _fit(dataset, metrics, model, label, features, list(callbacks), *bounds)
    snap = metrics.snapshot()
    snap["storage_share"] = _storage_share(io_before, process_io())
    snap["cpu"] = run_cpu if run_cpu is not None else _fit_cpu(model_stats)
    return _report(dataset, snap, batches, rows, model_stats)


def _run_cpu(before: CPUSample | None, after: CPUSample | None) -> dict[str, float | None]:
    """The drained run's CPU between two samples: seconds and shares of wall time x the usable cores."""
    if before is None or after is None:
        return {"pipeline_cpu_seconds": None, "pipeline_cpu_share": None, "process_cpu_share": None}
    share = share_between(before, after, after.wall - before.wall)
    return {
        "pipeline_cpu_seconds": share.pipeline_seconds,
        "pipeline_cpu_share": share.pipeline_share,
        "process_cpu_share": share.process_share,
    }


def _fit_cpu(model_stats: dict[str, Any] | None) -> dict[str, float | None]:
    """Training's CPU, as its InputStallMonitor measured it over the epochs (after the warm-up's compile)."""
    stats = model_stats or {}
    pipeline, process, wall = (
        stats.get(name, math.nan) for name in ("pipeline_cpu_seconds", "process_cpu_seconds", "seconds")
    )
    cores = usable_cores()
    measured = not math.isnan(pipeline) and wall > 0
    return {
        "pipeline_cpu_seconds": pipeline if measured else None,
        "pipeline_cpu_share": pipeline / (wall * cores) if measured else None,
        "process_cpu_share": process / (wall * cores) if wall > 0 and not math.isnan(process) else None,
    }


def process_io() -> tuple[int, int] | None:
    """This process's (bytes read through system calls, bytes fetched from storage devices) so far.

    Linux's ``/proc/self/io`` (``rchar``, ``read_bytes``); ``None`` where it
    is absent (macOS, Windows) or unreadable. A read the page cache serves
    counts in the first only.
    """
    try:
        with open("/proc/self/io") as handle:
            fields = dict(line.split(":", 1) for line in handle.read().splitlines() if ":" in line)
        return int(fields["rchar"]), int(fields["read_bytes"])
    except (OSError, KeyError, ValueError):
        return None


def _storage_share(before: tuple[int, int] | None, after: tuple[int, int] | None) -> float | None:
    """Of the bytes the process read between two :func:`process_io` readings, the share the device served."""
    if before is None or after is None:
        return None
    read, fetched = after[0] - before[0], after[1] - before[1]
    if fetched <= 0:
        return 0.0
    return min(1.0, fetched / max(read, 1))  # read-ahead may fetch more than was read; mmap reads miss rchar


@dataclass(frozen=True)
class ReadEvidence:
    """What decides whether reads wait on decoding, the disk or the network (:func:`read_limit`)."""

    read_seconds: float  # wall time of the reads, summed over the read threads
    read_cpu_seconds: float  # their threads' CPU time meanwhile
    cores_busy: float  # the whole process's CPU time over (wall time x cores)
    storage_share: float | None  # of the bytes read, the share the storage device served; None: not known
    remote: bool  # the source is read over a network (object storage)


def read_limit(evidence: ReadEvidence) -> str:
    """``"decode"``, ``"disk"`` or ``"network"``: what reads that set the pace are waiting on.

    The one rule for ``bench``'s verdict and ``doctor``'s pipeline finding.
    Reads on their threads' CPU at least :data:`IO_BOUND_CPU_RATIO` of
    their wall time decode. Off the CPU they wait on I/O, a core or a lock:
    a core when the process keeps :data:`CORES_BUSY` of the cores busy
    (decoders' own threads, pyarrow's CSV), a lock or a core when the page
    cache served the bytes (less than :data:`FROM_STORAGE_SHARE` from the
    device: h5py serialises every call through one lock, so of four read
    threads three wait); both are decoding's cost. What remains waits on
    the network for a remote source, else on the disk.
    """
    cpu_ratio = evidence.read_cpu_seconds / evidence.read_seconds if evidence.read_seconds > 0 else 1.0
    if cpu_ratio >= IO_BOUND_CPU_RATIO or evidence.cores_busy >= CORES_BUSY:
        return "decode"
    if evidence.remote:
        return "network"
    if evidence.storage_share is not None and evidence.storage_share < FROM_STORAGE_SHARE:
        return "decode"
    return "disk"


def _drain(
    dataset: Any, metrics: StageMetrics, seconds: float, max_batches: int | None, advance: Advance, cpu: PipelineCPU
) -> tuple[int, int]:
    batches = rows = epoch = 0
    deadline = time.perf_counter() + seconds if seconds > 0 else float("inf")
    while True:
        with dataset.iter_epoch(epoch, metrics=metrics) as stream:
            for batch in stream:
                batches, rows = batches + 1, rows + chunk_len(batch)
                advance()
                cpu.sample_every(CPU_SAMPLE_SECONDS)  # the epoch's threads end with it: seen while they run
                if (max_batches and batches >= max_batches) or time.perf_counter() >= deadline:
                    return batches, rows
        if batches == 0:
            return 0, 0
        epoch += 1


def _fit(
    dataset: Any, metrics: StageMetrics, model: Any, label: str, features: list[str] | None, callbacks: list[Any],
    seconds: float, max_batches: int | None, advance: Advance,
) -> tuple[int, int, dict[str, float]]:  # fmt: skip
    import keras

    from .keras.monitor import InputStallMonitor

    train = dataset.to_keras(label=label, features=features, model=model)
    with train:
        warm = min(2, len(train))
        model.fit(train, epochs=1, steps_per_epoch=warm, verbose=0)  # traces/compiles the step
        train.close()
        train.dataset = train.dataset.with_options(metrics=metrics)
        monitor = InputStallMonitor(train, warn_above=1.0)
        steps = min(max_batches or len(train), len(train))
        epochs = -(-max_batches // steps) if max_batches else 1_000_000  # bounded by the deadline
        deadline = time.perf_counter() + seconds if seconds > 0 else float("inf")
        done = [0]

        class Bounded(keras.callbacks.Callback):
            def on_train_batch_end(self, batch: int, logs: dict | None = None) -> None:
                done[0] += 1
                advance()
                if time.perf_counter() >= deadline or (max_batches and done[0] >= max_batches):
                    self.model.stop_training = True

        model.fit(train, epochs=epochs, steps_per_epoch=steps, verbose=0, callbacks=[monitor, Bounded(), *callbacks])
    epochs_run = monitor.history
    wall = sum(epoch["epoch_seconds"] for epoch in epochs_run)
    wait = sum(epoch["input_wait_seconds"] for epoch in epochs_run)
    steps_done = int(sum(epoch["steps"] for epoch in epochs_run))
    rows = steps_done * (dataset.batch_size or 0)
    stats = {
        "epochs": float(len(epochs_run)),
        "steps": float(steps_done),
        "seconds": wall,
        "input_wait_seconds": wait,
        "input_wait_share": wait / wall if wall else 0.0,
        "steps_per_second": steps_done / wall if wall else 0.0,
        "rows_per_second": rows / wall if wall else 0.0,
        "pipeline_cpu_seconds": sum(epoch["pipeline_cpu_seconds"] for epoch in epochs_run),  # NaN: not measured
        "process_cpu_seconds": sum(epoch["process_cpu_seconds"] for epoch in epochs_run),
    }
    return steps_done, rows, stats


def _report(dataset: Any, snap: dict[str, Any], batches: int, rows: int, model_stats: dict | None) -> BenchReport:
    # with a model, throughput is training's (fit's epochs); stage shares stay relative to the pipeline's wall
    wall = max(model_stats["seconds"] if model_stats else snap["wall_seconds"], 1e-9)
    stages, threads = snap["stages"], int(snap["layout"].get("read_threads", 1))
    cores = usable_cores()
    read_bytes = int(stages["read"]["bytes"])
    bottleneck, verdict, advice, limit = _verdict(dataset, snap, threads, cores, model_stats)
    return BenchReport(
        seconds=wall,
        pipeline_seconds=snap["wall_seconds"],
        batches=batches,
        rows=rows,
        read_bytes=read_bytes,
        rows_per_second=rows / wall,
        mb_per_second=read_bytes / max(snap["wall_seconds"], 1e-9) / 1e6,
        batches_per_second=batches / wall,
        read_threads=threads,
        cpu_count=cores,
        stages=stages,
        ops=snap["ops"],
        utilisation=snap["utilisation"],
        queues=snap["queues"],
        layout=snap["layout"],
        peak_rss_bytes=int(snap["peak_rss_bytes"]),
        memory_limit_bytes=int(snap["memory_limit_bytes"] or 0),
        bottleneck=bottleneck,
        verdict=verdict,
        advice=advice,
        model=model_stats,
        storage=snap.get("storage"),
        read_limit=limit,
        storage_share=snap.get("storage_share"),
        **snap["cpu"],
    )


def _verdict(
    dataset: Any, snap: dict, threads: int, cores: int, model_stats: dict | None
) -> tuple[str, str, list[str], str | None]:
    stages, ops, wall = snap["stages"], snap["ops"], max(snap["wall_seconds"], 1e-9)
    seconds = {name: stages[name]["seconds"] for name in stages}
    pool = (seconds["read"] + seconds["fragment_ops"]) / threads
    producer = seconds["assemble"] + seconds["batch"] + seconds["batch_ops"]
    advice: list[str] = []
    if snap["peak_rss_bytes"] > (snap["memory_limit_bytes"] or float("inf")):
        advice.append(
            f"peak RSS {snap['peak_rss_bytes'] / MIB:,.0f} MiB exceeds memory_limit "
            f"{snap['memory_limit_bytes'] / MIB:,.0f} MiB (RSS includes Python, the framework and the model)"
        )
    cpu = snap.get("cpu") or {}
    if model_stats is not None and cpu.get("pipeline_cpu_share") is not None:
        cores_limit = cores_verdict(
            wait_share=model_stats["input_wait_share"],
            pipeline_share=cpu["pipeline_cpu_share"],
            process_share=cpu["process_cpu_share"],
            cores=cores,
        )
        if cores_limit is not None:
            advice.insert(
                0,
                f"training waited for input only {model_stats['input_wait_share']:.0%} of step time, yet the "
                f"pipeline's threads took {cpu['pipeline_cpu_share']:.0%} of the cores: a cheaper pipeline gives "
                "the model those cores (run without a model for the stage that costs most)",
            )
            return "cores", cores_limit, advice, None
    if model_stats is not None and model_stats["input_wait_share"] < MODEL_BOUND_WAIT_SHARE:
        advice.insert(
            0,
            f"training waited for input only {model_stats['input_wait_share']:.0%} of step time and the pipeline's "
            f"busiest thread worked {max(pool, producer) / wall:.0%} of the time: a faster input pipeline "
            "would not speed training up (run without a model for the pipeline's own ceiling)",
        )
        return "model", "the model is the limit — data waits", advice, None
    if pool >= producer:
        fragment_ops = [op for op in ops if op["stage"] == "fragment_ops"]
        slowest = fragment_ops[0] if fragment_ops else None
        if slowest is not None and slowest["seconds"] > seconds["read"]:
            name = _op_label(slowest["op"])
            advice.insert(
                0,
                f"{name} takes {slowest['seconds'] / (seconds['read'] + seconds['fragment_ops']):.0%} of read-pool "
                f"time ({1000 * slowest['seconds'] / max(1, slowest['calls']):.1f} ms per fragment); make it "
                "cheaper (vectorised NumPy), it already runs in parallel in the read threads",
            )
            if threads < cores:
                advice.append(f"more read threads: with_options(read_threads={cores}) (now {threads} of {cores} cores)")
            return f"fragment_op:{slowest['op']}", f"per-fragment {name} is the limit", advice, None
        return "read", *_read_verdict(dataset, stages["read"], snap, threads, cores, advice)
    parts = {"assemble": seconds["assemble"], "batch": seconds["batch"], "batch_ops": seconds["batch_ops"]}
    stage = max(parts, key=lambda name: parts[name])
    if stage == "batch_ops":
        slowest = next(op for op in ops if op["stage"] == "batch_ops")
        name = _op_label(slowest["op"])
        advice.insert(
            0,
            f"{name} after batch() takes {slowest['seconds'] / wall:.0%} of the producer thread "
            f"({1000 * slowest['seconds'] / max(1, slowest['calls']):.1f} ms per batch); move it before batch() "
            f"so it runs per fragment in the {threads} read threads, or make it cheaper",
        )
        return f"batch_op:{slowest['op']}", f"per-batch {name} is the limit", advice, None
    if stage == "assemble":
        advice.insert(
            0,
            f"window assembly and the shuffle gather take {parts['assemble'] / wall:.0%} of the producer thread: "
            "read fewer or narrower columns, or a smaller shuffle window (shuffle(window=...))",
        )
        return "assemble", "window assembly / shuffle gather is the limit", advice, None
    advice.insert(
        0, f"batching takes {parts['batch'] / wall:.0%} of the producer thread: larger batches copy less per row"
    )
    return "batch", "batching is the limit", advice, None


def _read_verdict(
    dataset: Any, read: dict, snap: dict, threads: int, cores: int, advice: list[str]
) -> tuple[str, list[str], str]:
    wall = max(snap["wall_seconds"], 1e-9)
    mb_per_second = read["bytes"] / wall / 1e6
    rows_per_fragment = read["rows"] / max(1, read["calls"])
    source_format = _source_format(dataset)
    cores_busy = snap.get("process_cpu_seconds", 0.0) / (wall * cores)
    storage_share = snap.get("storage_share")
    evidence = ReadEvidence(
        read["seconds"], read["cpu_seconds"], cores_busy, storage_share, is_remote(dataset.source.info.filesystem)
    )
    limit = read_limit(evidence)
    waited = 1 - read["cpu_seconds"] / read["seconds"] if read["seconds"] else 0.0
    if limit == "network":
        advice.insert(0, f"reads spent {waited:.0%} of their time waiting on the network ({mb_per_second:,.1f} MB/s)")
        advice.append(f"more read threads overlap more requests: with_options(read_threads={2 * threads})")
        return f"the network is the limit at {mb_per_second:,.1f} MB/s", advice, limit
    if limit == "disk":
        served = "" if storage_share is None else f"; the disk served {storage_share:.0%} of the bytes read"
        advice.insert(
            0,
            f"reads spent {waited:.0%} of their time waiting on I/O{served}: the disk is the limit at "
            f"{mb_per_second:,.1f} MB/s (decoded)",
        )
        return f"the disk is the limit at {mb_per_second:,.1f} MB/s", advice, limit
    bound = f"CPU-bound: {cores_busy:.0%} of {cores} cores busy"
    if storage_share is not None and waited > 1 - IO_BOUND_CPU_RATIO and cores_busy < CORES_BUSY:
        lock = " (h5py serialises every call through one lock)" if source_format == "hdf5" else ""
        bound = "reads wait on decoding's threads, a lock or a core, not the disk"
        advice.append(
            f"reads spent {waited:.0%} of their time off the CPU, yet the disk served only {storage_share:.0%} of "
            "the bytes read (the rest came from the page cache): they waited for the decoder's own threads, "
            f"a lock or a core{lock}, not the disk"
        )
    if threads < cores and snap["utilisation"]["read_pool"] > 0.7:
        advice.append(
            f"more read threads: with_options(read_threads={cores}) (now {threads} of {cores} cores, "
            f"{snap['utilisation']['read_pool']:.0%} busy)"
        )
    if rows_per_fragment < SMALL_FRAGMENT_ROWS and read["calls"] >= 8 and source_format not in ("images", "zip"):
        advice.append(
            f"fragments are small ({rows_per_fragment:,.0f} rows, "
            f"{1000 * read['seconds'] / read['calls']:.1f} ms each): "
            "per-fragment overhead dominates; write larger row groups or `streamfeed convert` to Parquet shards"
        )
    if source_format in ("images", "zip"):  # a folder, or a zip archive of one
        advice.append(
            "decode at reduced size: read_images(size=...) smaller (JPEGs are downscaled in the DCT domain), "
            "or convert once to pre-resized shards"
        )
    elif source_format in ("csv", "tfrecord"):
        advice.append(f"{source_format} decoding is CPU work: `streamfeed convert` to Parquet once reads much faster")
    if not advice:
        advice.append("project fewer columns (columns=...) or use more cores")
    return f"reading and decoding is the limit ({mb_per_second:,.1f} MB/s, {bound})", advice, limit


def _source_format(dataset: Any) -> str | None:
    try:
        return dataset.source.fingerprint().get("format")
    except Exception:  # a custom source without a format: no format-specific advice
        return None
