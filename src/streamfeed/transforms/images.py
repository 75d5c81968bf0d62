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
from ..errors import DataError, describe
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
from ..sources.images.fragment import too_large


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

    A file that does not decode raises :class:`DataError` naming the row's
    ``path`` when the chunk has one. An image whose header declares more
    than ``max_image_bytes`` decoded (default: as ``read_images``) raises
    :class:`~streamfeed.errors.CorruptFileError` naming the row and the
    declared size, before decoding; under ``on_error="skip"`` its fragment
    is left out and reported, like an unreadable one.
    """
    limit = image_byte_limit(max_image_bytes)
    spec = DecodeSpec(int(size[0]), int(size[1]), int(channels), dtype, resize, decoder, limit)
    chosen = resolve_decoder(decoder)

    def decode_column(chunk: Chunk) -> Chunk:
        encoded = chunk[column]
        images = np.empty((len(encoded),) + spec.shape, dtype=spec.dtype)
        for index, data in enumerate(encoded):
            try:
                images[index] = decode(bytes(data), spec, chosen)
            except ImageDecodeError as exc:
                where = str(chunk["path"][index]) if "path" in chunk else f"row {index} of a chunk"
                if isinstance(exc, ImageTooLargeError):
                    raise too_large(f"{where}, column {column!r}", exc) from exc
                raise DataError(
                    describe(
                        f"Column {column!r} holds bytes that do not decode as an image", where=where, found=str(exc)
                    )
                ) from exc
        out = {name: values for name, values in chunk.items() if name != column}
        out[output] = images
        return out

    decode_column.__name__ = f"decode_images({column})"
    return decode_column
