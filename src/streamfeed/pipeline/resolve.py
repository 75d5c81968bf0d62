"""A :class:`~streamfeed.pipeline.dataset.Dataset` resolved: every derived figure, computed once, in one place.

The Dataset holds settings; this holds what follows from them: the memory
limit in force, which fragments can be read at all, the rows each yields
after the per-fragment ops, the shuffle window, the buffer layout, the
autotuner's budget, each epoch's plan and lanes, the fingerprint, and the
:class:`EpochSpec` the runtime reads. A Dataset makes its Resolution on
first use and keeps it (it is the Dataset's memo); a derived Dataset makes
its own, so no two datasets share one. The rows counted after filters, the
one costly figure, are handed to a derived dataset whose source and ops are
the same (:meth:`Resolution.for_derived`), as a value.

What is served, and in which order, is a function of the data and of the
settings that describe it alone (source, ops, seed, epoch, window, batch,
shard lanes): the window defaults to :func:`~streamfeed.plan.default_window`
of the data, never to what ``memory_limit`` allows; a fragment is left out
only as bad input, never for the machine's limit; ``memory_limit``,
``read_threads``, ``prefetch`` and autotuning size buffers only
(``tests/test_order_is_the_datas.py``).

Positions differ with sharding: an unsharded epoch is resumed at a row of a
read unit (:class:`UnitPositions`), a sharded one at a count of global
batches (:class:`LanePositions`). The two classes answer the same questions,
so nothing above them branches on sharding.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from typing import TYPE_CHECKING, Any, Callable, Generator, Iterator, Mapping, Sequence

import numpy as np

from ..core import Chunk, Position, chunk_len
from ..errors import ArgumentError, MemoryLimitError, describe
from ..memory import (
    Layout,
    decode_bytes_limit,
    default_read_threads,
    pass_threads,
    plan_layout,
    resolve_memory_limit,
    smaller_fragments_fix,
)
from ..plan import EpochPlan, Lanes, deal_lanes, default_window, make_epoch_plan
from ..runtime.autotune import Budget
from ..runtime.batch import num_batches
from ..runtime.epoch import produce_epoch
from ..runtime.lanes import produce_lanes
from ..runtime.shuffle import UnitBuffers
from ..runtime.spec import EpochSpec, Op
from ..state import make_lane_state, make_state, parse_lane_state, parse_state
from . import passes
from .bucketed import BucketPositions
from .ops import identity_of, keeping_pad_mask
from .settings import Settings

if TYPE_CHECKING:
    from ..runtime.metrics import StageMetrics

logger = logging.getLogger("streamfeed")

UNREADABLE_FRAGMENT_BYTES = 2**40
"""A fragment whose metadata declares more decoded bytes than this is bad input (a lying footer), on any machine.

Below it, a fragment too large for the memory limit is refused whatever
``on_error`` says: skipping it would make the rows served depend on the
machine's limit.
"""


class Resolution:
    """One dataset's derived figures (see the module's description); made by ``Dataset.resolution``."""

    def __init__(
        self,
        dataset: Settings,
        counted: tuple[int, ...] | None = None,
        bucket_counts: tuple[int, ...] | None = None,
    ) -> None:
        self.dataset = dataset
        self.memory_limit = resolve_memory_limit(dataset.memory_limit)
        self.decode_bytes = decode_bytes_limit(self.memory_limit)
        self._counted = counted
        self._lock = threading.Lock()  # Keras asks for steps and states from its threads
        self._memo: dict[Any, Any] = {}
        self.bucket_counts = bucket_counts  # rows of each bucket (batch(bucket=...)), counted once: bucketed.py
        self.positions: UnitPositions | LanePositions | BucketPositions
        if dataset.bucket is not None:
            self.positions = BucketPositions(self)
        else:
            self.positions = UnitPositions(self) if dataset.lanes is None else LanePositions(self)

    def for_derived(self, derived: Settings, same_rows: bool | None = None) -> Resolution:
        """The resolution of ``derived``: its own, with the rows counted here when its fragments yield the same.

        ``same_rows`` None: when its source and per-fragment ops are this one's.
        """
        if same_rows is None:
            same_rows = derived.source is self.dataset.source and derived.row_ops == self.dataset.row_ops
        same_buckets = same_rows and derived.bucket == self.dataset.bucket
        return Resolution(derived, self._counted if same_rows else None, self.bucket_counts if same_buckets else None)

    def _once(self, key: Any, make: Callable[[], Any]) -> Any:
        with self._lock:
            if key in self._memo:
                return self._memo[key]
        value = make()
        with self._lock:
            if isinstance(key, tuple) and sum(isinstance(k, tuple) for k in self._memo) > 8:
                for old in [k for k in self._memo if isinstance(k, tuple)]:  # the last few epochs are reused
                    del self._memo[old]
            return self._memo.setdefault(key, value)

    # ------------------------------------------------------------ fragments
    def readable(self) -> tuple[bool, ...]:
        """Whether each fragment, as its metadata declares it, can be read at all (else it is bad input).

        Checked from metadata before any read: a footer claiming 2**60 rows
        is a bad unit naming its file under the error policy, not an
        allocation. A fragment that is merely larger than this machine's
        limit allows is refused (never skipped), naming the setting to change.
        """
        return self._once("readable", self._check_fragments)

    def fragment_bytes(self) -> tuple[float, ...]:
        """Each fragment's decoded bytes as its metadata declares them: its rows x its own row bytes.

        Its own, as files differ in width (a narrow file's rows beside a
        wide file's); what the checks, the layout and a pass's threads are sized by.
        """
        source = self.dataset.source
        return self._once(
            "fragment_bytes",
            lambda: tuple(f.num_rows * float(source.fragment_row_bytes(f)) for f in source.fragments),
        )

    def _check_fragments(self) -> tuple[bool, ...]:
        dataset, limit = self.dataset, self.memory_limit
        readable = []
        for fragment, size in zip(dataset.source.fragments, self.fragment_bytes()):
            row_bytes = size / fragment.num_rows if fragment.num_rows else 0.0
            where = f"{fragment.path}, {fragment.location}"
            found = f"{fragment.num_rows} rows x {row_bytes:.0f} bytes = {size / 2**20:.0f} MiB"
            if size > UNREADABLE_FRAGMENT_BYTES:
                error = MemoryLimitError(
                    describe(
                        "A fragment declares more rows than any machine can read as one piece",
                        where=where,
                        expected=f"fragments below {UNREADABLE_FRAGMENT_BYTES / 2**40:.0f} TiB decoded",
                        found=found,
                        fix="the file's metadata is damaged: rewrite the file; on_error='skip' leaves it out and "
                        "reports it",
                    )
                )
                dataset.report.reject(error, path=fragment.path, location=fragment.location, rows=fragment.num_rows)
                readable.append(False)
                continue
            if 2 * size > limit:
                raise MemoryLimitError(
                    describe(
                        "A fragment is larger than the memory limit allows",
                        where=where,
                        expected=f"fragments below {limit / 2**20:.0f} MiB / 2 (read, then converted)",
                        found=found,
                        fix=f"raise memory_limit to {-(-int(2 * size) // 2**20)} MiB or more, project fewer "
                        f"columns, or {self.smaller_fragments}",
                    )
                )
            readable.append(True)
        return tuple(readable)

    def fragment_rows(self) -> list[int]:
        """Rows each fragment yields after the per-fragment ops (counted in one pass when not declared)."""
        dataset = self.dataset
        readable = self.readable()
        if dataset.source.exact_counts and not dataset.filtered:
            return [fragment.num_rows if ok else 0 for fragment, ok in zip(dataset.source.fragments, readable)]
        if self._counted is None and isinstance(self.positions, BucketPositions):
            self.positions.counts()  # its one pass counts each fragment's rows too
        if self._counted is None:
            fragments = dataset.source.fragments
            logger.info("counting rows after filters: one pass over %d fragments", len(fragments))
            indices = [index for index, ok in enumerate(readable) if ok]
            counts = dict.fromkeys(range(len(fragments)), 0)
            ops = dataset.row_ops  # a last op that can count its rows without making them does (pack_sequences)
            ops = ops[:-1] + (ops[-1].counting,) if ops and hasattr(ops[-1], "counting") else ops
            for index, rows in zip(
                indices, self.fragment_pass(lambda _, chunk: chunk_len(chunk), indices, name="count", row_ops=ops)
            ):
                counts[index] = rows or 0
            self._counted = tuple(counts[index] for index in range(len(fragments)))
        return list(self._counted)

    def counted_rows(self, rows: tuple[int, ...]) -> None:
        """Keeps the rows of each fragment that another pass counted (``bucketed.py``'s) unless counted already."""
        if self._counted is None:
            self._counted = rows

    def fragment_pass(
        self,
        summarise: Callable[[int, Chunk], passes.T],
        indices: list[int] | None = None,
        *,
        threads: int | None = None,
        name: str = "pass",
        text_as_arrow: bool = False,
        row_ops: Sequence[Op] | None = None,
    ) -> Generator[passes.T | None, None, None]:
        """:func:`passes.fragment_pass` over this dataset's fragments, ops (or ``row_ops``), report and decode bound.

        Its threads are at most what the memory limit holds (each reads one
        fragment: ``memory.pass_threads``); a fragment the limit cannot read is
        refused before the pass, naming the setting that makes it smaller.
        """
        dataset = self.dataset
        source = dataset.source
        readable = self.readable()
        sizes = self.fragment_bytes()
        chosen = range(len(source.fragments)) if indices is None else indices
        largest = max((sizes[index] for index in chosen if readable[index]), default=0.0)
        wanted = threads or dataset.read_threads or default_read_threads()
        return passes.fragment_pass(
            source.fragments,
            dataset.row_ops if row_ops is None else row_ops,
            dataset.report,
            summarise,
            indices=indices,
            threads=pass_threads(largest, self.memory_limit, wanted, self.smaller_fragments),
            decode_bytes=self.decode_bytes,
            name=name,
            text_as_arrow=text_as_arrow,
        )

    # --------------------------------------------------------------- layout
    @property
    def window(self) -> int:
        """Fragments per read unit: the user's, or the data's default (1 unshuffled); never the machine's."""
        dataset = self.dataset
        if not dataset.shuffled:
            return 1
        if dataset.window is not None:
            return dataset.window
        sizes = self._sizes()
        return default_window(self._row_bytes(), sizes["fragment_rows"], len(dataset.source.fragments), dataset.lanes)

    def _sizes(self) -> dict[str, float]:
        """The mean and the largest readable fragment, in rows of :meth:`_row_bytes` (the buffers' unit).

        The largest is the one largest in bytes (each fragment by its own
        row bytes), counted in rows of the mean row: rows x row bytes is
        then its size, so a narrow fragment of many rows is not taken for
        the largest.
        """

        def make() -> dict[str, float]:
            source = self.dataset.source
            readable = self.readable()
            rows = [fragment.num_rows for fragment, ok in zip(source.fragments, readable) if ok] or [0]
            sizes = [size for size, ok in zip(self.fragment_bytes(), readable) if ok] or [0.0]
            row_bytes = sum(sizes) / sum(rows) if sum(rows) else float(source.row_bytes)
            # An op whose rows hold more bytes than it is given says how many times (pack_sequences): buffers hold them
            grown = float(np.prod([getattr(op, "bytes_factor", 1.0) for op in self.dataset.row_ops]))
            return {
                "fragment_rows": max(1.0, float(np.mean(rows))),
                "largest_fragment_rows": max(sizes) / row_bytes if row_bytes else float(max(rows)),
                "row_bytes": row_bytes * grown,
            }

        return self._once("sizes", make)

    def _row_bytes(self) -> float:
        """Decoded bytes of a row on average over the readable fragments, each weighed by its own row bytes."""
        return self._sizes()["row_bytes"]

    def _batch_rows(self) -> int | None:
        """Rows of one served batch (a lane's share of a step when sharded); None unbatched (fragments are served)."""
        if self.dataset.batch_size is None:
            return None
        return self.positions.batch_rows()

    @property
    def smaller_fragments(self) -> str:
        """How this source reads smaller fragments: the fix a memory refusal names."""
        return smaller_fragments_fix(self.dataset.source.info.fragment_setting)

    def layout(self) -> Layout:
        """Buffer sizes chosen for the memory limit, with their estimated bytes."""

        def make() -> Layout:
            dataset = self.dataset
            # Sharded, each lane's share of the limit: a worker's buffers then do not depend on the worker count.
            share = self.memory_limit // (dataset.lanes or 1)
            sizes = self._sizes()
            return plan_layout(
                row_bytes=sizes["row_bytes"],
                batch_rows=self._batch_rows(),
                shuffled=dataset.shuffled,
                window=min(self.window, max(1, len(dataset.source.fragments))),  # a unit holds what there is
                read_threads=dataset.read_threads,
                prefetch=dataset.prefetch_depth,
                memory_limit=share,
                # Per-fragment ops run in the read threads and may run in parallel where the source's reads cannot.
                read_parallelism=None if dataset.row_ops else dataset.source.read_parallelism,
                fragment_rows=sizes["fragment_rows"],
                largest_fragment_rows=sizes["largest_fragment_rows"],
                smaller_fragments=self.smaller_fragments,
                read_scratch=self.read_scratch,
            )

        return self._once("layout", make)

    @property
    def read_scratch(self) -> float | None:
        """What each read holds decoding, per byte of its fragment: the source's, unless ops run in the reads.

        A per-fragment op (a user's ``map``) holds what it holds: the
        library's default figure then, as with no source figure.
        """
        dataset = self.dataset
        return None if dataset.row_ops else dataset.source.read_scratch

    def tuning_budget(self) -> Budget:
        """What the autotuner may spend: the layout's sizes and the limit it was planned for."""
        dataset = self.dataset
        return Budget(
            row_bytes=self._row_bytes(),
            fragment_rows=self._sizes()["fragment_rows"],
            batch_rows=self._batch_rows(),
            window=self.layout().window,
            shuffled=dataset.shuffled,
            memory_limit=self.memory_limit // (dataset.lanes or 1),
            read_scratch=self.read_scratch,
        )

    # ---------------------------------------------------------------- plans
    def read_plan(self, epoch: int) -> EpochPlan:
        """The epoch's read units over the unsharded order (lanes cut it when sharded, ``runtime/lanes.py``)."""
        dataset = self.dataset
        # Computed once per epoch: Keras and the checkpoint callback ask for the step count every batch.
        return self._once(
            ("plan", epoch),
            lambda: make_epoch_plan(self.fragment_rows(), seed=dataset.seed, epoch=epoch, window=self.window),
        )

    def epoch_plan(self, epoch: int) -> EpochPlan:
        """The read units for ``epoch``, with their sampled sizes when balanced."""
        plan, sampler = self.read_plan(epoch), self.dataset.sampler
        if sampler is None:
            return plan
        return EpochPlan(units=plan.units, unit_rows=tuple(sampler.unit_samples(plan.unit_rows)))

    def epoch_spec(self, epoch: int) -> EpochSpec:
        """The dataset resolved for one epoch: all the runtime reads (see ``runtime/spec.py``)."""
        dataset = self.dataset
        row_ops, batch_ops = dataset.row_ops, dataset.batch_ops
        if dataset.pack is not None:
            if batch_ops:
                batch_ops = batch_ops + (keeping_pad_mask(dataset.pack),)
            else:
                row_ops = row_ops + (dataset.pack,)
        return self.positions.spec(
            EpochSpec(
                epoch=epoch,
                fragments=dataset.source.fragments,
                plan=self.epoch_plan(epoch),
                layout=self.layout(),
                row_ops=row_ops,
                batch_ops=batch_ops,
                batch_size=dataset.batch_size,
                last_batch=dataset.last_batch,
                seed=dataset.seed,
                shard_index=0,  # the plan is the unsharded order; lanes cut it
                sampler=dataset.sampler,
                report=dataset.report,
                matrix=dataset.matrix if dataset.pack is not None else None,
                bucket=dataset.bucket,
            )
        )

    # ---------------------------------------------------------- fingerprint
    def fingerprint(self) -> dict:
        """What a saved state must match (read-only: states share it). Data and order settings only."""

        def make() -> dict:
            dataset = self.dataset
            return {
                "source": dict(dataset.source.fingerprint()),
                "seed": dataset.seed,
                "window": self.window,
                "batch_size": dataset.batch_size,
                "last_batch": dataset.last_batch,
                "shard": [0, 1],
                **self.positions.fingerprint(),
                "ops": {
                    "per_fragment": [identity_of(op) for op in dataset.row_ops],
                    "per_batch": [identity_of(op) for op in dataset.batch_ops],
                },
                **({"sampler": dataset.sampler.settings()} if dataset.sampler is not None else {}),
            }

        return self._once("fingerprint", make)


def _check_epoch(epoch: int) -> int:
    if isinstance(epoch, bool) or not isinstance(epoch, int) or epoch < 0:
        raise ArgumentError(describe("An epoch number is a count", expected="an integer >= 0", found=repr(epoch)))
    return epoch


class UnitPositions:
    """An unsharded epoch: a position is ``(unit, offset)`` of the epoch's read units."""

    def __init__(self, resolution: Resolution) -> None:
        self.resolution = resolution

    def batch_rows(self) -> int:
        return int(self.resolution.dataset.batch_size or 1)

    def spec(self, spec: EpochSpec) -> EpochSpec:
        return spec

    def fingerprint(self) -> dict:
        return {}

    def start(self, epoch: int, state: Mapping[str, Any] | None) -> tuple[int, Position]:
        """Where an epoch starts: at its beginning, or where a saved state says (checked)."""
        if state is None:
            return _check_epoch(epoch), Position()
        return parse_state(state, self.resolution.fingerprint(), self.resolution.epoch_plan)

    def initial_state(self, epoch: int) -> dict:
        return make_state(epoch, Position(), self.resolution.fingerprint())

    def rows_left(self, epoch: int, position: Position) -> int:
        plan = self.resolution.epoch_plan(epoch)
        return plan.total_rows - plan.rows_before(position.unit) - position.offset

    def batches_left(self, epoch: int, position: Position) -> int:
        dataset = self.resolution.dataset
        rows = self.rows_left(epoch, position)
        return rows if dataset.batch_size is None else num_batches(rows, dataset.batch_size, dataset.last_batch)

    def state(self, epoch: int, position: Position) -> dict:
        """The state at ``position``; once nothing is left to serve, the next epoch's start."""
        if self.batches_left(epoch, position) == 0:
            return self.initial_state(epoch + 1)
        return make_state(epoch, position, self.resolution.fingerprint())

    def rows(self, epoch: int) -> int:
        return self.resolution.epoch_plan(epoch).total_rows

    def producer(
        self,
        spec: EpochSpec,
        start: Position,
        timing: StageMetrics | None,
        buffers: UnitBuffers,
        reads_done: threading.Event,
    ) -> Callable[[threading.Event], Iterator[tuple[Chunk, Any]]]:
        return lambda stop: produce_epoch(spec, start, stop, timing, buffers=buffers, reads_done=reads_done)


class LanePositions:
    """A sharded epoch: the unsharded order cut into equal lanes; a position is the global batches served.

    See ``Dataset.shard``: this worker serves its lanes side by side, each
    lane giving ``workers x batch_size / lanes`` rows a step.
    """

    def __init__(self, resolution: Resolution) -> None:
        self.resolution = resolution

    @property
    def _dataset(self) -> Settings:
        return self.resolution.dataset

    def batch_rows(self) -> int:
        """Rows each lane gives a step: the global batch (workers x batch_size) over the lanes."""
        dataset = self._dataset
        lanes, count, size = int(dataset.lanes or 1), dataset.shard_count, int(dataset.batch_size or 0)
        if size * count % lanes:
            multiple = lanes // count
            lower, upper = size // multiple * multiple, -(-size // multiple) * multiple
            raise ArgumentError(
                describe(
                    "The global batch does not split evenly into the lanes",
                    expected=f"batch_size x count divisible by lanes: a batch_size that is a multiple of {multiple}",
                    found=f"batch_size={size}, count={count}, lanes={lanes}",
                    fix=f"use batch({upper})" + (f" or batch({lower})" if lower else ""),
                )
            )
        return size * count // lanes

    def worker_lanes(self) -> tuple[int, ...]:
        dataset = self._dataset
        per = int(dataset.lanes or 1) // dataset.shard_count
        return tuple(range(dataset.shard_index * per, (dataset.shard_index + 1) * per))

    def lanes(self, epoch: int) -> Lanes:
        """The epoch's order cut into lanes (the rows left out are logged once per epoch)."""

        def make() -> Lanes:
            lanes = deal_lanes(
                # the epoch as emitted (a sampler's draw sizes, balance() or hard_examples()): every lane
                # draws the units it overlaps as the unsharded epoch draws them, so the global order is one
                self.resolution.epoch_plan(epoch).total_rows,
                int(self._dataset.lanes or 1),
                self._dataset.remainder,
            )
            if lanes.dropped:
                logger.info(
                    "shard: epoch %d leaves out its last %d of %d rows (rows %d..%d of its order): they do not "
                    "split into %d equal lanes (remainder='drop'; remainder='pad' serves them, see shard_report)",
                    epoch,
                    lanes.dropped,
                    lanes.rows,
                    lanes.rows - lanes.dropped,
                    lanes.rows - 1,
                    lanes.count,
                )
            return lanes

        return self.resolution._once(("lanes", epoch), make)

    def steps(self, epoch: int) -> int:
        """Steps of a sharded epoch: every worker's, the same as one lane's slices."""
        return num_batches(self.lanes(epoch).length, self.batch_rows(), self._dataset.last_batch)

    def spec(self, spec: EpochSpec) -> EpochSpec:
        if self._dataset.batch_size is None:
            return spec
        return dataclasses.replace(
            spec, batch_size=self.batch_rows(), lanes=self.lanes(spec.epoch), worker_lanes=self.worker_lanes()
        )

    def fingerprint(self) -> dict:
        """The lanes, the global batch and the policies, never the worker index or count."""
        dataset = self._dataset
        size = dataset.batch_size
        return {
            "batch_size": None if size is None else self.batch_rows(),  # each lane's rows per step
            "shard": {
                "lanes": dataset.lanes,
                "global_batch": None if size is None else size * dataset.shard_count,
                "remainder": dataset.remainder,
            },
        }

    def start(self, epoch: int, state: Mapping[str, Any] | None) -> tuple[int, int]:
        """Where a sharded epoch starts: ``(epoch, global batches done)``, from a saved state if given."""
        if self._dataset.batch_size is None:
            raise ArgumentError(
                describe("A sharded dataset is served in batches", fix="call .batch(batch_size) after .shard()")
            )
        if state is None:
            return _check_epoch(epoch), 0
        return parse_lane_state(state, self.resolution.fingerprint(), self._dataset.shard_count, self.steps)

    def initial_state(self, epoch: int) -> dict:
        return make_lane_state(epoch, 0, self.resolution.fingerprint())

    def batches_left(self, epoch: int, position: int) -> int:
        return self.steps(epoch) - position

    def state(self, epoch: int, position: int) -> dict:
        if self.batches_left(epoch, position) == 0:
            return self.initial_state(epoch + 1)
        return make_lane_state(epoch, position, self.resolution.fingerprint())

    def rows(self, epoch: int) -> int:
        """This worker's rows (filler rows included)."""
        return len(self.worker_lanes()) * self.lanes(epoch).length

    def producer(
        self,
        spec: EpochSpec,
        start: int,
        timing: StageMetrics | None,
        buffers: UnitBuffers,
        reads_done: threading.Event,
    ) -> Callable[[threading.Event], Iterator[tuple[Chunk, Any]]]:
        # Lanes keep buffers of their own, one per lane in flight.
        return lambda stop: produce_lanes(spec, start, stop, timing)
