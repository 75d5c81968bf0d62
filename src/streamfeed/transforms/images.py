"""Decoding a column of encoded images inside a pipeline.

For images stored as bytes (``streamfeed convert`` of an image folder, or a
TFRecord ``bytes`` feature): ``dataset.map(decode_images(size=(224, 224)))``
before ``batch`` decodes in the read threads with the same decoder, rules,
dtype and decompression-bomb bound as :func:`streamfeed.read_images`, and
the same formats: JPEG (and MPO), PNG, WebP, TIFF, BMP and GIF, sniffed
from the bytes. Bytes in any other format (PPM, ICO, TGA, ...) do not
decode: the error names the row and the format found.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from ..core import Chunk
from ..errors import CorruptFileError, DataError, describe
from ..runtime.rows import leave_out_row
from ..sources.images.decode import (
    Decoder,
    DecodeSpec,
    ImageDecodeError,
    ImageTooLargeError,
    OutputDType,
    Resize,
    decode,
    image_byte_limit,
    resolve_decoder,
)
from ..sources.images.fragment import corrupt, too_large


def decode_images(
    size: tuple[int, int] = (224, 224),
    *,
    column: str = "image_bytes",
    output: str = "image",
    channels: int = 3,
    dtype: OutputDType = "uint8",
    resize: Resize = "stretch",
    decoder: Decoder = "auto",
    max_image_bytes: int | None = None,
) -> Callable[[Chunk], Chunk]:
    """A map op replacing ``column`` (encoded bytes) by ``output`` (n, h, w, c) pixels.

    A file that does not decode is a :class:`DataError` naming the row's
    ``path`` when the chunk has one. An image whose header declares more
    than ``max_image_bytes`` decoded (default: as ``read_images``) is a
    :class:`~streamfeed.errors.CorruptFileError` naming the row and the
    declared size, found before decoding. Either raises; under
    ``on_error="skip"``, before ``batch``, the row alone is left out and
    reported (the fragment's file and row, and the reason), and the rows of
    the dataset are then counted as a filter's are (one pass), so that
    ``num_rows()`` is what is served.
    """
    limit = image_byte_limit(max_image_bytes)
    spec = DecodeSpec(int(size[0]), int(size[1]), int(channels), dtype, resize, decoder, limit)
    chosen = resolve_decoder(decoder)

    def decode_column(chunk: Chunk) -> Chunk:
        encoded = chunk[column]
        images = np.empty((len(encoded),) + spec.shape, dtype=spec.dtype)
        keep = np.ones(len(encoded), dtype=bool)
        for index, data in enumerate(encoded):
            try:
                images[index] = decode(bytes(data), spec, chosen)
            except ImageDecodeError as exc:
                where = str(chunk["path"][index]) if "path" in chunk else f"row {index} of a chunk"
                leave_out_row(_undecodable(exc, where, column), index)
                keep[index] = False
        out = {name: values for name, values in chunk.items() if name != column}
        out[output] = images
        return out if keep.all() else {name: values[keep] for name, values in out.items()}

    decode_column.__name__ = f"decode_images({column})"
    decode_column.leaves_out_rows = True  # type: ignore[attr-defined]  # under on_error="skip"
    return decode_column


_CHECK = DecodeSpec(8, 8, 3, "uint8", "stretch", "auto", image_byte_limit(None))
"""How :func:`verify_images` decodes: every byte of the image through the decoder ``decode_images`` uses by
default, to a tiny target. Measured on this 2-core machine, 300 noisy 256x256 JPEGs (34 KB), one core:
0.13 ms an image for the header alone, 0.99 to 8x8 (simplejpeg, scaled in the DCT), 1.9 to 224x224."""


def verify_images(*, column: str = "image_bytes", path: str = "path") -> Callable[[Chunk], Chunk]:
    """A map op that decodes every byte of each image of ``column`` (to 8x8), keeping the bytes as they are.

    What ``streamfeed convert`` runs on an image folder, whose header probe
    at open cannot see a file cut short: a bad image is a
    :class:`~streamfeed.errors.CorruptFileError` naming its file (the
    ``path`` column), raised, or under ``on_error="skip"`` left out and
    reported as that file, as the probe reports the files it refuses.
    Made for one pass that writes what it is served (``convert``): unlike
    :func:`decode_images`, it does not have the rows counted ahead, which
    would decode every image twice, so ``num_rows()`` stays the count
    declared before the check (what was written is counted as it is).
    """
    chosen = resolve_decoder("auto")

    def check_column(chunk: Chunk) -> Chunk:
        encoded = chunk[column]
        keep = np.ones(len(encoded), dtype=bool)
        for index, data in enumerate(encoded):
            try:
                if not len(data):
                    raise ImageDecodeError("the file is empty (0 bytes)")
                decode(bytes(data), _CHECK, chosen)
            except ImageDecodeError as exc:
                name = str(chunk[path][index]) if path in chunk else f"row {index} of a chunk"
                error = corrupt(name, exc)
                error.__cause__ = exc
                leave_out_row(error, index, path=name, location="file")
                keep[index] = False
        return chunk if keep.all() else {name: values[keep] for name, values in chunk.items()}

    check_column.__name__ = f"verify_images({column})"
    return check_column


def _undecodable(exc: ImageDecodeError, where: str, column: str) -> CorruptFileError | DataError:
    """The error for a row of ``column`` that does not decode, raised from ``exc``."""
    if isinstance(exc, ImageTooLargeError):
        error: CorruptFileError | DataError = too_large(f"{where}, column {column!r}", exc)
    else:
        error = DataError(
            describe(f"Column {column!r} holds bytes that do not decode as an image", where=where, found=str(exc))
        )
    error.__cause__ = exc
    return error
