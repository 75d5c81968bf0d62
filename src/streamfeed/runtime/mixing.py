"""splitmix64, vectorised: the one 64-bit mixer of the statistics' sketches, the quality report's row hashes
and ``random_map``'s per-row draws (``runtime/row_random.py``; here, below them all, so the runtime can use it).

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
    """splitmix64's finaliser (a new array; ``x`` is left as it is)."""
    out = _mix_in_place(np.array(x, dtype=np.uint64))
    return out if out.ndim else out[()]


def splitmix64(x: np.ndarray, *, overwrite: bool = False) -> np.ndarray:
    """The ``x``-th output of splitmix64 (the finaliser of ``x + GOLDEN``); ``overwrite``: computed in
    ``x`` itself (a ``uint64`` array the caller no longer needs), without a copy."""
    out = x if overwrite else np.array(x, dtype=np.uint64)
    with np.errstate(over="ignore"):
        out += GOLDEN
    out = _mix_in_place(out)
    return out if out.ndim else out[()]


def _mix_in_place(x: np.ndarray) -> np.ndarray:
    """The finaliser computed in ``x`` with one scratch array: two arrays where the expressions
    made ten, each a fresh allocation the kernel maps page by page (12 -> 7 ns a value measured)."""
    scratch = np.empty_like(x)
    with np.errstate(over="ignore"):
        for shift, factor in ((30, 0xBF58476D1CE4E5B9), (27, 0x94D049BB133111EB), (31, None)):
            np.right_shift(x, _U(shift), out=scratch)
            x ^= scratch
            if factor is not None:
                x *= _U(factor)
    return x
