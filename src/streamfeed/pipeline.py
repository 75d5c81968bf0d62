"""The immutable, fluent description of a pipeline, and its iteration.

Who owns what:

- the **source** owns files, schema, fragments and their row counts;
- the **plan** (``plan.py``) owns the order of fragments per epoch and shard;
- this **Dataset** owns the settings (ops, shuffle, batch, shard, memory):
  they are frozen, and every method returns a new Dataset. It also carries
  the run's :class:`BadInputReport` (shared with the datasets derived from
  it, since they read the same input), a balanced sampler's tally, and
  caches of its layout and plans;
- for each epoch it resolves its settings into a frozen
  :class:`~streamfeed.runtime.spec.EpochSpec`, which is all the runtime
  (``runtime/``) reads: the runtime never calls back into the Dataset;
- an **EpochIterator** owns the threads and buffers of one pass; it is the
  only thing that must be closed (``with``, ``close()``, or exhaustion).

Stages run in one canonical order — read → per-fragment ops (``map`` and
``filter`` called before ``batch``) → shuffle window → batch → per-batch ops
(``map`` after ``batch``) → prefetch — so that the iterator state is a single
position ``(epoch, unit, offset)`` and per-fragment work runs in the read
thread pool.
"""

from __future__ import annotations

import copy
import dataclasses
import logging
import os
import threading
import weakref
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Iterator, Mapping, cast

import numpy as np

from .core import Chunk, Position, Source, chunk_len
from .errors import (
    ArgumentError,
    BadInputReport,
    CorruptFileError,
    DataError,
    MemoryLimitError,
    OnError,
    UserFunctionError,
    describe,
)
from .memory import DEFAULT_MEMORY_LIMIT, MAX_DEFAULT_WINDOW, Layout, decode_bytes_limit, plan_layout
from .plan import EpochPlan, Lanes, Remainder, deal_lanes, make_epoch_plan
from .runtime.autotune import Autotune, Budget, Settings, TuningReport
from .runtime.autotune import resolve as resolve_autotune
from .runtime.background import BackgroundIterator
from .runtime.batch import PAD_MASK, LastBatch, num_batches
from .runtime.epoch import produce_epoch
from .runtime.lanes import produce_lanes
from .runtime.reader import op_place, read_fragment
from .runtime.shuffle import UnitBuffers
from .runtime.spec import EpochSpec, Op
from .state import make_lane_state, make_state, parse_lane_state, parse_state

if TYPE_CHECKING:
    from .keras.adapter import KerasDataset
    from .runtime.metrics import StageMetrics
    from .sampling import BalancedSampler

logger = logging.getLogger("streamfeed")


def _call_user(fn: Callable[[Chunk], Any], chunk: Chunk, kind: str, name: str, *, mask: bool = False) -> Any:
    """``fn(chunk)`` (as a boolean array if ``mask``); what it raises names it and where it ran.

    A failing user function is a bug, not bad input: it becomes a
    :class:`UserFunctionError`, which ``on_error="skip"`` never skips.
    streamfeed's own transforms (``decode_images``) are not user code: the
    data faults they find (undecodable bytes, an image bomb) stay data
    faults, under the error policy like a fragment that cannot be read.
    """
    try:
        out = fn(chunk)
        return np.asarray(out, dtype=bool) if mask else out
    except Exception as exc:
        ours = str(getattr(fn, "__module__", "")).startswith("streamfeed.")
        if ours and isinstance(exc, (CorruptFileError, DataError)):
            raise
        raise UserFunctionError(
            describe(
                f"{kind} {name!r} raised {type(exc).__name__}: {exc}",
                where=op_place(),
                fix=f"fix {name}: an error in user code always raises (on_error='skip' skips only bad data)",
            )
        ) from exc


_VERSION_LENGTH = 200  # a version names a revision ("2", a date, a commit), not a document


def _op_identity(fn: Callable[..., Any], name: str | None, version: str | None) -> str:
    """Who a user op is in a fingerprint: the ``name`` given, else its module and name; then ``@version``.

    A saved state is restored only into a pipeline with the same ops: a
    filter added or changed would serve other rows at the same position.
    Code is not hashed (a closure's values would escape it anyway): bump
    ``version`` when a function changes its rows under the same name.
    """
    if version is not None and (not isinstance(version, str) or not 0 < len(version) <= _VERSION_LENGTH):
        raise ArgumentError(
            describe(
                "Invalid op version",
                expected=f"a string of 1 to {_VERSION_LENGTH} characters (version='2', a date, a commit)",
                found=repr(version)[:80],
            )
        )
    if name is None:
        qualified = str(getattr(fn, "__qualname__", type(fn).__qualname__))
        renamed = str(getattr(fn, "__name__", qualified))  # streamfeed's transforms name their column
        last = qualified.rsplit(".", 1)[-1]
        name = f"{getattr(fn, '__module__', None) or '?'}.{qualified if renamed == last else renamed}"
    return name if version is None else f"{name}@{version}"


def _row_preserving(fn: Callable[[Chunk], Chunk], name: str) -> Callable[[Chunk], Chunk]:
    """``fn`` as an op that must return a dict of columns with as many rows as it was given."""

    def op(chunk: Chunk) -> Chunk:
        rows = chunk_len(chunk)
        out = _call_user(fn, chunk, "map function", name)
        if not isinstance(out, dict):
            found = f"a {type(out).__name__}"
        else:
            wrong = {key: len(column) if hasattr(column, "__len__") else None for key, column in out.items()}
            found = ", ".join(f"{key!r}: {n} rows" for key, n in wrong.items() if n != rows)
            if not found and (out or not rows):
                return out
        raise UserFunctionError(
            describe(
                f"map function {name!r} changed the number of rows",
                where=op_place(),
                expected=f"a dict of columns of {rows} rows, as many as in",
                found=found or "no columns",
                fix="use .filter() to drop rows; map must keep one output row per input row",
            )
        )

    op.__name__ = name
    if hasattr(fn, "new_columns"):  # declared; otherwise what it returns is known only by running it
        op.new_columns = tuple(fn.new_columns)  # type: ignore[attr-defined]
    return op


def _filtering(predicate: Callable[[Chunk], np.ndarray], name: str) -> Callable[[Chunk], Chunk]:
    """``predicate`` as an op keeping the rows where its mask (one bool per row) is True."""

    def op(chunk: Chunk) -> Chunk:
        mask = _call_user(predicate, chunk, "filter predicate", name, mask=True)
        if mask.shape != (chunk_len(chunk),):
            raise UserFunctionError(
                describe(
                    f"filter predicate {name!r} returned the wrong shape",
                    where=op_place(),
                    expected=f"a boolean mask of shape ({chunk_len(chunk)},), one entry per row",
                    found=f"shape {mask.shape}",
                    fix=f"make {name} return one bool per row of the columns it is given",
                )
            )
        return {key: column[mask] for key, column in chunk.items()}

    op.__name__ = name
    op.new_columns = ()  # type: ignore[attr-defined]  # a filter keeps the columns it is given
    return op


def _identity_of(op: Op) -> str:
    return str(getattr(op, "identity", getattr(op, "__name__", "op")))


def _keeping_pad_mask(pack: Op) -> Op:
    """``pack`` for whole batches: the padding mask the batcher added passes through."""

    def packed(batch: Chunk) -> Chunk:
        out = pack(batch)
        return {**out, PAD_MASK: batch[PAD_MASK]} if PAD_MASK in batch else out

    packed.__name__ = getattr(pack, "__name__", "pack")
    return packed


@dataclass(frozen=True)
class Dataset:
    """A description of how to stream a source; iterate it to run it.

    Build one with a reader such as :func:`streamfeed.read_parquet`, then
    chain ``.map``, ``.filter``, ``.shuffle``, ``.batch``, ``.prefetch``,
    ``.shard`` and ``.with_memory_limit``; hand it to Keras with
    :meth:`to_keras`.
    """

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
    _counts: dict = field(default_factory=dict, compare=False, repr=False)
    _memo: dict = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        # The source's identity (sizes, modification times) is taken now, at
        # open: a file appended to later must not pass for what was opened.
        # Sources keep it, so every derived Dataset costs nothing here.
        self.source.fingerprint()

    # ----------------------------------------------------------------- building
    @property
    def on_error(self) -> OnError:
        """``"raise"`` or ``"skip"``: the policy of this dataset's bad-input report."""
        return self.report.on_error

    @property
    def shuffled(self) -> bool:
        return self.seed is not None

    def _with(self, **changes: Any) -> "Dataset":
        # ``_counts`` (rows after filters) carries over unless the ops change it;
        # ``_memo`` (layout, plans) depends on every setting, so it starts afresh.
        return dataclasses.replace(self, _memo={}, **changes)

    def map(self, fn: Callable[[Chunk], Chunk], *, name: str | None = None, version: str | None = None) -> "Dataset":
        """Applies ``fn`` to columns: per fragment before ``batch``, per batch after.

        ``fn`` takes and returns a dict of NumPy arrays and must keep the row
        count. Before ``batch`` it runs in the read threads, in parallel.
        ``name`` and ``version`` identify it in saved state: a state is
        restored only into a pipeline with the same ops, so bump ``version``
        when ``fn`` changes what it yields.
        """
        op = _row_preserving(fn, str(name or getattr(fn, "__name__", "map")))
        op.identity = _op_identity(fn, name, version)  # type: ignore[attr-defined]
        if self.batch_size is None:
            return self._with(row_ops=self.row_ops + (op,))
        return self._with(batch_ops=self.batch_ops + (op,))

    def filter(
        self, predicate: Callable[[Chunk], np.ndarray], *, name: str | None = None, version: str | None = None
    ) -> "Dataset":
        """Keeps the rows where ``predicate(columns)`` is True (before ``batch`` only).

        The epoch's row count is then unknown until counted: the first call
        that needs it (``len``, ``to_keras``) runs one counting pass.
        ``name`` and ``version`` identify it in saved state, as for :meth:`map`.
        """
        if self.batch_size is not None:
            raise ArgumentError(
                describe(
                    "filter() after batch()",
                    expected="filter() before batch(): batches have a fixed size",
                    fix="move .filter() before .batch()",
                )
            )
        op = _filtering(predicate, str(name or getattr(predicate, "__name__", "filter")))
        op.identity = _op_identity(predicate, name, version)  # type: ignore[attr-defined]
        return self._with(row_ops=self.row_ops + (op,), filtered=True, _counts={})

    def shuffle(self, seed: int | None = None, *, window: int | None = None) -> "Dataset":
        """Shuffles fragment order per epoch and rows within windows of fragments.

        ``seed=None`` draws a seed from the operating system once and logs
        it; the run is then not reproducible unless you pass that seed.
        ``window`` is the number of fragments whose rows are mixed together;
        by default, as many as the memory limit allows (at most 64).
        """
        if seed is None:
            seed = int.from_bytes(os.urandom(4), "little")
            logger.info("unseeded shuffle: drew seed %d (pass seed=%d to reproduce this run)", seed, seed)
        if window is not None and window < 1:
            raise ArgumentError(describe("Invalid window", expected=">= 1 fragment", found=f"{window}"))
        return self._with(seed=int(seed), window=window)

    def batch(self, batch_size: int, *, last_batch: LastBatch = "keep") -> "Dataset":
        """Groups rows into batches of exactly ``batch_size`` rows.

        ``last_batch``: ``"keep"`` a short last batch (default), ``"drop"`` it,
        or ``"pad"`` it to full size by repeating rows, with a mask column
        that the Keras adapter turns into zero sample weights.
        """
        if self.batch_size is not None:
            raise ArgumentError(describe("batch() was already called", fix="call batch() once"))
        if last_batch not in ("keep", "drop", "pad"):
            raise ArgumentError(
                describe("Invalid last_batch", expected="'keep', 'drop' or 'pad'", found=f"{last_batch!r}")
            )
        if batch_size < 1:
            raise ArgumentError(describe("Invalid batch_size", expected=">= 1", found=f"{batch_size}"))
        return self._with(batch_size=int(batch_size), last_batch=last_batch)

    def prefetch(self, depth: int) -> "Dataset":
        """Keeps up to ``depth`` finished batches ready in a background thread."""
        return self._with(prefetch_depth=int(depth))

    def shard(self, index: int, count: int, *, lanes: int | None = None, remainder: Remainder = "drop") -> "Dataset":
        """Keeps worker ``index`` of ``count``'s equal share of every epoch.

        The epoch's order (the unsharded dataset's, for the seed and epoch)
        is cut into ``lanes`` contiguous lanes of equal length (default:
        ``count``); this worker serves lanes ``index * lanes / count`` to
        ``(index + 1) * lanes / count - 1``. Its batch at step ``t`` is its
        lanes' ``t``-th slices of ``count * batch_size / lanes`` rows, so
        every worker has the same steps and batch sizes, and the global
        batches (all workers' step-``t`` batches in worker order) are the
        same for any ``count`` dividing ``lanes``: keep ``lanes`` and the
        global batch and a saved state resumes with another worker count.
        The ``rows % lanes`` rows that cannot be dealt evenly are
        ``remainder="drop"``: left out (logged, see :meth:`shard_report`),
        or ``"pad"``: lanes filled with repeated rows of weight 0 (the
        padding mask the Keras adapter turns into sample weights).
        """
        lanes = count if lanes is None else lanes
        for name, value in (("count", count), ("lanes", lanes)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ArgumentError(describe(f"Invalid shard {name}", expected="an integer >= 1", found=repr(value)))
        if not 0 <= index < count:
            raise ArgumentError(describe("Invalid shard index", expected=f"in [0, {count})", found=f"{index}"))
        if lanes % count:
            valid = [n for n in range(1, lanes + 1) if lanes % n == 0]
            raise ArgumentError(
                describe(
                    "The worker count must divide the lanes",
                    expected=f"a count dividing lanes={lanes}: one of {valid}",
                    found=f"count={count}",
                    fix=f"run {valid} workers, or keep the lanes the job was started with and pick such a count",
                )
            )
        if remainder not in ("drop", "pad"):
            raise ArgumentError(describe("Invalid remainder", expected="'drop' or 'pad'", found=repr(remainder)))
        if self.sampler is not None:
            raise ArgumentError(
                describe(
                    "balance() cannot be combined with shard()",
                    expected="an unbalanced dataset to shard",
                    fix="shard a dataset without balance(), or balance without sharding",
                )
            )
        if count == lanes == 1:  # one worker, one lane: the unsharded epoch, served as it is
            return self._with(shard_index=0, shard_count=1, lanes=None, remainder="drop")
        return self._with(shard_index=int(index), shard_count=int(count), lanes=int(lanes), remainder=remainder)

    def with_options(
        self,
        *,
        memory_limit: int | None = None,
        read_threads: int | None = None,
        metrics: "bool | StageMetrics | None" = None,
        autotune: "bool | Autotune | None" = None,
    ) -> "Dataset":
        """Sets the memory limit (bytes) that sizes every buffer, and read threads.

        ``metrics=True`` times every stage of each epoch (see
        :meth:`EpochIterator.metrics`); a :class:`StageMetrics` given here
        accumulates across epochs. Off by default, at no cost.

        ``autotune=True`` (or an :class:`~streamfeed.runtime.autotune.Autotune`
        with its intervals and ceilings) moves read threads, read-ahead and
        prefetch depth during each epoch, from the consumer's and the
        producer's waits, never past ``memory_limit``; the batches and their
        order are the same as without it. Off by default: the layout's
        settings (or ``read_threads``) stay fixed. Read what it did with
        ``dataset.autotune.report()`` or :meth:`EpochIterator.tuning`.
        """
        return self._with(
            memory_limit=self.memory_limit if memory_limit is None else int(memory_limit),
            read_threads=self.read_threads if read_threads is None else int(read_threads),
            metrics=self.metrics if metrics is None else metrics,
            autotune=self.autotune if autotune is None else resolve_autotune(autotune),
        )

    def with_source(self, source: Source) -> "Dataset":
        """The same pipeline over another source (a subset of its fragments, a cached copy).

        Everything derived from the source (row counts, layout, plans,
        fingerprint) is derived afresh; the bad-input report is shared, as
        the input is.
        """
        return self._with(source=source, _counts={})

    def with_packing(self, pack: Op) -> "Dataset":
        """Sets the function that turns the user's columns into the model's arrays.

        It runs after every user op: per fragment in the read threads when
        there are no per-batch ops (so the shuffle moves one packed matrix),
        otherwise per batch after them. The Keras adapter sets it; the
        padding mask of ``last_batch="pad"`` passes through unchanged.
        """
        return self._with(pack=pack)

    # ------------------------------------------------------------------ sizing
    def fragment_rows(self) -> list[int]:
        """Rows each fragment yields after per-fragment ops (counted once if unknown).

        A fragment too large to read within the memory limit yields none: it
        is a bad unit, refused or reported before anything is read.
        """
        fits = self._fitting()
        fragments = self.source.fragments
        if self.source.exact_counts and not self.filtered:
            return [fragment.num_rows if ok else 0 for fragment, ok in zip(fragments, fits)]
        key = ("rows", fits)
        if key not in self._counts:
            self._counts[key] = self._count_rows(fits)
        return self._counts[key]

    def _count_rows(self, fits: tuple[bool, ...]) -> list[int]:
        import concurrent.futures

        threads = self.read_threads or min(4, os.cpu_count() or 1)
        logger.info("counting rows after filters: one pass over %d fragments", len(self.source.fragments))

        decode_bytes = decode_bytes_limit(self.memory_limit)

        def count(fragment: Any, fits: bool) -> int:
            chunk = read_fragment(fragment, self.row_ops, self.report, decode_bytes=decode_bytes) if fits else None
            return 0 if chunk is None else chunk_len(chunk)

        with concurrent.futures.ThreadPoolExecutor(threads) as pool:
            return list(pool.map(count, self.source.fragments, fits))

    def _fitting(self) -> tuple[bool, ...]:
        """Whether each fragment, as its metadata declares it, can be read within the memory limit.

        The rule is :func:`~streamfeed.memory.plan_layout`'s (read, then
        converted: twice its bytes), applied per fragment from metadata
        before any read, so that a footer claiming 2**60 rows is a bad unit
        naming its file under the normal error policy, not an allocation.
        """
        if "fitting" not in self._memo:
            limit = self.memory_limit or DEFAULT_MEMORY_LIMIT
            row_bytes = float(self.source.row_bytes)
            fits = []
            for fragment in self.source.fragments:
                size = row_bytes * fragment.num_rows
                if 2 * size > limit:
                    error = MemoryLimitError(
                        describe(
                            "A fragment is larger than the memory limit allows",
                            where=f"{fragment.path}, {fragment.location}",
                            expected=f"fragments below {limit / 2**20:.0f} MiB / 2 (read, then converted)",
                            found=f"{fragment.num_rows} rows x {row_bytes:.0f} bytes = {size / 2**20:.0f} MiB",
                            fix="raise memory_limit, project fewer columns, or rewrite the data in smaller pieces "
                            "(streamfeed convert writes row groups sized for streaming); "
                            "on_error='skip' leaves it out and reports it",
                        )
                    )
                    self.report.reject(error, path=fragment.path, location=fragment.location, rows=fragment.num_rows)
                fits.append(2 * size <= limit)
            self._memo["fitting"] = tuple(fits)
        return self._memo["fitting"]

    def epoch_plan(self, epoch: int) -> EpochPlan:
        """This shard's read units for ``epoch`` (with their sampled sizes when balanced)."""
        plan = self._read_plan(epoch)
        if self.sampler is None:
            return plan
        return EpochPlan(units=plan.units, unit_rows=tuple(self.sampler.unit_samples(plan.unit_rows)))

    def _read_plan(self, epoch: int) -> EpochPlan:
        # Computed once per epoch: Keras and the checkpoint callback ask for
        # the step count every batch, and a plan permutes every fragment.
        key = ("plan", epoch)
        if key not in self._memo:
            if len(self._memo) > 8:  # the layout and the last few epochs are all that is reused
                self._memo.clear()
            self._memo[key] = make_epoch_plan(
                self.fragment_rows(),
                seed=self.seed,
                epoch=epoch,
                window=self.layout().window,
                # Sharded, the plan is the unsharded one: lanes cut its row order (runtime/lanes.py).
                shard_index=0 if self.lanes is not None else self.shard_index,
                shard_count=1 if self.lanes is not None else self.shard_count,
            )
        return self._memo[key]

    def layout(self) -> Layout:
        """Buffer sizes chosen for the memory limit, with their estimated bytes."""
        if "layout" not in self._memo:
            self._memo["layout"] = self._plan_layout()
        return self._memo["layout"]

    def _plan_layout(self) -> Layout:
        inputs = self._layout_inputs()
        layout = plan_layout(window=self.window, read_threads=self.read_threads, prefetch=self.prefetch_depth, **inputs)
        return dataclasses.replace(layout, decode_bytes=decode_bytes_limit(self.memory_limit))

    def _tuning_budget(self) -> Budget:
        """What the autotuner may spend: the layout's sizes and the limit it was planned for."""
        inputs = self._layout_inputs()
        return Budget(
            row_bytes=inputs["row_bytes"],
            fragment_rows=inputs["fragment_rows"],
            batch_rows=inputs["batch_rows"],
            window=self.layout().window,
            shuffled=self.shuffled,
            memory_limit=inputs["memory_limit"] or DEFAULT_MEMORY_LIMIT,
        )

    def _layout_inputs(self) -> dict[str, Any]:
        """The sizes and limit :func:`plan_layout` sizes the layout from (the autotuner's budget too)."""
        fragments = self.source.fragments
        rows = [fragment.num_rows for fragment, ok in zip(fragments, self._fitting()) if ok] or [0]
        fragment_rows = max(1.0, float(np.mean(rows)))
        limit, batch_rows = self.memory_limit, self.batch_size or int(fragment_rows)
        max_window = MAX_DEFAULT_WINDOW
        if self.lanes is not None:
            # Sized per lane, so that the window (and so the global order) does not depend on the worker count.
            limit = (self.memory_limit or DEFAULT_MEMORY_LIMIT) // self.lanes
            batch_rows = self._lane_batch() if self.batch_size else batch_rows
            # A lane reads every unit it overlaps: units of at most 1/4 of a lane's fragments keep a
            # worker's reads near its share (measured: 35-fragment units of 41 fragments made each of
            # 2 workers read 34 and 41 of the 41).
            max_window = max(1, len(fragments) // (4 * self.lanes))
        return {
            "row_bytes": float(self.source.row_bytes),
            "fragment_rows": fragment_rows,
            "batch_rows": batch_rows,
            "shuffled": self.shuffled,
            "memory_limit": limit,
            "largest_fragment_rows": float(max(rows)),
            "max_window": max_window,
            # Per-fragment ops run in the read threads and may run in parallel where the source's reads cannot.
            "read_parallelism": None if self.row_ops else self.source.read_parallelism,
        }

    def num_rows(self, epoch: int = 0) -> int:
        """Rows this shard yields per epoch (before last-batch dropping; sharded: filler rows included)."""
        if self.lanes is not None:
            return len(self._worker_lanes()) * self._lanes(epoch).length
        return self.epoch_plan(epoch).total_rows

    def num_batches(self, epoch: int = 0, *, state: Mapping[str, Any] | None = None) -> int:
        """Batches this shard yields in ``epoch``, or from a saved ``state`` to its epoch's end."""
        if self.batch_size is None:
            raise ArgumentError(describe("num_batches needs batches", fix="call batch() first, or use num_rows()"))
        if self.lanes is not None:
            epoch, done = self._lane_start(epoch, state)
            return self._steps(epoch) - done
        epoch, start = self._start(epoch, state)
        plan = self.epoch_plan(epoch)
        rows = plan.total_rows - plan.rows_before(start.unit) - start.offset
        return num_batches(rows, self.batch_size, self.last_batch)

    def __len__(self) -> int:
        return self.num_batches() if self.batch_size else self.num_rows()

    def epoch_spec(self, epoch: int) -> EpochSpec:
        """This dataset resolved for one epoch: all the runtime reads (see ``runtime/spec.py``)."""
        row_ops, batch_ops = self.row_ops, self.batch_ops
        if self.pack is not None:
            if batch_ops:
                batch_ops = batch_ops + (_keeping_pad_mask(self.pack),)
            else:
                row_ops = row_ops + (self.pack,)
        sharded = self.lanes is not None and self.batch_size is not None
        return EpochSpec(
            epoch=epoch,
            fragments=self.source.fragments,
            plan=self.epoch_plan(epoch),
            layout=self.layout(),
            row_ops=row_ops,
            batch_ops=batch_ops,
            batch_size=self._lane_batch() if sharded else self.batch_size,
            last_batch=self.last_batch,
            seed=self.seed,
            shard_index=0 if self.lanes is not None else self.shard_index,  # lanes cut the unsharded order
            sampler=self.sampler,
            report=self.report,
            lanes=self._lanes(epoch) if sharded else None,
            worker_lanes=self._worker_lanes() if sharded else (),
        )

    # ---------------------------------------------------------------- sharding
    def _lane_batch(self) -> int:
        """Rows each lane gives a step: the global batch (workers x batch_size) over the lanes."""
        lanes, count, size = cast(int, self.lanes), self.shard_count, cast(int, self.batch_size)
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

    def _worker_lanes(self) -> tuple[int, ...]:
        per = cast(int, self.lanes) // self.shard_count
        return tuple(range(self.shard_index * per, (self.shard_index + 1) * per))

    def _lanes(self, epoch: int) -> Lanes:
        """The epoch's order cut into lanes (the rows left out are logged once per epoch)."""
        key = ("lanes", epoch)
        if key not in self._memo:
            lanes = deal_lanes(self._read_plan(epoch).total_rows, cast(int, self.lanes), self.remainder)
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
            self._memo[key] = lanes
        return self._memo[key]

    def _steps(self, epoch: int) -> int:
        """Steps of a sharded epoch: every worker's, the same as one lane's slices."""
        return num_batches(self._lanes(epoch).length, self._lane_batch(), self.last_batch)

    def shard_report(self, epoch: int = 0) -> dict:
        """How ``epoch`` is dealt: rows, lanes, this worker's lanes, steps, and the rows left out or padded."""
        if self.lanes is None:
            raise ArgumentError(describe("shard_report() needs shard()", fix="call .shard(index, count) first"))
        lanes = self._lanes(epoch)
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
            "worker_lanes": list(self._worker_lanes()),
            "steps": self._steps(epoch) if self.batch_size else None,
        }

    # --------------------------------------------------------------- iterating
    def iter_epoch(
        self, epoch: int = 0, *, state: Mapping[str, Any] | None = None, metrics: "bool | StageMetrics | None" = None
    ) -> "EpochIterator":
        """Starts the threads of one epoch; close the result (or use ``with``).

        With ``state`` (from :meth:`EpochIterator.get_state`), the epoch and
        the position in it come from the state, which is checked against
        this pipeline first. ``metrics`` (default: the dataset's
        ``with_options(metrics=)``) times the stages; read them with
        :meth:`EpochIterator.metrics`.
        """
        if self.lanes is not None:
            if self.batch_size is None:
                raise ArgumentError(
                    describe("A sharded dataset is served in batches", fix="call .batch(batch_size) after .shard()")
                )
            epoch, done = self._lane_start(epoch, state)
            return EpochIterator(self, epoch, done, metrics=self.metrics if metrics is None else metrics)
        epoch, start = self._start(epoch, state)
        return EpochIterator(self, epoch, start, metrics=self.metrics if metrics is None else metrics)

    def __iter__(self) -> "EpochIterator":
        return self.iter_epoch(0)

    # ------------------------------------------------------------------- state
    def fingerprint(self) -> dict:
        """What a saved state must match to be restored into this pipeline.

        Built once (it depends only on settings): the Keras adapter takes a
        state after every served batch, and the sampler's settings alone
        cost ~8 us to build (measured), on the training thread.
        """
        return copy.deepcopy(self._fingerprint())

    def _fingerprint(self) -> dict:
        """The memoised fingerprint itself (read-only: states share it)."""
        if "fingerprint" not in self._memo:
            self._memo["fingerprint"] = {
                "source": dict(self.source.fingerprint()),
                "seed": self.seed,
                "window": self.layout().window,
                "batch_size": self.batch_size,
                "last_batch": self.last_batch,
                "shard": [self.shard_index, self.shard_count],
                **(self._lane_fingerprint() if self.lanes is not None else {}),
                "ops": {
                    "per_fragment": [_identity_of(op) for op in self.row_ops],
                    "per_batch": [_identity_of(op) for op in self.batch_ops],
                },
                **({"sampler": self.sampler.settings()} if self.sampler is not None else {}),
            }
        return self._memo["fingerprint"]

    def _lane_fingerprint(self) -> dict:
        """Sharded: the lanes, the global batch and the policies, never the worker index or count."""
        size = self.batch_size
        return {
            "batch_size": None if size is None else self._lane_batch(),  # each lane's rows per step
            "shard": {
                "lanes": self.lanes,
                "global_batch": None if size is None else size * self.shard_count,
                "remainder": self.remainder,
            },
        }

    def initial_state(self, epoch: int = 0) -> dict:
        """The state at the start of ``epoch``: restoring it starts that epoch afresh."""
        if self.lanes is not None:
            return make_lane_state(epoch, 0, self._fingerprint())
        return self._make_state(epoch, Position())

    def _make_state(self, epoch: int, position: Position) -> dict:
        return make_state(epoch, position, self._fingerprint())

    def _lane_start(self, epoch: int, state: Mapping[str, Any] | None) -> tuple[int, int]:
        """Where a sharded epoch starts: ``(epoch, global batches done)``, from a saved state if given."""
        if state is None:
            return self._start(epoch, None)[0], 0
        return parse_lane_state(state, self._fingerprint(), self.shard_count, self._steps)

    def _start(self, epoch: int, state: Mapping[str, Any] | None) -> tuple[int, Position]:
        """Where an epoch starts: at its beginning, or where a saved state says (checked)."""
        if state is None:
            if isinstance(epoch, bool) or not isinstance(epoch, int) or epoch < 0:
                raise ArgumentError(
                    describe("An epoch number is a count", expected="an integer >= 0", found=repr(epoch))
                )
            return epoch, Position()
        return parse_state(state, self._fingerprint(), self.epoch_plan)

    # --------------------------------------------------------------- balancing
    def balance(
        self,
        label: str,
        *,
        stats: Any,
        proportions: "str | Mapping[Any, float]" = "uniform",
        samples_per_epoch: int | None = None,
        seed: int | None = None,
    ) -> "Dataset":
        """Draws rows so that the classes of ``label`` appear in target proportions.

        ``proportions``: ``"uniform"`` (every class equally often) or
        ``{class: weight}`` (normalised; classes left out are not drawn).
        Rows are drawn with replacement per read unit, with probabilities
        ``target[c] / count[c]`` from ``stats`` (a ``streamfeed.stats.Stats``),
        so rare classes are oversampled and common ones undersampled.
        ``samples_per_epoch`` (default: this shard's rows) is the exact epoch
        length. Implies a shuffle; ``seed`` defaults to the shuffle's seed.
        See :mod:`streamfeed.sampling` and :meth:`sampling_report`.
        """
        from .sampling import make_sampler

        if self.lanes is not None:
            raise ArgumentError(
                describe(
                    "balance() cannot be combined with shard()",
                    expected="an unsharded dataset to balance",
                    fix="balance without sharding, or shard a dataset without balance()",
                )
            )
        dataset = self if self.shuffled else self.shuffle(seed)
        draw_seed = seed if seed is not None else dataset.seed
        sampler = make_sampler(
            stats,
            label,
            proportions=proportions,  # type: ignore[arg-type]
            samples_per_epoch=samples_per_epoch,
            seed=cast(int, draw_seed),  # set: dataset is shuffled
        )
        return dataset._with(sampler=sampler)

    def sampling_report(self, epoch: int | None = None) -> dict:
        """Class counts and proportions actually emitted by ``balance`` in ``epoch`` (latest by default)."""
        if self.sampler is None:
            raise ArgumentError(describe("sampling_report() needs balance()", fix="call .balance(...) first"))
        return self.sampler.report(epoch)

    @property
    def column_names(self) -> list[str]:
        """The source's columns plus those that map functions declare they add (``fn.new_columns``)."""
        names = list(self.source.column_names)
        for op in self.row_ops + self.batch_ops:
            names += [name for name in getattr(op, "new_columns", ()) if name not in names]
        return names

    def served_columns(self) -> list[str]:
        """The columns a batch holds: :attr:`column_names`, or, when a ``map``
        does not declare what it returns, those of the first batch.

        That batch is read unshuffled (the first fragment or two, not a
        shuffle window), in a short-lived epoch whose threads stop at once.
        """
        if all(hasattr(op, "new_columns") for op in self.row_ops + self.batch_ops):
            return self.column_names
        unsharded = self._with(seed=None, window=None, sampler=None, lanes=None, shard_index=0, shard_count=1)
        with unsharded.iter_epoch(0) as stream:
            batch = next(stream, None)
        if batch is None:
            return self.column_names
        return [name for name in batch if name != PAD_MASK]

    # ------------------------------------------------------------------- cache
    def cache(
        self, directory: "str | os.PathLike[str] | None" = None, *, max_bytes: int | None = None, mode: str = "always"
    ) -> "Dataset":
        """Reads each fragment from a Parquet copy of the source once one was written, writing it while reading.

        The first epoch writes the copy as it reads (no extra pass); later
        epochs, and later datasets of the same source and settings, read it.
        The source's decoded rows are cached (``map``/``filter`` still run
        every epoch), so batches, order and saved states are unchanged.
        ``directory``: default ``$STREAMFEED_CACHE_DIR`` or
        ``~/.cache/streamfeed/cache``. ``max_bytes``: past it (or on a full
        disk) caching stops with a warning and reading continues from the
        source. ``mode="auto"``: cache only if reading the source measured at
        least twice as slow per row as reading the cache. See
        :mod:`streamfeed.cache.store`.
        """
        from .cache.store import cache_source

        return self._with(source=cache_source(self.source, directory, max_bytes=max_bytes, mode=mode))  # type: ignore[arg-type]

    # ------------------------------------------------------------------- keras
    def to_keras(self, **options: Any) -> "KerasDataset":
        """Wraps this dataset for ``model.fit/evaluate/predict`` on any backend.

        See :class:`streamfeed.keras.KerasDataset` for the options
        (``features``, ``label``, ``sample_weight``, ``dtype``, ...).
        """
        from .keras.adapter import KerasDataset

        return KerasDataset(self, **options)


def _metrics_follow(timing: "StageMetrics", layout: Layout, limit: int) -> Callable[[Settings, int], None]:
    """A tuner listener that records its settings as the metrics' layout."""

    def follow(settings: Settings, nbytes: int) -> None:
        timing.start({**layout.to_dict(), **settings.to_dict(), "estimated_bytes": nbytes}, limit)

    return follow


class EpochIterator:
    """The running form of one epoch: yields batches (dicts of arrays).

    :meth:`get_state` is the JSON-able state to save: restoring it with
    ``dataset.iter_epoch(state=...)`` continues with the next batch. Owns a
    producer thread and a read pool: close it (``with``, ``close()``). Its
    threads also stop at the epoch's end, when a ``KeyboardInterrupt``
    reaches the consumer, and when the iterator is dropped unclosed (``for
    batch in dataset: break``). Several threads may share one: each gets
    ``StopIteration`` at the end of the epoch or after ``close()``.
    """

    def __init__(
        self,
        dataset: Dataset,
        epoch: int,
        start: Position | int,
        *,
        metrics: "bool | StageMetrics" = False,
        _buffers: UnitBuffers | None = None,
    ) -> None:
        from .runtime.metrics import resolve

        self.dataset = dataset
        self.epoch = epoch
        self.position: Position | int = start  # sharded: the global batches done
        spec = dataset.epoch_spec(epoch)
        self._plan = spec.plan
        # The unit buffer pair, shared with the epoch started by successor(); set once every fragment is read.
        self._buffers = buffers = _buffers if _buffers is not None else UnitBuffers()
        self._reads_done = reads_done = threading.Event()
        self._metrics = timing = resolve(metrics)
        if timing is not None:
            timing.start(spec.layout.to_dict(), dataset.memory_limit or DEFAULT_MEMORY_LIMIT)
        self._tuner = tuner = None
        if dataset.autotune is not None:  # the tuner travels in the spec, to every reader of the epoch
            self._tuner = tuner = dataset.autotune.start(spec.layout, dataset._tuning_budget())
            spec = dataclasses.replace(spec, tuner=tuner)
            if timing is not None:  # the metrics' layout (bench's read-pool share) follows the tuned settings
                tuner.on_change(_metrics_follow(timing, spec.layout, dataset.memory_limit or DEFAULT_MEMORY_LIMIT))
        # Neither the producer thread nor the finalizer may refer to self: a
        # dropped iterator must be collected for its threads to be stopped.
        self._background: BackgroundIterator[tuple[Chunk, Position | int]] = BackgroundIterator(
            (
                (lambda stop: produce_lanes(spec, start, stop, timing))
                if isinstance(start, int)
                else (lambda stop: produce_epoch(spec, start, stop, timing, buffers=buffers, reads_done=reads_done))
            ),
            depth=spec.layout.prefetch if tuner is None else tuner.settings.prefetch,
            name="streamfeed-epoch",
            metrics=timing,
            tuner=tuner,
        )
        self._finalizer = weakref.finalize(self, self._background.close)

    def __iter__(self) -> Iterator[Chunk]:
        return self

    def __next__(self) -> Chunk:
        try:
            batch, self.position = next(self._background)
        except KeyboardInterrupt:  # Ctrl-C in a bare for loop: nothing else would close it
            self.close()
            raise
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
        checked like :meth:`Dataset.iter_epoch`'s. Sharded epochs are
        started plainly (their lanes keep buffers of their own).
        """
        dataset = self.dataset
        if dataset.lanes is not None:
            return dataset.iter_epoch(state=state)
        epoch, start = dataset._start(0, state)
        return EpochIterator(dataset, epoch, start, metrics=dataset.metrics, _buffers=self._buffers)

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
        plan, position = self._plan, self.position
        if isinstance(position, int):  # sharded: a position in the global order
            if self.dataset._steps(self.epoch) == position:
                return self.dataset.initial_state(self.epoch + 1)
            return make_lane_state(self.epoch, position, self.dataset._fingerprint())
        rows_left = plan.total_rows - plan.rows_before(position.unit) - position.offset
        size = self.dataset.batch_size
        left = rows_left if size is None else num_batches(rows_left, size, self.dataset.last_batch)
        if left == 0:
            return self.dataset.initial_state(self.epoch + 1)
        return self.dataset._make_state(self.epoch, position)

    def memory(self) -> dict[str, int]:
        """The pipeline's own buffer estimate next to the process's measured RSS."""
        from .memory import peak_rss_bytes, rss_bytes

        tuned = self.tuning()
        estimated = self.dataset.layout().estimated_bytes if tuned is None else tuned.estimated_bytes
        return {
            "estimated_pipeline_bytes": estimated,
            "memory_limit_bytes": self.dataset.memory_limit or DEFAULT_MEMORY_LIMIT,
            "rss_bytes": rss_bytes(),
            "peak_rss_bytes": peak_rss_bytes(),
        }

    def close(self) -> None:
        """Stops the epoch's threads and waits for them; safe to call more than once."""
        self._finalizer()

    def __enter__(self) -> "EpochIterator":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
