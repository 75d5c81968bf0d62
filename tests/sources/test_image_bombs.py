"""Decompression bombs: an image whose header declares more pixels than may be decoded.

The declared size (width x height x channels, from the header) is checked
before any pixel is decoded, against ``max_image_bytes`` (default: a quarter
of the default memory limit) and Pillow's own decompression-bomb limit. An
over-size image is a bad unit under the normal policy: a
:class:`~streamfeed.errors.CorruptFileError` naming the file and the
declared size, or skipped and reported. Pillow's warning is never silenced.

The bomb headers are Pillow-written PNGs whose IHDR is rewritten to declare
the size (``factories.images.declared_png``); real pixels of that size would
take gigabytes to write.
"""

from __future__ import annotations

import io
import json
import warnings
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

import streamfeed as sf
from factories.images import declared_png
from streamfeed.memory import DEFAULT_MEMORY_LIMIT
from streamfeed.readers import read_images, read_tfrecord
from streamfeed.transforms import decode_images


def _folder(tmp_path: Path, bombs: dict[str, bytes], good: int = 3) -> Path:
    root = tmp_path / "data"
    (root / "c").mkdir(parents=True)
    for number in range(good):
        Image.new("RGB", (8, 8), (number * 40, 0, 0)).save(root / "c" / f"good{number}.png", "PNG")
    for name, data in bombs.items():
        (root / "c" / name).write_bytes(data)
    return root


def _rows(ds) -> int:
    return sum(len(chunk["label"]) for chunk in ds.iter_epoch(0))


@pytest.mark.parametrize("verify_headers", [True, False])
def test_a_bomb_raises_naming_the_file_and_its_declared_size(tmp_path, verify_headers):
    root = _folder(tmp_path, {"bomb.png": declared_png(50_000, 50_000)})
    with pytest.raises(sf.CorruptFileError) as excinfo:
        _rows(read_images(root, size=(8, 8), verify_headers=verify_headers))
    text = str(excinfo.value)  # Pillow refuses 2.5 G pixels at open, before anything else sees the size
    assert str(root / "c" / "bomb.png") in text and "2500000000 pixels" in text and "max_image_bytes" in text


@pytest.mark.parametrize("verify_headers", [True, False])
def test_skip_leaves_a_bomb_out_and_reports_it(tmp_path, verify_headers):
    root = _folder(tmp_path, {"bomb.png": declared_png(50_000, 50_000), "big.png": declared_png(13_000, 13_000)})
    ds = read_images(root, size=(8, 8), on_error="skip", verify_headers=verify_headers)
    assert _rows(ds) == 3
    entries = sorted(ds.report.entries, key=lambda entry: entry.path)
    assert [(Path(e.path).name, e.location, e.rows) for e in entries] == [
        ("big.png", "file", 1),
        ("bomb.png", "file", 1),
    ]
    assert all(entry.path in entry.reason and "declares" in entry.reason for entry in entries)
    assert "169000000 pixels" in entries[0].reason  # past Pillow's warning threshold: its warning is an error here


def test_the_bound_is_the_decoded_size_and_configurable(tmp_path):
    root = _folder(tmp_path, {}, good=0)
    Image.new("L", (300, 200), 9).save(root / "c" / "photo.png", "PNG")  # a real image: 60 000 pixels
    assert _rows(read_images(root, size=(8, 8))) == 1  # default bound: DEFAULT_MEMORY_LIMIT / 4
    assert _rows(read_images(root, size=(8, 8), channels=1, max_image_bytes=100_000)) == 1  # 60 000 bytes
    with pytest.raises(sf.CorruptFileError) as excinfo:  # decoded to RGB: 180 000 bytes
        read_images(root, size=(8, 8), channels=3, max_image_bytes=100_000)
    assert "300x200" in str(excinfo.value) and "3 channels" in str(excinfo.value) and "180000" in str(excinfo.value)
    with pytest.raises(sf.ArgumentError):
        read_images(root, size=(8, 8), max_image_bytes=0)
    limit = DEFAULT_MEMORY_LIMIT // 4
    side = int((limit // 3) ** 0.5) + 1  # just over the default bound as RGB, below Pillow's own limit
    (root / "c" / "over.png").write_bytes(declared_png(side, side))
    with pytest.raises(sf.CorruptFileError, match="over.png"):
        read_images(root, size=(8, 8))


def test_pillows_bomb_warning_is_not_silenced_and_becomes_our_error(tmp_path):
    # 10 000 x 10 000 is past Pillow's warning threshold (MAX_IMAGE_PIXELS) but not its error threshold.
    root = _folder(tmp_path, {"warned.png": declared_png(10_000, 10_000, "L")})
    with pytest.raises(sf.CorruptFileError) as excinfo:  # pytest turns warnings into errors
        read_images(root, size=(8, 8), max_image_bytes=2**40)
    assert str(root / "c" / "warned.png") in str(excinfo.value) and "decompression bomb" in str(excinfo.value)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(sf.CorruptFileError, match="warned.png"):
            read_images(root, size=(8, 8), max_image_bytes=2**40)
    assert any(issubclass(w.category, Image.DecompressionBombWarning) for w in caught)  # shown, not suppressed


def test_decode_images_transform_refuses_a_bomb_naming_the_row(tmp_path):
    op = decode_images((8, 8))
    chunk = {"image_bytes": np.array([declared_png(50_000, 50_000)], dtype=object), "path": np.array(["/x/bomb.png"])}
    with pytest.raises(sf.CorruptFileError) as excinfo:
        op(chunk)
    assert "/x/bomb.png" in str(excinfo.value) and "2500000000 pixels" in str(excinfo.value)
    root = _folder(tmp_path, {"big.png": declared_png(4_000, 4_000)})
    encoded = read_images(root, decode=False, fragment_size=1, on_error="skip")  # bytes: nothing decoded at open
    assert len(encoded.source.files) == 4
    ds = encoded.map(decode_images((8, 8), max_image_bytes=10_000))
    assert sum(len(chunk["image"]) for chunk in ds.iter_epoch(0)) == 3
    assert [Path(entry.path).name for entry in ds.report.entries] == ["data"]  # the fragment (one file) is reported
    assert "big.png" in ds.report.entries[0].reason and "4000x4000" in ds.report.entries[0].reason


def test_read_tfrecord_decode_images_refuses_a_bomb(tmp_path):
    good = io.BytesIO()
    Image.new("RGB", (4, 4)).save(good, "PNG")
    records = {"image": np.array([good.getvalue(), declared_png(50_000, 50_000)], dtype=object)}
    (path,) = sf.write_tfrecord([records], tmp_path / "out" / "images.tfrecord")
    with pytest.raises(sf.DataError) as excinfo:
        list(read_tfrecord(path, decode_images={"image": (4, 4, 3)}).iter_epoch(0))
    assert path in str(excinfo.value) and "record 1" in str(excinfo.value) and "2500000000 pixels" in str(excinfo.value)
    ds = read_tfrecord(path, decode_images={"image": (4, 4, 3)}, on_error="skip")
    assert sum(len(chunk["image"]) for chunk in ds.iter_epoch(0)) == 1
    assert [entry.location.split(" (")[0] for entry in ds.report.entries] == ["record 1"]
    json.dumps(ds.report.to_dict())


def test_read_tfrecord_decode_images_at_stored_size_refuses_a_bomb(tmp_path):
    """decode_images=[name] decodes at the stored size: the header is checked first all the same."""
    good = io.BytesIO()
    Image.new("RGB", (4, 4)).save(good, "PNG")
    records = {"image": np.array([good.getvalue(), declared_png(50_000, 50_000)], dtype=object)}
    (path,) = sf.write_tfrecord([records], tmp_path / "out" / "images.tfrecord")
    with pytest.raises(sf.DataError, match="record 1"):
        list(read_tfrecord(path, decode_images=["image"]).iter_epoch(0))
    ds = read_tfrecord(path, decode_images=["image"], on_error="skip")
    assert sum(len(chunk["image"]) for chunk in ds.iter_epoch(0)) == 1


def test_inspect_reports_a_bomb_instead_of_decoding_it(tmp_path):
    from streamfeed.inspect import inspect
    from streamfeed.inspect.image_quality import image_quality

    root = _folder(tmp_path, {"big.png": declared_png(1_000, 1_000)})
    report = inspect(root, full=True, memory_limit=8 * 2**20)  # images may decode to 2 MiB each
    (bad,) = report.details["undecodable"]
    assert bad["path"] == str(root / "c" / "big.png") and "1000x1000" in bad["error"]
    quality = image_quality(sorted(str(p) for p in (root / "c").iterdir()), max_image_bytes=2**20)
    (bad,) = quality.images["undecodable"]
    assert bad["path"].endswith("big.png") and "1000x1000" in bad["error"] and quality.rows == 3


def _big_real_png(side: int) -> bytes:
    """A real, decodable RGB PNG of ``side`` x ``side``: one colour, so a few KB on disk."""
    out = io.BytesIO()
    Image.new("RGB", (side, side), (10, 20, 30)).save(out, "PNG")
    return out.getvalue()


def test_the_memory_limit_bounds_what_one_image_may_decode_to(tmp_path):
    """3000 x 3000 RGB decodes to 27 MB: fine by default, over a quarter of a 64 MiB limit."""
    root = _folder(tmp_path, {"scan.png": _big_real_png(3_000)})
    assert _rows(read_images(root, size=(8, 8))) == 4
    small = read_images(root, size=(8, 8)).with_options(memory_limit=64 * 2**20)
    with pytest.raises(sf.CorruptFileError) as excinfo:
        _rows(small)
    text = str(excinfo.value)
    assert str(root / "c" / "scan.png") in text and "3000x3000" in text and "memory_limit" in text
    skipping = read_images(root, size=(8, 8), on_error="skip").with_options(memory_limit=64 * 2**20)
    assert _rows(skipping) == 3
    assert [Path(entry.path).name for entry in skipping.report.entries] == ["scan.png"]


def test_the_memory_limit_bounds_decode_images_and_tfrecord_decoding(tmp_path):
    root = _folder(tmp_path, {"scan.png": _big_real_png(3_000)})
    encoded = read_images(root, decode=False, fragment_size=1)
    decoded = encoded.map(decode_images((8, 8))).with_options(memory_limit=64 * 2**20)
    with pytest.raises(sf.CorruptFileError, match="memory_limit"):
        sum(len(chunk["image"]) for chunk in decoded.iter_epoch(0))
    per_batch = encoded.batch(2).map(decode_images((8, 8))).with_options(memory_limit=64 * 2**20)
    with pytest.raises(sf.CorruptFileError, match="memory_limit"):
        sum(len(chunk["image"]) for chunk in per_batch.iter_epoch(0))
    records = {"image": np.array([_big_real_png(3_000)], dtype=object)}
    (path,) = sf.write_tfrecord([records], tmp_path / "out" / "images.tfrecord")
    for images in ({"image": (8, 8, 3)}, ["image"]):
        ds = read_tfrecord(path, decode_images=images)
        assert sum(len(chunk["image"]) for chunk in ds.iter_epoch(0)) == 1
        with pytest.raises(sf.DataError, match="memory_limit"):
            list(ds.with_options(memory_limit=64 * 2**20).iter_epoch(0))
