"""The immutable, fluent description of a pipeline.

Who owns what:

- the **source** owns files, schema, fragments and their row counts;
- the **plan** (``plan.py``) owns the order of fragments per epoch and shard;
- this **Dataset** owns the settings (ops, shuffle, batch, shard, memory):
  they are frozen, and every method returns a new Dataset;
- its **Resolution** (``resolve.py``) owns what follows from the settings:
  sizes, layout, plans, lanes, fingerprint, states, and for each epoch the
  frozen :class:`~streamfeed.runtime.spec.EpochSpec` that is all the runtime
  (``runtime/``) reads: the runtime never calls back into the Dataset;
- an **EpochIterator** (``iterator.py``) owns the threads and buffers of one
  pass; it is the only thing that must be closed.

A derived Dataset shares no mutable state with the one it came from, but
for what records the run itself and is shared by design: the bad-input
:class:`~streamfeed.errors.BadInputReport` (they read the same input), a
balanced sampler's tally of what it drew, the user's ``StageMetrics`` and
the ``Autotune`` whose report covers every epoch of the datasets derived
from it.

Stages run in one canonical order — read → per-fragment ops (``map`` and
``filter`` called before ``batch``) → shuffle window → batch → per-batch ops
(``map`` after ``batch``) → prefetch — so that the iterator state is a single
position ``(epoch, unit, offset)`` and per-fragment work runs in the read
thread pool.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Literal, Mapping, Sequence, TypeVar

import numpy as np

from ..core import Chunk, Source
from ..errors import ArgumentError, describe
from ..plan import Remainder
from ..runtime.assembly import MatrixColumns
from ..runtime.autotune import Autotune
from ..runtime.autotune import resolve as resolve_autotune
from ..runtime.batch import PAD_MASK, LastBatch
from ..runtime.bucketing import Bucket
from ..runtime.padding import Pad
from ..runtime.sequence_packing import Pack, PackTruncate
from ..runtime.spec import Op
from .bucketed import check_bucket
from .combinations import (
    buckets_not_sharded,
    windows_after_ops,
)
from .draws import Draws
from .iterator import EpochIterator
from .ops import drops_rows, filtering, op_identity, row_preserving
from .random_ops import RandomFn, random_op
from .resolve import Resolution
from .settings import memory_limit_bytes

if TYPE_CHECKING:
    from ..keras.adapter import KerasDataset
    from ..runtime.metrics import StageMetrics

logger = logging.getLogger("streamfeed")
T = TypeVar("T")


@dataclass(frozen=True)
class Dataset(Draws):
    """A description of how to stream a source; iterate it to run it.

    Build one with a reader such as :func:`streamfeed.read_parquet`, then
    chain ``.map``, ``.filter``, ``.shuffle``, ``.batch``, ``.prefetch``,
    ``.shard`` and ``.with_options``; hand it to Keras with :meth:`to_keras`.
    What follows from the settings (sizes, layout, plans, states) is its
    :attr:`resolution`, made once and never shared with a derived dataset.
    """

    # ----------------------------------------------------------------- building
    @functools.cached_property
    def resolution(self) -> Resolution:
        """Everything derived from the settings, resolved once (``pipeline/resolve.py``)."""
        return Resolution(self)

    def _with(self, *, same_rows: bool | None = None, **changes: Any) -> "Dataset":
        """A copy with ``changes``; rows already counted after filters carry over as a value where they hold.

        ``same_rows``: whether every fragment yields what it yields here (None:
        when the source and the per-fragment ops are the same objects).
        """
        derived = dataclasses.replace(self, **changes)
        if "resolution" in self.__dict__:
            derived.__dict__["resolution"] = self.resolution.for_derived(derived, same_rows)
        return derived

    def map(self, fn: Callable[[Chunk], Chunk], *, name: str | None = None, version: str | None = None) -> "Dataset":
        """Applies ``fn`` to columns: per fragment before ``batch``, per batch after.

        ``fn`` takes and returns a dict of NumPy arrays and must keep the row
        count. Before ``batch`` it runs in the read threads, in parallel.
        ``name`` and ``version`` identify it in saved state: a state is
        restored only into a pipeline with the same ops, so bump ``version``
        when ``fn`` changes what it yields.
        """
        op = row_preserving(fn, str(name or getattr(fn, "__name__", "map")))
        op.identity = op_identity(fn, name, version)  # type: ignore[attr-defined]
        if self.batch_size is None:  # an op leaving bad rows out (decode_images, skipping) has its rows counted
            return self._with(row_ops=self.row_ops + (op,), filtered=self.filtered or drops_rows(op, self.on_error))
        return self._with(batch_ops=self.batch_ops + (op,))

    def random_map(
        self, fn: RandomFn, *, seed: int = 0, name: str | None = None, version: str | None = None
    ) -> "Dataset":
        """:meth:`map` before ``batch`` with ``fn(columns, rng)``: ``rng`` (a ``RowRandom``) draws per row, keyed on
        the seed, the epoch and the row's index in the source, whatever the threads, shards, shuffle or resume."""
        op = random_op(fn, seed=seed, name=name, version=version, batched=self.batch_size is not None)
        return self._with(row_ops=self.row_ops + (op,), filtered=self.filtered or drops_rows(op, self.on_error))

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
        op = filtering(predicate, str(name or getattr(predicate, "__name__", "filter")))
        op.identity = op_identity(predicate, name, version)  # type: ignore[attr-defined]
        return self._with(row_ops=self.row_ops + (op,), filtered=True)

    def pack_sequences(
        self,
        length: int | Mapping[str, int],
        *,
        columns: Sequence[str] | None = None,
        truncate: PackTruncate = "error",
        value: int | float = 0,
        max_segments: int | None = None,
        seed: int | None = 0,
    ) -> "Dataset":
        """Packs the rows' list columns into rows of ``length`` tokens, with ``<name>_segment_ids`` and ``_positions``.

        First-fit decreasing per fragment in the read threads (before
        ``batch``), so the packed rows are the same for any thread count and a
        resume replays nothing; the epoch's rows are counted once, as after a
        ``filter``. ``length``: an int, or ``{column: length}``; ``columns``:
        the list columns to pack (None: every one); ``truncate``: a longer row
        raises (``"error"``), keeps its first or last values (``"end"``,
        ``"start"``) or is cut into pieces (``"split"``); ``value``: the
        padding; ``max_segments``: the most sequences per row, and the width
        of the other columns, which come per segment; ``seed``: orders rows of
        equal length, per epoch (None: source order). Every setting is in the
        saved state's fingerprint. The policies and figures:
        ``runtime/sequence_packing.py`` and ``docs/sequences.md``.
        """
        if self.batch_size is not None:
            raise ArgumentError(
                describe(
                    "pack_sequences() after batch()",
                    expected="pack_sequences() before batch()",
                    fix="move .pack_sequences() before .batch()",
                )
            )
        packing = Pack(length, columns, truncate, value, max_segments, seed)
        return self._with(row_ops=self.row_ops + (packing.op(),), filtered=True)

    def shuffle(self, seed: int | None = None, *, window: int | None = None) -> "Dataset":
        """Shuffles fragment order per epoch and rows within windows of fragments.

        ``seed=None`` draws a seed from the operating system once and logs
        it; the run is then not reproducible unless you pass that seed.
        ``window`` is the number of fragments whose rows are mixed together;
        by default, 128 MiB of the data's fragments (at most 64; sharded, a
        lane's share): a function of the data alone, so the order is the
        same on every machine (``plan.default_window``). A ``memory_limit``
        too small for the window is refused at open, naming the window it
        would hold.
        """
        if seed is None:
            seed = int.from_bytes(os.urandom(4), "little")
            logger.info("unseeded shuffle: drew seed %d (pass seed=%d to reproduce this run)", seed, seed)
        if window is not None and window < 1:
            raise ArgumentError(describe("Invalid window", expected=">= 1 fragment", found=f"{window}"))
        return self._with(seed=int(seed), window=window)

    def batch(
        self,
        batch_size: int | None = None,
        *,
        last_batch: LastBatch = "keep",
        pad: Pad | None = None,
        bucket: Bucket | None = None,
    ) -> "Dataset":
        """Groups rows into batches of exactly ``batch_size`` rows, or by length into ``bucket``'s batches.

        ``last_batch``: ``"keep"`` a short last batch (default), ``"drop"`` it,
        or ``"pad"`` it to full size by repeating rows, with a mask column
        that the Keras adapter turns into zero sample weights.
        ``pad``: a :class:`~streamfeed.Pad` that pads each variable-length list
        column of a batch into a rectangular array, with its lengths or mask
        (``runtime/padding.py``); it is the first per-batch op, and its
        settings are in the saved state's fingerprint.
        ``bucket``: a :class:`~streamfeed.Bucket` (then no ``batch_size``):
        each row goes to the bucket of its list column's length, each bucket
        serves batches of its own size padded to its boundary, so a model
        sees ``len(boundaries)`` shapes; the last-batch policy applies to
        each bucket's rest at the epoch's end (``runtime/bucketing.py``). The
        steps of an epoch come from one counting pass over the data, made
        once; ``pad`` then pads the batch's other list columns.
        """
        if self.batch_size is not None:
            raise ArgumentError(describe("batch() was already called", fix="call batch() once"))
        if last_batch not in ("keep", "drop", "pad"):
            raise ArgumentError(
                describe("Invalid last_batch", expected="'keep', 'drop' or 'pad'", found=f"{last_batch!r}")
            )
        if pad is not None and not isinstance(pad, Pad):
            raise ArgumentError(describe("Invalid pad", expected="a streamfeed.Pad or None", found=repr(pad)[:80]))
        padding = () if pad is None else (pad.op(),)
        if bucket is not None:
            check_bucket(self, batch_size, pad, bucket)
            return self._with(
                batch_size=max(bucket.batch_sizes),
                last_batch=last_batch,
                bucket=bucket,
                batch_ops=self.batch_ops + (bucket.op(),) + padding,
            )
        if batch_size is None:
            raise ArgumentError(describe("batch() needs a batch_size", fix="batch(32), or batch(bucket=Bucket(...))"))
        if batch_size < 1:
            raise ArgumentError(describe("Invalid batch_size", expected=">= 1", found=f"{batch_size}"))
        return self._with(batch_size=int(batch_size), last_batch=last_batch, batch_ops=self.batch_ops + padding)

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
        if self.bucket is not None and not count == lanes == 1:
            raise buckets_not_sharded()
        if count == lanes == 1:  # one worker, one lane: the unsharded epoch, served as it is
            return self._with(shard_index=0, shard_count=1, lanes=None, remainder="drop")
        return self._with(shard_index=int(index), shard_count=int(count), lanes=int(lanes), remainder=remainder)

    def with_options(
        self,
        *,
        memory_limit: int | str | None = None,
        read_threads: int | None = None,
        metrics: "bool | StageMetrics | None" = None,
        autotune: "bool | Autotune | None" = None,
    ) -> "Dataset":
        """Sets the memory limit that sizes every buffer, and read threads.

        ``memory_limit`` is bytes, or a size as the CLI's ``--memory-limit``
        takes it: ``"512MiB"`` or ``"512M"`` (2^20), ``"1GB"`` (10^9),
        ``"2G"``; anything else, and less than one byte, raises
        :class:`~streamfeed.errors.ArgumentError` here.

        These are machine settings: they size buffers and threads, never what
        is served or in which order (a state saved under one limit restores
        under another). A limit too small for a fragment, or for the shuffle
        window, is refused when the data is opened, naming what to change.

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
            memory_limit=self.memory_limit if memory_limit is None else memory_limit_bytes(memory_limit),
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
        return dataclasses.replace(self, source=source)

    def windows(
        self,
        length: int,
        *,
        stride: int = 1,
        sampling_rate: int = 1,
        shift: int | None = None,
        targets: Mapping[str, str] | None = None,
        by: str | None = None,
        columns: Sequence[str] | None = None,
    ) -> "Dataset":
        """Serves windows of ``length`` rows instead of rows: Keras' ``timeseries_dataset_from_array``, streamed.

        A window starts at a series' first row and every ``stride``-th row
        after it and takes every ``sampling_rate``-th row; it never crosses a
        change of ``by`` (one series per key). ``columns`` (default: all but
        ``by``) are served as ``(windows, length, ...)``; ``targets``
        ``{name: column}`` as ``column`` at ``shift`` rows after the start
        (default the sample after the window); ``by`` as each window's key.
        Windows are this dataset's rows: shuffled, counted, sharded and resumed
        as rows are. Call it before ``map``/``filter``/``batch``/``balance``.
        See :mod:`streamfeed.sources.windows` for the definition and costs.
        """
        if self.row_ops or self.batch_ops or self.batch_size is not None or self.sampler is not None:
            raise windows_after_ops()
        from ..sources.windows import WindowSource, window_spec

        spec = window_spec(
            self.source.column_names,
            length,
            stride=stride,
            sampling_rate=sampling_rate,
            shift=shift,
            targets=targets,
            by=by,
            columns=columns,
        )
        return self.with_source(WindowSource(self.source, spec))

    def with_packing(self, pack: Op, matrix: MatrixColumns | None = None) -> "Dataset":
        """Sets the function that turns the user's columns into the model's arrays.

        It runs after every user op: per fragment in the read threads when
        there are no per-batch ops (so the shuffle moves the model's rows),
        otherwise per batch after them. The Keras adapter sets it; the
        padding mask of ``last_batch="pad"`` passes through unchanged.
        ``matrix`` names the feature columns it leaves for the runtime to
        write side by side into the model's matrix, where the rows are kept
        (``runtime/assembly.py``).
        """
        return self._with(pack=pack, matrix=matrix)

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
        epoch, start = self.resolution.positions.start(epoch, state)
        return EpochIterator(self.resolution, epoch, start, metrics=self.metrics if metrics is None else metrics)

    def __iter__(self) -> "EpochIterator":
        return self.iter_epoch(0)

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
        self,
        directory: "str | os.PathLike[str] | None" = None,
        *,
        max_bytes: int | None = None,
        mode: str = "always",
        trust_directory: bool = False,
        verify: Literal["content", "metadata"] | None = None,
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
        least twice as slow per row as reading the cache. ``trust_directory``:
        use a directory that another user owns or others can write (refused
        by default: they could plant rows; see ``docs/reliability.md``).
        ``verify``: ``"content"`` hashes the source files' bytes once per run
        (xxh3_128, in the cache's key), so a rewrite of the same size with its
        modification time put back is not served from the old cache;
        ``"metadata"`` trusts path, size and time (that rewrite serves the old
        rows); None: ``"content"`` for CSV and image folders, where the hash
        measured under 5 % of the first epoch, else ``"metadata"`` (Parquet:
        14 %; ``docs/self-healing.md``). See :mod:`streamfeed.cache`.
        """
        from ..cache import cache_source

        cached = cache_source(
            self.source, directory, max_bytes=max_bytes, mode=mode, trust_directory=trust_directory, verify=verify
        )
        return self._with(source=cached, same_rows=True)  # the cache serves the source's rows

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
        categorical: Any = None,  # a streamfeed.Stats (typed Any: stats/ is a layer above this one)
        standardize: bool | Sequence[str] = False,
    ) -> KerasDataset:
        """Wraps this dataset for ``model.fit/evaluate/predict`` on any backend (a batched dataset).

        ``features``: the feature columns (default: all but the label, weight,
        ids and bookkeeping columns such as ``path``); ``label``: one column or
        several; ``sample_weight``, ``ids``: columns; ``inputs``: one
        ``"matrix"`` or a ``"dict"`` of named inputs; ``dtype``/``label_dtype``:
        what the model gets; ``model``: checked against the first batch;
        ``categorical``: a :class:`streamfeed.Stats` whose string columns
        become ids; ``standardize``: numeric features standardized from it.
        See :class:`streamfeed.keras.KerasDataset`, whose keywords these are.

        The one import that runs up the layers: the adapter (and Keras) load
        only when this is called (``docs/architecture.md``).
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
