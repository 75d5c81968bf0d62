"""Everything the runtime needs to produce one epoch, decided up front.

A :class:`~streamfeed.Dataset` describes a pipeline; an :class:`EpochSpec`
is that description resolved for one epoch: the plan (which fragments, in
what read units), the buffer layout chosen for the memory limit, the ops,
the batch settings and the bad-input report. The runtime reads only this
frozen value and never calls back into the ``Dataset``, so the data path
of an epoch can be understood (and tested) from ``runtime/`` alone.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Callable, Sequence

from ..core import Chunk, Fragment
from ..errors import BadInputReport
from ..memory import Layout
from ..plan import EpochPlan, Lanes
from .assembly import MatrixColumns
from .batch import LastBatch

if TYPE_CHECKING:
    from ..hard_examples import HardExampleSampler
    from ..sampling import BalancedSampler
    from .autotune import Autotuner
    from .bucketing import Bucket
    from .metrics import StageMetrics

Op = Callable[[Chunk], Chunk]


@dataclass(frozen=True)
class EpochSpec:
    """One epoch of one worker, resolved: what to read, how to buffer, what to emit."""

    epoch: int
    fragments: Sequence[Fragment]
    plan: EpochPlan  # read units, with their emitted row counts (sampled sizes when balanced)
    layout: Layout
    row_ops: tuple[Op, ...]  # per fragment, in the read threads
    batch_ops: tuple[Op, ...]  # per batch, in the producer thread
    batch_size: int | None
    last_batch: LastBatch
    seed: int | None  # None: no row shuffle
    shard_index: int
    sampler: BalancedSampler | HardExampleSampler | None  # balance() or hard_examples(): draws each unit's rows
    report: BadInputReport
    # Sharded: the plan (the unsharded order) cut into lanes, and this worker's
    # lanes in order; ``batch_size`` is then each lane's rows per step.
    lanes: Lanes | None = None
    worker_lanes: tuple[int, ...] = ()
    # With autotuning (one per running epoch): the reader's threads and read-ahead are the tuner's, not the layout's.
    tuner: Autotuner | None = None
    # The packing's feature columns, written side by side into the model's matrix after the last op
    # (runtime/assembly.py): in the read threads, the unit buffer, or after the per-batch ops.
    matrix: MatrixColumns | None = None
    # Bucketed by length (runtime/bucketing.py): the buckets' sizes replace ``batch_size`` (their largest).
    bucket: Bucket | None = None

    def reader_ops(self) -> tuple[Op, ...]:
        """The ops the read threads run per fragment: the row ops, and the matrix when nothing after them
        keeps the rows (unshuffled, no per-batch ops). Shuffled, the unit buffer writes it."""
        if self.matrix is None or self.batch_ops or self.seed is not None:
            return self.row_ops
        return (*self.row_ops, self.matrix.assemble)

    def timed(self, metrics: StageMetrics) -> EpochSpec:
        """The same spec with every op timed under the metrics' op stages."""
        return replace(
            self,
            row_ops=tuple(metrics.timed_op(op, "fragment_ops") for op in self.row_ops),
            batch_ops=tuple(metrics.timed_op(op, "batch_ops") for op in self.batch_ops),
        )
