"""The unshuffled batch path: what the batcher hands out, and that it stays the user's.

A batch inside one incoming chunk is a view of it (no copy); a batch that
spans chunks is one copy; a padded batch carries its mask in a dict of its
own, leaving the incoming chunk as it was. Batches of an epoch stay valid
(and unchanged) after later batches are produced.
"""

from __future__ import annotations

import h5py
import numpy as np

from streamfeed.readers import read_hdf5
from streamfeed.runtime.batch import PAD_MASK, Batcher


def _chunk(start: int, rows: int) -> dict[str, np.ndarray]:
    ids = np.arange(start, start + rows)
    return {"id": ids, "x": np.stack([ids, ids * 10], axis=1).astype(np.float32)}


def test_batches_inside_a_chunk_are_views_and_a_spanning_batch_is_a_copy():
    first, second = _chunk(0, 10), _chunk(10, 6)
    batcher = Batcher(4, "keep")
    batches = [*batcher.add(first, 0, 0, 16), *batcher.add(second, 0, 10, 16), *batcher.finish()]
    assert [b["id"].tolist() for b, _ in batches] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11], [12, 13, 14, 15]]
    assert [(p.unit, p.offset) for _, p in batches] == [(0, 4), (0, 8), (0, 12), (1, 0)]
    assert np.shares_memory(batches[0][0]["x"], first["x"]) and np.shares_memory(batches[1][0]["id"], first["id"])
    assert not np.shares_memory(batches[2][0]["x"], first["x"]) and not np.shares_memory(
        batches[2][0]["x"], second["x"]
    )
    assert np.shares_memory(batches[3][0]["x"], second["x"])


def test_padded_batches_carry_the_mask_and_leave_the_chunk_as_it_was():
    whole = _chunk(0, 4)  # exactly one batch: handed out whole
    batcher = Batcher(4, "pad")
    ((batch, position),) = list(batcher.add(whole, 0, 0, 4))
    assert sorted(whole) == ["id", "x"], "the incoming chunk gained a column"
    np.testing.assert_array_equal(batch[PAD_MASK], np.ones(4, dtype=np.float32))
    assert np.shares_memory(batch["x"], whole["x"]) and (position.unit, position.offset) == (1, 0)
    batcher = Batcher(4, "pad")
    batches = [*batcher.add(_chunk(0, 6), 0, 0, 6), *batcher.finish()]
    np.testing.assert_array_equal(batches[0][0][PAD_MASK], np.ones(4, dtype=np.float32))
    np.testing.assert_array_equal(batches[1][0][PAD_MASK], np.array([1, 1, 0, 0], dtype=np.float32))
    assert batches[1][0]["id"].tolist() == [4, 5, 4, 5]


def test_batches_kept_by_the_user_stay_valid_after_the_epoch(tmp_path):
    rows = 3000
    with h5py.File(tmp_path / "data.h5", "w") as f:
        f.create_dataset("x", data=np.arange(rows * 3, dtype=np.float32).reshape(rows, 3), chunks=(128, 3))
        f.create_dataset("id", data=np.arange(rows), chunks=(128,))
    ds = read_hdf5(tmp_path / "data.h5", rows_per_fragment=256).batch(100)
    with ds.iter_epoch(0) as it:
        kept = list(it)  # every batch held while the later ones are produced
    ids = np.concatenate([b["id"] for b in kept])
    np.testing.assert_array_equal(ids, np.arange(rows))
    np.testing.assert_array_equal(np.concatenate([b["x"] for b in kept]), np.arange(rows * 3).reshape(rows, 3))
    assert all(b["x"].flags.writeable for b in kept)  # the user's to change, as before
