"""Which builders combine: each refused combination of ``Dataset`` builders and what its message says, in one place.

A combination is refused when its meaning would be unclear or its
guarantees would break (equal steps per worker, exact epoch lengths), never
silently reinterpreted.
"""

from __future__ import annotations

from ..errors import ArgumentError, describe


def one_sampler() -> ArgumentError:
    """The refusal of a second ``balance()`` or ``hard_examples()``: one draw decides an epoch's rows."""
    return ArgumentError(
        describe(
            "balance() and hard_examples() draw the epoch's rows: a dataset takes one of them, once",
            fix="call one of them once (balance's class weights can go to fit(class_weight=) instead)",
        )
    )


def buckets_not_sharded() -> ArgumentError:
    """The refusal of ``shard()`` with ``batch(bucket=...)`` (either order)."""
    return ArgumentError(
        describe(
            "batch(bucket=...) cannot be combined with shard()",
            expected="a bucketed dataset on one worker, or a sharded dataset batched by batch_size",
            found="shard() and batch(bucket=...)",
            fix="bucket without sharding: the workers' buckets would fill at different steps, so their step "
            "counts would differ",
        )
    )


def buckets_not_balanced() -> ArgumentError:
    """The refusal of ``balance()`` with ``batch(bucket=...)`` (either order)."""
    return ArgumentError(
        describe(
            "batch(bucket=...) cannot be combined with balance()",
            expected="a bucketed or a balanced dataset, not both",
            fix="balance without bucketing: a balanced draw changes the rows of each epoch, and so each bucket's steps",
        )
    )


def windows_after_ops() -> ArgumentError:
    """The refusal of ``windows()`` after ``map``, ``filter``, ``batch`` or ``balance``: it windows source rows."""
    return ArgumentError(
        describe(
            "windows() after map(), filter(), batch() or balance()",
            expected="windows() right after reading: it windows the source's rows",
            fix="call .windows(...) first, then map/filter/batch the windows",
        )
    )
