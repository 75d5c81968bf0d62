"""Image formats: exactly the documented list decodes, everything else is a bad record naming what it is.

The documented list (``sources/_decode.py``, README, ``read_images``) is
JPEG (with camera MPO), PNG, WebP, TIFF, BMP and GIF. A file in any other
format Pillow could open (PPM, ICO, PCX, SGI, TGA, IM, ...) is refused by
all three entry points (``read_images``, the ``decode_images`` transform,
``read_tfrecord(decode_images=...)``) as an undecodable image: an error
naming the file (or record) and the format its content is in, skippable
under ``on_error="skip"``. Every file here is written by Pillow itself.
"""

from __future__ import annotations

import io
import warnings
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from PIL import Image

import streamfeed as sf
from streamfeed.readers import read_images, read_tfrecord
from streamfeed.transforms import decode_images

COLOUR = (200, 40, 90)
FOREIGN = ["PPM", "ICO", "PCX", "SGI", "TGA", "IM"]
DOCUMENTED = [  # (Pillow format, suffix, save options, exact pixels)
    ("JPEG", "jpg", {"quality": 95}, False),
    ("MPO", "jpg", {"quality": 95}, False),
    ("PNG", "png", {}, True),
    ("WEBP", "webp", {"lossless": True}, True),
    ("TIFF", "tiff", {}, True),
    ("BMP", "bmp", {}, True),
    ("GIF", "gif", {}, True),
]


def encoded(fmt: str, **options) -> bytes:
    """A 16x16 image of one colour, encoded by Pillow in ``fmt``."""
    out = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # Pillow 13 deprecates its IM plugin
        Image.new("RGB", (16, 16), COLOUR).save(out, fmt, **options)
    return out.getvalue()


def good_png() -> bytes:
    return encoded("PNG")


def folder(tmp_path: Path, files: dict[str, bytes]) -> Path:
    """A class folder ``c`` holding a good PNG and ``files``."""
    root = tmp_path / "data"
    (root / "c").mkdir(parents=True)
    (root / "c" / "good.png").write_bytes(good_png())
    for name, data in files.items():
        (root / "c" / name).write_bytes(data)
    return root


def rows(ds, column: str = "image") -> np.ndarray:
    chunks = [chunk[column] for chunk in ds.iter_epoch(0)]
    return np.concatenate(chunks) if chunks else np.empty((0,))


def assert_colour(images: np.ndarray, exact: bool) -> None:
    assert images.shape[1:] == (8, 8, 3)
    if exact:
        assert (images == COLOUR).all()
    else:
        np.testing.assert_allclose(images.reshape(-1, 3).mean(axis=0), COLOUR, atol=4)


def test_the_foreign_files_really_are_foreign():
    """Pillow itself opens each of them (so refusing them is our rule, not Pillow's inability) as that format."""
    for fmt in FOREIGN:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            with Image.open(io.BytesIO(encoded(fmt))) as image:
                assert image.format == fmt


# ------------------------------------------------------------------ read_images
@pytest.mark.parametrize("verify_headers", [True, False])
@pytest.mark.parametrize("fmt", FOREIGN)
def test_read_images_refuses_a_foreign_format_named_like_a_png(tmp_path, fmt, verify_headers):
    root = folder(tmp_path, {"foreign.png": encoded(fmt)})
    with pytest.raises(sf.CorruptFileError) as excinfo:
        rows(read_images(root, size=(8, 8), verify_headers=verify_headers))
    text = str(excinfo.value)
    assert str(root / "c" / "foreign.png") in text and f"the {fmt} format" in text
    ds = read_images(root, size=(8, 8), verify_headers=verify_headers, on_error="skip")
    assert_colour(rows(ds), exact=True)  # the good PNG only
    (entry,) = ds.report.entries
    assert entry.path == str(root / "c" / "foreign.png") and entry.rows == 1 and f"the {fmt} format" in entry.reason


def test_read_images_lists_only_documented_suffixes(tmp_path):
    """A ``.ppm`` (or ``.ico``, ``.tga``) file in a class folder is not one of the dataset's images: ignored."""
    root = folder(tmp_path, {"a.ppm": encoded("PPM"), "b.ico": encoded("ICO"), "c.tga": encoded("TGA")})
    ds = read_images(root, size=(8, 8))
    assert [Path(path).name for path in ds.source.files] == ["good.png"]
    assert sorted(Path(path).name for path in ds.source.ignored["not_image"]) == ["a.ppm", "b.ico", "c.tga"]
    assert len(rows(ds)) == 1


@pytest.mark.parametrize("decoder", ["pillow", "simplejpeg"])
@pytest.mark.parametrize(("fmt", "suffix", "options", "exact"), DOCUMENTED)
def test_read_images_decodes_every_documented_format(tmp_path, fmt, suffix, options, exact, decoder):
    root = tmp_path / "data"
    (root / "c").mkdir(parents=True)
    (root / "c" / f"image.{suffix}").write_bytes(encoded(fmt, **options))
    assert_colour(rows(read_images(root, size=(8, 8), decoder=decoder)), exact)


# --------------------------------------------------------- decode_images (a map)
@pytest.mark.parametrize("fmt", FOREIGN)
def test_decode_images_transform_refuses_a_foreign_format(tmp_path, fmt):
    op = decode_images((8, 8))
    chunk = {"image_bytes": np.array([good_png(), encoded(fmt)], dtype=object), "path": np.array(["/x/a", "/x/b"])}
    with pytest.raises(sf.DataError) as excinfo:
        op(chunk)
    assert "/x/b" in str(excinfo.value) and f"the {fmt} format" in str(excinfo.value)
    # In a pipeline under on_error="skip" its row is left out and reported (issue 23: the row, not the fragment).
    path = tmp_path / "encoded.parquet"
    pq.write_table(pa.table({"image_bytes": [good_png(), encoded(fmt)]}), path, row_group_size=1)
    ds = sf.read_parquet(path, on_error="skip").map(decode_images((8, 8)))
    assert_colour(rows(ds), exact=True)
    (entry,) = ds.report.entries
    assert entry.location == "row group 1, row 0" and f"the {fmt} format" in entry.reason


@pytest.mark.parametrize(("fmt", "suffix", "options", "exact"), DOCUMENTED)
def test_decode_images_transform_decodes_every_documented_format(fmt, suffix, options, exact):
    op = decode_images((8, 8))
    out = op({"image_bytes": np.array([encoded(fmt, **options)], dtype=object)})
    assert_colour(out["image"], exact)


# ------------------------------------------------------- read_tfrecord(decode_images=...)
@pytest.mark.parametrize("target", [{"image": (8, 8, 3)}, ["image"]], ids=["resized", "stored-size"])
@pytest.mark.parametrize("fmt", FOREIGN)
def test_read_tfrecord_refuses_a_foreign_format(tmp_path, fmt, target):
    records = {"image": np.array([good_png(), encoded(fmt)], dtype=object)}
    (path,) = sf.write_tfrecord([records], tmp_path / "out" / "images.tfrecord")
    with pytest.raises(sf.DataError) as excinfo:
        rows(read_tfrecord(path, decode_images=target))
    text = str(excinfo.value)
    assert path in text and "record 1" in text and f"the {fmt} format" in text
    ds = read_tfrecord(path, decode_images=target, on_error="skip")
    assert len(rows(ds)) == 1
    (entry,) = ds.report.entries
    assert entry.location.startswith("record 1") and f"the {fmt} format" in entry.reason


@pytest.mark.parametrize(("fmt", "suffix", "options", "exact"), DOCUMENTED)
def test_read_tfrecord_decodes_every_documented_format(tmp_path, fmt, suffix, options, exact):
    records = {"image": np.array([encoded(fmt, **options)], dtype=object)}
    (path,) = sf.write_tfrecord([records], tmp_path / "out" / "images.tfrecord")
    assert_colour(rows(read_tfrecord(path, decode_images={"image": (8, 8, 3)})), exact)
    stored = rows(read_tfrecord(path, decode_images=["image"]))
    assert stored.shape == (1, 16, 16, 3)


def test_a_damaged_header_of_a_documented_format_is_named_as_that_format(tmp_path):
    """A PNG signature followed by garbage: refused, and the message says it looked like a PNG."""
    root = folder(tmp_path, {"broken.png": good_png()[:8] + b"\0" * 40})
    with pytest.raises(sf.CorruptFileError) as excinfo:
        read_images(root, size=(8, 8))
    assert "broken.png" in str(excinfo.value) and "starts like a PNG image" in str(excinfo.value)
