"""Wide rows (images) in a shuffled unit: gathered from the chunks as read, one copy a row, the same rows.

``runtime/shuffle.UnitBuffer`` keeps a column of rows of ``WIDE_ROW_BYTES``
or more as its chunks and copies each batch row straight from its chunk
(issue 27: the unit's own copy was 7 % of a shuffled image epoch's CPU).
"""

from __future__ import annotations

import gc
import json
import threading
import weakref

import numpy as np
import pytest

from _unit_buffer import loaded_unit
from factories.images import images_class_folders
from streamfeed.core_ragged import Ragged
from streamfeed.runtime import shuffle
from streamfeed.runtime.shuffle import UnitBuffers

RNG = np.random.default_rng(11)


def _chunks(sizes: list[int], side: int = 160) -> list[dict[str, np.ndarray]]:
    chunks, first = [], 0
    for size in sizes:
        ident = np.arange(first, first + size)
        image = RNG.integers(0, 256, (size, side, side, 3), dtype=np.uint8)
        image[:, 0, 0, 0] = ident % 256
        chunks.append({"image": image, "label": ident.astype(np.int64), "weight": ident.astype(np.float32)})
        first += size
    return chunks


def test_a_wide_row_is_gathered_from_its_chunk_as_a_block_gather_would(monkeypatch: pytest.MonkeyPatch) -> None:
    chunks = _chunks([5, 17, 1, 9])
    assert chunks[0]["image"][:1].nbytes >= shuffle.WIDE_ROW_BYTES  # the case under test
    indices = RNG.permutation(32)
    wide = loaded_unit(chunks).gather(indices)
    monkeypatch.setattr(shuffle, "WIDE_ROW_BYTES", 1 << 40)  # every row into the unit's block, as before
    block = loaded_unit(chunks).gather(indices)
    everything = {name: np.concatenate([c[name] for c in chunks]) for name in chunks[0]}
    for name in ("image", "label", "weight"):
        assert wide[name].dtype == block[name].dtype and wide[name].shape == block[name].shape
        assert np.array_equal(wide[name], block[name])
        assert np.array_equal(wide[name], everything[name][indices])
        assert wide[name].flags.writeable
    assert wide["image"].flags.c_contiguous  # the 1-D columns are views of one gathered row block


def test_the_unit_does_not_copy_a_wide_row_before_its_batch() -> None:
    """Fails on the old code, which copied the chunk into the unit's block when it was appended."""
    chunks = _chunks([4, 4])
    buffer = loaded_unit(chunks)
    chunks[1]["image"][2] = 0  # after the append: seen by the gather only if the unit kept the chunk
    assert not buffer.gather(np.array([6]))["image"].any()
    assert buffer.gather(np.array([5]))["image"].any()


def test_a_released_unit_lets_go_of_the_chunks_it_kept() -> None:
    """Wide and variable-length columns are kept as chunks; giving the buffer back drops them (not at the next unit).

    Fails on the old code, which held a variable-length column's chunks until the buffer's next unit began.
    """
    pair, stop = UnitBuffers(), threading.Event()
    buffer = pair.acquire("epoch", stop)
    assert buffer is not None
    chunks = _chunks([3, 3])
    chunks[0]["tokens"] = Ragged.from_rows([np.arange(n) for n in (1, 2, 3)])
    chunks[1]["tokens"] = Ragged.from_rows([np.arange(n) for n in (4, 5, 6)])
    buffer.begin(chunks[0], capacity=6)
    for chunk in chunks:
        buffer.append(chunk)
    assert buffer.rows == 6  # not gathered: the ragged column is still its chunks as read
    watched = [weakref.ref(chunks[1]["image"]), weakref.ref(chunks[1]["tokens"].values)]
    pair.release(buffer)
    del chunks, chunk
    gc.collect()
    assert [ref() is None for ref in watched] == [True, True]


@pytest.mark.parametrize("wide", [False, True], ids=["block", "wide"])
def test_shuffled_image_epochs_and_resume_are_the_same_either_way(monkeypatch, tmp_path, wide: bool) -> None:
    """The image source's shuffled batches, and a resume from every batch boundary, with every row wide or none."""

    def epoch(rows_wide: bool) -> tuple[list[dict], list[dict]]:
        monkeypatch.setattr(shuffle, "WIDE_ROW_BYTES", 1 if rows_wide else 1 << 40)
        pipeline = images_class_folders(tmp_path / str(rows_wide))[0].shuffle(5, window=3).batch(37)
        batches, states = [], [pipeline.initial_state(2)]
        with pipeline.iter_epoch(2) as it:
            for batch in it:
                batches.append({name: np.array(column, copy=True) for name, column in batch.items()})
                states.append(json.loads(json.dumps(it.get_state())))
        for done, state in enumerate(states[:-1]):
            rest = [{name: np.array(c, copy=True) for name, c in b.items()} for b in pipeline.iter_epoch(state=state)]
            assert len(rest) == len(batches) - done
            for got, want in zip(rest, batches[done:]):
                assert all(np.array_equal(got[name], want[name]) for name in ("image", "id", "label"))
        return batches, states

    served, _ = epoch(wide)
    reference, _ = epoch(not wide)
    assert len(served) == len(reference) >= 3
    for got, want in zip(served, reference):
        for name in ("image", "id", "label"):
            assert np.array_equal(got[name], want[name])
    ids = np.concatenate([batch["id"] for batch in served])
    assert sorted(ids.tolist()) == list(range(270))
