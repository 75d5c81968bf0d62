"""A Keras callback that tells, per epoch, whether training waited for data.

How the wait is measured, and why this way on every backend: in Keras 3
the next batch is fetched *inside* the train step (``train_function(iterator)``
calls ``next`` on JAX, PyTorch and TensorFlow alike), so the gap between
``on_train_batch_end`` and the next ``on_train_batch_begin`` never contains
the wait. What does is the time :class:`~streamfeed.keras.KerasDataset`'s
``__getitem__`` spends blocked on the pipeline's prefetch queue
(``KerasDataset.input_wait_seconds``):

- JAX and PyTorch call ``__getitem__`` on the training thread, so this is
  exactly the time training waited;
- TensorFlow calls it from a tf.data thread that prefetches a few batches.
  When the pipeline is the bottleneck that thread blocks on our queue as
  long as training blocks on tf.data (the slower producer sets the pace);
  when the model is the bottleneck our queue is full and the wait is ~0.
  It is an estimate, honest in both regimes, off only while tf.data's own
  small buffer fills or drains.

Compute time is the epoch's wall time minus the wait. Without a
``dataset`` the monitor can only report step times and throughput. Its
cost is a few clock reads per batch: cheap enough to leave on.

Beside the wait, the CPU: a pipeline that takes the cores from the model
never makes it wait (issue 28: 0.0-0.4 % wait on 2 cores, at 0.37-0.47x
the model's in-memory rate). The monitor samples the CPU time of the
pipeline's own threads (``runtime/cpu.py``; every ``CPU_SAMPLE_SECONDS``,
from ``on_train_batch_end``: 0.19 ms per sample measured with the 12
threads of a TensorFlow fit on 2 cores) and reports it as a share of the
epoch's wall time x the cores; when the cores are busy and the pipeline takes a large share of them
(``runtime.cpu.cores_verdict``) it says so, with a warning.
"""

from __future__ import annotations

import logging
import math
import time
from typing import Any

import keras

from ..runtime.cpu import CPUSample, PipelineCPU, cores_verdict, share_between, usable_cores

logger = logging.getLogger("streamfeed")
CPU_SAMPLE_SECONDS = 0.5  # a read pool's thread that ends between samples loses at most this much of its CPU time


class InputStallMonitor(keras.callbacks.Callback):
    """Logs, per epoch, the share of training time spent waiting for input.

    Args:
        dataset: the :class:`~streamfeed.keras.KerasDataset` given to ``fit``.
        warn_above: wait share above which the input pipeline is called the
            bottleneck (a ``logging.WARNING`` pointing to ``streamfeed bench``).

        verbose: also print the line (after Keras's epoch line), not only log it.

    Writes one readable line per epoch ("input wait 3.9 % of step time") to
    the ``streamfeed`` logger (and the console when ``verbose``). Nothing is
    added to Keras's ``logs``: a raw float in the progress bar and
    ``History`` says less than the line. ``history`` keeps one dict per
    epoch: ``input_wait_share``, ``input_wait_seconds``,
    ``steps_per_second``, when the batch size is known
    ``rows_per_second``, and the CPU: ``pipeline_cpu_seconds`` (the
    pipeline's threads), ``process_cpu_seconds``, ``pipeline_cpu_share`` and ``process_cpu_share``
    (of the epoch's wall time x ``cores``; the pipeline's NaN where it
    cannot be measured, off Linux) and ``cores_limit`` (whether the cores
    are the limit and the pipeline takes a large share of them:
    ``runtime.cpu.cores_verdict``, whose sentence is ``cores_verdict``, else
    None; then a ``logging.WARNING`` says it).
    """

    def __init__(self, dataset: Any = None, *, warn_above: float = 0.3, verbose: bool = True) -> None:
        super().__init__()
        self.dataset = dataset
        self.warn_above = float(warn_above)
        self.verbose = bool(verbose)
        self.history: list[dict[str, Any]] = []
        self._epoch_started = 0.0
        self._wait_at_start = 0.0
        self._steps = 0
        self._step_seconds = 0.0
        self._batch_started: float | None = None
        self._cpu = PipelineCPU()
        self._cpu_at_start: CPUSample | None = None
        self._cores = usable_cores()

    def _wait_total(self) -> float:
        return float(getattr(self.dataset, "input_wait_seconds", 0.0)) if self.dataset is not None else 0.0

    def on_epoch_begin(self, epoch: int, logs: dict | None = None) -> None:
        self._steps, self._step_seconds, self._batch_started = 0, 0.0, None
        self._wait_at_start = self._wait_total()
        self._cpu_at_start = self._cpu.sample()
        self._epoch_started = time.perf_counter()

    def on_train_batch_begin(self, batch: int, logs: dict | None = None) -> None:
        self._batch_started = time.perf_counter()

    def on_train_batch_end(self, batch: int, logs: dict | None = None) -> None:
        if self._batch_started is not None:
            self._step_seconds += time.perf_counter() - self._batch_started
            self._batch_started = None
        self._steps += 1
        self._cpu.sample_every(CPU_SAMPLE_SECONDS)

    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        wall = max(time.perf_counter() - self._epoch_started, 1e-9)
        wait = max(0.0, self._wait_total() - self._wait_at_start) if self.dataset is not None else float("nan")
        stats: dict[str, Any] = {
            "input_wait_seconds": wait,
            "input_wait_share": min(1.0, wait / wall) if self.dataset is not None else float("nan"),
            "compute_seconds": wall - wait if self.dataset is not None else self._step_seconds,
            "epoch_seconds": wall,
            "steps": float(self._steps),
            "steps_per_second": self._steps / wall,
        }
        batch_size = getattr(getattr(self.dataset, "dataset", None), "batch_size", None)
        if batch_size:
            stats["rows_per_second"] = self._steps * batch_size / wall
        stats.update(self._cpu_stats(wall, stats["input_wait_share"]))
        self.history.append(stats)
        self._report(epoch, stats)

    def _cpu_stats(self, wall: float, wait_share: float) -> dict[str, Any]:
        """The epoch's CPU: the pipeline's threads' and the process's, as shares of wall time x cores."""
        share = share_between(self._cpu_at_start, self._cpu.sample(), wall, self._cores)
        wait = wait_share if self.dataset is not None else 0.0  # without a dataset: the CPU alone decides
        verdict = cores_verdict(
            wait_share=wait, pipeline_share=share.pipeline_share, process_share=share.process_share, cores=share.cores
        )
        return {
            "pipeline_cpu_seconds": share.pipeline_seconds,
            "process_cpu_seconds": share.process_seconds,
            "pipeline_cpu_share": share.pipeline_share,
            "process_cpu_share": share.process_share,
            "cores": float(share.cores),
            "cores_limit": verdict is not None,
            "cores_verdict": verdict,
        }

    def _say(self, line: str) -> None:
        logger.info("%s", line)
        if self.verbose:
            print(line, flush=True)  # where Keras's progress bar writes

    def _report(self, epoch: int, stats: dict[str, Any]) -> None:
        share = stats["input_wait_share"]
        rate = (
            f"{stats['rows_per_second']:,.0f} rows/s"
            if "rows_per_second" in stats
            else f"{stats['steps_per_second']:,.1f} steps/s"
        )
        if self.dataset is None:
            self._say(
                f"epoch {epoch + 1}: {stats['steps']:.0f} steps, {rate}, {_cpu_words(stats)} "
                "(pass dataset= to measure the input wait)"
            )
        else:
            self._say(
                f"epoch {epoch + 1}: input wait {100 * share:.1f} % of step time "
                f"({stats['input_wait_seconds']:.2f} of {stats['epoch_seconds']:.1f} s), {_cpu_words(stats)}, {rate}"
            )
        if stats["cores_verdict"] is not None:
            logger.warning(
                "epoch %d: %s: training does not wait for data, yet runs slower than the cores allow; make the "
                "pipeline cheaper (run `streamfeed bench PATH` to find the stage that takes the CPU)",
                epoch + 1,
                stats["cores_verdict"],
            )
        if self.dataset is None:
            return
        if share > self.warn_above:
            logger.warning(
                "epoch %d: training waited for input %.0f%% of the time (%.1f of %.1f s): the input pipeline is the "
                "bottleneck; run `streamfeed bench PATH` to find the slow stage",
                epoch,
                100 * share,
                stats["input_wait_seconds"],
                stats["epoch_seconds"],
            )


def _cpu_words(stats: dict[str, Any]) -> str:
    """ "the input pipeline uses 12 % of the 2 cores (process 95 %)", or why it is not measured."""
    cores = int(stats["cores"])
    process = f"process {100 * stats['process_cpu_share']:.0f} %"
    if math.isnan(stats["pipeline_cpu_seconds"]):  # no per-thread CPU time here
        return f"the input pipeline's CPU not measured (needs Linux /proc; {process} of {cores} cores)"
    return f"the input pipeline uses {100 * stats['pipeline_cpu_share']:.0f} % of the {cores} cores ({process})"
