"""What the layers above rely on of a batched dataset, as a protocol: the seam ``Dataset.to_keras`` hands over.

The Keras adapter is typed against this, not against ``Dataset``: the one
import that runs up the layers (``Dataset.to_keras`` loading
``keras.adapter``) then closes no circle, as ``runtime/spec.EpochSpec`` is
the seam the runtime reads without calling back into the builder.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterator, Mapping, Protocol

from ..core import Chunk, Source
from ..errors import BadInputReport
from ..runtime.assembly import MatrixColumns
from ..runtime.batch import LastBatch
from ..runtime.spec import Op

if TYPE_CHECKING:
    from ..runtime.bucketing import Bucket
    from ..runtime.metrics import StageMetrics


class ServedMark(Protocol):
    """Where a served epoch stood after a batch (``EpochIterator.mark()``): the state, made when asked for."""

    def state(self) -> dict: ...


class ServedEpoch(Protocol):
    """A running epoch as the Keras adapter uses it: :class:`~streamfeed.pipeline.iterator.EpochIterator`,
    or a mixture's :class:`~streamfeed.pipeline.mix_epoch.MixedEpoch`."""

    def __iter__(self) -> Iterator[Chunk]: ...

    def __next__(self) -> Chunk: ...

    @property
    def reads_done(self) -> bool: ...

    @property
    def wait_seconds(self) -> float: ...

    def mark(self) -> ServedMark: ...

    def successor(self, state: Mapping[str, Any]) -> ServedEpoch: ...

    def close(self) -> None: ...

    def release(self) -> None: ...

    def __enter__(self) -> ServedEpoch: ...

    def __exit__(self, *exc_info: object) -> None: ...


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

    @property
    def varying_shapes(self) -> bool: ...

    def served_columns(self) -> list[str]: ...

    def with_packing(self, pack: Op, matrix: MatrixColumns | None = None) -> ServedDataset: ...

    def num_rows(self, epoch: int = 0) -> int: ...

    def num_batches(self, epoch: int = 0, *, state: Mapping[str, Any] | None = None) -> int: ...

    def initial_state(self, epoch: int = 0) -> dict: ...

    def iter_epoch(
        self, epoch: int = 0, *, state: Mapping[str, Any] | None = None, metrics: bool | StageMetrics | None = None
    ) -> ServedEpoch: ...
