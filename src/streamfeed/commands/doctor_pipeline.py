"""``streamfeed doctor``'s first measurement: the pipeline as training reads it, and what the autotuner found.

A short run of ``diagnostics.bench`` (stage metrics on, batches drained as
fast as they come) with the run-time autotuner on
(``with_options(autotune=True)``, ``runtime/autotune.py``) unless the user
fixed ``--read-threads``: rows/s, read threads and how busy they were, the
stage that sets the pace, the buffers against the memory limit, and the
settings the autotuner reached, and the share of the cores the pipeline's
own threads kept busy at that rate (``runtime/cpu.py``): cores a model
training beside it could not use. Its own module because it is the one place
where the doctor reads the autotuner's report and turns it into a repair.
"""

from __future__ import annotations

from typing import Any

from ..errors import MemoryLimitError
from .doctor_findings import Finding, count

MORE_THREADS_BUSY = 0.7  # a read pool busier than this share of its threads' time would use more (bench's rule)
MIB = 2**20


def tuning_finding(dataset: Any, seconds: float, *, progress: bool | None = False) -> Finding:
    """The pipeline's throughput and settings from a short measured run with autotuning, and what to tune.

    The run is ``bench``'s (stage metrics on, batches drained as fast as
    possible) with the run-time autotuner on (``runtime/autotune.py``): when
    it moved a setting within the memory limit, the finding says which and
    why, and the repair is to train with it. Otherwise the repair suggested
    is the one setting the run measures the need for: more read threads,
    when the read pool is the limit, busy above ``MORE_THREADS_BUSY``, fewer
    threads than cores run, and the layout with one per core still fits the
    memory limit. A user's explicit ``--read-threads`` is kept (no tuning).
    """
    from ..diagnostics import bench

    tuned = dataset if dataset.read_threads else dataset.with_options(autotune=True)
    report = bench(tuned, seconds=seconds, progress=progress)
    tuning = tuned.autotune.report() if tuned.autotune is not None else None
    threads, cores, busy = report.read_threads, report.cpu_count, report.utilisation["read_pool"]
    measured = {
        "rows_per_second": report.rows_per_second,
        "rows": report.rows,
        "seconds": report.seconds,
        "read_threads": threads,
        "cpu_count": cores,
        "read_pool_busy": busy,
        "producer_busy": report.utilisation["producer"],
        "bottleneck": report.bottleneck,
        "read_limit": report.read_limit,
        "verdict": report.verdict,
        "estimated_bytes": report.layout.get("estimated_bytes", 0),
        "memory_limit_bytes": report.memory_limit_bytes,
        "peak_rss_bytes": report.peak_rss_bytes,
        "layout": report.layout,
        "pipeline_cpu_seconds": report.pipeline_cpu_seconds,
        "pipeline_cpu_share": report.pipeline_cpu_share,
        "process_cpu_share": report.process_cpu_share,
    }
    summary = (
        f"the pipeline delivers {count(report.rows_per_second)} rows/s with {threads} read thread"
        f"{'s' if threads != 1 else ''} ({cores} cores); read threads busy {busy:.0%}: {_bound(report)}; "
        f"buffers {report.layout.get('estimated_bytes', 0) / MIB:,.0f} MiB of the "
        f"{report.memory_limit_bytes / MIB:,.0f} MiB memory limit; {_cpu(report)}"
    )
    if tuning is not None:
        measured["autotune"] = tuning.to_dict()
        if reads_retuned(tuning):
            return Finding(
                "pipeline",
                True,
                f"{summary}; autotuning changed {tuning.summary()}",
                measured,
                "train with with_options(autotune=True), or fix the settings it reached: "
                f"with_options(read_threads={tuning.final.read_threads}) and prefetch({tuning.final.prefetch})",
            )
        if tuning.final != tuning.initial:
            summary = f"{summary}; autotuning deepened the prefetch queue only ({tuning.summary()})"
    if report.bottleneck == "read" and busy > MORE_THREADS_BUSY and threads < cores:
        try:
            wider = dataset.with_options(read_threads=cores).layout()
        except MemoryLimitError:
            wider = None
        if wider is not None:
            measured["suggested_read_threads"] = cores
            measured["suggested_estimated_bytes"] = wider.estimated_bytes
            return Finding(
                "pipeline",
                True,
                summary,
                measured,
                f"read with {cores} threads: --read-threads {cores} (with_options(read_threads={cores})); "
                f"its buffers, about {wider.estimated_bytes / MIB:,.0f} MiB, fit the memory limit",
            )
    return Finding("pipeline", False, summary, measured)


def reads_retuned(tuning: Any) -> bool:
    """Whether autotuning moved the reads (threads or read-ahead): the settings the doctor offers as a repair.

    A deeper prefetch queue alone is not: ``bench`` drains batches as fast
    as they come, so its consumer always waits, and a shuffle served unit by
    unit makes the batch rate of two intervals differ by bursts.
    """
    moved = ("read_threads", "read_ahead")
    return any(getattr(tuning.final, name) != getattr(tuning.initial, name) for name in moved)


def _bound(report: Any) -> str:
    """What sets the pipeline's pace, in two words."""
    if report.bottleneck == "read":  # bench's call, diagnostics.read_limit: one rule for both commands
        return f"{report.read_limit}-bound"
    return {"assemble": "shuffle-bound", "batch": "batching-bound"}.get(report.bottleneck, report.verdict)


def _cpu(report: Any) -> str:
    """The share of the cores the pipeline's threads took at the rate measured: what a model could not use."""
    if report.pipeline_cpu_share is None:
        return "the pipeline's CPU share not measured (needs Linux /proc)"
    return (
        f"at that rate its threads keep {report.pipeline_cpu_share:.0%} of the {report.cpu_count} cores busy, "
        "cores a model training beside it cannot use"
    )
