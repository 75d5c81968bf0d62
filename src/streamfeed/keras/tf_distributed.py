"""TensorFlow multi-worker training with a custom loop: per-worker feeds, agreement, checkpoints.

``model.fit`` under ``tf.distribute.MultiWorkerMirroredStrategy`` fails
upstream in Keras 3.15 / TF 2.21 (``ValueError: Attempt to convert a value
(PerReplica...)``, keras-team/keras#20585), on plain ``tf.data`` too. The path
that works is a custom loop: ``strategy.distribute_datasets_from_function``
and ``strategy.run`` with a Keras 3 model and optimizer (the optimizer sums
the replicas' gradients itself). This module gives that loop its data, its
train step, and checkpoints of weights, optimizer and data position::

    strategy = tf.distribute.MultiWorkerMirroredStrategy()   # TF_CONFIG names the workers
    with strategy.scope():
        model = make_model()
        model.compile(optimizer=keras.optimizers.SGD(0.05))  # the optimizer the checkpoint saves
    data = sf.read_parquet("data/").shuffle(seed=7).batch(GLOBAL_BATCH // workers)
    feed = WorkerFeed(strategy, data, lanes=4, label="y")    # this worker's shard, steps known
    step = train_step(strategy, model, keras.losses.MeanSquaredError(reduction=None))
    ckpt = WorkerCheckpoint(feed, model, "shared/ckpt")      # restores a saved checkpoint, if any
    for epoch in range(ckpt.initial_epoch, EPOCHS):
        for trained, batch in feed.epoch():                  # exactly feed.steps steps, on every worker
            loss = step(batch)
            if trained % 100 == 0 or trained == feed.steps:
                ckpt.save(trained)                           # every worker, at the same step

Each worker builds its shard from the strategy's input context
(``shard(ctx.input_pipeline_id, ctx.num_input_pipelines, lanes=...)``), so
every worker runs the same number of steps (equal lanes of one global order)
and a saved state is a position in the global order: it resumes on any worker
count dividing ``lanes`` with the same global batch. Before each epoch and at
each save the workers gather ``[epoch, steps (or save number), digest of the
state]`` with a TensorFlow collective (:func:`tf_gather`) and all raise the
same :class:`~streamfeed.errors.StateError` when they differ, rather than
one waiting forever in the next step's all-reduce.

Checkpoints reuse :mod:`.checkpoint`'s commit: the chief (worker 0) writes the
weights (with the compiled optimizer's variables) once, into a private
temporary directory, then ``data_state.json`` last, atomically, then moves the
weights to their final name; the other workers write nothing (reading a
mirrored variable needs no collective in TensorFlow, unlike JAX).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np

from ..errors import ArgumentError, describe
from ..pipeline import Dataset, Remainder
from .adapter import KerasDataset
from .checkpoint import commit_checkpoint, load_checkpoint, restore_weights
from .workers import Gather, check_workers_agree


def tf_gather(strategy: Any) -> Gather:
    """Stacks each worker's 1-D int64 array into a ``(replicas, n)`` array on every worker (a TF all-gather).

    One ``tf.function``, traced once: ``strategy.gather`` called eagerly
    builds and traces a new function at every call (TensorFlow warns of the
    retracing at each checkpoint).
    """
    import tensorflow as tf

    def replica_gather(mine: Any) -> Any:
        # tf.identity places the value on the replica's device: without it the collective has none to
        # gather to ("destinations can not be empty").
        return tf.distribute.get_replica_context().all_gather(tf.identity(mine), axis=0)

    @tf.function
    def all_gather(mine: Any) -> Any:
        return strategy.run(replica_gather, args=(mine,))

    def gather(values: np.ndarray) -> np.ndarray:
        table = all_gather(tf.constant(np.asarray(values, dtype=np.int64)[None]))
        return np.asarray(strategy.experimental_local_results(table)[0])

    return gather


class WorkerFeed:
    """This worker's shard of ``dataset`` as ``strategy.distribute_datasets_from_function`` input.

    Args:
        strategy: a ``tf.distribute`` strategy (``MultiWorkerMirroredStrategy``).
        dataset: a batched :class:`streamfeed.Dataset`, not sharded; its batch
            is each worker's (the global batch divided by the workers).
        lanes, remainder: as :meth:`streamfeed.Dataset.shard` (keep ``lanes``
            fixed for a job to resume on another worker count).
        **to_keras: :class:`KerasDataset`'s arguments (``features``, ``label``, ``ids``...).

    The per-worker ``tf.data.Dataset`` is :meth:`KerasDataset.get_tf_dataset`
    (batches crossing into TensorFlow in blocks); :attr:`keras` is the
    :class:`KerasDataset` behind it, for its state and served ids.
    """

    def __init__(
        self,
        strategy: Any,
        dataset: Dataset,
        *,
        lanes: int | None = None,
        remainder: Remainder = "drop",
        **to_keras: Any,
    ) -> None:
        if dataset.lanes is not None:
            raise ArgumentError(
                describe(
                    "WorkerFeed shards the dataset by the strategy's input context itself",
                    expected="a dataset without .shard(...)",
                    found=f"a dataset sharded {dataset.shard_index} of {dataset.shard_count}",
                    fix="drop .shard(...) and pass lanes= and remainder= to WorkerFeed",
                )
            )
        self.strategy = strategy
        self._gather = tf_gather(strategy)
        self._feeds: list[KerasDataset] = []

        def dataset_fn(context: Any) -> Any:
            shard = dataset.shard(
                context.input_pipeline_id, context.num_input_pipelines, lanes=lanes, remainder=remainder
            )
            feed = KerasDataset(shard, **to_keras)
            self._feeds.append(feed)
            return feed.get_tf_dataset()

        try:
            self.distributed = strategy.distribute_datasets_from_function(dataset_fn)
        except BaseException:
            self.close()  # a feed made before the failure has its pipeline threads running
            raise
        if len(self._feeds) != 1:  # one input pipeline per worker process (MultiWorkerMirroredStrategy)
            self.close()
            raise ArgumentError(
                describe(
                    "WorkerFeed needs one input pipeline in this process",
                    expected="a strategy calling the dataset function once per worker",
                    found=f"{len(self._feeds)} calls",
                    fix="use MultiWorkerMirroredStrategy, one process per worker",
                )
            )
        self.keras: KerasDataset = self._feeds[0]

    @property
    def steps(self) -> int:
        """Steps of the current (or next) epoch: the same on every worker; fewer after a mid-epoch resume."""
        return self.keras.num_batches

    @property
    def data_epoch(self) -> int:
        """The data epoch being (or next to be) served."""
        return self.keras.epoch

    def epoch(self) -> Iterator[tuple[int, Any]]:
        """Serves one epoch: ``(steps trained after this one, per-replica batch)``, exactly :attr:`steps` times.

        First the workers check they agree on the epoch, its steps and where
        it starts (:class:`StateError` on every worker if not). The loop stops
        at the known step count instead of at the end of the data, so no worker
        runs a step the others do not.
        """
        check_workers_agree(self.keras.epoch, self.keras.num_batches, self.keras.get_state(), self._gather)
        self.keras.on_epoch_begin()
        steps = self.keras.num_batches
        iterator = iter(self.distributed)
        try:
            for step in range(steps):
                yield step + 1, next(iterator)
        finally:
            del iterator
        self.keras.on_epoch_end()

    def get_state(self, trained: int) -> dict:
        """The data state after ``trained`` steps of the current epoch (a position in the global order)."""
        return self.keras.get_state(trained)

    def set_state(self, state: dict) -> None:
        """Serves from ``state`` at the next :meth:`epoch` (checked against this pipeline now)."""
        self.keras.set_state(state)

    def close(self) -> None:
        """Stops the pipeline's background threads."""
        for feed in self._feeds:
            feed.close()


def train_step(strategy: Any, model: Any, loss: Callable[[Any, Any], Any]) -> Callable[[Any], Any]:
    """A compiled step: forward, ``loss`` averaged over the global batch, ``model.optimizer`` update; returns the loss.

    ``loss(y_true, y_pred)`` gives one loss per row (e.g. a Keras loss with
    ``reduction=None``). Each replica averages by the global batch
    (``tf.nn.compute_average_loss``, weighted by the batch's sample weights,
    e.g. the padding mask of ``remainder="pad"``); the Keras 3 optimizer sums
    the replicas' gradients, so every worker applies the same update.
    """
    import tensorflow as tf

    optimizer = model.optimizer
    if optimizer is None:
        raise ArgumentError(
            describe(
                "train_step needs the model's optimizer",
                expected="a compiled model",
                found="model.optimizer is None",
                fix="call model.compile(optimizer=...) inside strategy.scope()",
            )
        )

    def replica_step(batch: tuple) -> Any:
        x, y = batch[0], batch[1]
        weight = batch[2] if len(batch) > 2 else None
        with tf.GradientTape() as tape:
            per_row = loss(y, model(x, training=True))
            average = tf.nn.compute_average_loss(per_row, sample_weight=weight)
        gradients = tape.gradient(average, model.trainable_variables)
        optimizer.apply_gradients(zip(gradients, model.trainable_variables))
        return average

    @tf.function
    def step(batch: Any) -> Any:
        return strategy.reduce("SUM", strategy.run(replica_step, args=(batch,)), axis=None)

    return step


class WorkerCheckpoint:
    """Weights, optimizer variables and the data position of a custom multi-worker loop, saved together.

    Loads ``directory`` when made (:func:`.checkpoint.load_checkpoint`: a
    save interrupted after its commit is completed, anything not whole is
    refused) and, if it holds a checkpoint, restores the weights and the
    optimizer's variables into ``model`` and the data state into ``feed``.
    Every worker calls :meth:`save` at the same step; the chief commits.
    """

    def __init__(self, feed: WorkerFeed, model: Any, directory: str | Path) -> None:
        self.feed, self.model, self.directory = feed, model, Path(directory)
        saved = load_checkpoint(self.directory, save_model=True)
        self._saves = int(saved["save_number"]) if saved else 0
        self.initial_epoch = int(saved["data"]["epoch"]) if saved else 0
        """The epoch to start the loop at: the saved data epoch (0 without a checkpoint)."""
        if saved is not None:
            feed.set_state(saved["data"])  # the pipeline checks it: StateError naming what differs
            with feed.strategy.scope():  # the optimizer's variables are made where the strategy puts them
                restore_weights(model, self.directory, saved)

    def save(self, trained: int) -> None:
        """Saves after ``trained`` steps of the current epoch (after its last step: the next epoch's start)."""
        self._saves += 1
        data = self.feed.get_state(trained)
        check_workers_agree(int(data["epoch"]), self._saves, data, self.feed._gather)
        if not self.feed.strategy.extended.should_checkpoint:
            return
        state = {"keras_epoch": int(data["epoch"]), "data": data, "save_number": self._saves}
        commit_checkpoint(self.directory, state, self.model)
