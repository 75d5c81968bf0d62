"""What is served, and in which order, depends on the data and its settings, never on the machine's.

The same data, seed, window and batch settings must give the same rows in
the same order under any ``memory_limit``, ``read_threads``, ``prefetch``
and with autotuning, and a state saved under one restores under another:
two machines with different limits train on one order, and a job moved to
a smaller machine resumes. The data is sized so that the old rule (a
default window of ``memory_limit / 4`` bytes) chose 55 fragments at 64 MiB
and 64 at 4 GiB.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import streamfeed as sf

FRAGMENTS = 64
ROWS_PER_FRAGMENT = 4400  # x 68 bytes = 299 KB per row group, 19 MiB in all
LIMITS = (64 * 2**20, 256 * 2**20, 4 * 2**30)


@pytest.fixture(scope="module")
def path(tmp_path_factory) -> str:
    rows = FRAGMENTS * ROWS_PER_FRAGMENT
    columns = {"id": np.arange(rows, dtype=np.int64)}
    columns |= {f"f{i}": np.full(rows, i, dtype=np.float32) for i in range(15)}
    target = tmp_path_factory.mktemp("order") / "d.parquet"
    pq.write_table(pa.table(columns), target, row_group_size=ROWS_PER_FRAGMENT)
    return str(target)


def _ids(data: sf.Dataset, epoch: int = 0, state: dict | None = None) -> np.ndarray:
    with data.iter_epoch(epoch, state=state) as it:
        return np.concatenate([batch["id"] for batch in it])


def _pipeline(path: str) -> sf.Dataset:
    return sf.read_parquet(path, columns=["id", *[f"f{i}" for i in range(15)]]).shuffle(seed=7).batch(1000)


MACHINES = [pytest.param({"memory_limit": limit}, id=f"memory_limit={limit // 2**20}MiB") for limit in LIMITS] + [
    pytest.param({"read_threads": 1}, id="read_threads=1"),
    pytest.param({"read_threads": 4, "memory_limit": LIMITS[-1]}, id="read_threads=4"),
    pytest.param({"autotune": True}, id="autotune"),
    pytest.param({"autotune": True, "memory_limit": LIMITS[0]}, id="autotune-64MiB"),
]


@pytest.mark.parametrize("machine", MACHINES)
@pytest.mark.parametrize("epoch", [0, 1])
def test_every_machine_setting_serves_the_same_rows_in_the_same_order(path, machine, epoch):
    reference = _pipeline(path)
    data = reference.with_options(**machine)
    assert data.fingerprint() == reference.fingerprint()
    assert data.epoch_plan(epoch) == reference.epoch_plan(epoch)
    np.testing.assert_array_equal(_ids(data, epoch), _ids(reference, epoch))


def test_prefetch_depth_changes_nothing_served(path):
    np.testing.assert_array_equal(_ids(_pipeline(path).prefetch(2)), _ids(_pipeline(path)))


@pytest.mark.parametrize(("saved_under", "restored_under"), [(LIMITS[0], LIMITS[-1]), (LIMITS[-1], LIMITS[0])])
def test_a_state_saved_under_one_limit_resumes_under_another(path, saved_under, restored_under):
    saving = _pipeline(path).with_options(memory_limit=saved_under)
    with saving.iter_epoch(0) as it:
        served = np.concatenate([next(it)["id"] for _ in range(7)])
        state = it.get_state()
    restoring = _pipeline(path).with_options(memory_limit=restored_under)
    rest = _ids(restoring, state=state)
    np.testing.assert_array_equal(np.concatenate([served, rest]), _ids(saving))


@pytest.mark.parametrize("limit", LIMITS)
def test_a_shard_is_the_same_under_every_limit(path, limit):
    reference = _pipeline(path).shard(1, 2)
    data = reference.with_options(memory_limit=limit)
    assert data.fingerprint() == reference.fingerprint()
    np.testing.assert_array_equal(_ids(data), _ids(reference))


def test_a_limit_too_small_for_the_window_is_refused_naming_the_window_that_fits(path):
    with pytest.raises(sf.MemoryLimitError) as excinfo:
        _pipeline(path).with_options(memory_limit=24 * 2**20).layout()
    message = str(excinfo.value)
    assert "window=" in message and "memory_limit" in message
    held = int(message.split("window=")[1].split(" ")[0])
    assert 1 <= held < FRAGMENTS
    smaller = sf.read_parquet(path).shuffle(seed=7, window=held).batch(1000).with_options(memory_limit=24 * 2**20)
    assert len(_ids(smaller)) == FRAGMENTS * ROWS_PER_FRAGMENT


def test_a_fragment_over_the_limit_is_refused_even_under_skip(path):
    """Skipping it would make the rows served depend on the machine's limit."""
    data = sf.read_parquet(path, on_error="skip").with_options(memory_limit=2**19)
    with pytest.raises(sf.MemoryLimitError) as excinfo:
        data.num_rows()
    assert "row group" in str(excinfo.value) and "memory_limit" in str(excinfo.value)
    assert data.report.entries == []
