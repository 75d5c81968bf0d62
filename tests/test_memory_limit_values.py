"""``with_options(memory_limit=...)`` takes what the CLI's ``--memory-limit`` takes, and refuses the rest.

Issue 28 item 5: ``memory_limit="1GiB"`` raised a raw ``ValueError: invalid
literal for int()``, and ``memory_limit=-1`` (or 0) was accepted, to fail
later as "fragments below -0 MiB / 2". A size with a unit is parsed by the
same function as the CLI's; anything else is an :class:`ArgumentError`
naming the value, raised by ``with_options`` itself.
"""

from __future__ import annotations

import numpy as np
import pytest

import streamfeed as sf
from streamfeed.errors import ArgumentError, StreamfeedError


@pytest.fixture
def dataset(pyarrow_file):
    return sf.read_parquet(pyarrow_file)


@pytest.mark.parametrize(
    ("limit", "size"),
    [
        ("512MiB", 512 * 2**20),
        ("1GiB", 2**30),
        ("1GB", 10**9),
        ("2G", 2 * 2**30),
        ("64 MiB", 64 * 2**20),
        ("536870912", 536870912),
        (256 * 2**20, 256 * 2**20),
        (np.int64(2**30), 2**30),
        (1e9, 10**9),
    ],
)
def test_sizes_with_units_are_taken_as_the_cli_takes_them(dataset, limit, size):
    configured = dataset.with_options(memory_limit=limit)
    assert configured.memory_limit == size
    assert configured.resolution.memory_limit == size


def test_the_cli_parses_sizes_with_the_same_function():
    from streamfeed import memory
    from streamfeed.commands import _options

    assert _options.parse_size("1GiB") == memory.parse_size("1GiB") == 2**30


@pytest.mark.parametrize("limit", [-1, 0, "-1GB", "0", "0MiB", "lots", "1XB", "", "1.5", 1.5, float("nan"), True])
def test_other_values_are_refused_naming_them(dataset, limit):
    with pytest.raises(ArgumentError) as caught:
        dataset.with_options(memory_limit=limit)
    error = caught.value
    assert isinstance(error, StreamfeedError) and isinstance(error, ValueError)
    assert "memory_limit" in str(error)
    assert repr(limit) in str(error)
    assert "512MiB" in str(error)  # says what it takes
