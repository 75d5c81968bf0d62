"""Contract-test factories for the image-folder source (see ``tests/test_contract.py``).

Images are written by Pillow into class folders of uneven sizes. The source's
own columns are ``image``, ``label`` and ``path``; a ``map`` derives the
contract's ``id`` and ``x`` from them: ``id`` from the pixels (lossless
formats encode ``id % 256`` in red and ``id // 256`` in green) and ``x``
from the file name (``<id>.<ext>``), so ``x == id / 2`` also checks that a
row's image and path were never separated.
"""

from __future__ import annotations

import io
import os
import struct
import zlib
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from streamfeed.readers import read_images

CLASS_SIZES = {"ant": 7, "bee": 95, "cat": 41, "dog": 112, "eel": 15}  # 270 images
LOSSLESS = [
    ("png", "PNG", {}),
    ("bmp", "BMP", {}),
    ("tiff", "TIFF", {}),
    ("webp", "WEBP", {"lossless": True}),
    ("gif", "GIF", {}),
]


def _pixels(ident: int, side: int = 8) -> np.ndarray:
    pixels = np.zeros((side, side, 3), dtype=np.uint8)
    pixels[..., 0] = ident % 256
    pixels[..., 1] = ident // 256
    pixels[..., 2] = 7
    return pixels


def _id_from_name(paths: np.ndarray) -> np.ndarray:
    return np.array([int(os.path.basename(p).split(".")[0]) for p in paths], dtype=np.int64)


def _from_pixels(chunk):
    ident = chunk["image"][:, 0, 0, 0].astype(np.int64) + 256 * chunk["image"][:, 0, 0, 1].astype(np.int64)
    return {**chunk, "id": ident, "x": _id_from_name(chunk["path"]) / 2.0}


def _from_names(chunk):
    ident = _id_from_name(chunk["path"])
    return {**chunk, "id": ident, "x": ident / 2.0}


def _write_tree(root: Path) -> np.ndarray:
    ident = 0
    for name, count in CLASS_SIZES.items():
        for number in range(count):
            folder = root / name / ("nested" if number % 5 == 4 else "")  # nested folders belong to the class
            folder.mkdir(parents=True, exist_ok=True)
            suffix, fmt, options = LOSSLESS[ident % len(LOSSLESS)]
            Image.fromarray(_pixels(ident)).save(
                folder / f"{ident}.{suffix.upper() if ident % 7 == 0 else suffix}", fmt, **options
            )
            ident += 1
    return np.arange(ident)


def images_class_folders(tmp_path: Path):
    """270 lossless 8x8 images in 5 uneven class folders; fragments of 16 files."""
    ids = _write_tree(tmp_path / "tree")
    (tmp_path / "tree" / "bee" / "notes.txt").write_text("not an image")
    (tmp_path / "tree" / "cat" / ".hidden.png").write_bytes(b"")
    ds = read_images(tmp_path / "tree", size=(8, 8), fragment_size=16)
    return ds.map(_from_pixels), ids


def images_jpeg_crop_skip(tmp_path: Path):
    """JPEGs (16x20, decoded and cropped to 8x8) under on_error='skip', fragments of 23, one bad file."""
    root = tmp_path / "jpegs"
    ids = np.arange(240)
    for ident in ids:
        folder = root / f"class {ident % 3}"  # names with a space
        folder.mkdir(parents=True, exist_ok=True)
        Image.fromarray(np.full((16, 20, 3), ident % 256, dtype=np.uint8)).save(
            folder / f"{ident}.jpg", "JPEG", quality=90
        )
    (root / "class 1" / "999.jpg").write_text("a text file named .jpg")  # left out and reported
    ds = read_images(root, size=(8, 8), resize="crop", fragment_size=23, on_error="skip")
    return ds.map(_from_names), ids


FACTORIES = [
    pytest.param(images_class_folders, id="images-class-folders"),
    pytest.param(images_jpeg_crop_skip, id="images-jpeg-crop-skip"),
]


def images_only_bad_files_skipped(tmp_path: Path):
    root = tmp_path / "bad"
    (root / "a").mkdir(parents=True)
    (root / "a" / "0.png").write_bytes(b"")
    (root / "a" / "1.jpg").write_text("text")
    return read_images(root, size=(8, 8), on_error="skip").map(_from_names), np.arange(0)


# Class folders holding no image file are no longer an empty dataset: the source raises NotFoundError
# naming what the folder holds (tests/sources/test_empty_inputs.py), as an empty glob always did.
EMPTY_FACTORIES = [
    pytest.param(images_only_bad_files_skipped, id="images-all-bad-skipped"),
]


def declared_png(width: int, height: int, mode: str = "RGB") -> bytes:
    """A PNG written by Pillow (1x1), whose IHDR then declares ``width`` x ``height`` (CRC fixed).

    A decompression bomb's header without its pixel data: a real 50 000 x
    50 000 PNG would take gigabytes to write. Everything a decoder learns
    from the header is what a real bomb's header says.
    """
    buffer = io.BytesIO()
    Image.new(mode, (1, 1)).save(buffer, "PNG")
    data = bytearray(buffer.getvalue())
    assert data[12:16] == b"IHDR"
    data[16:24] = struct.pack(">II", width, height)
    data[29:33] = struct.pack(">I", zlib.crc32(bytes(data[12:29])))
    return bytes(data)
