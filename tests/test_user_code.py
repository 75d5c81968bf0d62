"""A fault in user code always raises, naming the function and where it ran.

``on_error="skip"`` skips *data* faults only (what a fragment's ``read()``
raises: unreadable, corrupt, undecodable, failing the null policy). An
exception raised by a ``map`` or ``filter`` function, or a contract it
breaks (rows in = rows out, one mask entry per row), is a bug: skipping it
would silently turn every row into "bad input" (issue 9, item 7).
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Callable

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import streamfeed as sf
from streamfeed.core import Chunk
from streamfeed.errors import SchemaError, UserFunctionError, describe

ROWS, ROW_GROUP = 600, 100


@pytest.fixture
def parquet(tmp_path) -> Path:
    """600 rows in 6 row groups; row 350 (row group 3) holds a null ``x``."""
    x = pa.array([None if i == 350 else float(i) for i in range(ROWS)], pa.float64())
    path = tmp_path / "data.parquet"
    pq.write_table(pa.table({"id": np.arange(ROWS), "x": x}), path, row_group_size=ROW_GROUP)
    return path


def grow(columns: Chunk) -> Chunk:
    return {name: np.concatenate([column, column]) for name, column in columns.items()}


def ragged(columns: Chunk) -> Chunk:
    return {**columns, "extra": np.zeros(1)}


def returns_none(columns: Chunk) -> None:
    return None


def explode(columns: Chunk) -> Chunk:
    raise ZeroDivisionError("the function is cursed")


def rejects(columns: Chunk) -> Chunk:  # a user's DataError is still user code
    raise sf.DataError(describe("this function rejects everything"))


def wrong_mask(columns: Chunk) -> np.ndarray:
    return np.ones(len(columns["id"]) + 1, dtype=bool)


def explode_mask(columns: Chunk) -> np.ndarray:
    raise KeyError("no_such_column")


def _everything(dataset: sf.Dataset) -> int:
    with dataset.iter_epoch(0) as it:
        return sum(len(batch["id"]) for batch in it)


PER_FRAGMENT: list[tuple[Callable[[sf.Dataset], sf.Dataset], str, type | None]] = [
    (lambda ds: ds.map(grow), "grow", None),
    (lambda ds: ds.map(ragged), "ragged", None),
    (lambda ds: ds.map(returns_none), "returns_none", None),
    (lambda ds: ds.map(explode), "explode", ZeroDivisionError),
    (lambda ds: ds.map(rejects), "rejects", sf.DataError),
    (lambda ds: ds.filter(wrong_mask), "wrong_mask", None),
    (lambda ds: ds.filter(explode_mask), "explode_mask", KeyError),
]


@pytest.mark.parametrize("on_error", ["raise", "skip"])
@pytest.mark.parametrize("build, name, cause", PER_FRAGMENT, ids=[name for _, name, _ in PER_FRAGMENT])
def test_a_fault_in_a_per_fragment_function_raises_naming_it_and_the_fragment(parquet, on_error, build, name, cause):
    dataset = build(sf.read_parquet(parquet, columns=["id"], on_error=on_error)).batch(50)
    with pytest.raises(UserFunctionError) as excinfo:
        _everything(dataset)
    message = str(excinfo.value)
    assert repr(name) in message and f"{parquet}, row group 0" in message, message
    if cause is not None:
        assert isinstance(excinfo.value.__cause__, cause)
    assert dataset.report.skipped_units == 0  # nothing was passed off as bad input


def test_the_counting_pass_raises_too(parquet):
    dataset = sf.read_parquet(parquet, columns=["id"], on_error="skip").filter(wrong_mask).batch(10)
    with pytest.raises(UserFunctionError, match="wrong_mask") as excinfo:
        len(dataset)  # a Python filter: the epoch's rows are counted first
    assert f"{parquet}, row group 0" in str(excinfo.value)
    assert dataset.report.skipped_units == 0


def _on_the_second_batch(function: Callable[[Chunk], Chunk]) -> Callable[[Chunk], Chunk]:
    def on_second(columns: Chunk) -> Chunk:
        return function(columns) if 60 in columns["id"] else columns

    on_second.__name__ = f"{function.__name__}_on_second"
    return on_second


@pytest.mark.parametrize("function, cause", [(grow, None), (explode, ZeroDivisionError)])
def test_a_fault_in_a_per_batch_function_raises_naming_it_and_the_batch(parquet, function, cause):
    on_second = _on_the_second_batch(function)
    dataset = sf.read_parquet(parquet, columns=["id"], on_error="skip").batch(50).map(on_second)
    with pytest.raises(UserFunctionError) as excinfo:
        _everything(dataset)
    message = str(excinfo.value)
    assert repr(on_second.__name__) in message and "batch 1 of epoch 0" in message, message
    if cause is not None:
        assert isinstance(excinfo.value.__cause__, cause)


def test_timed_ops_raise_the_same_error(parquet):
    dataset = sf.read_parquet(parquet, columns=["id"], on_error="skip").map(explode).batch(50)
    with pytest.raises(UserFunctionError, match="explode"):
        _everything(dataset.with_options(metrics=True))


def test_data_faults_are_still_skipped_around_working_functions(parquet):
    def double(columns: Chunk) -> Chunk:
        return {**columns, "x": columns["x"] * 2}

    dataset = (
        sf.read_parquet(parquet, on_error="skip")
        .map(double)
        .filter(lambda columns: columns["id"] % 2 == 0)
        .batch(50)
        .map(double)
    )
    with dataset.iter_epoch(0) as it:
        batches = list(it)
    for batch in batches:
        assert np.array_equal(batch["x"], batch["id"] * 4.0)
    ids = np.concatenate([batch["id"] for batch in batches])
    assert np.array_equal(ids, [i for i in range(ROWS) if i % 2 == 0 and not 300 <= i < 400])
    assert [(entry.location, entry.rows) for entry in dataset.report.entries] == [("row group 3", ROW_GROUP)]


@pytest.mark.parametrize("batch_map", [False, True])
def test_the_packing_op_is_not_user_code(parquet, batch_map):
    def pack(columns: Chunk) -> Chunk:
        return {"id": columns["id"], "xy": np.stack([columns["x"], columns["x"]], axis=1)}

    dataset = sf.read_parquet(parquet, on_error="skip").batch(50)
    dataset = dataset.map(lambda columns: columns) if batch_map else dataset
    assert _everything(dataset.with_packing(pack)) == ROWS - ROW_GROUP  # row group 3 is skipped

    def refuse(columns: Chunk) -> Chunk:
        raise SchemaError(describe("Feature column 'x' is not numeric"))

    with pytest.raises(SchemaError, match="not numeric") as excinfo:  # its own errors, unwrapped
        _everything(dataset.with_packing(refuse))
    assert not isinstance(excinfo.value, UserFunctionError)


def test_data_faults_found_by_streamfeeds_own_transforms_stay_skippable(tmp_path):
    from PIL import Image

    from streamfeed.transforms import decode_images

    png = io.BytesIO()
    Image.new("RGB", (4, 4)).save(png, "PNG")
    path = tmp_path / "encoded.parquet"
    pq.write_table(pa.table({"id": [0, 1], "image_bytes": [png.getvalue(), b"not an image"]}), path, row_group_size=1)
    dataset = sf.read_parquet(path, on_error="skip").map(decode_images((4, 4)))
    assert _everything(dataset) == 1  # decode_images is not user code: undecodable bytes are bad data
    assert [entry.location for entry in dataset.report.entries] == ["row group 1, row 0"]  # the row alone (issue 23)
    with pytest.raises(sf.DataError, match="do not decode"):
        _everything(sf.read_parquet(path).map(decode_images((4, 4))))
