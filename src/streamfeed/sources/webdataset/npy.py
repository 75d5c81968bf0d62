"""A ``.npy`` member's bytes to an array, in the read threads, without ``ast``.

The header goes through ``sources/npy_header.py`` (``np.load``'s own
reader races between threads on CPython 3.11: see there). Plain dtypes
only: object and structured arrays are refused, so a shard never runs
code. The array is a read-only view on the member's bytes: the fragment
copies it into the column.
"""

from __future__ import annotations

import io
import math

import numpy as np

from ..npy_header import NpyError, read_header

__all__ = ["NpyError", "load_npy"]


def load_npy(data: bytes) -> np.ndarray:
    """The array ``np.save`` wrote into ``data``; :class:`NpyError` for anything else."""
    stream = io.BytesIO(data)
    dtype, shape, fortran = read_header(stream)
    if dtype.hasobject or dtype.names is not None or dtype.subdtype is not None:
        raise NpyError(f"dtype {dtype} is not a plain number, bool or fixed-width string dtype")
    start = stream.tell()
    count = math.prod(shape)  # Python ints: a stranger's shape cannot overflow into a match
    expected = count * dtype.itemsize
    if len(data) - start != expected:
        raise NpyError(f"shape {shape} of {dtype} needs {expected} data bytes, the member has {len(data) - start}")
    flat = np.frombuffer(data, dtype=dtype, count=count, offset=start)
    return flat.reshape(shape, order="F" if fortran else "C")
