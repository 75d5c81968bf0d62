"""What a pipeline is: the frozen settings that ``Dataset``'s methods set and ``Resolution`` resolves.

Kept apart from the fluent methods so that the resolution and the running
epoch depend on the settings alone, never on the builder that made them.
Machine settings (``memory_limit``, ``read_threads``, ``prefetch_depth``,
``metrics``, ``autotune``) size buffers and threads; every other field
describes what is served and in which order.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..core import Source
from ..errors import BadInputReport, OnError
from ..plan import Remainder
from ..runtime.autotune import Autotune
from ..runtime.batch import LastBatch
from ..runtime.spec import Op

if TYPE_CHECKING:
    from ..runtime.metrics import StageMetrics
    from ..sampling import BalancedSampler


@dataclass(frozen=True)
class Settings:
    """A pipeline's settings; build them with :class:`~streamfeed.pipeline.dataset.Dataset`'s methods."""

    source: Source
    report: BadInputReport = field(default_factory=BadInputReport)
    row_ops: tuple[Op, ...] = ()
    filtered: bool = False  # a row op may drop rows: the epoch's rows are counted once
    batch_ops: tuple[Op, ...] = ()
    pack: Op | None = None  # set by the Keras adapter: runs after every user op
    seed: int | None = None  # None: no shuffle
    window: int | None = None
    batch_size: int | None = None
    last_batch: LastBatch = "keep"
    prefetch_depth: int | None = None
    read_threads: int | None = None
    memory_limit: int | None = None
    shard_index: int = 0
    shard_count: int = 1
    lanes: int | None = None  # set by shard(): the epoch is dealt in this many equal lanes
    remainder: Remainder = "drop"
    metrics: "bool | StageMetrics" = field(default=False, compare=False, repr=False)
    autotune: Autotune | None = field(default=None, compare=False, repr=False)  # None: the layout's fixed settings
    sampler: "BalancedSampler | None" = None

    def __post_init__(self) -> None:
        # The source's identity (sizes, modification times) is taken now, at
        # open: a file appended to later must not pass for what was opened.
        # Sources keep it, so every derived Dataset costs nothing here.
        self.source.fingerprint()

    @property
    def on_error(self) -> OnError:
        """``"raise"`` or ``"skip"``: the policy of this dataset's bad-input report."""
        return self.report.on_error

    @property
    def shuffled(self) -> bool:
        return self.seed is not None
