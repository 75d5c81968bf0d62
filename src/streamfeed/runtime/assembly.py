"""Where the model's feature matrix is built: once, in the buffer the rows are finally kept in.

Keras takes a model's numeric features as one ``(rows, features)``
matrix; the sources give one 1-D column per feature. Building the matrix
is a transpose, the costliest copy of a row (0.056 CPU s per million rows
of 32 float32, measured: more than a third of what decoding the Parquet
costs). The packing names the columns (:class:`MatrixColumns`) and the
runtime writes them side by side where the rows are kept: in the read
threads for an unshuffled epoch (the batches are views of it), straight
into the unit buffer for a shuffled one (``runtime/shuffle.py``), which
once built the matrix per fragment and then copied it into the unit buffer
(0.02 CPU s per million rows more, measured), and after the per-batch ops
when the packing runs per batch.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..core import Chunk, chunk_len, fragment_array, interleave


@dataclass(frozen=True)
class MatrixColumns:
    """1-D columns of one dtype that the runtime writes side by side into the matrix ``name``.

    A chunk without them (the packing built ``name`` itself: a feature of
    several values per row, an image) is left as it is.
    """

    name: str
    columns: tuple[str, ...]

    def present(self, chunk: Chunk) -> bool:
        """Whether ``chunk`` holds the columns (then all of them, 1-D and of one dtype)."""
        return bool(self.columns) and self.columns[0] in chunk

    def assemble(self, chunk: Chunk) -> Chunk:
        """``chunk`` with the columns replaced by the matrix (a new array), in the columns' place."""
        if not self.present(chunk):
            return chunk
        parts = [chunk[name] for name in self.columns]
        matrix = interleave(parts, fragment_array((chunk_len(chunk), len(parts)), parts[0].dtype))
        return self.replaced(chunk, matrix)

    def replaced(self, chunk: Chunk, matrix: np.ndarray) -> Chunk:
        """``chunk`` with the columns replaced by ``matrix`` under ``name`` (where the first column was)."""
        out: Chunk = {}
        members = set(self.columns)
        for key, value in chunk.items():
            if key == self.columns[0]:
                out[self.name] = matrix
            elif key not in members:
                out[key] = value
        return out
