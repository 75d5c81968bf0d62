"""Contract-test factories for zip archives of images (see ``tests/test_contract.py``), and the archive writer.

Archives are written by Python's :mod:`zipfile` (a real writer) from an
image folder written by Pillow, as ``tests/factories/images.py`` writes it
(ids encoded in the pixels and the file names), so a zip and its folder can
be compared row by row.
"""

from __future__ import annotations

import os
import zipfile
from pathlib import Path

import numpy as np
import pytest

from streamfeed.readers import read_images

from .images import _from_pixels, _write_tree


def zip_folder(folder: Path, archive: Path, *, shuffled: bool = False) -> Path:
    """Writes every file and folder under ``folder`` into ``archive``: names relative to it, with folder entries.

    Members alternate between deflate and stored; ``shuffled`` writes them out
    of name order (the archive's order is then not the order read).
    """
    entries = sorted(Path(dirpath) / name for dirpath, dirnames, files in os.walk(folder) for name in dirnames + files)
    if shuffled:
        entries = [entries[i] for i in np.random.default_rng(3).permutation(len(entries))]
    with zipfile.ZipFile(archive, "w") as out:
        for number, path in enumerate(entries):
            method = zipfile.ZIP_DEFLATED if number % 2 else zipfile.ZIP_STORED
            out.write(path, path.relative_to(folder).as_posix(), compress_type=method)
    return archive


def zip_class_folders(tmp_path: Path):
    """270 lossless 8x8 images in 5 uneven class folders, zipped out of order; fragments of 16 members."""
    ids = _write_tree(tmp_path / "tree")
    (tmp_path / "tree" / "bee" / "notes.txt").write_text("not an image")
    archive = zip_folder(tmp_path / "tree", tmp_path / "images.zip", shuffled=True)
    ds = read_images(archive, size=(8, 8), fragment_size=16)
    assert len(ds.source.fragments) > 10
    return ds.map(_from_pixels), ids


FACTORIES = [pytest.param(zip_class_folders, id="zip-class-folders")]


def zip_only_bad_members_skipped(tmp_path: Path):
    (tmp_path / "bad" / "a").mkdir(parents=True)
    (tmp_path / "bad" / "a" / "0.png").write_bytes(b"")
    (tmp_path / "bad" / "a" / "1.jpg").write_text("text")
    archive = zip_folder(tmp_path / "bad", tmp_path / "bad.zip")
    return read_images(archive, size=(8, 8), on_error="skip").map(_from_pixels), np.arange(0)


EMPTY_FACTORIES = [pytest.param(zip_only_bad_members_skipped, id="zip-all-bad-skipped")]
