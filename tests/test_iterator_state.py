"""A saved state is checked field by field before it is used; a bad one names the field."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import streamfeed as sf


@pytest.fixture
def pipeline(tmp_path):
    pq.write_table(pa.table({"id": list(range(1000))}), tmp_path / "d.parquet", row_group_size=100)
    return sf.read_parquet(tmp_path / "d.parquet").shuffle(3, window=2).batch(32)


def saved(pipeline) -> dict:
    with pipeline.iter_epoch(1) as stream:
        next(stream)
        return json.loads(json.dumps(stream.get_state()))


@pytest.mark.parametrize(
    "field, value",
    [
        ("offset", -1),  # would serve rows twice
        ("offset", 10**6),  # past the end of its unit
        ("unit", 99),  # past the end of the epoch
        ("unit", -1),
        ("epoch", -5),
        ("epoch", 1.5),
        ("unit", True),  # a bool is not a count
        ("fingerprint", ["not", "a", "dict"]),
        ("version", 2),
    ],
)
def test_a_tampered_field_is_refused_by_name(pipeline, field, value):
    state = {**saved(pipeline), field: value}
    with pytest.raises(sf.StateError, match=f"'{field}'"):
        pipeline.iter_epoch(state=state)
    with pytest.raises(sf.StateError, match=f"'{field}'"):
        pipeline.num_batches(state=state)


def test_a_state_that_is_not_a_dict_is_refused(pipeline):
    with pytest.raises(sf.StateError, match="'state'"):
        pipeline.iter_epoch(state=["epoch", 1])  # type: ignore[arg-type]


def test_the_end_of_an_epoch_is_the_next_epochs_start(pipeline):
    with pipeline.iter_epoch(0) as stream:
        for _ in stream:
            pass
        assert stream.get_state() == pipeline.initial_state(1)
    assert pipeline.num_batches(state=pipeline.initial_state(1)) == len(pipeline)


def test_a_valid_state_resumes_where_it_was_saved(pipeline):
    state = saved(pipeline)
    assert (state["epoch"], state["unit"]) == (1, 0) and state["offset"] == 32
    assert pipeline.num_batches(state=state) == len(pipeline) - 1
