"""An image folder says what a read holds while it decodes, and the layout spends the rest on reading.

The library's figure for a read's decoding bytes is pyarrow's: four times
the fragment it decodes (``memory.READ_TRANSIENT``). An image read holds one
file and its full-size decode beside the fragment's array, far less at
usual sizes; counted at four fragments a read, shuffled 1024x1024 JPEGs
read to 256 at the default limit had read-ahead 1, so two read threads
decoded one fragment at a time (478 against 888 images/s unshuffled).
"""

from __future__ import annotations

import gc
import zipfile
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

import streamfeed as sf
from streamfeed.memory import READ_TRANSIENT, estimate_bytes, high_water_bytes, reset_peak_rss, rss_bytes


def _folder(root: Path, ext: str, count: int, side: int) -> Path:
    rng = np.random.default_rng(0)
    for index in range(count):
        folder = root / ("a" if index % 2 else "b")
        folder.mkdir(parents=True, exist_ok=True)
        pixels = rng.integers(0, 256, (side, side, 3), dtype=np.uint8)
        pixels[:, ::5] = 0  # some structure, so that the files are not all incompressible noise
        Image.fromarray(pixels).save(folder / f"{index:03d}.{ext}", quality=90)
    return root


@pytest.mark.parametrize(("ext", "container"), [("png", "folder"), ("jpg", "folder"), ("png", "zip")])
def test_a_fragment_read_holds_no_more_than_the_source_declares(tmp_path, ext, container):
    """Large files read smaller: the peak beyond the fragment's array stays within ``read_scratch`` of it.

    A zip fragment holds its members too (read in runs and inflated at
    once): in its figure, not in its row bytes.
    """
    root = _folder(tmp_path / ext, ext, count=8, side=2048)
    root = _zipped(root, ext) if container == "zip" else root
    source = sf.read_images(root, size=(1448, 1448), fragment_size=4).source
    assert source.read_scratch is not None
    fragments = source.fragments
    fragments[0].read()  # the decoders' code and tables: loaded once, not a read's
    gc.collect()
    if not reset_peak_rss():
        pytest.skip("needs /proc/self/clear_refs to reset the peak RSS (Linux)")
    for fragment in fragments[1:]:
        gc.collect()
        before = rss_bytes()
        reset_peak_rss()
        chunk = fragment.read()
        held = high_water_bytes() - before  # type: ignore[operator]
        output = fragment.num_rows * source.row_bytes
        assert len(chunk["image"]) == fragment.num_rows
        # A 2048x2048 PNG held 2.9x its 12 MiB decode beyond the array: one copy counted would not cover it.
        assert held - output <= source.read_scratch * output, (held, output, source.read_scratch)
        del chunk


def test_a_decode_past_the_library_figure_is_the_decode_bounds(tmp_path):
    """Read to thumbnails, a large image's decode would count hundreds of fragments a read: the library's
    figure stands instead (the decode bound holds one such image to a quarter of the limit,
    ``tests/sources/test_image_bombs.py``); a zip's members held are counted beside it, whatever their size."""
    folder = _folder(tmp_path / "png", "png", count=4, side=2048)
    archive = _zipped(folder, "png")
    assert sf.read_images(folder, size=(64, 64), fragment_size=2).source.read_scratch == READ_TRANSIENT
    zipped = sf.read_images(archive, size=(64, 64), fragment_size=2).source
    members = max(sum(member.size for member in fragment.members) for fragment in zipped.fragments)
    assert zipped.read_scratch is not None
    assert zipped.read_scratch >= READ_TRANSIENT + 2 * members / (2 * zipped.row_bytes)


def _zipped(folder: Path, ext: str = "jpg") -> Path:
    """The folder's class folders in a zip archive written by Python's ``zipfile`` (stored, as images are)."""
    archive = folder.with_suffix(".zip")
    with zipfile.ZipFile(archive, "w", compression=zipfile.ZIP_STORED) as out:
        for path in sorted(folder.rglob(f"*.{ext}")):
            out.write(path, path.relative_to(folder).as_posix())
    return archive


@pytest.mark.parametrize("container", ["folder", "zip"])
def test_shuffled_images_read_as_many_fragments_as_threads_where_the_library_figure_would_not(tmp_path, container):
    root = _folder(tmp_path / "jpg", "jpg", count=192, side=256)
    root = _zipped(root) if container == "zip" else root
    ds = sf.read_images(root, size=(128, 128), fragment_size=32).shuffle(seed=3).batch(8)
    source = ds.source
    assert source.read_scratch is not None and source.read_scratch < (1 if container == "folder" else READ_TRANSIENT)

    def two_ahead(read_scratch: float | None) -> int:
        """The estimate of 2 threads reading 2 fragments ahead, with the least prefetch."""
        return estimate_bytes(
            source.row_bytes, 32.0, 8, read_ahead=2, window=6, prefetch=2, shuffled=True, read_threads=2,
            read_scratch=read_scratch,
        )  # fmt: skip

    limit = two_ahead(source.read_scratch) + 1024
    assert two_ahead(None) > limit  # the library's figure would not hold two reads in flight
    assert READ_TRANSIENT > source.read_scratch
    limited = ds.with_options(memory_limit=limit, read_threads=2)
    layout = limited.layout()
    assert (layout.window, layout.read_threads, layout.read_ahead) == (6, 2, 2)
    assert layout.estimated_bytes <= limit
    with limited.iter_epoch(0) as batches:
        paths = [path for batch in batches for path in batch["path"]]
    assert len(paths) == len(set(paths)) == 192  # every image once


@pytest.mark.parametrize("container", ["folder", "zip"])
def test_without_the_probe_or_under_a_map_the_library_figure_holds(tmp_path, container):
    root = _folder(tmp_path / "jpg", "jpg", count=4, side=256)
    root = _zipped(root) if container == "zip" else root
    unprobed = sf.read_images(root, size=(64, 64), verify_headers=False).source
    if container == "folder":
        assert unprobed.read_scratch is None
    else:  # the library's figure for the decode, and the members a read holds beside it
        assert unprobed.read_scratch is not None and unprobed.read_scratch > READ_TRANSIENT
    assert sf.read_images(root, size=(64, 64), decode=False).source.read_scratch is None
    probed = sf.read_images(root, size=(64, 64))
    assert probed.source.read_scratch is not None
    assert probed.resolution.read_scratch == probed.source.read_scratch
    mapped = probed.map(lambda chunk: chunk)  # a user's op runs in the reads: what it holds is unknown
    assert mapped.resolution.read_scratch is None


def test_a_zip_archive_plans_and_shuffles_as_the_folder_it_holds(tmp_path):
    """The same images serve the same bytes a row, so the same default window and order, zipped or not.

    Fails on the old code: the zip counted its members' bytes in its row
    bytes (2 000 JPEGs of 1024x1024 read to 256: 638 428 against 196 680),
    which shrank its default window to 1 fragment against the folder's 5
    (read-ahead 1 at the default limit: 352-382 against 717-740 images/s
    shuffled, with the members counted as a read's scratch instead).
    """
    folder = _folder(tmp_path / "jpg", "jpg", count=96, side=256)
    archive = _zipped(folder)
    served = {}
    for name, root in (("folder", folder), ("zip", archive)):
        ds = sf.read_images(root, size=(64, 64), fragment_size=8)
        served[name] = ds
    assert served["zip"].source.row_bytes == served["folder"].source.row_bytes
    # A held member is a read's, in flight: in the figure that multiplies the reads, not every buffer.
    assert served["zip"].source.read_scratch > served["folder"].source.read_scratch

    def names(ds) -> list[str]:
        shuffled = ds.shuffle(seed=5).batch(16)
        with shuffled.iter_epoch(0) as batches:
            return [
                path.rsplit("/", 2)[-2] + "/" + path.rsplit("/", 1)[-1] for batch in batches for path in batch["path"]
            ]

    assert served["zip"].shuffle(seed=5).layout().window == served["folder"].shuffle(seed=5).layout().window
    assert names(served["zip"]) == names(served["folder"])
