"""splitmix64, vectorised: the one 64-bit mixer of the statistics' sketches and the quality report's row hashes.

Its finaliser is a bijection of ``uint64`` in which every input bit
changes about half of the output bits, which is what hash-keyed sampling
(``sketches.py``), HyperLogLog registers and row hashes
(``inspect/hashing.py``) need; NumPy's ``uint64`` arithmetic wraps, as
the algorithm expects.
"""

from __future__ import annotations

import numpy as np

_U = np.uint64
GOLDEN = _U(0x9E3779B97F4A7C15)  # splitmix64's increment: 2**64 / the golden ratio, odd


def mix64(x: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser."""
    with np.errstate(over="ignore"):
        x = (x ^ (x >> _U(30))) * _U(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> _U(27))) * _U(0x94D049BB133111EB)
        return x ^ (x >> _U(31))


def splitmix64(x: np.ndarray) -> np.ndarray:
    """The ``x``-th output of splitmix64 (the finaliser of ``x + GOLDEN``)."""
    with np.errstate(over="ignore"):
        return mix64(x + GOLDEN)
