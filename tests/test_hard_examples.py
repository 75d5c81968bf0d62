"""The hard-example sampler and its score table, without Keras (the miner's real fit: tests/keras).

The data: 4000 rows in 20 row groups, ids 0..3999. Scores are written
into the sampler's table directly, as the miner would, with a "hard" set
(ids < 400) at a high loss.
"""

from __future__ import annotations

import dataclasses
import inspect

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import streamfeed as sf
from streamfeed.errors import ArgumentError, SchemaError, StateError
from streamfeed.hard_examples import HardExampleSampler, RowScores, systematic_draw

ROWS, GROUP, HARD = 4000, 200, 400


@pytest.fixture(scope="module")
def path(tmp_path_factory):
    target = tmp_path_factory.mktemp("hard") / "data.parquet"
    ids = np.arange(ROWS, dtype=np.int64)
    pq.write_table(pa.table({"id": ids, "x": ids * 0.5, "y": ids % 3}), target, row_group_size=GROUP)
    return target


def served(dataset, epoch: int = 0, state=None) -> np.ndarray:
    with dataset.batch(128).iter_epoch(epoch, state=state) as stream:
        return np.concatenate([b["id"] for b in stream])


def scored(dataset, hard_loss: float = 4.0, easy_loss: float = 0.1, epoch: int = 1):
    """Writes a loss per row, as the miner does after epoch ``epoch - 1``, and freezes them for ``epoch``."""
    ids = np.arange(ROWS)
    dataset.sampler.scores.record(ids, np.where(ids < HARD, hard_loss, easy_loss))
    dataset.sampler.scores.freeze(epoch)
    return dataset


def test_an_epoch_without_scores_serves_every_row_once(path):
    hard = sf.read_parquet(path).shuffle(seed=1).hard_examples("id")
    first = served(hard)
    assert len(first) == ROWS and len(np.unique(first)) == ROWS
    assert not np.array_equal(first, np.arange(ROWS))  # in a seeded order


@pytest.mark.parametrize("samples", [None, 1000, 9999])
def test_epoch_length_is_exact_with_or_without_scores(path, samples):
    hard = scored(sf.read_parquet(path).shuffle(seed=1).hard_examples("id", samples_per_epoch=samples))
    for epoch in (0, 1, 2):
        assert len(served(hard, epoch)) == (samples or ROWS)
        assert hard.num_rows(epoch) == (samples or ROWS)


def test_hard_rows_are_drawn_by_their_loss_and_every_row_keeps_its_floor(path):
    floor = 0.2
    hard = scored(sf.read_parquet(path).shuffle(seed=1, window=20).hard_examples("id", floor=floor))
    counts = np.bincount(served(hard, 1), minlength=ROWS)
    # one unit of all 20 groups: mean loss 0.49, so a hard row's weight is 0.2 + 0.8 * 4 / 0.49 = 6.73,
    # an easy one's 0.2 + 0.8 * 0.1 / 0.49 = 0.363; systematic: each is drawn floor or ceil of that
    hard_weight, easy_weight = floor + (1 - floor) * 4 / 0.49, floor + (1 - floor) * 0.1 / 0.49
    assert set(np.unique(counts[:HARD])) <= {int(np.floor(hard_weight)), int(np.ceil(hard_weight))}
    assert set(np.unique(counts[HARD:])) <= {0, 1}
    assert abs(np.mean(counts[HARD:] > 0) - easy_weight) < 0.01  # drawn with probability e_i, at least `floor`
    assert np.mean(counts[HARD:] > 0) >= floor


def test_floor_one_is_uniform_whatever_the_scores(path):
    plain = scored(sf.read_parquet(path).shuffle(seed=1).hard_examples("id", floor=1.0))
    assert np.array_equal(np.sort(served(plain, 1)), np.arange(ROWS))


@pytest.mark.parametrize(
    ("rule", "options", "hard_share"),
    [
        # quantile 0.75 of the losses is the easy loss (90 % of rows): every row is at or above it, all weigh 1
        ("quantile", {"quantile": 0.75}, HARD / ROWS),
        # quantile 0.95: only hard rows score 1; their weight 0.2 + 0.8 * 1 / 0.1 = 8.2, 8.2 * 400 / 4000
        ("quantile", {"quantile": 0.95}, 0.82),
        # a softmax of the losses at temperature 1: hard rows e^0 = 1, easy e^-3.9; mean 0.1 + 0.9 * 0.0202
        ("temperature", {"temperature": 1.0}, 0.1 * (0.2 + 0.8 / (0.1 + 0.9 * np.exp(-3.9)))),
    ],
)
def test_each_rule_weights_as_documented(path, rule, options, hard_share):
    hard = scored(sf.read_parquet(path).shuffle(seed=1, window=20).hard_examples("id", rule=rule, **options))
    assert abs(np.mean(served(hard, 1) < HARD) - hard_share) < 0.005


def test_the_draw_is_seeded_and_machine_settings_change_nothing(path):
    def run(seed: int, epoch: int = 1, **options) -> np.ndarray:
        dataset = sf.read_parquet(path).with_options(**options).shuffle(seed=seed, window=4)
        return served(scored(dataset.hard_examples("id")), epoch)

    first = run(5)
    assert np.array_equal(first, run(5))
    assert np.array_equal(first, run(5, read_threads=1))
    assert np.array_equal(first, run(5, read_threads=4, memory_limit="64MiB"))
    assert not np.array_equal(first, run(6))


def test_an_epoch_is_drawn_from_the_table_frozen_for_it_not_from_later_writes(path):
    hard = scored(sf.read_parquet(path).shuffle(seed=1).hard_examples("id"))
    before = served(hard, 1)
    hard.sampler.scores.record(np.arange(ROWS), np.full(ROWS, 9.0))  # written during epoch 1, for epoch 2
    assert np.array_equal(served(hard, 1), before)
    assert np.array_equal(np.sort(served(hard, 0)), np.arange(ROWS))  # epoch 0: no table, every row once


def test_resume_from_a_saved_position_equals_the_uninterrupted_epoch(path):
    hard = scored(sf.read_parquet(path).shuffle(seed=2, window=4).hard_examples("id", samples_per_epoch=3333))
    batched = hard.batch(128)
    full = served(hard, 1)
    for stop_after in (1, 7, 25):
        with batched.iter_epoch(1) as stream:
            for _ in range(stop_after):
                next(stream)
            state = stream.get_state()
        assert np.array_equal(served(hard, state=state), full[stop_after * 128 :]), stop_after


def test_every_setting_is_in_the_fingerprint(path):
    """A state saved under one setting is refused under any other: enumerated from the sampler's fields."""
    base = {
        "rule": "quantile",
        "floor": 0.2,
        "quantile": 0.75,
        "temperature": 1.0,
        "max_rows": 10_000,
        "smoothing": 0.5,
    }
    changed = {
        "ids": "x",
        "rule": "temperature",
        "floor": 0.3,
        "quantile": 0.5,
        "temperature": 2.0,
        "samples_per_epoch": 100,
        "seed": 9,
        "scores": [{"max_rows": 20_000}, {"smoothing": 0.1}],  # the table's own settings
    }
    fields = {f.name for f in dataclasses.fields(HardExampleSampler) if not f.name.startswith("_")}
    assert fields == set(changed), "a new sampler field must be fingerprinted and listed here"
    table_settings = set(inspect.signature(RowScores).parameters)
    assert table_settings == {key for change in changed["scores"] for key in change}
    original = sf.read_parquet(path).shuffle(seed=1).hard_examples("id", seed=4, **base).batch(100)
    with original.iter_epoch(0) as stream:
        next(stream)
        state = stream.get_state()
    for name, value in changed.items():
        for change in value if isinstance(value, list) else [{name: value}]:
            options = {"ids": "id", "seed": 4, **base, **change}
            other = sf.read_parquet(path).shuffle(seed=1).hard_examples(**options).batch(100)
            with pytest.raises(StateError):
                other.iter_epoch(state=state)


def test_refusals_name_what_to_do(path):
    plain = sf.read_parquet(path)
    bad = ({"rule": "focal"}, {"floor": 0.0}, {"floor": 1.5}, {"quantile": 1.0}, {"temperature": 0}, {"smoothing": 1})
    for options in bad:
        with pytest.raises(ArgumentError, match="hard_examples"):
            plain.hard_examples("id", **options)
    with pytest.raises(ArgumentError, match="once"):
        plain.hard_examples("id").hard_examples("id")
    with pytest.raises(SchemaError, match="'nope'"):
        served(plain.hard_examples("nope"))


def test_the_table_keeps_the_latest_loss_of_the_smallest_hashes_within_max_rows():
    scores = RowScores(max_rows=100)
    scores.record(np.arange(1000), np.full(1000, 1.0))
    scores.record(np.arange(10), np.full(10, 7.0))  # the highest measurement of a row in an epoch counts
    table = scores.freeze(1)
    assert len(table.hashes) == 100 and np.all(np.diff(table.hashes.astype(np.float64)) > 0)
    kept = table.lookup(np.arange(1000))
    assert np.count_nonzero(~np.isnan(kept)) == 100
    assert set(kept[:10][~np.isnan(kept[:10])]) <= {7.0}
    # rows beyond the cut are not collected, and what is collected is compacted: memory stays bounded
    unbounded = RowScores(max_rows=None)
    for start in range(0, 100_000, 1000):
        batch = np.arange(start, start + 1000)
        scores.record(batch, batch * 0.5)
        unbounded.record(batch, batch * 0.5)
        assert scores.state(1)["pending"]["hashes"].__len__() <= 200
    again, everything = scores.freeze(2), unbounded.freeze(2)
    assert len(again.hashes) == 100
    # and the table is what an unbounded one would hold for its 100 smallest hashes (from epoch 1's or 2's)
    smallest = np.union1d(table.hashes, everything.hashes)[:100]
    assert np.array_equal(again.hashes, smallest)
    newer = np.isin(smallest, everything.hashes)
    assert np.array_equal(again.losses[newer], everything.losses[np.isin(everything.hashes, smallest)])


def test_a_score_is_a_moving_average_of_each_epochs_latest_loss():
    scores = RowScores(max_rows=None, smoothing=0.7)
    scores.record(np.arange(3), np.array([1.0, 2.0, 9.0]))
    scores.record(np.arange(1), np.array([4.0]))  # within an epoch the highest counts
    scores.record(np.arange(1), np.array([0.5]))
    first = scores.freeze(1)
    assert first.lookup(np.arange(4)).tolist()[:3] == [4.0, 2.0, 9.0]
    scores.record(np.array([0, 3]), np.array([1.0, 5.0]))  # row 1 and 2 not measured in epoch 1: kept
    second = scores.freeze(2).lookup(np.arange(4))
    np.testing.assert_allclose(second, [0.7 * 4.0 + 0.3 * 1.0, 2.0, 9.0, 5.0])


def test_the_scores_state_round_trips_exactly_and_refuses_a_malformed_one():
    scores = RowScores(max_rows=None)
    scores.record(np.arange(50), np.linspace(0, 1, 50))
    scores.freeze(3)
    scores.record(np.arange(5), np.full(5, np.pi))
    state = scores.state(3)
    copy = RowScores(max_rows=None)
    copy.restore(state)
    assert copy.state(3) == state
    assert np.array_equal(copy.freeze(4).losses, scores.freeze(4).losses)
    with pytest.raises(StateError, match="max_rows"):
        RowScores(max_rows=10).restore(state)
    with pytest.raises(StateError, match="smoothing"):
        RowScores(max_rows=None, smoothing=0.5).restore(state)
    broken = {**state, "table": {**state["table"], "hashes": state["table"]["hashes"][::-1]}}
    with pytest.raises(StateError, match="malformed"):
        RowScores(max_rows=None).restore(broken)


def test_systematic_draw_is_within_one_of_each_expectation():
    rng = np.random.default_rng(0)
    weights = rng.exponential(size=5000)
    for samples in (100, 5000, 20_000):
        counts = np.bincount(systematic_draw(weights, samples, np.random.default_rng(1)), minlength=5000)
        expected = samples * weights / weights.sum()
        assert counts.sum() == samples
        assert np.all(counts >= np.floor(expected)) and np.all(counts <= np.ceil(expected))


@pytest.mark.parametrize("sampler", ["hard", "balance"])
def test_sharded_draws_make_the_same_global_batches_for_any_worker_count(path, sampler):
    """Lanes cut the epoch as drawn: every worker draws the units it overlaps as the unsharded epoch does."""
    from _stats_reference import stats_of

    base = sf.read_parquet(path).shuffle(seed=2, window=4)
    if sampler == "hard":
        drawn = scored(base.hard_examples("id", samples_per_epoch=3000))
    else:
        drawn = base.balance("y", stats=stats_of(base, categorical=["y"], label="y"), samples_per_epoch=3000)

    def global_ids(count: int, epoch: int = 1) -> list[np.ndarray]:
        per_worker = []
        for index in range(count):
            with drawn.shard(index, count, lanes=4).batch(128 // count).iter_epoch(epoch) as stream:
                per_worker.append([b["id"].copy() for b in stream])
        assert len({len(batches) for batches in per_worker}) == 1  # equal steps on every worker
        return [np.concatenate([batches[t] for batches in per_worker]) for t in range(len(per_worker[0]))]

    one = global_ids(1)
    assert sum(len(ids) for ids in one) == 3000  # 3000 rows in 4 lanes of 750
    for count in (2, 4):
        assert all(np.array_equal(a, b) for a, b in zip(global_ids(count), one, strict=True)), count
    # and the lanes hold the epoch as the unsharded pipeline draws it, cut into four
    unsharded = served(drawn, 1)
    for lane in range(4):
        rows = np.concatenate([ids[lane * len(ids) // 4 : (lane + 1) * len(ids) // 4] for ids in one])
        assert np.array_equal(rows, unsharded[lane * 750 : (lane + 1) * 750]), lane
