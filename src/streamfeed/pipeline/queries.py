"""What a pipeline answers without running: sizes, plans, layout, steps, shards and states.

Every answer comes from the dataset's :class:`~streamfeed.pipeline.resolve.Resolution`,
so these methods live apart from the fluent builders in ``dataset.py``:
they read the settings and never make a new dataset.
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any, Callable, Generator, Mapping, TypeVar

from ..core import Chunk
from ..errors import ArgumentError, describe
from ..memory import Layout
from ..plan import EpochPlan
from ..runtime.spec import EpochSpec
from .resolve import LanePositions, Resolution
from .settings import Settings

T = TypeVar("T")


class Queries(Settings):
    """The questions a :class:`~streamfeed.pipeline.dataset.Dataset` answers from its resolution."""

    if TYPE_CHECKING:

        @property
        def resolution(self) -> Resolution: ...  # a cached property of Dataset

    # ------------------------------------------------------------------ sizing
    def fragment_rows(self) -> list[int]:
        """Rows each fragment yields after per-fragment ops (counted once if unknown)."""
        return self.resolution.fragment_rows()

    def epoch_plan(self, epoch: int) -> EpochPlan:
        """The read units for ``epoch`` (with their sampled sizes when balanced)."""
        return self.resolution.epoch_plan(epoch)

    def layout(self) -> Layout:
        """Buffer sizes chosen for the memory limit, with their estimated bytes."""
        return self.resolution.layout()

    def fragment_pass(
        self,
        summarise: Callable[[int, Chunk], T],
        *,
        threads: int | None = None,
        name: str = "pass",
        text_as_arrow: bool = False,
    ) -> Generator[T | None, None, None]:
        """``summarise(index, chunk)`` of every fragment read through the per-fragment ops, in fragment order.

        The one pass behind counting after filters, ``compute_stats`` and
        ``inspect --quality`` (:func:`streamfeed.pipeline.passes.fragment_pass`):
        read in a bounded pool under the error policy (None for a fragment
        skipped as bad); close the iterator, or exhaust it, to stop its threads.
        """
        return self.resolution.fragment_pass(summarise, threads=threads, name=name, text_as_arrow=text_as_arrow)

    def num_rows(self, epoch: int = 0) -> int:
        """Rows this shard yields per epoch (before last-batch dropping; sharded: filler rows included)."""
        return self.resolution.positions.rows(epoch)

    def num_batches(self, epoch: int = 0, *, state: Mapping[str, Any] | None = None) -> int:
        """Batches this shard yields in ``epoch``, or from a saved ``state`` to its epoch's end."""
        if self.batch_size is None:
            raise ArgumentError(describe("num_batches needs batches", fix="call batch() first, or use num_rows()"))
        positions = self.resolution.positions
        return positions.batches_left(*positions.start(epoch, state))

    def __len__(self) -> int:
        return self.num_batches() if self.batch_size else self.num_rows()

    def epoch_spec(self, epoch: int) -> EpochSpec:
        """This dataset resolved for one epoch: all the runtime reads (see ``runtime/spec.py``)."""
        return self.resolution.epoch_spec(epoch)

    # ---------------------------------------------------------------- sharding
    def shard_report(self, epoch: int = 0) -> dict:
        """How ``epoch`` is dealt: rows, lanes, this worker's lanes, steps, and the rows left out or padded."""
        positions = self.resolution.positions
        if not isinstance(positions, LanePositions):
            raise ArgumentError(describe("shard_report() needs shard()", fix="call .shard(index, count) first"))
        lanes = positions.lanes(epoch)
        return {
            "epoch": epoch,
            "rows": lanes.rows,
            "lanes": lanes.count,
            "lane_rows": lanes.length,
            "remainder": lanes.remainder,
            "dropped_rows": lanes.dropped,
            "dropped": [lanes.rows - lanes.dropped, lanes.rows] if lanes.dropped else None,  # rows [a, b) of the order
            "padded_rows": lanes.padded,
            "worker": [self.shard_index, self.shard_count],
            "worker_lanes": list(positions.worker_lanes()),
            "steps": positions.steps(epoch) if self.batch_size else None,
        }

    # ------------------------------------------------------------------- state
    def fingerprint(self) -> dict:
        """What a saved state must match to be restored into this pipeline: data and order settings, no machine's."""
        return copy.deepcopy(self.resolution.fingerprint())

    def initial_state(self, epoch: int = 0) -> dict:
        """The state at the start of ``epoch``: restoring it starts that epoch afresh."""
        return self.resolution.positions.initial_state(epoch)
