"""What the layers above rely on of a batched dataset, as a protocol: the seam ``Dataset.to_keras`` hands over.

The Keras adapter is typed against this, not against ``Dataset``: the one
import that runs up the layers (``Dataset.to_keras`` loading
``keras.adapter``) then closes no circle, as ``runtime/spec.EpochSpec`` is
the seam the runtime reads without calling back into the builder.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping, Protocol

from ..core import Source
from ..errors import BadInputReport
from ..runtime.assembly import MatrixColumns
from ..runtime.batch import LastBatch
from ..runtime.spec import Op
from .iterator import EpochIterator

if TYPE_CHECKING:
    from ..runtime.bucketing import Bucket
    from ..runtime.metrics import StageMetrics


class ServedDataset(Protocol):
    """A :class:`~streamfeed.pipeline.dataset.Dataset` as the Keras adapter uses it."""

    @property
    def source(self) -> Source: ...

    @property
    def report(self) -> BadInputReport: ...

    @property
    def batch_size(self) -> int | None: ...

    @property
    def last_batch(self) -> LastBatch: ...

    @property
    def bucket(self) -> Bucket | None: ...

    def served_columns(self) -> list[str]: ...

    def with_packing(self, pack: Op, matrix: MatrixColumns | None = None) -> ServedDataset: ...

    def num_rows(self, epoch: int = 0) -> int: ...

    def num_batches(self, epoch: int = 0, *, state: Mapping[str, Any] | None = None) -> int: ...

    def initial_state(self, epoch: int = 0) -> dict: ...

    def iter_epoch(
        self, epoch: int = 0, *, state: Mapping[str, Any] | None = None, metrics: bool | StageMetrics | None = None
    ) -> EpochIterator: ...
