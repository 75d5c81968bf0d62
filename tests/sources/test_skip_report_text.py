"""What the report says of input skipped under ``on_error="skip"``: why and how to repair it, not "pass on_error=...".

The errors a source raises under ``"raise"`` end "... or pass on_error='skip'
to leave it out and report it"; the same text recorded as the reason of a
skipped unit told a user who had done just that to do it. Each format's
bad file is real (written by its writer, then cut or garbled), read in a
folder beside a good file.
"""

from __future__ import annotations

import gzip
from pathlib import Path
from typing import Callable

import h5py
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from PIL import Image

import streamfeed as sf
from streamfeed.errors import BadInputReport, ErrorPolicy, SkippedUnit


def _parquet(root: Path) -> sf.Dataset:
    pq.write_table(pa.table({"x": np.arange(100.0)}), root / "good.parquet")
    (root / "bad.parquet").write_bytes(b"PAR1" + b"\x00garbage" * 20)
    return sf.read_parquet(root, on_error="skip")


def _csv(root: Path) -> sf.Dataset:
    (root / "good.csv").write_text("x\n" + "\n".join(map(str, range(100))) + "\n")
    packed = gzip.compress(("x\n" + "\n".join(map(str, range(20000))) + "\n").encode())
    (root / "cut.csv.gz").write_bytes(packed[: len(packed) // 2])
    return sf.read_csv(root, on_error="skip")


def _hdf5(root: Path) -> sf.Dataset:
    with h5py.File(root / "good.h5", "w") as handle:
        handle["x"] = np.arange(100.0)
    (root / "bad.h5").write_bytes(b"\x89HDF\r\n\x1a\n" + b"\x00" * 64)
    return sf.read_hdf5(root, on_error="skip")


def _images(root: Path) -> sf.Dataset:
    (root / "cat").mkdir()
    for index in range(3):
        Image.fromarray(np.full((16, 16, 3), index * 40, np.uint8)).save(root / "cat" / f"{index}.png")
    whole = (root / "cat" / "0.png").read_bytes()
    (root / "cat" / "cut.png").write_bytes(whole[: len(whole) // 2])
    return sf.read_images(root, size=(16, 16), on_error="skip")


FORMATS: dict[str, Callable[[Path], sf.Dataset]] = {
    "parquet": _parquet,
    "csv": _csv,
    "hdf5": _hdf5,
    "images": _images,
}


@pytest.mark.parametrize("kind", sorted(FORMATS))
def test_a_skipped_unit_is_not_told_to_pass_on_error_skip(tmp_path, kind):
    dataset = FORMATS[kind](tmp_path)
    with dataset.batch(64).iter_epoch(0) as epoch:
        assert sum(len(next(iter(batch.values()))) for batch in epoch) > 0
    entries = dataset.report.entries
    assert entries, "the bad file was not skipped"
    for entry in entries:
        assert "on_error" not in entry.reason, entry.reason
        assert "Fix: ." not in entry.reason and not entry.reason.endswith("Fix:"), entry.reason
    assert any("Fix: " in entry.reason for entry in entries), entries  # the rest of the fix stays


def test_the_advice_is_dropped_in_every_wording():
    report = BadInputReport(policy=ErrorPolicy(on_error="skip"))
    reasons = {
        "A. Fix: rewrite the file, or pass on_error='skip' to leave it out and report it.": "A. Fix: rewrite the file.",
        "B. Fix: rewrite the file; pass on_error='skip' to leave the row group out and report it.": (
            "B. Fix: rewrite the file."
        ),
        "C. Fix: shorten the line (a blob?), or pass on_error='skip' to skip such lines (no setting: it is 8.0 MiB).": (
            "C. Fix: shorten the line (a blob?)."
        ),
        "D. Where: f.npy. Fix: check the file, or pass on_error='skip'.": "D. Where: f.npy. Fix: check the file.",
        "E. Fix: the metadata is damaged: rewrite the file; on_error='skip' leaves it out and reports it.": (
            "E. Fix: the metadata is damaged: rewrite the file."
        ),
        "F. Fix: pass on_error='skip' to leave it out.": "F.",
    }
    for index, reason in enumerate(reasons):
        report.add(SkippedUnit(f"f{index}", "file", reason, 1))
    assert [entry.reason for entry in report.entries] == list(reasons.values())
