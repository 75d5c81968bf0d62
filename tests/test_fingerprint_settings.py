"""A reader setting that changes the rows changes the fingerprint: saved states are refused and the cache is not reused.

Issue 22, item 1: CSV ``column_types``, ``encoding`` and ``null_values``
were in neither the fingerprint nor the conversion cache's key, so after
changing one the cache served the other setting's rows (int64 for float32,
other characters, strings for fill values) and saved states were accepted;
changing CSV ``fragment_bytes`` or image ``fragment_size`` made the cache
serve other fragments' rows (some twice, some never). The data here is
written by the real writers (Python's text files, Pillow).
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import numpy as np
import pytest
from PIL import Image

import streamfeed as sf

ROWS = 400


def _csv(tmp_path: Path) -> Path:
    path = tmp_path / "d.csv"
    letters = ["\x80" if i % 5 == 0 else "e" for i in range(ROWS)]  # byte 0x80: "€" in cp1252, U+0080 in latin-1
    values = [-1 if i % 4 == 0 else i for i in range(ROWS)]
    lines = [f"{i},{value},{letter}" for i, value, letter in zip(range(ROWS), values, letters)]
    path.write_bytes(("id,a,s\n" + "\n".join(lines) + "\n").encode("latin-1"))
    return path


def _read_csv(path: Path, **settings) -> sf.Dataset:
    return sf.read_csv(path, count_cache=False, fragment_bytes=1000, **{"encoding": "latin-1", **settings})


def _rows(ds: sf.Dataset) -> dict[str, np.ndarray]:
    with ds.batch(64).iter_epoch(0) as stream:
        batches = [{name: np.array(column, copy=True) for name, column in batch.items()} for batch in stream]
    return {name: np.concatenate([batch[name] for batch in batches]) for name in batches[0]}


def _state(ds: sf.Dataset) -> dict:
    with ds.batch(10).iter_epoch(0) as stream:
        next(stream)
        return stream.get_state()


def _same_rows(first: dict[str, np.ndarray], second: dict[str, np.ndarray]) -> None:
    assert list(first) == list(second)
    for name in first:
        assert first[name].dtype == second[name].dtype, name
        np.testing.assert_array_equal(first[name], second[name])


CSV_CHANGES: dict[str, tuple[dict, dict]] = {
    "column_types": ({}, {"column_types": {"a": "float32"}}),
    "encoding": ({}, {"encoding": "cp1252"}),
    "null_values": ({"nulls": "fill", "fill": 0}, {"nulls": "fill", "fill": 0, "null_values": ["-1"]}),
}


@pytest.mark.parametrize("setting", sorted(CSV_CHANGES))
def test_a_changed_csv_setting_changes_the_fingerprint_and_refuses_states(tmp_path, setting):
    path = _csv(tmp_path)
    before, after = (_read_csv(path, **settings) for settings in CSV_CHANGES[setting])
    assert before.fingerprint() != after.fingerprint()
    with pytest.raises(sf.StateError, match="source"):
        after.batch(10).iter_epoch(state=_state(before))


@pytest.mark.parametrize("setting", sorted(CSV_CHANGES))
def test_the_cache_does_not_serve_another_csv_settings_rows(tmp_path, setting):
    path = _csv(tmp_path)
    before, after = (_read_csv(path, **settings) for settings in CSV_CHANGES[setting])
    expected = _rows(after)
    assert any(
        expected[name].dtype != _rows(before)[name].dtype or not np.array_equal(expected[name], _rows(before)[name])
        for name in expected
    ), "the two settings must yield other rows for this test to mean anything"
    cache = tmp_path / "cache"
    _rows(before.cache(cache))  # the first epoch writes the cache of the first setting
    _same_rows(_rows(after.cache(cache)), expected)


def _images(tmp_path: Path) -> Path:
    root = tmp_path / "images"
    for label in ("a", "b"):
        (root / label).mkdir(parents=True)
    for ident in range(100):
        pixels = np.full((4, 4, 3), ident, dtype=np.uint8)
        Image.fromarray(pixels).save(root / ("a" if ident % 3 else "b") / f"{ident:03d}.png")
    return root


Open = Callable[[Path, int], sf.Dataset]
FRAGMENTINGS: dict[str, tuple[Callable[[Path], Path], Open, Callable[[dict], np.ndarray], int, int]] = {
    "csv fragment_bytes": (
        _csv,
        lambda path, size: sf.read_csv(
            path, count_cache=False, encoding="latin-1", fragment_bytes=size, on_error="skip"
        ),
        lambda rows: rows["id"],
        900,
        1700,
    ),
    "image fragment_size": (
        _images,
        lambda root, size: sf.read_images(root, size=(4, 4), fragment_size=size, on_error="skip"),
        lambda rows: rows["image"][:, 0, 0, 0].astype(np.int64),
        8,
        13,
    ),
}


# Under on_error="skip" a part's row count cannot be checked against the fragment's (records may have been
# skipped), so before the fragmenting was in the cache's key a part of another fragment was served as this one.
@pytest.mark.parametrize("case", sorted(FRAGMENTINGS))
def test_the_cache_serves_the_new_fragments_rows_every_row_once(tmp_path, case):
    write, open_, ids, old, new = FRAGMENTINGS[case]
    data = write(tmp_path)
    cache = tmp_path / "cache"
    before, after = open_(data, old), open_(data, new)
    assert [f.num_rows for f in before.source.fragments] != [f.num_rows for f in after.source.fragments]
    _rows(before.cache(cache))
    served = _rows(after.cache(cache))
    assert sorted(ids(served).tolist()) == list(range(len(ids(served)))) == list(range(ROWS if "csv" in case else 100))
    _same_rows(served, _rows(after))
    with pytest.raises(sf.StateError, match="source"):
        after.batch(10).iter_epoch(state=_state(before))
