"""Inspecting an image folder, or a zip archive of one: classes, formats, modes and sizes from headers; bad files.

Headers only (Pillow opens lazily) unless ``full``, which decodes every
image to find files whose header is fine but whose data is not; an image
whose header declares more than a quarter of the memory limit decoded (a
decompression bomb) is reported as undecodable instead of decoded. The
folder is listed as the source lists it: links outside the root are not
followed (and are warned about), a file under two classes raises.

A zip archive (``inspect_zip``) goes through the same code, its members
listed from the central directory and opened one at a time
(``image_files.py``): the counts, classes and refusals are those of the
central directory; formats, modes and sizes are read from the headers of
``ZIP_SAMPLE`` members spread evenly over the archive (every member with
``full``), so inspecting a large archive reads a sample, never the whole.
"""

from __future__ import annotations

import collections
import concurrent.futures
import os
import re

import numpy as np

from ..errors import require
from ..memory import decode_bytes_limit
from ..sources.images.decode import DEFAULT_MAX_IMAGE_BYTES, ImageDecodeError, check_size
from ..sources.images.formats import pillow
from .image_files import ImageFiles, image_files
from .progress import progress
from .report import Column, InspectReport, add_files, warn_rare_classes

_HIGH_DEPTH = {"I;16", "I;16L", "I;16B", "I;16N", "I", "F"}
_OBJECT_REPR = re.compile(r"<[\w.]+ object at 0x[0-9a-fA-F]+>")
EMPTY_FILE = "empty file (0 bytes)"
ZIP_SAMPLE = 512  # members of an archive whose headers are read (all of them with ``full``)


def decode_failure(exc: BaseException | None, size: int | None = None) -> str:
    """Why an image file does not open or decode, in a user's words: the one text the CLI and the page show.

    ``size`` is the file's bytes when known: an empty file is "empty file
    (0 bytes)" whatever the decoder raised for it. The sources' decoder
    errors are their own message; Pillow's "cannot identify image file
    <_io.BytesIO object at 0x...>" says what the content is not; any other
    error is its type and message, an object's repr in it replaced by
    "the file" (it names a buffer's address, nothing a user can act on).
    """
    if size == 0:
        return EMPTY_FILE
    if exc is None:
        return "does not decode"
    if isinstance(exc, ImageDecodeError):
        return str(exc)
    if isinstance(exc, pillow().UnidentifiedImageError):
        return "not an image in a format Pillow reads: its content was not recognised"
    return _OBJECT_REPR.sub("the file", f"{type(exc).__name__}: {exc}")


def probe_image(
    path: str, decode: bool, max_image_bytes: int = DEFAULT_MAX_IMAGE_BYTES, files: ImageFiles | None = None
) -> dict:
    """Format, mode and size from the header (and a full decode if asked); ``error`` when unreadable.

    Before a full decode the declared size is checked against
    ``max_image_bytes``. ``files``: where ``path`` is listed (a zip
    archive's member is opened through it); None: a file on disk.
    """
    Image = require("PIL.Image", "images")
    try:
        with files.open(path) if files is not None else open(path, "rb") as handle:
            if handle.seek(0, os.SEEK_END) == 0:
                return {"error": EMPTY_FILE}
            handle.seek(0)
            with Image.open(handle) as image:
                facts = {"format": image.format, "mode": image.mode, "width": image.width, "height": image.height}
                if decode:
                    check_size(image, max_image_bytes)
                    image.load()
        return facts
    except Exception as exc:  # noqa: BLE001 - Pillow raises many types for bad data; all mean "does not decode"
        return {"error": decode_failure(exc)}


def inspect_zip(path: str, *, full: bool, sample_rows: int, memory_limit: int, report: InspectReport) -> None:
    """A zip archive of class folders, as :func:`inspect_images` inspects the folder it holds."""
    inspect_images(path, full=full, sample_rows=sample_rows, memory_limit=memory_limit, report=report, format="zip")


def _sample(count: int, full: bool, archive: bool) -> list[int]:
    """The positions whose headers are read: all of a folder's (or with ``full``), else ``ZIP_SAMPLE`` spread evenly."""
    if full or not archive or count <= ZIP_SAMPLE:
        return list(range(count))
    return sorted({int(i) for i in np.linspace(0, count - 1, ZIP_SAMPLE).round()})


def inspect_images(
    path: str,
    *,
    full: bool,
    sample_rows: int,
    memory_limit: int,
    report: InspectReport,
    format: str = "images",  # noqa: A002 - inspect's --format: "images" (a folder) or "zip" (an archive of one)
) -> None:
    """Fills ``report`` for an image folder or a zip archive of one (its members read, never extracted)."""
    listing = image_files(path, format)
    root, has_classes = listing.root, listing.has_classes
    if listing.archive:
        add_files(report, [root], [listing.archive_bytes])
    else:
        add_files(report, listing.files, listing.sizes)
    limit = decode_bytes_limit(memory_limit)
    picked = _sample(len(listing.files), full, listing.archive)
    probed = [listing.files[i] for i in picked]
    task = "decoding images" if full else "reading headers"
    with progress(len(probed), task, enabled=None if full else False) as advance:
        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            facts = []
            for fact in pool.map(lambda file: probe_image(file, full, limit, listing), probed):
                facts.append(fact)
                advance()
    bad = [(file, fact["error"]) for file, fact in zip(probed, facts) if "error" in fact]
    good = [fact for fact in facts if "error" not in fact]
    failed = {file for file, _ in bad}
    report.rows = len(listing.files) - len(bad)
    report.rows_exact = full or (listing.archive and len(probed) == len(listing.files))  # every header read
    classes = collections.Counter(
        c for c, file in zip(listing.classes, listing.files) if c is not None and file not in failed
    )
    for folder in listing.folders:
        classes.setdefault(folder, 0)
    modes = collections.Counter(fact["mode"] for fact in good)
    sizes = collections.Counter((fact["width"], fact["height"]) for fact in good)
    report.details.update(
        {
            "classes": dict(sorted(classes.items())),
            "formats": dict(collections.Counter(fact["format"] for fact in good).most_common()),
            "modes": dict(modes.most_common()),
            "image_sizes": {f"{w}x{h}": n for (w, h), n in sizes.most_common(20)},
            "image_size_histogram": _pixel_histogram([fact["width"] * fact["height"] for fact in good]),
            "not_images": listing.not_images[:50],
            "undecodable": [{"path": file, "error": error} for file, error in bad[:50]],
        }
    )
    if listing.archive:
        report.details["archive"] = {"members": len(listing.files), "headers_read": len(probed)}
    report.columns = [
        Column("image", "encoded image", samples=[listing.relative(f) for f in listing.files[:sample_rows]])
    ]
    if has_classes:
        report.columns.append(Column("label", "int64", samples=sorted(classes)[:sample_rows]))
        warn_rare_classes(report, dict(classes), root)
    if bad:
        report.warn(
            "unreadable_files",
            f"{len(bad)} image file(s) do not open" + ("" if full else " (headers only; --full decodes every image)"),
            where=bad[0][0],
            found=bad[0][1][:200],
            fix="remove or replace them, or read with on_error='skip'",
        )
    outside = listing.outside_root
    if outside:
        report.warn(
            "links_outside_root",
            f"{len(outside)} symbolic link(s) point outside the folder; they are not followed",
            where=outside[0],
            found=os.path.realpath(outside[0]),
            fix="move the data inside the folder, or read with follow_links='all' if the links are meant",
        )
    if listing.not_images:
        report.warn(
            "not_images",
            f"{len(listing.not_images)} file(s) are not images and will be left out",
            where=listing.not_images[0],
            fix="move them out of the image folder if they are not meant to be there",
        )
    if len(modes) > 1:
        deep = sorted(mode for mode in modes if mode in _HIGH_DEPTH)
        report.warn(
            "mixed_image_modes",
            "Images have different modes (colour, greyscale, bit depth)",
            where=root,
            found=", ".join(f"{mode}: {count}" for mode, count in modes.most_common())
            + (f"; {deep} are more than 8 bits per channel" if deep else ""),
            fix=(
                "decoding converts every image to one mode (channels=3, dtype=...); "
                "check that 16-bit images are scaled as intended"
            ),
        )


def _pixel_histogram(pixels: list[int]) -> list[dict]:
    if not pixels:
        return []
    exponents = np.floor(np.log2(np.maximum(pixels, 1))).astype(int)
    bins, counts = np.unique(exponents, return_counts=True)
    return [
        {"pixels_low": 1 << int(b), "pixels_high": 1 << (int(b) + 1), "images": int(c)} for b, c in zip(bins, counts)
    ]
