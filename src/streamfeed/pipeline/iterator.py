"""One running epoch: its threads, its position and the state to save.

An :class:`EpochIterator` is made by ``Dataset.iter_epoch`` from the
dataset's :class:`~streamfeed.pipeline.resolve.Resolution`; it runs the
runtime's producer for the epoch's spec in a background thread and knows
nothing of the builder.
"""

from __future__ import annotations

import dataclasses
import re
import threading
import weakref
from typing import TYPE_CHECKING, Any, Callable, Iterator, Mapping, NamedTuple

from ..core import Chunk, Position
from ..errors import BadInputReport, ErrorBudgetExceeded, describe
from ..memory import Layout
from ..runtime.autotune import Settings as TunedSettings
from ..runtime.autotune import TuningReport
from ..runtime.background import BackgroundIterator
from ..runtime.bucketing import BucketPosition
from ..runtime.shuffle import UnitBuffers
from .resolve import Resolution

if TYPE_CHECKING:
    from ..runtime.metrics import StageMetrics


def _metrics_follow(timing: "StageMetrics", layout: Layout, limit: int) -> Callable[[TunedSettings, int], None]:
    """A tuner listener that records its settings as the metrics' layout."""

    def follow(settings: TunedSettings, nbytes: int) -> None:
        timing.start({**layout.to_dict(), **settings.to_dict(), "estimated_bytes": nbytes}, limit)

    return follow


_REASONS = 3  # the first entries an emptied epoch's error quotes (the report holds them all)


def skipped_everything(report: BadInputReport) -> bool:
    """Whether ``on_error="skip"`` left out every row of the input (not a filter, nor ``last_batch="drop"``).

    An epoch emptied by a filter with one bad file among 240 good ones is
    the filter's doing: it ends empty, as any filter matching nothing does.
    """
    if not report.entries:
        return False
    return report.total_rows is None or report.skipped_rows >= report.total_rows


def emptied_by_skipping(epoch: int, report: BadInputReport) -> ErrorBudgetExceeded:
    """The error for an epoch that served no batch because ``on_error="skip"`` left its input out.

    An empty epoch would let ``fit`` "train" on nothing without a word;
    leaving some bad input out is what ``skip`` is for, leaving all of it
    out is not (the implicit budget: less than everything).
    """
    first = []
    for entry in report.entries[:_REASONS]:
        said = re.search(r"Found: (.*?)\.(?: Fix:|$)", entry.reason)
        first.append(f"{entry.path} ({entry.location}): {(said.group(1) if said else entry.reason)[:300]}")
    total = "" if report.total_rows is None else f" of {report.total_rows:,}"
    return ErrorBudgetExceeded(
        describe(
            f"Epoch {epoch} served no batch: on_error='skip' left its bad input out and no row was left to serve",
            expected="rows left once the bad input is skipped",
            found=(
                f"{report.skipped_units:,} unit(s), {report.skipped_rows:,} row(s) skipped{total}; "
                f"first: {'; '.join(first)}"
            ),
            fix="inspect the files named in the report (dataset.report, or report_path=...) and repair or replace them",
        )
    )


class StateMark(NamedTuple):
    """Where an epoch stood after a batch: the state it names, made only when it is asked for.

    The Keras adapter keeps one after every batch it serves, on the training
    thread, and asks for few (a checkpoint's): making each state there cost
    4.4 µs a batch (measured), a mark a tenth of it.
    """

    resolution: Resolution
    epoch: int
    position: Position | int | BucketPosition

    def state(self) -> dict:
        """The state after the batch (as :meth:`EpochIterator.get_state` gave it then)."""
        return self.resolution.positions.state(self.epoch, self.position)  # type: ignore[arg-type]


class EpochIterator:
    """The running form of one epoch: yields batches (dicts of arrays).

    :meth:`get_state` is the JSON-able state to save: restoring it with
    ``dataset.iter_epoch(state=...)`` continues with the next batch. Owns a
    producer thread and a read pool: close it (``with``, ``close()``). Its
    threads also stop at the epoch's end, when a ``KeyboardInterrupt``
    reaches the consumer, and when the iterator is dropped unclosed (``for
    batch in dataset: break``). Several threads may share one: each gets
    ``StopIteration`` at the end of the epoch or after ``close()``, except
    that an epoch run from its start that served no batch while
    ``on_error="skip"`` left input out ends in :func:`emptied_by_skipping`'s
    error instead.
    """

    def __init__(
        self,
        resolution: Resolution,
        epoch: int,
        start: Position | int | BucketPosition,
        *,
        metrics: "bool | StageMetrics" = False,
        buffers: UnitBuffers | None = None,
    ) -> None:
        from ..runtime.metrics import resolve

        self.resolution = resolution
        settings = resolution.dataset
        self.epoch = epoch
        self.position: Position | int | BucketPosition = (
            start  # sharded: the global batches done; bucketed: a BucketPosition
        )
        spec = resolution.epoch_spec(epoch)
        # The unit buffer pair, shared with the epoch started by successor(); set once every fragment is read.
        self._buffers = buffers = buffers if buffers is not None else UnitBuffers()
        self._reads_done = reads_done = threading.Event()
        self._metrics = timing = resolve(metrics)
        limit = resolution.memory_limit
        if timing is not None:
            timing.start(spec.layout.to_dict(), limit)
        self._tuner = tuner = None
        if settings.autotune is not None:  # the tuner travels in the spec, to every reader of the epoch
            self._tuner = tuner = settings.autotune.start(spec.layout, resolution.tuning_budget())
            spec = dataclasses.replace(spec, tuner=tuner)
            if timing is not None:  # the metrics' layout (bench's read-pool share) follows the tuned settings
                tuner.on_change(_metrics_follow(timing, spec.layout, limit))
        # Neither the producer thread nor the finalizer may refer to self: a
        # dropped iterator must be collected for its threads to be stopped.
        self._background: BackgroundIterator[tuple[Chunk, Position | int | BucketPosition]] = BackgroundIterator(
            resolution.positions.producer(spec, start, timing, buffers, reads_done),  # type: ignore[arg-type]
            depth=spec.layout.prefetch if tuner is None else tuner.settings.prefetch,
            name="streamfeed-epoch",
            metrics=timing,
            tuner=tuner,
        )
        # Inside a garbage collection the finalizer must not wait (BackgroundIterator.stop says why).
        self._finalizer = weakref.finalize(self, self._background.finalize)
        # An epoch run from its start that serves nothing while input was skipped is an error (see __next__).
        self._served, self._closed = 0, False
        self._from_start = start in (0, Position()) or (isinstance(start, BucketPosition) and start.row == 0)

    def __iter__(self) -> Iterator[Chunk]:
        return self

    def __next__(self) -> Chunk:
        try:
            batch, self.position = next(self._background)
        except KeyboardInterrupt:  # Ctrl-C in a bare for loop: nothing else would close it
            self.close()
            raise
        except StopIteration:
            report = self.resolution.dataset.report
            if not self._served and self._from_start and not self._closed and skipped_everything(report):
                raise emptied_by_skipping(self.epoch, report) from None
            raise
        self._served += 1
        return batch

    @property
    def reads_done(self) -> bool:
        """Whether every fragment of the epoch has been read (its last unit is being served)."""
        return self._reads_done.is_set()

    def successor(self, state: Mapping[str, Any]) -> "EpochIterator":
        """Starts the epoch at ``state`` now, to read while this one's last batches are served.

        Call it once :attr:`reads_done`: this epoch's reader is closed then,
        and the two share one pair of unit buffers, so the pipeline stays in
        its memory layout (the successor loads its first unit into the buffer
        this epoch no longer needs, and waits for the other). ``state`` is
        checked like :meth:`Dataset.iter_epoch`'s. Sharded epochs keep
        buffers of their own per lane.
        """
        resolution = self.resolution
        epoch, start = resolution.positions.start(0, state)
        return EpochIterator(resolution, epoch, start, metrics=resolution.dataset.metrics, buffers=self._buffers)

    @property
    def wait_seconds(self) -> float:
        """Time the consumer spent blocked waiting for batches."""
        return self._background.wait_seconds

    def metrics(self) -> dict | None:
        """A snapshot of the stage metrics, or None when metrics are off."""
        return None if self._metrics is None else self._metrics.snapshot()

    def tuning(self) -> TuningReport | None:
        """This epoch's autotuning so far (settings, every change and why), or None without autotuning."""
        return None if self._tuner is None else self._tuner.report()

    def get_state(self) -> dict:
        """The state after the last batch handed out.

        Once no batch of this epoch is left (after its last batch, or before
        rows that ``last_batch="drop"`` leaves out), it is the next epoch's
        start, so that restoring it never yields an empty epoch. States share
        their ``fingerprint`` dict with the pipeline (one per batch would be
        a copy per batch): copy a state before editing what is inside it.
        """
        return self.mark().state()

    def mark(self) -> StateMark:
        """The state after the last batch handed out, to make later (:class:`StateMark`)."""
        return StateMark(self.resolution, self.epoch, self.position)

    def memory(self) -> dict[str, int]:
        """The pipeline's own buffer estimate next to the process's measured RSS."""
        from ..memory import peak_rss_bytes, rss_bytes

        tuned = self.tuning()
        estimated = self.resolution.layout().estimated_bytes if tuned is None else tuned.estimated_bytes
        return {
            "estimated_pipeline_bytes": estimated,
            "memory_limit_bytes": self.resolution.memory_limit,
            "rss_bytes": rss_bytes(),
            "peak_rss_bytes": peak_rss_bytes(),
        }

    def close(self) -> None:
        """Stops the epoch's threads and waits for them; safe to call more than once."""
        self._closed = True  # an epoch stopped early did not end empty
        self._finalizer.detach()
        self._background.close()

    def release(self) -> None:
        """What the finalizer of an object owning this iterator calls: close(), not waiting inside a collection."""
        self._closed = True
        self._finalizer.detach()
        self._background.finalize()

    def __enter__(self) -> "EpochIterator":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
