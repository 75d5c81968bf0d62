"""Which image formats streamfeed decodes, and what a file's first bytes say it is.

Only :data:`FORMATS` are decoded: Pillow is asked to try those plugins
only, so no other format's parser ever runs on a stranger's file. A file
that none of them opens is named by its signature (:func:`sniff_format`),
so the error says what it is (a TGA, a JPEG 2000) rather than only that it
is not an image. ``decode.py`` decodes; this module only recognises.
"""

from __future__ import annotations

import functools
import io
from typing import Any

from ...errors import require

# Pillow format names accepted (the JPEG plugin also opens camera MPO files, as format "MPO").
FORMATS = ("JPEG", "PNG", "WEBP", "TIFF", "BMP", "GIF")
# What an image folder lists: the usual suffixes of FORMATS only (a ``.dib`` is almost always a BMP file
# with its header; a headerless DIB is refused by content like any other format outside the list).
IMAGE_SUFFIXES = (".jpg", ".jpeg", ".jpe", ".jfif", ".png", ".webp", ".tif", ".tiff", ".bmp", ".dib", ".gif")


@functools.cache
def pillow():
    """Pillow's ``Image`` module (the ``images`` extra), with every plugin registered; imported once."""
    Image = require("PIL.Image", "images")
    Image.init()  # registers WebP, TIFF, MPO (``open(formats=...)`` needs them registered)
    return Image


def unsupported_reason(data: Any) -> str:
    """Why no accepted plugin opened ``data``, naming the format its signature shows, if any."""
    supported = ", ".join(FORMATS)
    found = sniff_format(data)
    if found is None:
        return f"not an image in a supported format ({supported}); the content was not recognised"
    if found in FORMATS:
        return f"the content starts like a {found} image, but its header could not be read"
    return f"an image in the {found} format (by its signature), which is not one of the supported {supported}"


# Signatures for formats whose Pillow plugins have no magic-byte test of their own.
_TGA_FOOTER = b"TRUEVISION-XFILE.\0"  # TGA 2.0 (what Pillow and most tools write)
_IM_HEADER = b"Image type:"


def sniff_format(data: Any) -> str | None:
    """The Pillow format name whose signature ``data`` (bytes or a seekable binary file) starts with, or None.

    Only for naming what a refused file is: it matches the first bytes
    against each plugin's signature test (``accept``), as ``Image.open``
    does before parsing, and never runs a plugin's parser, so formats
    outside :data:`FORMATS` are identified without being opened. A weak
    signature can misname a file (an uncompressed TGA 1.0 starts like a CUR),
    hence "by its signature" in messages.
    """
    try:
        if isinstance(data, (bytes, bytearray, memoryview)):
            prefix, tail = bytes(data[:16]), bytes(data[-len(_TGA_FOOTER) :])
        else:
            data.seek(0)
            prefix = data.read(16)
            data.seek(0, io.SEEK_END)
            data.seek(max(0, data.tell() - len(_TGA_FOOTER)))
            tail = data.read(len(_TGA_FOOTER))
    except (OSError, ValueError):
        return None
    if tail == _TGA_FOOTER:
        return "TGA"
    if prefix.startswith(_IM_HEADER):
        return "IM"
    Image = pillow()
    for name in Image.ID:
        accept = Image.OPEN[name][1]
        try:
            if accept is not None and accept(prefix):  # a str: recognised, a variant Pillow cannot read
                return name
        except Exception:  # a signature test on a too-short prefix: not that format
            continue
    return None
