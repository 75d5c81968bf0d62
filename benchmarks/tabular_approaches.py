"""The tabular benchmark's approaches: what each one builds, and the registries naming them.

``tabular.py`` and ``peers.py`` both run these (in fresh worker processes);
each function imports what its approach needs, so a worker pays only for
the imports of the approach it measures.
"""

from __future__ import annotations

import _common as C

ITER_APPROACHES = {
    "floor_stack": "decode floor: iter_batches(65536) + np.column_stack, 1 thread",
    "floor_prealloc": "decode floor: iter_batches(65536) + preallocated matrix, 1 thread",
    "scanner": "pyarrow scanner -> NumPy per column (limit)",
    "scanner_b1024": "pyarrow scanner(batch_size=1024) -> NumPy",
    "generator": "pyarrow -> pandas -> tf.data.from_generator",
    "streamfeed": "streamfeed, unshuffled",
    "streamfeed_shuffled": "streamfeed, shuffle(seed=1)",
    "streamfeed_keras_unshuffled": "streamfeed to_keras batches, unshuffled, no model",
    "streamfeed_keras": "streamfeed to_keras batches, shuffled, no model",
}
FLOOR_APPROACHES = ("floor_stack", "floor_prealloc")
# Issue 27: CPU per row of each streamfeed path x the decode floor (the faster floor variant), and its target.
FLOOR_TARGETS = {
    "streamfeed": None,
    "streamfeed_shuffled": None,
    "streamfeed_keras_unshuffled": 1.25,
    "streamfeed_keras": 1.5,
}
# Shuffled / unshuffled CPU per row (issue 11's target: <= 1.5): the plain pipeline and the Keras path.
SHUFFLE_CPU_PAIRS = {
    "pipeline": ("streamfeed", "streamfeed_shuffled"),
    "to_keras batches": ("streamfeed_keras_unshuffled", "streamfeed_keras"),
}
FIT_APPROACHES = {
    "numpy": "in-memory NumPy",
    "pydataset_mem": "PyDataset serving in-memory slices",
    "generator": "generator approach (tf.data)",
    "pydataset": "PyDataset reading row groups",
    "streamfeed": "streamfeed to_keras, unshuffled",
    "streamfeed_shuffled": "streamfeed to_keras, shuffle(seed=1)",
}
TARGETS = {"iteration": 0.9, "fit": 0.9, "rss_growth": 0.10, "shuffle_cpu": 1.5}
# The model's ceiling, per backend and steps_per_execution: the faster of these.
CEILING_APPROACHES = ("numpy", "pydataset_mem")
FIT_SPES = (1, 32)
BACKEND_SPES = {"torch": (1,)}  # torch has no compiled multi-step execution worth a row set
BACKEND_SHORT = {"tensorflow": "TF", "jax": "JAX", "torch": "torch"}


def floor_batches(path, preallocated: bool, batch_size: int = 65_536):
    """Issue 27's decode floor: ``ParquetFile.iter_batches`` on one thread, then ``x (n, 32)`` and ``y``.

    ``preallocated=False`` is the issue's definition (``np.column_stack``, a
    fresh matrix per batch); ``True`` writes each column into one reused
    matrix (no allocation, no page faults), the stricter floor. Either way
    ``y`` is the label column's zero-copy view.
    """
    import numpy as np
    import pyarrow.parquet as pq

    matrix = np.empty((batch_size, C.N_FEATURES), dtype=np.float32) if preallocated else None
    for name in C.files(path):
        for record_batch in pq.ParquetFile(name).iter_batches(
            batch_size=batch_size, columns=C.COLUMNS, use_threads=False
        ):
            columns = record_batch.columns
            if matrix is not None:
                x = matrix[: record_batch.num_rows]
                for i in range(C.N_FEATURES):
                    x[:, i] = columns[i].to_numpy()
            else:
                x = np.column_stack([columns[i].to_numpy() for i in range(C.N_FEATURES)])
            yield x, columns[C.N_FEATURES].to_numpy()


def _dataset(path):
    import pyarrow.dataset as pads

    return pads.dataset(C.files(path), format="parquet")


def scanner_batches(path, batch_size=C.BATCH):
    """The limit: scanner record batches -> NumPy per column, served as 1024-row views."""
    import numpy as np

    held: list[dict] = []
    count = 0
    for record_batch in _dataset(path).to_batches(columns=C.COLUMNS):
        columns = {name: record_batch.column(i).to_numpy() for i, name in enumerate(record_batch.schema.names)}
        rows, start = record_batch.num_rows, 0
        if held:  # finish the batch that spans two record batches
            take = min(batch_size - count, rows)
            held.append({k: v[:take] for k, v in columns.items()})
            count += take
            start = take
            if count == batch_size:
                yield {k: np.concatenate([h[k] for h in held]) for k in columns}
                held, count = [], 0
        while start + batch_size <= rows:
            yield {k: v[start : start + batch_size] for k, v in columns.items()}
            start += batch_size
        if start < rows:
            held, count = [{k: v[start:] for k, v in columns.items()}], rows - start
    if held:
        yield {k: np.concatenate([h[k] for h in held]) for k in held[0]}


def scanner_b1024_batches(path, batch_size=C.BATCH):
    """The scanner asked for 1024-row record batches directly (one to_numpy per column per batch)."""
    for record_batch in _dataset(path).to_batches(columns=C.COLUMNS, batch_size=batch_size):
        yield {name: record_batch.column(i).to_numpy() for i, name in enumerate(record_batch.schema.names)}


def generator_tf_dataset(path, batch_size=C.BATCH):
    """The common recipe: pyarrow batches -> to_pandas() -> from_generator -> unbatch/batch."""
    import numpy as np
    import tensorflow as tf

    files = C.files(path)

    def generate():
        import pyarrow.dataset as pads

        for record_batch in pads.dataset(files, format="parquet").to_batches(columns=C.COLUMNS):
            frame = record_batch.to_pandas()
            yield frame[C.FEATURES].to_numpy(np.float32), frame[C.LABEL].to_numpy(np.float32)

    signature = (tf.TensorSpec((None, C.N_FEATURES), tf.float32), tf.TensorSpec((None,), tf.float32))
    return (
        tf.data.Dataset.from_generator(generate, output_signature=signature)
        .unbatch()
        .batch(batch_size)
        .prefetch(tf.data.AUTOTUNE)
    )


def streamfeed_dataset(path, shuffled, batch_size=C.BATCH):
    import streamfeed as sf

    dataset = sf.read_parquet(str(path), columns=C.COLUMNS)
    if shuffled:
        dataset = dataset.shuffle(seed=1)
    return dataset.batch(batch_size)


def load_numpy(path):
    """The whole data set in memory: (rows, 32) float32 features and float32 labels."""
    import numpy as np
    import pyarrow.parquet as pq

    table = pq.read_table(C.files(path), columns=C.COLUMNS)
    x = np.empty((table.num_rows, C.N_FEATURES), dtype=np.float32)
    for i, name in enumerate(C.FEATURES):
        x[:, i] = table[name].to_numpy()
    y = table[C.LABEL].to_numpy()
    del table
    return x, y


def make_pydatasets():
    """PyDataset classes (defined after keras is imported, in the fit worker)."""
    import bisect

    import keras
    import numpy as np
    import pyarrow.parquet as pq

    class RowGroupPyDataset(keras.utils.PyDataset):
        """Batch i = rows [i*B, (i+1)*B) of the epoch's row-group order, read with ParquetFile.read_row_group.

        Keeps the last decoded row group (as a stacked float32 matrix), so a
        sequential epoch decodes each row group once. With ``seed`` (the
        shuffle a user would write without streamfeed) each epoch visits
        the row groups in a fresh random order and permutes the rows of
        each decoded group: rows mix within a row group, never across.
        """

        def __init__(self, path, batch_size=C.BATCH, seed: int | None = None):
            super().__init__()
            self.batch_size, self.seed, self.epoch = batch_size, seed, 0
            self.files = [pq.ParquetFile(name) for name in C.files(path)]
            self.groups = [(f, g) for f in self.files for g in range(f.metadata.num_row_groups)]
            self.sizes = [f.metadata.row_group(g).num_rows for f, g in self.groups]
            self.rows = sum(self.sizes)
            self._order_epoch()

        def _order_epoch(self):
            order = list(range(len(self.groups)))
            if self.seed is not None:
                order = list(np.random.default_rng([self.seed, self.epoch]).permutation(order))
            self.order = order
            self.starts = list(np.cumsum([0] + [self.sizes[g] for g in order[:-1]]))
            self._cached = (-1, None, None)

        def on_epoch_end(self):
            self.epoch += 1
            self._order_epoch()

        def __len__(self):
            return -(-self.rows // self.batch_size)

        def _group(self, position):
            if self._cached[0] != position:
                f, g = self.groups[self.order[position]]
                table = f.read_row_group(g, columns=C.COLUMNS)
                x = np.empty((table.num_rows, C.N_FEATURES), dtype=np.float32)
                for i, name in enumerate(C.FEATURES):
                    x[:, i] = table[name].to_numpy()
                y = table[C.LABEL].to_numpy()
                if self.seed is not None:
                    rows = np.random.default_rng([self.seed, self.epoch, position]).permutation(len(y))
                    x, y = x[rows], y[rows]
                self._cached = (position, x, y)
            return self._cached[1], self._cached[2]

        def __getitem__(self, i):
            start, stop = i * self.batch_size, min((i + 1) * self.batch_size, self.rows)
            xs, ys = [], []
            while start < stop:
                position = bisect.bisect_right(self.starts, start) - 1
                x, y = self._group(position)
                offset = start - self.starts[position]
                take = min(stop - start, len(y) - offset)
                xs.append(x[offset : offset + take])
                ys.append(y[offset : offset + take])
                start += take
            if len(xs) == 1:
                return xs[0], ys[0]
            return np.concatenate(xs), np.concatenate(ys)

    class MemoryPyDataset(keras.utils.PyDataset):
        """Slices of in-memory arrays: the cost of Keras's PyDataset path itself."""

        def __init__(self, x, y, batch_size=C.BATCH):
            super().__init__()
            self.x, self.y, self.batch_size = x, y, batch_size

        def __len__(self):
            return -(-len(self.y) // self.batch_size)

        def __getitem__(self, i):
            s = slice(i * self.batch_size, (i + 1) * self.batch_size)
            return self.x[s], self.y[s]

    return RowGroupPyDataset, MemoryPyDataset
