"""The pre-epoch agreement of training processes (``streamfeed.keras.workers``), table by table.

The real collective runs in test_jax_multiprocess.py; here the gathered
table is given directly, to pin the message every process raises.
"""

from __future__ import annotations

import numpy as np
import pytest

from streamfeed.errors import StateError
from streamfeed.keras.workers import check_workers_agree, jax_gather, state_digest

START = {"version": 1, "epoch": 0, "batches": 0, "fingerprint": {"seed": 7}}


def _gather_with(others: list[list[int]]):
    """The table a collective would return: this process's row first, then the others'."""
    return lambda mine: np.array([mine.tolist(), *others], dtype=np.int64)


def test_equal_processes_pass():
    digest = state_digest(START)
    check_workers_agree(0, 40, START, _gather_with([[0, 40, digest]]))


@pytest.mark.parametrize(
    "other, named",
    [([0, 32, None], "steps"), ([1, 40, None], "data epoch"), ([0, 40, 12345], "start")],
)
def test_a_difference_raises_naming_each_worker(other, named):
    other = [value if value is not None else state_digest(START) for value in other]
    with pytest.raises(StateError) as caught:
        check_workers_agree(0, 40, START, _gather_with([other]))
    message = str(caught.value)
    assert f"disagree on their data before an epoch ({named})" in message
    assert "worker 0:" in message and "worker 1:" in message and ".shard(index, count)" in message


def test_one_process_exchanges_nothing():
    assert jax_gather() is None  # this test process runs no multi-process JAX job
    check_workers_agree(0, 40, START, None)


def test_the_digest_is_of_the_whole_state():
    moved = {**START, "batches": 1}
    assert state_digest(START) == state_digest(dict(reversed(list(START.items()))))
    assert state_digest(START) != state_digest(moved)
    assert 0 <= state_digest(START) < 2**63
