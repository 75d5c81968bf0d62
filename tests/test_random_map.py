"""``Dataset.random_map``: each row's draws depend on (seed, epoch, row), never on how it is read.

Every comparison matches rows by their ``id`` column: a row must draw the
same values for 1 or 4 read threads, two memory limits, shuffled or not,
sharded two ways or not, resumed mid-epoch or not; and other values in
another epoch or under another seed.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import streamfeed as sf
from streamfeed.errors import ArgumentError, UserFunctionError
from streamfeed.runtime.batch import PAD_MASK
from streamfeed.runtime.row_random import RowRandom

ROWS = 1037


def write_parquet(folder: Path) -> Path:
    """Two files, in row groups of 100 rows: 11 fragments, the last of 37 rows; ``id`` is the row's index."""
    folder.mkdir(parents=True, exist_ok=True)
    ids = np.arange(ROWS, dtype=np.int64)
    pq.write_table(pa.table({"id": ids[:600], "x": ids[:600] / 2.0}), folder / "a.parquet", row_group_size=100)
    pq.write_table(pa.table({"id": ids[600:], "x": ids[600:] / 2.0}), folder / "b.parquet", row_group_size=100)
    return folder


def draw(chunk: dict, rng: RowRandom) -> dict:
    """Four kinds of draw and the rng's own row index, so that a test sees every one."""
    return {
        **chunk,
        "u": rng.uniform(-1.0, 1.0),
        "n": rng.normal(size=(3,)),
        "k": rng.integers(0, 1000, size=2),
        "b": rng.bernoulli(0.3),
        "row": rng.rows,
    }


@pytest.fixture
def data(tmp_path: Path) -> Path:
    return write_parquet(tmp_path / "data")


def served(ds: sf.Dataset, epoch: int = 0, state: dict | None = None) -> list[dict]:
    stream = ds.iter_epoch(epoch) if state is None else ds.iter_epoch(state=state)
    with stream as it:
        return [{key: np.array(column, copy=True) for key, column in batch.items()} for batch in it]


def by_id(batches: list[dict]) -> dict[int, tuple]:
    """Each row's draws under its id; a row seen twice must not be (every test serves each row once)."""
    out: dict[int, tuple] = {}
    for batch in batches:
        for i, ident in enumerate(batch["id"].tolist()):
            if PAD_MASK in batch and batch[PAD_MASK][i] == 0.0:  # a sharded remainder's filler, weight 0
                continue
            assert ident not in out, f"row {ident} served twice"
            values = (batch["u"][i], *batch["n"][i], *batch["k"][i], batch["b"][i])
            out[ident] = tuple(float(v) for v in values)
    return out


def randomised(data: Path, seed: int = 5) -> sf.Dataset:
    return sf.read_parquet(data).random_map(draw, seed=seed)


def test_the_rng_is_keyed_on_the_rows_index_in_the_source(data):
    batches = served(randomised(data).batch(64))
    for batch in batches:
        np.testing.assert_array_equal(batch["row"], batch["id"])  # ids are the rows' indices here
    assert len(by_id(batches)) == ROWS


def test_threads_and_memory_limits_do_not_change_a_rows_draws(data):
    reference = by_id(served(randomised(data).with_options(read_threads=1).batch(64)))
    assert len(reference) == ROWS
    for options in ({"read_threads": 4}, {"read_threads": 3, "memory_limit": "64MiB"}, {"memory_limit": "2GiB"}):
        assert by_id(served(randomised(data).with_options(**options).batch(64))) == reference, options


def test_shuffled_rows_draw_what_they_draw_unshuffled(data):
    plain = by_id(served(randomised(data).batch(50)))
    shuffled_batches = served(randomised(data).shuffle(11, window=3).batch(50))
    order = np.concatenate([batch["id"] for batch in shuffled_batches])
    assert not np.array_equal(order, np.arange(ROWS))  # the rows did move
    assert by_id(shuffled_batches) == plain


def test_shards_draw_what_the_unsharded_dataset_draws(data):
    whole = by_id(served(randomised(data).shuffle(3).batch(64), epoch=1))
    parts: dict[int, tuple] = {}
    for index in range(2):
        part = by_id(served(randomised(data).shuffle(3).shard(index, 2, remainder="pad").batch(32), epoch=1))
        assert not set(part) & set(parts), "a row served by both shards"
        parts.update(part)
    assert set(parts) == set(whole)
    assert parts == whole


def test_a_resumed_epoch_draws_what_an_uninterrupted_one_draws(data):
    ds = randomised(data).shuffle(9, window=2).batch(40)
    full = served(ds, epoch=2)
    with ds.iter_epoch(2) as it:
        head = [{key: np.array(column, copy=True) for key, column in next(it).items()} for _ in range(7)]
        state = it.get_state()
    tail = served(ds, state=state)
    resumed = head + tail
    assert [b["id"].tolist() for b in resumed] == [b["id"].tolist() for b in full]
    assert by_id(resumed) == by_id(full)


def test_draws_change_with_the_epoch_and_the_seed_but_not_with_the_version(data):
    first = by_id(served(randomised(data).batch(64), epoch=0))
    second = by_id(served(randomised(data).batch(64), epoch=1))
    reseeded = by_id(served(randomised(data, seed=6).batch(64), epoch=0))
    versioned = by_id(served(sf.read_parquet(data).random_map(draw, seed=5, version="2").batch(64)))
    assert set(first) == set(second) == set(reseeded) == set(range(ROWS))
    for other in (second, reseeded):
        differing = sum(first[i][0] != other[i][0] for i in first)
        assert differing == ROWS  # a float64 in [-1, 1): a repeat would be a 2**-53 chance
    assert versioned == first  # a version names the code's revision for the fingerprint only


def test_two_random_maps_of_one_seed_draw_different_values(data):
    def second(chunk: dict, rng: RowRandom) -> dict:
        return {**chunk, "v": rng.uniform(-1.0, 1.0)}

    batches = served(sf.read_parquet(data).random_map(draw, seed=1).random_map(second, seed=1).batch(100))
    u = np.concatenate([b["u"] for b in batches])
    v = np.concatenate([b["v"] for b in batches])
    assert not np.any(u == v)


def test_the_draws_look_like_their_distributions(data):
    rows = served(randomised(data).batch(ROWS))
    (batch,) = rows
    assert -1.0 <= batch["u"].min() and batch["u"].max() < 1.0 and abs(batch["u"].mean()) < 0.1
    assert abs(batch["n"].mean()) < 0.1 and abs(batch["n"].std() - 1.0) < 0.1
    assert batch["k"].min() >= 0 and batch["k"].max() < 1000 and len(np.unique(batch["k"])) > 600
    assert batch["b"].dtype == bool and 0.25 < batch["b"].mean() < 0.35


def test_seed_and_version_are_in_the_fingerprint(data):
    one, other = randomised(data, seed=1), randomised(data, seed=2)
    assert one.fingerprint() != other.fingerprint()
    assert randomised(data, seed=1).fingerprint() == one.fingerprint()
    saved = served_state(one.batch(100))
    with pytest.raises(sf.errors.StateError):
        other.batch(100).iter_epoch(state=saved)


def served_state(ds: sf.Dataset) -> dict:
    with ds.iter_epoch(0) as it:
        next(it)
        return it.get_state()


def test_random_map_after_batch_is_refused(data):
    with pytest.raises(ArgumentError, match=r"random_map\(\) after batch\(\)"):
        sf.read_parquet(data).batch(10).random_map(draw)


@pytest.mark.parametrize("seed", [-1, 2**64, 1.5, True, "3"])
def test_an_invalid_seed_is_refused(data, seed):
    with pytest.raises(ArgumentError, match="Invalid random_map seed"):
        sf.read_parquet(data).random_map(draw, seed=seed)


def test_a_failing_function_names_itself_as_user_code(data):
    def broken(chunk: dict, rng: RowRandom) -> dict:
        raise ValueError("boom")

    with pytest.raises(UserFunctionError, match="broken"):
        served(sf.read_parquet(data).random_map(broken).batch(10))


def test_a_function_changing_the_row_count_is_refused(data):
    def halves(chunk: dict, rng: RowRandom) -> dict:
        return {key: column[::2] for key, column in chunk.items()}

    with pytest.raises(UserFunctionError, match="changed the number of rows"):
        served(sf.read_parquet(data).random_map(halves).batch(10))


def test_after_a_filter_rows_are_keyed_by_their_place_among_the_kept_rows(data):
    def odd(chunk: dict) -> np.ndarray:
        return chunk["id"] % 2 == 1

    ds = sf.read_parquet(data).filter(odd).random_map(draw, seed=5)
    assert len(ds.batch(64)) == -(-(ROWS // 2) // 64)  # the counting pass runs the random op too
    one = served(ds.with_options(read_threads=1).batch(64))
    four = served(ds.with_options(read_threads=4).shuffle(2).batch(64))
    assert by_id(one) == by_id(four) and set(by_id(one)) == set(range(1, ROWS, 2))
    rows = np.concatenate([batch["row"] for batch in one])
    ids = np.concatenate([batch["id"] for batch in one])
    # the fragment's first row plus the place among its kept rows: fragments of 100 rows keep 50 each
    np.testing.assert_array_equal(rows, (ids // 100) * 100 + (ids % 100) // 2)
