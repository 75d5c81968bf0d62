"""The model's feature matrix is written once, where the rows are kept (``runtime/assembly.py``).

Unshuffled in the read threads, shuffled straight into the unit buffer,
after the per-batch ops when the packing runs per batch, and per lane when
sharded: every path must serve the same rows, each row's features beside
its own label, in the order the plain epoch serves them.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import streamfeed as sf
from streamfeed.runtime.assembly import MatrixColumns
from streamfeed.runtime.shuffle import UnitBuffer

FEATURES = [f"f{i}" for i in range(5)]


@pytest.fixture(scope="module")
def table_dir(tmp_path_factory):
    """2 files, 3000 rows in row groups of 250; y is a function of the row's features (a checksum)."""
    root = tmp_path_factory.mktemp("matrix")
    rng = np.random.default_rng(0)
    for part in range(2):
        rows = 1500
        columns = {name: rng.random(rows, dtype=np.float32) for name in FEATURES}
        columns["id"] = np.arange(part * rows, (part + 1) * rows, dtype=np.int64)
        columns["y"] = _checksum(np.column_stack([columns[name] for name in FEATURES]))
        pq.write_table(pa.table(columns), root / f"part-{part}.parquet", row_group_size=250)
    return root


def _checksum(x: np.ndarray) -> np.ndarray:
    return (x * np.arange(1, x.shape[1] + 1, dtype=np.float32)).sum(axis=1, dtype=np.float32)


def _served(keras_data) -> tuple[np.ndarray, np.ndarray]:
    keras_data.on_epoch_begin()
    batches = [keras_data[i] for i in range(len(keras_data))]
    keras_data.on_epoch_end()
    x = np.concatenate([batch[0] for batch in batches])
    y = np.concatenate([batch[1] for batch in batches])
    assert all(batch[0].flags.c_contiguous for batch in batches)  # what every backend takes without a copy
    return x, y


def _plain_order(dataset: sf.Dataset) -> np.ndarray:
    """The features in the order the plain epoch serves its rows (no Keras, no packing)."""
    with dataset.iter_epoch(0) as stream:
        return np.concatenate([np.column_stack([batch[name] for name in FEATURES]) for batch in stream])


@pytest.mark.parametrize("shuffled", [False, True], ids=["unshuffled", "shuffled"])
@pytest.mark.parametrize("where", ["per fragment", "per batch", "sharded"])
def test_every_path_serves_each_rows_features_beside_its_label_in_the_epochs_order(table_dir, shuffled, where):
    dataset = sf.read_parquet(table_dir, columns=[*FEATURES, "y"])
    if shuffled:
        dataset = dataset.shuffle(seed=7, window=3)
    dataset = dataset.batch(128)
    if where == "per batch":  # a per-batch op: the packing runs after it, per batch
        dataset = dataset.map(lambda batch: {**batch, "f0": batch["f0"] * 1}, name="same")
    if where == "sharded":
        dataset = dataset.shard(0, 2)
    x, y = _served(dataset.to_keras(label="y", features=FEATURES))
    np.testing.assert_array_equal(_checksum(x), y)  # each row's features are its own
    np.testing.assert_array_equal(x, _plain_order(dataset))
    assert len(x) == (3000 if where != "sharded" else 1500)


def test_the_unit_buffer_gathers_the_matrix_contiguous_with_the_other_columns_beside_it():
    rng = np.random.default_rng(1)
    matrix = MatrixColumns("X", ("a", "b", "c"))
    chunks = [{**{name: rng.random(n).astype(np.float32) for name in "abc"}, "y": rng.random(n)} for n in (5, 7, 4)]
    buffer = UnitBuffer()
    buffer.begin(chunks[0], capacity=8, matrix=matrix)  # grows past the announced rows
    for chunk in chunks:
        buffer.append(chunk)
    indices = rng.permutation(16)[:9]
    out = buffer.gather(indices)
    whole = {name: np.concatenate([chunk[name] for chunk in chunks]) for name in "abcy"}
    assert list(out) == ["X", "y"]
    assert out["X"].flags.c_contiguous and out["X"].dtype == np.float32
    np.testing.assert_array_equal(out["X"], np.column_stack([whole[name] for name in "abc"])[indices])
    np.testing.assert_array_equal(out["y"], whole["y"][indices])
    assert matrix.assemble({"a": whole["a"], "y": whole["y"], "b": whole["b"], "c": whole["c"]}).keys() == {"X", "y"}


def _owner(array: np.ndarray) -> object:
    """What finally holds an array's memory: an ndarray that owns it, or a foreign buffer."""
    while isinstance(array.base, np.ndarray):
        array = array.base
    return array if array.base is None else array.base


def test_the_read_threads_matrix_is_in_arrows_pool_so_that_a_freed_one_is_returned():
    """Fails on the old code: the matrix came from glibc's malloc in the read thread.

    Freed by the consumer, such blocks stayed in the read threads' arenas
    once glibc had raised its mmap threshold past them: ``to_keras`` over
    65 536-row fragments of 32 float32 peaked 239-256 MiB over the start
    against 164-165 from Arrow's pool (a 112 MiB layout; 10 epochs, two
    rounds, ``docs/performance.md``). Peak RSS differs too little between
    runs for a test to tell the two apart, so this checks where the memory is.
    """
    columns = MatrixColumns("x", tuple(FEATURES))
    chunk = {name: np.arange(1000, dtype=np.float32) + i for i, name in enumerate(FEATURES)}
    before = pa.total_allocated_bytes()
    matrix = columns.assemble(chunk)["x"]
    assert isinstance(_owner(matrix), pa.Buffer)
    assert pa.total_allocated_bytes() - before >= matrix.nbytes
    assert matrix.flags.c_contiguous and matrix.flags.writeable and matrix.ctypes.data % 64 == 0
    np.testing.assert_array_equal(matrix, np.column_stack([chunk[name] for name in FEATURES]))
    view = matrix[10:20]
    del matrix
    assert pa.total_allocated_bytes() - before >= 1000 * len(FEATURES) * 4  # a batch's view keeps its fragment
    del view
    assert pa.total_allocated_bytes() - before < 1000 * len(FEATURES) * 4


def test_an_array_of_objects_or_of_no_rows_comes_from_numpy():
    from streamfeed.core import fragment_array

    assert fragment_array((3,), object).tolist() == [None, None, None]
    empty = fragment_array((0, 4), np.float32)
    assert empty.shape == (0, 4) and empty.dtype == np.float32
