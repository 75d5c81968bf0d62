"""The boundary with Keras: one object for fit, evaluate and predict.

:class:`KerasDataset` is a ``keras.utils.PyDataset`` — the one input type
Keras 3 accepts on the TensorFlow, JAX and PyTorch backends with the number
of steps known — served by a streamfeed epoch running in background
threads. It serves batches in the pipeline's own order: Keras's
``shuffle=True`` (fit's default) asks for batch indices in random order,
which for a stream would mean random reads (4x slower, measured); the
pipeline's seeded shuffle replaces it, so the index Keras asks for is not
used.

Keras reads ahead of training (the TF backend through a prefetching
tf.data pipeline, and it also peeks at batches to build the model), so the
last batch served is not the last batch trained. The state after every
served batch is kept, keyed by its number in the epoch, and
:meth:`KerasDataset.get_state` takes the number of batches trained (the
checkpoint callback counts them in ``on_train_batch_end``). Epochs advance only
when one was served completely after ``on_epoch_begin`` and Keras ended it
(rather than abandoning it with ``EpochIterator.reset()``), so peeks
restart the epoch instead of consuming it. Each epoch tells Keras its own
step count (a resumed epoch has fewer batches left than the epochs after
it). The Keras internals these two need live in :mod:`._keras_internals`,
which says why no public API suffices.
"""

from __future__ import annotations

import collections
import copy
import logging
import weakref
from typing import Any, Callable, Iterator, Literal, Mapping, Sequence

import keras
import numpy as np

from ..core import Chunk
from ..errors import ArgumentError, DataError, SchemaError, StateError, describe
from ..hard_examples import HardExampleSampler, RowScores
from ..pipeline.served import ServedDataset, ServedEpoch, ServedMark
from ..runtime.batch import PAD_MASK
from ..sources.names import served_names
from . import feeds
from ._keras_internals import (
    beginning_epoch_iterator,
    called_from_epoch_reset,
    class_weight_for_caller,
    data_adapter_base,
    epochs_after_this,
    note_class_weight,
    set_epoch_steps,
)
from .encoding import feature_encoding
from .packing import IDS, W, X, Y, feature_matrix, pack_columns
from .validation import check_model_inputs
from .workers import check_workers_agree, jax_gather, rows_exchange

ROW_SCORES = "row_scores"  # a hard-example dataset's state: the scores its epoch is drawn from

logger = logging.getLogger("streamfeed")
_KEEP_STATES = 4096  # far more batches than any Keras read-ahead
_PEEK_BATCHES = 4  # Keras peeks at one or two batches before an epoch
BOOKKEEPING = frozenset({"path", "file", "filename", "id", "ids", "index", "key", "row", "uuid"})
"""Column names never inferred as features: they identify rows, they do not describe them."""


class KerasDataset(keras.utils.PyDataset, data_adapter_base()):  # type: ignore[misc]
    """A streamfeed pipeline as Keras input, on every backend.

    It is a ``PyDataset`` and also Keras's data adapter for itself
    (:mod:`._keras_internals`): TensorFlow gets a ``tf.data.Dataset`` fed in
    blocks of batches, JAX and PyTorch the batches directly (:mod:`.feeds`).

    Args:
        dataset: a batched :class:`streamfeed.Dataset`.
        features: feature columns; by default every column that is not the
            label, the sample weight, the ids or a bookkeeping column
            (:data:`BOOKKEEPING`: ``path``, ``id``, ``index``, ...; name
            them in ``features=`` to use them).
        label: label column (or a list of them, given to Keras as a tuple);
            ``None`` for inputs only (``predict``).
        sample_weight: column of per-row weights.
        ids: a column kept out of the model and collected per epoch, so
            predictions can be matched to rows (:meth:`served_ids`).
        inputs: ``"matrix"`` stacks features into one ``(batch, n)`` array
            of ``dtype`` (a single feature of images or other n-D rows keeps
            its shape, e.g. ``(batch, h, w, c)``); ``"dict"`` gives Keras a dict keyed by column
            name, matching a functional model's input names.
        dtype: dtype of the feature matrix (or of numeric dict inputs).
        label_dtype: dtype of labels; by default as stored.
        model: if given, the first batch is checked against its inputs
            before Keras sees it, with a message naming column and input.
        categorical: a :class:`streamfeed.Stats` of this data: every
            feature with categorical statistics (strings, bytes, columns
            given to ``compute_stats(categorical=...)``) becomes int32 ids
            from its vocabulary, id 0 for values outside it and nulls
            (:mod:`streamfeed.keras.encoding`); see :attr:`categorical_sizes`.
        standardize: with ``categorical``, ``True`` (every numeric feature)
            or a list of columns shifted and scaled by the stats' mean and
            standard deviation, in the pipeline.
    """

    def __init__(
        self,
        dataset: ServedDataset,
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
    ) -> None:
        super().__init__(workers=1, use_multiprocessing=False)
        if inputs not in ("matrix", "dict"):
            raise ArgumentError(
                describe(
                    "Unknown inputs=", expected="'matrix' (one array) or 'dict' (named inputs)", found=repr(inputs)
                )
            )
        if dataset.batch_size is None:
            raise ArgumentError(describe("to_keras() needs a batched dataset", fix="call .batch(batch_size) first"))
        if standardize and categorical is None:
            raise ArgumentError(
                describe("standardize= needs statistics", fix="pass categorical=stats (streamfeed.compute_stats)")
            )
        columns = dataset.served_columns()  # what the user's ops give: packing runs after them
        label, features = served_names(dataset.source, label, columns), served_names(dataset.source, features, columns)
        sample_weight, ids = (
            served_names(dataset.source, sample_weight, columns),
            served_names(dataset.source, ids, columns),
        )
        labels = [label] if isinstance(label, str) else list(label or [])
        reserved = set(labels) | {sample_weight, ids} - {None}
        if features is None:
            features = [name for name in columns if name not in reserved and name not in BOOKKEEPING]
            left_out = [name for name in columns if name in BOOKKEEPING and name not in reserved]
            if left_out:
                logger.info(
                    "to_keras: bookkeeping columns %s are not features (name them in features= to use them)", left_out
                )
        features = list(features)
        missing = [name for name in [*features, *reserved] if name not in columns]
        if missing:
            raise SchemaError(
                describe(
                    f"Columns {missing} are not in the dataset",
                    expected=f"names among {columns}",
                    fix="check features=, label=, sample_weight= and ids=, and the columns= you read",
                )
            )
        self.features, self.labels, self.label_is_list = features, labels, not isinstance(label, (str, type(None)))
        self.inputs, self.model = inputs, model
        encode, self.categorical_sizes = feature_encoding(features, categorical, standardize)
        pack = pack_columns(
            features,
            labels,
            sample_weight,
            ids,
            inputs=inputs,
            dtype=dtype,
            label_dtype=label_dtype,
            encode=encode,
            id_columns=frozenset(self.categorical_sizes),
        )
        self.dataset = dataset.with_packing(pack, feature_matrix(features) if inputs == "matrix" else None)
        # Where the current (or next) epoch starts: an epoch's start, or a restored state.
        self._start: dict = self.dataset.initial_state(0)
        self._epoch, self._num_batches = 0, self.dataset.num_batches(0)
        self._stream: ServedEpoch | None = None
        # The next epoch, started while this one's last unit is served (see _start_successor).
        self._successor: ServedEpoch | None = None
        self._driver: _Driver | None = None  # the Keras epoch iterator running the epochs, while it lives
        # Epochs the running fit runs after the one being served (None: unknown, or not under fit): see _serve.
        self._epochs_after: int | None = None
        self.epochs_started_early = 0  # epochs served by a successor: read while the one before was trained
        self._begun = False
        self._served = 0
        self._states: collections.OrderedDict[int, ServedMark] = collections.OrderedDict()  # after served batch i
        self._ids: list[np.ndarray] = []
        # The first batches of the current stream, kept so that after a Keras
        # peek the epoch replays them instead of reading (decoding) them again.
        self._head: list[tuple[Chunk, ServedMark]] | None = []
        self._replay: collections.deque[tuple[Chunk, ServedMark]] = collections.deque()
        self._stream_start: dict | None = None  # the _start object the stream was opened from
        self._checked = model is None
        self._closed_wait_seconds = 0.0  # of streams already closed
        # TensorFlow's feed thread for the running epoch (feeds.BlockFeed): stopped before any bookkeeping.
        self._feed: feeds.BlockFeed | None = None
        self._fed_wait_seconds: float | None = None  # TensorFlow's waits for blocks, once a feed ran
        self.ids = ids
        self._listeners: list[Callable[[int, tuple, np.ndarray | None], None]] = []
        self._flushes: list[Callable[[int], None]] = []  # a listener's catch-up before a state is taken
        # hard_examples(): epoch e is drawn from epoch e - 1's scores, so it is never read before e - 1 ends
        sampler = getattr(self.dataset, "sampler", None)
        self._scores: RowScores | None = sampler.scores if isinstance(sampler, HardExampleSampler) else None

    # ------------------------------------------------------------ PyDataset API
    @property
    def num_batches(self) -> int:
        """Batches left in the current epoch (all of them unless resumed mid-epoch)."""
        note_class_weight()  # Keras's epoch iterator reads this first: see _keras_internals
        return self._num_batches

    def __len__(self) -> int:
        return self._num_batches

    def __getitem__(self, index: int) -> tuple:
        return self._serve()

    def _serve(self, class_weight: Mapping[int, float] | None = None) -> tuple:
        """The epoch's next batch as Keras takes it; keeps the state after it."""
        stream = self._stream if self._stream is not None else self._open(begun=False)
        batch, state = self._replay.popleft() if self._replay else self._read(stream)
        # Not during a peek (JAX and torch peek at one batch through on_epoch_begin, then restart the epoch),
        # and never past the last epoch fit runs: that read would be for nothing, and waited for at fit's return.
        if (
            self._successor is None
            and self._scores is None
            and self._epochs_after
            and self._served >= _PEEK_BATCHES
            and stream.reads_done
            and self._driven()
        ):
            self._start_successor(stream)
        self._states[self._served] = state
        if len(self._states) > _KEEP_STATES:
            self._states.popitem(last=False)
        self._served += 1
        if not self._checked:
            check_model_inputs(self.model, batch, self.features, self.inputs)
            self._checked = True
        if IDS in batch:
            self._ids.append(batch[IDS])
        packed = self._to_keras(batch)
        for listener in self._listeners:  # e.g. DataQualityMonitor; called on the thread Keras reads on
            listener(self._served - 1, packed, batch.get(IDS))
        return packed if not class_weight else feeds.with_class_weight(packed, class_weight, keras.config.floatx())

    def _epoch_batches(self, class_weight: Mapping[int, float] | None) -> Iterator[tuple]:
        """The rest of the epoch Keras began (``on_epoch_begin``), batch by batch."""
        while self._served < self._num_batches:
            yield self._serve(class_weight)

    # ------------------------------------------- Keras data adapter (see feeds)
    def get_tf_dataset(self) -> Any:
        class_weight = class_weight_for_caller()
        # Bucketed or padded to each batch's longest row, a batch's sequence length is its own: only the rank is fixed.
        varying = self.dataset.varying_shapes
        return feeds.tf_dataset(
            self._peek(class_weight), lambda: self._epoch_batches(class_weight), self._feed_from, varying=varying
        )

    def get_jax_iterator(self) -> Iterator[tuple]:
        return self._epoch_batches(class_weight_for_caller())

    def get_numpy_iterator(self) -> Iterator[tuple]:
        return self._epoch_batches(class_weight_for_caller())

    def get_torch_dataloader(self) -> Any:
        class_weight = class_weight_for_caller()
        return feeds.torch_loader(lambda: self._epoch_batches(class_weight))

    @property
    def batch_size(self) -> int | None:
        return self.dataset.batch_size

    @property
    def has_partial_batch(self) -> bool:
        return self.partial_batch_size is not None

    @property
    def partial_batch_size(self) -> int | None:
        size = self.dataset.batch_size
        if self.dataset.bucket is not None:  # each bucket has its own short last batch: no one partial size
            return None
        rows = self.dataset.num_rows(self._epoch) % size if size and self.dataset.last_batch == "keep" else 0
        return rows or None

    def _peek(self, class_weight: Mapping[int, float] | None) -> tuple:
        """The epoch's first batch as Keras will take it, without serving it (it is replayed)."""
        self._stop_feed()
        if self._head is None:  # a stream read past its head: start the epoch afresh
            self._close_stream()
        stream = self._stream if self._stream is not None else self._open(begun=False)
        if not self._head:
            self._read(stream)
        assert self._head  # a stream's first batch is always kept
        self._replay, self._served = collections.deque(self._head), 0
        if not self._checked:  # TensorFlow traces its step with this batch's shapes before serving any
            check_model_inputs(self.model, self._head[0][0], self.features, self.inputs)
            self._checked = True
        packed = self._to_keras(self._head[0][0])
        return packed if not class_weight else feeds.with_class_weight(packed, class_weight, keras.config.floatx())

    def add_batch_listener(
        self,
        listener: Callable[[int, tuple, np.ndarray | None], None],
        *,
        flush: Callable[[int], None] | None = None,
    ) -> None:
        """Calls ``listener(number, packed, ids)`` with every batch served: its number in the epoch (0 first,
        what ``on_train_batch_end`` receives), the ``(x, y[, w])`` tuple Keras gets and the ``ids`` column
        (``None`` without ``ids=``). Keras reads ahead and replays peeked batches, so a number may be served
        again (the same batch) before it is trained.

        ``flush(trained)`` is called before :meth:`get_state` takes a state after ``trained`` batches, so
        that a listener whose work goes into the state (the hard-example miner's scores) has done it for
        every one of them, whichever callback runs first."""
        self._listeners.append(listener)
        if flush is not None:
            self._flushes.append(flush)

    def _read(self, stream: ServedEpoch) -> tuple[Chunk, ServedMark]:
        try:
            batch = next(stream)
        except StopIteration:
            raise DataError(
                describe(
                    "The epoch ended before Keras got the batches it was promised",
                    where=f"epoch {self._epoch}, after {self._served} batches",
                    expected=f"{self.num_batches} batches",
                    found=f"{self._served}; skipped input: {self.dataset.report.to_dict()['entries']}",
                    fix="inspect the files named in the report; rows were lost while reading",
                )
            ) from None
        entry = (batch, stream.mark())
        if self._head is not None:
            self._head = self._head + [entry] if len(self._head) < _PEEK_BATCHES else None
        return entry

    def on_epoch_begin(self) -> None:
        # Several training processes (JAX multi-process) must run the same steps from the same
        # position, or the one with fewer leaves the others waiting forever: see workers.py.
        self._stop_feed()
        check_workers_agree(self._epoch, self._num_batches, self._start, jax_gather())
        self._follow(beginning_epoch_iterator())
        self._epochs_after = epochs_after_this()
        self._open(begun=True)
        # Keras fixed its step count when fit began, before a checkpoint
        # restored a mid-epoch state: a resumed epoch is shorter, and Keras
        # asking for more batches than it has warns and, on TensorFlow,
        # counts one optimizer iteration too many (see _keras_internals).
        set_epoch_steps(self.num_batches)

    def on_epoch_end(self) -> None:
        self._stop_feed()  # served in full (its thread is ending), or abandoned: no batch is served after this
        self._epochs_after = None  # until Keras begins another epoch
        complete = self._begun and self._stream is not None and self._served == self.num_batches
        # A peek (JAX, PyTorch) of a one-batch epoch looks complete: see _keras_internals.
        complete = complete and not called_from_epoch_reset()
        if complete:
            self._close_stream()
            self._move_to(self.dataset.initial_state(self._epoch + 1))  # a successor, if any, starts here
            return
        # Abandoned (a peek, an early stop): the epoch restarts from its start.
        self._close_successor()
        self._served = 0
        self._states.clear()
        if self._head is None:  # more than a peek was read: nothing to replay
            self._close_stream()

    # ---------------------------------------------------------------- helpers
    def _open(self, *, begun: bool) -> ServedEpoch:
        """Starts serving the epoch at ``_start``: replays a peek's batches, or opens a stream."""
        if self._stream is None and self._successor is not None:  # already reading the epoch that starts now
            self._stream, self._stream_start, self._head = self._successor, self._start, []
            self._successor = None
            self.epochs_started_early += 1
        if self._stream is not None and self._head is not None and self._stream_start is self._start:
            # Restarting right after a peek: serve the peeked batches again.
            self._replay = collections.deque(self._head)
        else:
            self._close_stream()
            self._close_successor()
            self._stream = self.dataset.iter_epoch(state=self._start)
            self._stream_start, self._head, self._replay = self._start, [], collections.deque()
        self._begun, self._served = begun, 0
        self._states.clear()
        self._ids = []
        return self._stream

    def _follow(self, iterator: Any) -> None:
        """Notes the Keras epoch iterator beginning an epoch (a new one drops an early start made for another)."""
        if iterator is None or (self._driver is not None and self._driver.iterator() is iterator):
            return
        self._close_successor()
        self._driver = _Driver(iterator, self)

    def _driven(self) -> bool:
        """Whether a live Keras epoch iterator runs the epochs: only then can an early start be cleaned up."""
        return self._driver is not None and self._driver.iterator() is not None

    def _start_successor(self, stream: ServedEpoch) -> None:
        """Starts the next epoch's reads now that ``stream`` has read all of its fragments.

        Measured (JAX, 1 M rows in one 16-fragment unit, shuffled): the model
        waited 1.0 s at each epoch's start while the unit was read and
        loaded; started here, 0.0-0.1 s. The two epochs share one pair of unit
        buffers (the memory layout's). Only while the running ``fit`` has
        epochs left (:func:`._keras_internals.epochs_after_this`): past its
        last epoch, and under ``evaluate`` or ``predict`` (one epoch per
        call), the early start was read for nothing (issue 28: up to 67 row
        groups, ~0.6 GB, of a one-epoch fit) and stopped only when Keras
        dropped its epoch iterator, in ``fit``'s return, which then waited
        for the start's producer and its reads in flight. An early start
        that is not used (``fit`` stopped early, a validation skipped by
        ``validation_freq``) is still closed when Keras drops its epoch
        iterator (``_Driver``).
        """
        self._successor = stream.successor(self.dataset.initial_state(self._epoch + 1))

    def _close_successor(self, *, finalizing: bool = False) -> None:
        if self._successor is not None:
            if finalizing:  # from a finalizer: it must not wait inside a garbage collection
                self._successor.release()
            else:
                self._successor.close()
            self._successor = None

    def _move_to(self, start: Mapping[str, Any]) -> None:
        """Makes ``start`` where the next epoch is served from; checks it against the pipeline."""
        batches = self.dataset.num_batches(state=start)  # raises StateError naming what differs
        self._start, self._epoch, self._num_batches = copy.deepcopy(dict(start)), int(start["epoch"]), batches

    def _feed_from(self, start: Callable[[], feeds.BlockFeed]) -> feeds.BlockFeed:
        """Starts TensorFlow's feed of the epoch now pulled (on the thread that pulls it), after any other stopped."""
        self._stop_feed()
        if self._fed_wait_seconds is None:
            self._fed_wait_seconds = 0.0
        self._feed = start()
        return self._feed

    def _stop_feed(self) -> None:
        """Stops TensorFlow's feed thread, if one runs, so that no batch is served behind our back."""
        if self._feed is not None:
            self._feed.close()
            self._fed_wait_seconds = (self._fed_wait_seconds or 0.0) + self._feed.wait_seconds
            self._feed = None

    def _close_stream(self) -> None:
        if self._stream is not None:
            self._closed_wait_seconds += self._stream.wait_seconds
            self._stream.close()
            self._stream = None
        self._head, self._replay = [], collections.deque()

    def _to_keras(self, batch: Chunk) -> tuple:
        weight = batch.get(W)
        if PAD_MASK in batch:
            mask = batch[PAD_MASK]
            if weight is not None:  # a per-token weight (rows, tokens) takes its row's mask along every axis
                mask = mask.reshape(mask.shape + (1,) * (np.ndim(weight) - 1))
            weight = mask if weight is None else weight * mask
        x = batch[X] if self.inputs == "matrix" else {name: batch[X + name] for name in self.features}
        if not self.labels:
            return (x,) if weight is None else (x, None, weight)
        y = tuple(batch[Y + name] for name in self.labels) if self.label_is_list else batch[Y + self.labels[0]]
        return (x, y) if weight is None else (x, y, weight)

    @property
    def input_wait_seconds(self) -> float:
        """Total time ``__getitem__`` blocked on the pipeline, over all epochs so far.

        Monotonic: :class:`InputStallMonitor` takes its difference per epoch.
        On TensorFlow, once its feed thread serves the batches, this is how
        long TensorFlow waited for blocks from that thread: the pipeline's
        own waits then happen ahead of training.
        """
        feed = self._feed
        if self._fed_wait_seconds is not None:
            return self._fed_wait_seconds + (feed.wait_seconds if feed is not None else 0.0)
        return self._closed_wait_seconds + (self._stream.wait_seconds if self._stream is not None else 0.0)

    # ------------------------------------------------------------------ state
    @property
    def epoch(self) -> int:
        """The data epoch being (or next to be) served."""
        return self._epoch

    def get_state(self, trained: int | None = None) -> dict:
        """The JSON-able state to save: restoring it with :meth:`set_state` serves the next batch.

        Between epochs (and after an abandoned one) it is the next epoch's
        start. Within an epoch it is the state after the last batch handed
        out, or, with ``trained``, after the first ``trained`` batches of the
        epoch. Under ``fit`` pass ``trained``: Keras reads batches ahead of
        training, so only a callback's ``on_train_batch_end`` knows how many
        were trained (:class:`DataCheckpoint` counts them). ``trained`` may
        exceed the epoch's batches: with ``steps_per_execution`` Keras
        numbers a short last execution as if it were full.
        """
        done = self._served if trained is None else min(trained, self._num_batches)
        for flush in self._flushes:
            flush(done)
        return self._with_scores(self._position_state(done, trained))

    def _position_state(self, done: int, trained: int | None) -> dict:
        """The pipeline's state after ``done`` batches of the current epoch (see :meth:`get_state`)."""
        if done <= 0 or self._stream is None:
            return copy.deepcopy(self._start)
        if done > self._served or done - 1 not in self._states:
            raise ArgumentError(
                describe(
                    f"No state was kept after batch {done} of the current epoch",
                    where=f"data epoch {self._epoch}",
                    expected=f"trained between {max(0, self._served - len(self._states))} and {self._served} "
                    "(the batches served and still kept)",
                    found=str(trained),
                    fix="pass the number of batches Keras trained in this epoch (on_train_batch_end's batch + 1)",
                )
            )
        return copy.deepcopy(self._states[done - 1].state())

    def _with_scores(self, state: dict) -> dict:
        """``state`` with the hard-example scores its epoch is drawn from (``row_scores``), if the draw uses any."""
        if self._scores is not None:  # every process's measurements: one collective, as DataCheckpoint's own
            state[ROW_SCORES] = self._scores.state(int(state["epoch"]), rows_exchange(jax_gather()))
        return state

    def set_state(self, state: Mapping[str, Any]) -> None:
        """Serves from a saved state at the next epoch Keras starts; checked against this pipeline now.

        A state of a hard-example dataset also restores the scores its epoch is drawn from."""
        self._stop_feed()
        state = dict(state)
        scores = state.pop(ROW_SCORES, None)
        if (self._scores is None) != (scores is None):
            raise StateError(
                describe(
                    "The state's hard-example scores do not match the pipeline",
                    expected="no row_scores" if self._scores is None else "row_scores",
                    found="row_scores" if scores is not None else "none",
                    fix="restore a state saved by this same pipeline (hard_examples() or not)",
                )
            )
        self._move_to(state)
        if self._scores is not None:
            self._scores.restore(scores)
        self._close_stream()
        self._close_successor()

    def served_ids(self) -> np.ndarray:
        """The ``ids`` column of the batches served in the current or last epoch."""
        return np.concatenate(self._ids) if self._ids else np.empty(0)

    def check(self, model: Any) -> None:
        """Checks one batch against ``model``'s inputs; raises naming column and input."""
        with self.dataset.iter_epoch(state=self._start) as stream:
            check_model_inputs(model, next(stream), self.features, self.inputs)

    def close(self) -> None:
        """Stops the background threads of the current epoch (and of the next, if started), if any."""
        self._stop_feed()
        self._close_stream()
        self._close_successor()

    def __enter__(self) -> "KerasDataset":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class _Driver:
    """The Keras epoch iterator running an adapter's epochs, held weakly.

    When Keras drops it (``fit`` or ``evaluate`` returned), an epoch started
    early for it will not be asked for: it is closed then, so no reading
    thread outlives the call that needed it.
    """

    def __init__(self, iterator: Any, adapter: KerasDataset) -> None:
        self.iterator = weakref.ref(iterator)
        owner = weakref.ref(adapter)
        weakref.finalize(iterator, _close_successor_of, owner)


def _close_successor_of(owner: "weakref.ref[KerasDataset]") -> None:
    adapter = owner()
    if adapter is not None:
        adapter._close_successor(finalizing=True)
