"""A statistics pass reads text columns as Arrow arrays, and only where no user op would see them.

Why: counting a string column's values from Python objects cost a quarter
of a CSV epoch (issue 28, item 4); handing the pass Arrow arrays avoids
making the objects. A ``map`` or ``filter`` is promised NumPy, as in an
epoch, so a pass through user ops must still give it NumPy, and an epoch
never sees an Arrow array whatever ran before it on the same thread.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv

import streamfeed as sf


def _write(tmp_path):
    table = pa.table({"city": ["Oslo", "Lima", None, "Oslo"] * 50, "x": np.arange(200, dtype=np.float32)})
    path = tmp_path / "cities.csv"
    pacsv.write_csv(table, path)
    return path


def _kinds(dataset, text_as_arrow: bool) -> set[type]:
    seen: set[type] = set()
    for part in dataset.fragment_pass(lambda _, chunk: type(chunk["city"]), text_as_arrow=text_as_arrow):
        seen.add(part)
    return seen


def test_a_pass_without_user_ops_gets_arrow_text_and_with_them_numpy(tmp_path):
    dataset = sf.read_csv(_write(tmp_path), nulls="fill", fill={"city": "?"})
    assert _kinds(dataset, text_as_arrow=True) == {pa.StringArray}
    assert _kinds(dataset, text_as_arrow=False) == {np.ndarray}
    mapped = dataset.map(lambda chunk: chunk, name="same")
    assert _kinds(mapped, text_as_arrow=True) == {np.ndarray}  # a user op is promised NumPy
    with dataset.batch(64).iter_epoch(0) as stream:  # an epoch after a pass on this thread: NumPy
        assert {type(batch["city"]) for batch in stream} == {np.ndarray}


def test_statistics_of_a_text_column_are_those_of_its_values(tmp_path):
    dataset = sf.read_csv(_write(tmp_path), nulls="fill", fill={"city": "?"})
    stats = sf.compute_stats(dataset, categorical=["city"])
    plain = sf.compute_stats(dataset.map(lambda chunk: chunk, name="same"), categorical=["city"])  # NumPy path
    assert stats.to_dict()["columns"]["city"] == plain.to_dict()["columns"]["city"]
