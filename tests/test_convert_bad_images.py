"""``streamfeed convert`` of an image folder decodes what it claims to have checked (issue 23, item 3a).

The header probe at open finds an empty file, but a JPEG cut in half has a
whole header: before, ``convert --on-error skip`` copied it into the row
group, where decoding it later cost the whole group. Now every image is
decoded while converting: under ``--on-error skip`` a bad one is left out
and reported (file and reason), under the default it fails the conversion
naming the file, and nothing is published.
"""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

import streamfeed as sf
from streamfeed.convert import convert_to_parquet
from streamfeed.transforms.images import decode_images

GOOD_PER_CLASS = 12


def streamfeed(*args: object) -> subprocess.CompletedProcess:
    """The real CLI in a subprocess (``python -m streamfeed.cli``, this interpreter and its PYTHONPATH)."""
    command = [sys.executable, "-m", "streamfeed.cli", *map(str, args)]
    return subprocess.run(command, capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)


def _jpeg(pixels: np.ndarray) -> bytes:
    out = io.BytesIO()
    Image.fromarray(pixels).save(out, "JPEG", quality=90)
    return out.getvalue()


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """Two classes of good JPEGs and PNGs, one JPEG cut in half (its header whole) and one empty file."""
    rng = np.random.default_rng(3)
    root = tmp_path / "imgs"
    for name in ("cat", "dog"):
        (root / name).mkdir(parents=True)
        for index in range(GOOD_PER_CLASS):
            pixels = rng.integers(0, 256, (24, 32, 3), dtype=np.uint8)
            if index % 3:
                (root / name / f"{index:02d}.jpg").write_bytes(_jpeg(pixels))
            else:
                Image.fromarray(pixels).save(root / name / f"{index:02d}.png")
    whole = _jpeg(rng.integers(0, 256, (64, 64, 3), dtype=np.uint8))
    (root / "cat" / "truncated.jpg").write_bytes(whole[: len(whole) // 2])
    (root / "dog" / "empty.jpg").write_bytes(b"")
    return root


def test_the_truncated_jpeg_passes_the_header_probe(folder: Path):
    """The premise: only decoding finds it (the probe at open does not)."""
    with Image.open(folder / "cat" / "truncated.jpg") as image:
        assert image.size == (64, 64)
        with pytest.raises(OSError):
            image.load()


def test_convert_skip_leaves_out_and_reports_every_bad_image(folder: Path, tmp_path: Path):
    out, report = tmp_path / "out", tmp_path / "skipped.jsonl"
    proc = streamfeed("convert", folder, out, "--on-error", "skip", "--report", report, "--quiet", "--json")
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads(proc.stdout)
    good = 2 * GOOD_PER_CLASS
    assert summary["rows"] == good
    entries = {Path(entry["path"]).name: entry for entry in summary["skipped"]["entries"]}
    assert set(entries) == {"truncated.jpg", "empty.jpg"}, summary["skipped"]
    assert entries["truncated.jpg"]["location"] == "file" and entries["truncated.jpg"]["rows"] == 1
    assert "Premature end" in entries["truncated.jpg"]["reason"] or "truncated" in entries["truncated.jpg"]["reason"]
    assert "empty" in entries["empty.jpg"]["reason"]
    assert summary["skipped"]["skipped_rows"] + summary["rows"] == summary["skipped"]["total_rows"]
    lines = [json.loads(line) for line in report.read_text().splitlines()]
    assert sorted(Path(line["path"]).name for line in lines) == ["empty.jpg", "truncated.jpg"]

    # what was written decodes whole, under the strict default policy
    back = sf.read_parquet(out).map(decode_images((16, 16)))
    assert back.num_rows() == good
    with back.iter_epoch(0) as epoch:
        paths = [path for chunk in epoch for path in chunk["path"]]
    assert len(paths) == good and not any("truncated" in path or "empty" in path for path in paths)


def test_convert_text_output_names_the_skipped_files(folder: Path, tmp_path: Path):
    proc = streamfeed("convert", folder, tmp_path / "out", "--on-error", "skip", "--quiet")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert f"converted {2 * GOOD_PER_CLASS} rows" in proc.stdout
    skipped = [line for line in proc.stdout.splitlines() if line.startswith("  skipped ")]
    assert len(skipped) == 2 and any("truncated.jpg (file)" in line for line in skipped), proc.stdout


def test_convert_without_skip_fails_naming_the_truncated_file(folder: Path, tmp_path: Path):
    (folder / "dog" / "empty.jpg").unlink()  # the probe would refuse it first
    out = tmp_path / "out"
    proc = streamfeed("convert", folder, out, "--quiet")
    assert proc.returncode == 1, (proc.returncode, proc.stdout, proc.stderr[-3000:])
    assert "truncated.jpg" in proc.stderr and "Traceback" not in proc.stderr
    assert not out.exists()  # nothing published


def test_convert_to_parquet_decodes_images_from_python_too(folder: Path, tmp_path: Path):
    dataset = sf.read_images(folder, decode=False, on_error="skip")
    summary = convert_to_parquet(dataset, tmp_path / "out")
    assert summary.rows == 2 * GOOD_PER_CLASS
    assert sorted(Path(entry["path"]).name for entry in summary.skipped["entries"]) == ["empty.jpg", "truncated.jpg"]


def test_convert_to_tfrecord_leaves_them_out_too(folder: Path, tmp_path: Path):
    from streamfeed.convert import convert_to_tfrecord

    summary = convert_to_tfrecord(sf.read_images(folder, decode=False, on_error="skip"), tmp_path / "out")
    assert summary.rows == 2 * GOOD_PER_CLASS
    assert sorted(Path(entry["path"]).name for entry in summary.skipped["entries"]) == ["empty.jpg", "truncated.jpg"]
