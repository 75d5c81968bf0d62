"""A unit buffer loaded with given chunks, for the tests of ``runtime/shuffle.UnitBuffer``'s column layouts."""

from __future__ import annotations

import numpy as np

from streamfeed.runtime.shuffle import UnitBuffer


def loaded_unit(chunks: list[dict[str, np.ndarray]]) -> UnitBuffer:
    """A buffer holding ``chunks`` as one unit, begun with room for exactly their rows."""
    buffer = UnitBuffer()
    buffer.begin(chunks[0], capacity=sum(len(next(iter(chunk.values()))) for chunk in chunks))
    for chunk in chunks:
        buffer.append(chunk)
    return buffer
