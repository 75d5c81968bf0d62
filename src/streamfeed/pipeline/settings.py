"""What a pipeline is: the frozen settings that ``Dataset``'s methods set and ``Resolution`` resolves.

Kept apart from the fluent methods so that the resolution and the running
epoch depend on the settings alone, never on the builder that made them.
Machine settings (``memory_limit``, ``read_threads``, ``prefetch_depth``,
``metrics``, ``autotune``) size buffers and threads; every other field
describes what is served and in which order.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..core import Source
from ..errors import ArgumentError, BadInputReport, OnError, describe
from ..memory import parse_size
from ..plan import Remainder
from ..runtime.assembly import MatrixColumns
from ..runtime.autotune import Autotune
from ..runtime.batch import LastBatch
from ..runtime.bucketing import Bucket
from ..runtime.spec import Op

if TYPE_CHECKING:
    from ..hard_examples import HardExampleSampler
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
    matrix: MatrixColumns | None = None  # the packing's feature columns, which the runtime makes one matrix
    seed: int | None = None  # None: no shuffle
    window: int | None = None
    batch_size: int | None = None
    last_batch: LastBatch = "keep"
    bucket: Bucket | None = None  # batch(bucket=...): batches by length, of the buckets' sizes
    prefetch_depth: int | None = None
    read_threads: int | None = None
    memory_limit: int | None = None
    shard_index: int = 0
    shard_count: int = 1
    lanes: int | None = None  # set by shard(): the epoch is dealt in this many equal lanes
    remainder: Remainder = "drop"
    metrics: "bool | StageMetrics" = field(default=False, compare=False, repr=False)
    autotune: Autotune | None = field(default=None, compare=False, repr=False)  # None: the layout's fixed settings
    sampler: "BalancedSampler | HardExampleSampler | None" = None  # balance() or hard_examples()

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

    @property
    def varying_shapes(self) -> bool:
        """Whether a batch's dimensions past the first may differ from batch to batch: bucketed (each bucket its
        boundary), or padded to each batch's longest row. The TensorFlow feed then fixes only the rank."""
        return self.bucket is not None or any(getattr(op, "varies_shape", False) for op in self.batch_ops)


def memory_limit_bytes(value: object) -> int:
    """``with_options(memory_limit=...)`` in bytes: a whole byte count, or a size as the CLI takes it.

    ``"512MiB"``, ``"1GB"``, ``"2G"`` (:func:`streamfeed.memory.parse_size`,
    the CLI's ``--memory-limit``); a number of bytes (an integral float too,
    ``1e9``). Anything else, and less than one byte, is refused here, naming
    the value, rather than by ``int()`` or as a limit below zero much later.
    """
    size: int | None = None
    if isinstance(value, str):
        try:
            size = parse_size(value)
        except ArgumentError:
            size = None
    elif isinstance(value, numbers.Integral) and not isinstance(value, bool):
        size = int(value)
    elif isinstance(value, float) and value.is_integer():
        size = int(value)
    if size is None or size < 1:
        raise ArgumentError(
            describe(
                "with_options(memory_limit=...) is not a size",
                expected="a positive number of bytes, or a size with a unit such as 512MB, 512MiB, 1GiB or 2G",
                found=repr(value),
            )
        )
    return size
