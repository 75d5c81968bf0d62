"""Vocabularies: exact with counts up to the cap, a frequent-items sketch beyond it, types kept."""

from __future__ import annotations

import collections

import numpy as np

from streamfeed.stats.vocabulary import Vocabulary, count_values


def _vocabulary(chunks, cap):
    total = Vocabulary(cap)
    for chunk in chunks:
        part = Vocabulary(cap)
        part.add(*count_values(chunk))
        total.merge(part)
    return total


def test_exact_below_the_cap_with_counts_and_order():
    rng = np.random.default_rng(0)
    words = np.array([f"w{i}" for i in rng.zipf(1.5, 5000) % 50], dtype=object)
    vocabulary = _vocabulary(np.array_split(words, 9), cap=50)
    truth = collections.Counter(words.tolist())
    assert vocabulary.exact and vocabulary.distinct() == len(truth)
    top = vocabulary.top()
    assert dict(top) == dict(truth)
    assert top == sorted(truth.items(), key=lambda item: (-item[1], item[0]))


def test_beyond_the_cap_a_sketch_keeps_the_heavy_hitters_and_reports_it():
    rng = np.random.default_rng(1)
    heavy = np.repeat(np.arange(5), 2000)
    tail = rng.permutation(20_000) + 100  # 20 000 values seen once
    values = rng.permutation(np.concatenate([heavy, tail]))
    vocabulary = _vocabulary(np.array_split(values, 7), cap=100)
    assert not vocabulary.exact
    top = vocabulary.top()
    assert len(top) <= 100
    assert [value for value, _ in top[:5]] == [0, 1, 2, 3, 4]
    assert all(isinstance(value, int) for value, _ in top)
    for _, count in top[:5]:
        assert abs(count - 2000) <= vocabulary.total * 0.75 / 2**8  # the sketch's a-priori error
    assert abs(vocabulary.distinct() - 20_005) < 0.1 * 20_005


def test_value_types_survive_bytes_bools_and_ints():
    for values, kind in (
        (np.array([b"a", b"b", b"a"]), bytes),
        (np.array([True, False, True]), bool),
        (np.array([3, 1, 3]), int),
    ):
        vocabulary = _vocabulary([values], cap=10)
        top = vocabulary.top()
        assert all(type(value) is kind for value, _ in top)
        assert top[0][1] == 2
