"""Weighted mixtures of datasets with exact quotas: ``streamfeed.mix``.

``mix({"books": a, "web": b}, weights={"books": 0.7, "web": 0.3},
samples_per_epoch=100_000, seed=1).batch(256)`` serves epochs of exactly
100 000 rows, 70 000 of them from ``books`` and 30 000 from ``web``
(largest-remainder quotas, ``pipeline/mix_order.py``), in a seeded order
across the components; each component's rows come in its own order (its own
``shuffle``, plan and threads: a component is an ordinary ``Dataset`` served
through its ``iter_epoch``). Against the anchors: tf.data's
``sample_from_datasets`` draws at random (no exact proportions, no resume),
Grain's ``mix`` interleaves deterministically and ends with the shortest
component; MosaicML Streaming's ``Stream(proportion=)`` with ``epoch_size``
is the closest, and its ``stratified`` batching is ``batch(stratified=True)``
here.

- **Running out.** A component whose epoch is used up mid-mix starts its
  next epoch (``exhausted="repeat"``: its epoch counter advances, so its
  shuffle moves on) or ends the mixed epoch (``"stop"``, then the epoch's
  length is computed before its first batch: the row before which the first
  component would run out). Either way every row of a component is served
  once per component epoch, and a component's next mixed epoch continues
  where the last one left it.
- **Source column.** ``source_column="source"`` adds each row's component
  (its index in the sorted names, :attr:`MixedDataset.names`, int32).
- **Shards.** ``shard(i, n)`` shards each component (equal lanes, the rows
  that do not deal evenly dropped) and gives each worker
  ``samples_per_epoch // n`` rows with the same quotas and the same order
  of component labels: the mix of every global batch is the same as one
  worker's, times ``n``.
- **Weights** are a mapping or a schedule ``epoch -> mapping`` (changes
  between epochs, known in advance: an epoch may be read ahead). The state
  records the weights in force and each component's cursor at the epoch's
  start, so a resumed run continues the epoch with the weights it began
  with, even under another schedule (``with_weights``), which takes over
  from the next epoch. To know where epoch ``e + 1`` starts after a restored
  state, a mixture remembers the starts it has seen (:class:`_Starts`, shared
  by the datasets derived from it with ``with_packing``: it records the run,
  as a balanced sampler's tally does).
- **Machine settings** are the components' (``with_options`` on each): each
  runs within its own ``memory_limit``, and none changes what is served.
"""

from __future__ import annotations

import dataclasses
import functools
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Literal, Mapping, Sequence

import numpy as np

from ..core import Chunk, Source
from ..errors import ArgumentError, BadInputReport, SchemaError, StateError, describe
from ..runtime.assembly import MatrixColumns
from ..runtime.spec import Op
from .dataset import Dataset
from .mix_epoch import MixedEpoch, MixStart, ServedRows, advance, make_mix_state, parse_mix_state
from .mix_order import BLOCK_ROWS, EpochOrder, MixOrder, largest_remainder
from .mix_report import mixing_report

if TYPE_CHECKING:
    from ..keras.adapter import KerasDataset
    from ..runtime.metrics import StageMetrics

Weights = Mapping[str, float] | Callable[[int], Mapping[str, float]]
Exhausted = Literal["repeat", "stop"]
_ORDERS_KEPT = 8  # epochs' orders kept per mixture: the running one, its successor, a restored one


class _Starts:
    """Where each mixed epoch begins, as far as the run has seen: computed forward, or restored from a state."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._starts: dict[int, MixStart] = {}

    def record(self, start: MixStart) -> None:
        """Notes ``start`` (rows 0); what follows it was computed from another start and is dropped."""
        with self._lock:
            for epoch in [e for e in self._starts if e > start.epoch]:
                del self._starts[epoch]
            self._starts[start.epoch] = start._replace(rows=0)

    def nearest(self, epoch: int) -> MixStart | None:
        with self._lock:
            known = [e for e in self._starts if e <= epoch]
            return self._starts[max(known)] if known else None


def _bad_weights(names: Sequence[str], weights: Any, epoch: int | None) -> ArgumentError:
    where = None if epoch is None else f"the weights schedule's value for epoch {epoch}"
    return ArgumentError(
        describe(
            "Invalid mix weights",
            where=where,
            expected=f"a number >= 0 for each of {list(names)}, not all 0",
            found=repr(weights)[:300],
            fix="give one weight per component name, e.g. weights={" + ", ".join(f"{n!r}: 1.0" for n in names) + "}",
        )
    )


def _checked_weights(names: Sequence[str], weights: Any, epoch: int | None = None) -> tuple[float, ...]:
    if not isinstance(weights, Mapping) or sorted(weights) != sorted(names):
        raise _bad_weights(names, weights, epoch)
    values = [weights[name] for name in names]
    if any(isinstance(w, bool) or not isinstance(w, (int, float, np.number)) or not w >= 0 for w in values):
        raise _bad_weights(names, weights, epoch)
    if not sum(values) > 0 or not np.isfinite(sum(values)):
        raise _bad_weights(names, weights, epoch)
    return tuple(float(w) for w in values)


@dataclass(frozen=True, eq=False)
class MixedDataset:
    """Datasets with the same served columns mixed in exact per-epoch quotas; see :func:`mix`.

    Like a :class:`~streamfeed.Dataset` it is immutable (``batch``,
    ``shard``, ``with_weights`` return new ones), is handed to Keras with
    :meth:`to_keras`, and its epochs are resumed from :meth:`MixedEpoch.get_state`.
    """

    datasets: tuple[tuple[str, Dataset], ...]
    weights: Weights | None
    samples_per_epoch: int | None
    seed: int
    exhausted: Exhausted
    source_column: str | None
    batch_size: int | None = None
    last_batch: Literal["keep", "drop"] = "keep"
    stratified: bool = False
    shard_index: int = 0
    shard_count: int = 1
    pack: Op | None = None
    matrix: MatrixColumns | None = None
    starts: _Starts = field(default_factory=_Starts, compare=False, repr=False)
    served: ServedRows = field(default_factory=ServedRows, compare=False, repr=False)  # mixing_report's

    # ------------------------------------------------------------ components
    @property
    def names(self) -> tuple[str, ...]:
        """The components' names, sorted: the ``source`` column's value is an index into this."""
        return tuple(name for name, _ in self.datasets)

    @functools.cached_property
    def _sharded(self) -> tuple[Dataset, ...]:
        if self.shard_count == 1:
            return tuple(dataset for _, dataset in self.datasets)
        return tuple(dataset.shard(self.shard_index, self.shard_count) for _, dataset in self.datasets)

    @functools.cached_property
    def components(self) -> tuple[Dataset, ...]:
        """Each component as the mixture reads it: sharded as the mixture is, in batches of its batch size."""
        size = self.batch_size or 1
        return tuple(dataset.batch(size) for dataset in self._sharded)

    @functools.cached_property
    def epoch_rows(self) -> tuple[int, ...]:
        """Each component's rows per epoch (this shard's)."""
        rows = tuple(dataset.num_rows(0) for dataset in self._sharded)
        empty = [name for name, count in zip(self.names, rows) if count == 0]
        if empty:
            raise ArgumentError(
                describe(
                    f"Mixed components {empty} serve no rows",
                    expected="at least one row per component (and per shard)",
                    fix="leave empty datasets out of mix()",
                )
            )
        return rows

    @functools.cached_property
    def columns(self) -> list[str]:
        """The columns every component serves (in the first component's order)."""
        served = [dataset.served_columns() for _, dataset in self.datasets]
        first = served[0]
        for (name, _), columns in zip(self.datasets[1:], served[1:]):
            if set(columns) != set(first):
                raise SchemaError(
                    describe(
                        "The mixed datasets do not serve the same columns",
                        where=f"component {name!r} against {self.names[0]!r}",
                        expected=f"the columns {first}",
                        found=f"missing {[c for c in first if c not in columns]}, "
                        f"extra {[c for c in columns if c not in first]}",
                        fix="select or rename columns per component (columns=..., .map(...)) before mix()",
                    )
                )
        if self.source_column is not None and self.source_column in first:
            raise SchemaError(
                describe(
                    f"The source column {self.source_column!r} is already a column of the data",
                    fix="pass another source_column= name (or None)",
                )
            )
        return first

    @property
    def samples(self) -> int:
        """Rows of one mixed epoch on this shard (before ``exhausted="stop"`` ends one early)."""
        if self.samples_per_epoch is None:
            return sum(self.epoch_rows)
        return self.samples_per_epoch // self.shard_count

    def weights_of(self, epoch: int) -> tuple[float, ...]:
        """The weights the schedule gives ``epoch`` (in :attr:`names` order); default: the components' rows."""
        if self.weights is None:
            return tuple(float(rows) for rows in self.epoch_rows)
        if callable(self.weights):
            return _checked_weights(self.names, self.weights(epoch), epoch)
        return _checked_weights(self.names, self.weights)

    # --------------------------------------------------------------- builders
    def batch(
        self, batch_size: int, *, last_batch: Literal["keep", "drop"] = "keep", stratified: bool = False
    ) -> MixedDataset:
        """Groups the mixed rows into batches of ``batch_size``.

        ``stratified=True`` gives every batch its own largest-remainder quota
        of the components' remaining quotas (within one row of each weight's
        share), order within a batch seeded; otherwise batches are cut from
        one seeded order of the whole epoch. ``last_batch``: ``"keep"`` a
        short last batch or ``"drop"`` it (its rows are drawn and not served,
        as ``Dataset.batch``'s).
        """
        if self.batch_size is not None:
            raise ArgumentError(describe("batch() was already called on the mix", fix="call batch() once"))
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ArgumentError(describe("Invalid batch_size", expected="an integer >= 1", found=repr(batch_size)))
        if last_batch not in ("keep", "drop"):
            raise ArgumentError(
                describe("Invalid last_batch for a mix", expected="'keep' or 'drop'", found=repr(last_batch))
            )
        return dataclasses.replace(
            self,
            batch_size=batch_size,
            last_batch=last_batch,
            stratified=bool(stratified),
            starts=_Starts(),
            served=ServedRows(),
        )

    def shard(self, index: int, count: int) -> MixedDataset:
        """Worker ``index`` of ``count``: components sharded into equal lanes, ``samples_per_epoch // count`` rows."""
        if self.shard_count != 1:
            raise ArgumentError(describe("shard() was already called on the mix", fix="call shard() once"))
        if isinstance(count, bool) or not isinstance(count, int) or count < 1 or not 0 <= index < count:
            raise ArgumentError(
                describe("Invalid shard", expected="0 <= index < count", found=f"index={index}, count={count}")
            )
        mixed = dataclasses.replace(self, shard_index=index, shard_count=count, starts=_Starts(), served=ServedRows())
        if mixed.samples < 1:
            raise ArgumentError(
                describe(
                    "Too few samples_per_epoch for the shards",
                    expected=f">= {count}",
                    found=str(self.samples_per_epoch),
                )
            )
        return mixed

    def with_weights(self, weights: Weights) -> MixedDataset:
        """The same mixture under other weights (a mapping, or a schedule ``epoch -> mapping``).

        A state saved under the old weights still resumes its epoch with them; the new ones apply from the next.
        """
        mixed = dataclasses.replace(self, weights=weights, starts=_Starts(), served=ServedRows())
        if not callable(weights):
            _checked_weights(self.names, weights)
        return mixed

    def with_packing(self, pack: Op, matrix: MatrixColumns | None = None) -> MixedDataset:
        """What the Keras adapter calls: ``pack`` runs on each mixed batch (after the source column is added)."""
        return dataclasses.replace(self, pack=pack, matrix=matrix)  # the same starts: the same run

    # -------------------------------------------------------------- ServedDataset
    @property
    def source(self) -> Source:
        """The first component's source (it answers the adapter's column spellings; the columns are the same)."""
        return self.datasets[0][1].source

    @property
    def report(self) -> BadInputReport:
        """The first component's bad-input report; :attr:`reports` has every component's."""
        return self.datasets[0][1].report

    @property
    def bucket(self) -> None:
        """A mixture is never bucketed (its components are unbatched; it batches by ``batch_size``)."""
        return None

    @property
    def varying_shapes(self) -> bool:
        """A mixture's batches have one shape: its components serve rows, it batches them by ``batch_size``."""
        return False

    @property
    def reports(self) -> dict[str, BadInputReport]:
        return {name: dataset.report for name, dataset in self.datasets}

    def served_columns(self) -> list[str]:
        return self.columns + ([] if self.source_column is None else [self.source_column])

    def finish(self, batch: Chunk, labels: np.ndarray) -> Chunk:
        """A mixed batch as served: with its source column, then packed (the adapter's op), if set."""
        if self.source_column is not None:
            batch[self.source_column] = labels.astype(np.int32, copy=False)
        if self.pack is not None:
            batch = self.pack(batch)
            if self.matrix is not None:
                batch = self.matrix.assemble(batch)
        return batch

    # ------------------------------------------------------------------ epochs
    def _need_batches(self) -> int:
        if self.batch_size is None:
            raise ArgumentError(describe("A mix is served in batches", fix="call .batch(batch_size) on the mix"))
        return self.batch_size

    def mixing_report(self, epoch: int | None = None) -> dict[str, Any]:
        """What ``epoch`` (default: the latest served) mixed: per component weight, quota, rows served, share."""
        return mixing_report(self, epoch)

    def quotas(self, epoch: int = 0) -> dict[str, int]:
        """Rows each component gives ``epoch`` under ``exhausted="repeat"`` (largest remainder, ties by name)."""
        start = self.start_of(epoch)
        return dict(zip(self.names, (int(q) for q in self._order(start).quotas)))

    def _order(self, start: MixStart) -> MixOrder:
        quotas = largest_remainder(start.weights, self.samples)
        block = self._need_batches() if self.stratified else BLOCK_ROWS
        return MixOrder(quotas, seed=self.seed, epoch=start.epoch, block=block, stratified=self.stratified)

    def epoch_order(self, start: MixStart) -> EpochOrder:
        """The epoch ``start`` begins, resolved (kept for the last few starts asked for)."""
        return self._epoch_order(start.epoch, start.weights, start.starts)

    @functools.cached_property
    def _orders(self) -> dict[tuple, EpochOrder]:
        return {}

    def _epoch_order(self, epoch: int, weights: tuple[float, ...], starts: tuple[tuple[int, int], ...]) -> EpochOrder:
        key = (epoch, weights, starts)
        known = self._orders.get(key)
        if known is None:
            known = self._orders[key] = self._resolve_order(epoch, weights, starts)
            while len(self._orders) > _ORDERS_KEPT:  # dicts keep insertion order: the oldest goes
                del self._orders[next(iter(self._orders))]
        return known

    def _resolve_order(self, epoch: int, weights: tuple[float, ...], starts: tuple[tuple[int, int], ...]) -> EpochOrder:
        size = self._need_batches()
        order = self._order(MixStart(epoch, weights, starts))
        rows = order.total
        if self.exhausted == "stop":
            rows = order.stop_row([limit - row for (_, row), limit in zip(starts, self.epoch_rows)])
        served = rows if self.last_batch == "keep" else rows // size * size
        return EpochOrder(order, rows, served, size)

    def next_start(self, start: MixStart) -> MixStart:
        """Where the epoch after ``start``'s begins: each cursor moved by the rows its epoch drew."""
        plan = self.epoch_order(start)
        consumed = plan.order.consumed(plan.rows)
        cursors = tuple(advance(c, n, rows) for c, n, rows in zip(start.starts, consumed, self.epoch_rows))
        following = MixStart(start.epoch + 1, self.weights_of(start.epoch + 1), cursors)
        self.starts.record(following)
        return following

    def start_of(self, epoch: int) -> MixStart:
        """Where ``epoch`` begins: from the nearest start seen (a restored state's) or the first, moved forward."""
        if isinstance(epoch, bool) or not isinstance(epoch, int) or epoch < 0:
            raise ArgumentError(describe("Invalid epoch", expected="an integer >= 0", found=repr(epoch)))
        start = self.starts.nearest(epoch)
        if start is None:
            start = MixStart(0, self.weights_of(0), tuple((0, 0) for _ in self.names))
            self.starts.record(start)
        while start.epoch < epoch:
            start = self.next_start(start)
        return start

    @functools.cached_property
    def _fingerprint(self) -> dict:
        return {
            "mix": {
                "components": {name: dataset.fingerprint() for name, dataset in zip(self.names, self.components)},
                "seed": self.seed,
                "samples_per_epoch": self.samples_per_epoch,
                "exhausted": self.exhausted,
                "batch_size": self.batch_size,
                "last_batch": self.last_batch,
                "stratified": self.stratified,
                "source_column": self.source_column,
                "workers": self.shard_count,
            }
        }

    def fingerprint(self) -> dict:
        """What a saved state must match: the components' fingerprints and the mixture's settings (not its weights,
        which the state carries)."""
        import copy

        return copy.deepcopy(self._fingerprint)

    def state_at(self, start: MixStart) -> dict:
        """The state at ``start``; once its epoch has nothing left to serve, the next epoch's start."""
        if start.rows >= self.epoch_order(start).served_rows:
            start = self.next_start(start)
        return make_mix_state(start, self.names, self._fingerprint)

    def initial_state(self, epoch: int = 0) -> dict:
        """The state at the start of ``epoch``."""
        return make_mix_state(self.start_of(epoch), self.names, self._fingerprint)

    def _start(self, epoch: int, state: Mapping[str, Any] | None) -> MixStart:
        if state is None:
            return self.start_of(epoch)
        start = parse_mix_state(state, self.names, self._fingerprint, self.epoch_rows)
        served = self.epoch_order(start).served_rows
        if start.rows > served:
            raise StateError(
                describe(
                    "The saved mix state's 'rows' is not valid",
                    expected=f"rows in 0..{served} of mixed epoch {start.epoch}",
                    found=str(start.rows),
                    fix="restore a state saved by this same mixture",
                )
            )
        self.starts.record(start)
        return start

    def num_rows(self, epoch: int = 0) -> int:
        """Rows of mixed epoch ``epoch`` on this shard (before ``last_batch="drop"``)."""
        return self.epoch_order(self.start_of(epoch)).rows

    def num_batches(self, epoch: int = 0, *, state: Mapping[str, Any] | None = None) -> int:
        """Batches of ``epoch``, or from a saved ``state`` to its epoch's end."""
        start = self._start(epoch, state)
        plan = self.epoch_order(start)
        return -(-(plan.served_rows - start.rows) // plan.batch_size)

    def __len__(self) -> int:
        return self.num_batches()

    def iter_epoch(
        self, epoch: int = 0, *, state: Mapping[str, Any] | None = None, metrics: bool | StageMetrics | None = None
    ) -> MixedEpoch:
        """Starts one mixed epoch (or resumes it from ``state``); close the result (or use ``with``).

        ``metrics`` is not taken here: time a component with its own ``with_options(metrics=...)``.
        """
        if metrics:
            raise ArgumentError(
                describe("A mix has no metrics of its own", fix="pass with_options(metrics=...) to each component")
            )
        self.columns  # noqa: B018 - refuses mismatched columns before any thread starts
        return MixedEpoch(self, self._start(epoch, state))

    def __iter__(self) -> MixedEpoch:
        return self.iter_epoch(0)

    # ------------------------------------------------------------------- keras
    def to_keras(
        self,
        *,
        features: Sequence[str] | None = None,
        label: str | Sequence[str] | None = None,
        sample_weight: str | None = None,
        ids: str | None = None,
        inputs: Literal["matrix", "dict"] = "matrix",
        dtype: str = "float32",
        label_dtype: str | None = None,
        model: Any = None,
        categorical: Any = None,
        standardize: bool | Sequence[str] = False,
    ) -> KerasDataset:
        """Wraps the mixture for ``model.fit/evaluate/predict``, as :meth:`Dataset.to_keras` does (same keywords).

        The source column, when asked for, is served as any column: a feature unless ``features=``
        leaves it out, a label, or ``ids=`` (to match predictions or per-row losses to components).
        """
        from ..keras.adapter import KerasDataset

        return KerasDataset(
            self,
            features=features,
            label=label,
            sample_weight=sample_weight,
            ids=ids,
            inputs=inputs,
            dtype=dtype,
            label_dtype=label_dtype,
            model=model,
            categorical=categorical,
            standardize=standardize,
        )


def mix(
    datasets: Mapping[str, Dataset],
    *,
    weights: Weights | None = None,
    samples_per_epoch: int | None = None,
    seed: int = 0,
    exhausted: Exhausted = "repeat",
    source_column: str | None = None,
) -> MixedDataset:
    """Mixes unbatched datasets that serve the same columns; batch the result.

    ``datasets``: ``{name: Dataset}``, each unbatched and unsharded (the
    mixture batches and shards them), with its own ``shuffle`` and
    ``map``. ``weights``: ``{name: weight}`` (normalized), or a schedule
    ``epoch -> {name: weight}``; default: each component's rows.
    ``samples_per_epoch``: rows per mixed epoch (default: all components'
    rows); component ``i`` gives exactly its largest-remainder quota of
    them (:meth:`MixedDataset.quotas`). ``seed``: the order of components
    across the epoch (each component's own order is its ``shuffle``'s).
    ``exhausted``: ``"repeat"`` a component whose epoch runs out (its next
    epoch) or ``"stop"`` the mixed epoch there. ``source_column``: the name
    of an int32 column of each row's component index in the sorted names.
    """
    if not isinstance(datasets, Mapping) or not datasets:
        raise ArgumentError(
            describe("mix() needs datasets", expected="a dict {name: Dataset}", found=repr(datasets)[:200])
        )
    for name, dataset in datasets.items():
        if not isinstance(name, str) or not isinstance(dataset, Dataset):
            raise ArgumentError(
                describe(
                    "mix() takes {name: Dataset}",
                    found=f"{name!r}: {type(dataset).__name__}",
                    fix="pass read_* datasets by name",
                )
            )
        if dataset.batch_size is not None or dataset.bucket is not None or dataset.shard_count != 1:
            raise ArgumentError(
                describe(
                    f"Component {name!r} is batched, bucketed or sharded",
                    expected="unbatched, unsharded components: the mixture batches and shards them",
                    fix="drop .batch()/.shard() from the component and call them on the mix",
                )
            )
    if exhausted not in ("repeat", "stop"):
        raise ArgumentError(describe("Invalid exhausted=", expected="'repeat' or 'stop'", found=repr(exhausted)))
    if samples_per_epoch is not None and (
        isinstance(samples_per_epoch, bool) or not isinstance(samples_per_epoch, int) or samples_per_epoch < 1
    ):
        raise ArgumentError(
            describe("Invalid samples_per_epoch", expected="an integer >= 1 or None", found=repr(samples_per_epoch))
        )
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise ArgumentError(describe("Invalid seed", expected="an integer", found=repr(seed)))
    names = sorted(datasets)
    if weights is not None and not callable(weights):
        _checked_weights(names, weights)
    mixed = MixedDataset(
        tuple((name, datasets[name]) for name in names), weights, samples_per_epoch, seed, exhausted, source_column
    )
    mixed.columns  # noqa: B018 - refuses mismatched columns now, naming the component
    return mixed
