"""Decoding one image file's bytes into a fixed-size NumPy array.

What a caller gets is always ``(height, width, channels)`` of ``uint8``
(0..255) or ``float32`` (0..1), whatever the file held:

* **Format from content.** Pillow sniffs the magic bytes; the file name's
  extension is never trusted (a PNG named ``.jpg`` decodes as PNG). Only
  JPEG (and camera MPO JPEGs), PNG, WebP, TIFF, BMP and GIF are accepted:
  Pillow is asked to try those plugins only, so no other format's parser
  ever runs. Anything else (PPM, ICO, TGA, JPEG 2000, ...) is an
  undecodable image whose error names the format its first bytes show
  (``formats.sniff_format``).
* **EXIF orientation** is applied (``ImageOps.exif_transpose``), so a phone
  photo stored sideways comes out upright; the target size is understood in
  the upright frame.
* **Bit depth.** 16-bit images (PNG/TIFF ``I;16``) are scaled, not clipped:
  65535 becomes 255 in ``uint8`` and 1.0 in ``float32``. 32-bit integer
  images (``I``) are read as 16-bit values (clipped to 0..65535) and float
  images (``F``) as 0..1 (clipped).
* **Channels.** Grayscale, palette, CMYK, YCbCr and alpha images are
  converted: ``channels=1`` is ITU-R 601 luma, ``3`` is RGB with any alpha
  dropped (as TensorFlow's ``decode_image`` does; transparent pixels keep
  their stored colour), ``4`` is RGBA (opaque alpha added when absent).
  Animated GIFs and multi-page TIFFs give their first frame.
* **Resize policy.** ``"stretch"`` resizes to the target ignoring aspect;
  ``"crop"`` keeps the aspect, scales so the image covers the target and
  cuts the centre; ``"pad"`` keeps the aspect, scales so the image fits and
  centres it on zeros. Bilinear (antialiased) filter.
* **Speed.** JPEGs are downscaled in the DCT domain while decoding when the
  target is smaller (libjpeg-turbo: Pillow's ``draft`` by 1/2, 1/4, 1/8, or
  ``simplejpeg`` by any M/8, which often lands exactly on the target, e.g.
  256 → 224 is 7/8). Measured on this project's 2-core machine, one core:
  256² → 224² Pillow+draft 872 img/s, simplejpeg 2 428, OpenCV 1 339;
  1024² → 256² Pillow+draft 379, simplejpeg 411, OpenCV 381. So
  ``decoder="auto"`` uses simplejpeg for JPEG when it is installed and
  Pillow for everything else. All of it releases the GIL, so fragments
  decode in parallel in the pipeline's read threads.

* **Decompression bombs.** A few KB of PNG can declare 50 000 x 50 000
  pixels. Before any pixel is decoded, the size the header declares
  (width x height x channels x bytes per sample, channels being the larger
  of the stored bands and the output's) is checked against
  ``DecodeSpec.max_image_bytes`` (default :data:`DEFAULT_MAX_IMAGE_BYTES`, a
  quarter of the default memory limit) and against Pillow's own limit
  (``PIL.Image.MAX_IMAGE_PIXELS``): over either, :class:`ImageTooLargeError`.
  Pillow's ``DecompressionBombError`` (and its warning, when warnings are
  errors) become that error too. Pillow's warnings are never silenced
  (``warnings.catch_warnings`` changes process-wide state, racing the other
  read threads): a warned-about image is refused by the check after it.

Errors raise :class:`ImageDecodeError` with the reason; the source wraps it
in a :class:`~streamfeed.errors.CorruptFileError` naming the file.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from ...errors import ArgumentError, describe, require
from ...memory import DECODE_SHARE, DEFAULT_MEMORY_LIMIT, READ_TRANSIENT, decode_bound
from .formats import FORMATS, pillow, unsupported_reason

Resize = Literal["stretch", "crop", "pad"]
Decoder = Literal["auto", "pillow", "simplejpeg"]
OutputDType = Literal["uint8", "float32"]

_HIGH_DEPTH = {"I;16", "I;16L", "I;16B", "I;16N", "I", "F"}
_SAMPLE_BYTES = {"I;16": 2, "I;16L": 2, "I;16B": 2, "I;16N": 2, "I": 4, "F": 4}  # other modes: 1 byte per band

DEFAULT_MAX_IMAGE_BYTES = DEFAULT_MEMORY_LIMIT // 4
"""Default bound on one image's decoded bytes: a quarter of the default memory limit (128 MiB,
about 6 700 x 6 700 RGB), so a few images decoding at once in the read threads stay within it."""
_ORIENTATION_TAG = 0x0112
# numpy equivalents of EXIF orientations 2..8 (applied to an (h, w, c) array)
_ORIENT_NUMPY = {
    2: lambda a: a[:, ::-1],
    3: lambda a: a[::-1, ::-1],
    4: lambda a: a[::-1],
    5: lambda a: a.transpose(1, 0, 2),
    6: lambda a: np.rot90(a, -1),
    7: lambda a: np.rot90(a, 1)[::-1],  # transverse
    8: lambda a: np.rot90(a, 1),
}


def image_byte_limit(max_image_bytes: int | None) -> int:
    """The bound on one image's decoded bytes: ``max_image_bytes``, or the default for None; checked positive."""
    limit = DEFAULT_MAX_IMAGE_BYTES if max_image_bytes is None else int(max_image_bytes)
    if limit < 1:
        raise ArgumentError(
            describe(
                "max_image_bytes bounds one image's decoded bytes",
                expected="a positive number of bytes (or None for the default)",
                found=repr(max_image_bytes),
            )
        )
    return limit


class ImageDecodeError(ValueError):
    """The bytes are not a decodable image of a supported format."""


class ImageTooLargeError(ImageDecodeError):
    """The header declares more pixels than may be decoded (a decompression bomb, or just too big)."""


@dataclass(frozen=True)
class DecodeSpec:
    """What every decoded image becomes."""

    height: int
    width: int
    channels: int = 3
    dtype: OutputDType = "uint8"
    resize: Resize = "stretch"
    decoder: Decoder = "auto"
    max_image_bytes: int = DEFAULT_MAX_IMAGE_BYTES

    @property
    def shape(self) -> tuple[int, int, int]:
        return (self.height, self.width, self.channels)


def _simplejpeg():
    try:
        import simplejpeg
    except ImportError:
        return None
    return simplejpeg


def resolve_decoder(name: Decoder) -> str:
    """``"pillow"`` or ``"simplejpeg"``; ``auto`` prefers simplejpeg when installed."""
    if name == "simplejpeg":
        require("simplejpeg", "images")
        return "simplejpeg"
    if name == "auto":
        return "simplejpeg" if _simplejpeg() is not None else "pillow"
    if name == "pillow":
        return "pillow"
    raise ArgumentError(describe("Invalid decoder", expected="'auto', 'pillow' or 'simplejpeg'", found=f"{name!r}"))


def open_header(data: bytes | Any):
    """Opens an image lazily (header only); raises :class:`ImageDecodeError`.

    Pillow's decompression-bomb refusal raises :class:`ImageTooLargeError`;
    its warning is left to the warning filters (shown by default, raised
    under ``-W error``, then refused here as well).
    """
    Image = pillow()
    if isinstance(data, (bytes, bytearray, memoryview)):
        if len(data) == 0:
            raise ImageDecodeError("the file is empty (0 bytes)")
        data = io.BytesIO(data)
    try:
        return Image.open(data, formats=FORMATS)
    except (Image.DecompressionBombError, Image.DecompressionBombWarning) as exc:
        raise _bomb(exc) from exc
    except Image.UnidentifiedImageError as exc:
        raise ImageDecodeError(unsupported_reason(data)) from exc
    except (OSError, SyntaxError, ValueError, EOFError) as exc:
        raise ImageDecodeError(f"unreadable image header: {type(exc).__name__}: {exc}") from exc


JPEG_HEAD_BYTES = 1 << 16
"""Bytes of a file :func:`jpeg_header` is given: room for the EXIF and ICC segments before the frame header."""
_JPEG_MODES = {"Gray": "L", "RGB": "RGB", "YCbCr": "RGB", "CMYK": "CMYK", "YCCK": "CMYK"}  # as Pillow opens them


@dataclass(frozen=True)
class JpegHeader:
    """What :func:`check_size` reads of a Pillow image (size, mode, bands), from libjpeg-turbo's header read."""

    size: tuple[int, int]
    mode: str

    def getbands(self) -> tuple[str, ...]:
        return tuple(self.mode)


def jpeg_header(head: bytes) -> JpegHeader | None:
    """A JPEG's size and mode from libjpeg-turbo's header read of its first bytes, or None.

    Pillow parses a JPEG header in Python under the GIL (0.07 ms a file);
    simplejpeg's C read takes 0.017 ms. None leaves the verdict to Pillow
    (:func:`open_header`): not a JPEG, no simplejpeg, a colour space Pillow
    would name otherwise, or a header not within ``head``. A file it reads
    but that fails past the header fails when it is decoded, as any corrupt
    JPEG body does.
    """
    simplejpeg = _simplejpeg()
    if simplejpeg is None or bytes(head[:3]) != b"\xff\xd8\xff":
        return None
    try:
        height, width, colorspace, _ = simplejpeg.decode_jpeg_header(head)
    except (ValueError, KeyError):  # KeyError: a colour space simplejpeg has no name for
        return None
    mode = _JPEG_MODES.get(colorspace)
    return None if mode is None else JpegHeader((width, height), mode)


def _bomb(exc: BaseException) -> ImageTooLargeError:
    return ImageTooLargeError(
        f"Pillow refuses the size the header declares as a possible decompression bomb ({exc}); "
        "PIL.Image.MAX_IMAGE_PIXELS sets Pillow's limit"
    )


def declared_bytes(image: Any, channels: int = 1) -> tuple[int, int]:
    """(bytes, channels) the image's header declares decoded: width x height x channels x sample bytes.

    ``channels`` is the larger of the stored bands and the output's
    (a grey image decoded to RGB is three bytes a pixel).
    """
    width, height = image.size
    bands = max(len(image.getbands()), channels)
    return width * height * bands * _SAMPLE_BYTES.get(image.mode, 1), bands


DECODE_COPIES = 3
"""Full-size copies of one image a read may hold while it decodes (Pillow's decode, mode conversion, resize).

Measured: a 2048x2048 PNG read to 64 held 36 MiB beyond its output, 2.9x
its 12 MiB decode; 128 JPEGs of 1024x1024 read to 256 held nothing beyond
the fragment's array (libjpeg-turbo's DCT scaling decodes small).
"""

RESIZED_COPIES = 2
"""Copies of one image at the output size a read may hold beside the fragment's array (the resized image, and
its array before the copy into the fragment's row). Measured: 2048x2048 PNGs read to 1448 held 41-54 MiB
beyond 4-image fragments, against 50 MiB for :data:`DECODE_COPIES` decodes and the file alone."""


def checked_decoded_bytes(image: Any, spec: "DecodeSpec | None") -> int:
    """The bytes the image's header declares decoded, refused over the bound (:func:`check_size`); 0 without a spec."""
    if spec is None:
        return 0
    check_size(image, spec.max_image_bytes, spec.channels)
    return declared_bytes(image, spec.channels)[0]


def read_scratch(
    largest_decode: int | None, largest_file: int, rows: int, fragments: int, row_bytes: float, held_bytes: int = 0
) -> float:
    """A fragment read's bytes beyond its array, per byte of the mean fragment, as the layout multiplies it.

    The decoding part: one file, :data:`DECODE_COPIES` of its decode and
    :data:`RESIZED_COPIES` of a row (``largest_decode`` None: not probed,
    the library's figure), at most the library's figure
    (``memory.READ_TRANSIENT``): more than that is one item's (a 3000x3000
    PNG among thumbnails), which the decode bound holds to a quarter of the
    limit, refused or skipped by itself. Beside it,
    ``held_bytes``: what the read holds whatever its images decode to (a
    zip fragment's members, read and inflated at once), never capped. The
    mean fragment is ``rows`` over ``fragments`` rows of ``row_bytes``.
    """
    mean_fragment_bytes = max(rows / max(fragments, 1) * row_bytes, 1.0)
    decoding = (
        READ_TRANSIENT
        if largest_decode is None
        else min(
            (DECODE_COPIES * largest_decode + largest_file + RESIZED_COPIES * row_bytes) / mean_fragment_bytes,
            READ_TRANSIENT,
        )
    )
    return held_bytes / mean_fragment_bytes + decoding


def check_size(image: Any, max_image_bytes: int, channels: int = 1) -> None:
    """Raises :class:`ImageTooLargeError` if the declared size is over the bound or Pillow's limit.

    Reads the header's size and mode only: nothing has been decoded yet.
    Inside a pipeline the bound is also the memory limit's share for one
    item (:func:`~streamfeed.memory.decode_bound`), whichever is lower.
    """
    size, bands = declared_bytes(image, channels)
    width, height = image.size
    declared = f"the header declares {width}x{height} pixels x {bands} channels = {size} bytes decoded"
    share = decode_bound()
    bound, name = (
        (share, f"memory_limit / {DECODE_SHARE}")
        if share is not None and share < max_image_bytes
        else (max_image_bytes, "max_image_bytes")
    )
    if size > bound:
        raise ImageTooLargeError(
            f"{declared} ({size / 2**20:,.1f} MiB), over the limit of {bound} bytes ({bound / 2**20:,.1f} MiB, {name})"
        )
    limit = pillow().MAX_IMAGE_PIXELS
    if limit is not None and width * height > limit:
        raise ImageTooLargeError(
            f"{declared}: {width * height} pixels is over Pillow's decompression bomb limit of {limit} "
            "(PIL.Image.MAX_IMAGE_PIXELS)"
        )


def _orientation(image) -> int:
    try:
        value = int(image.getexif().get(_ORIENTATION_TAG, 1))
    except Exception:  # malformed EXIF: decode as stored, like every viewer does
        return 1
    return value if 1 <= value <= 8 else 1


def _content_size(spec: DecodeSpec, upright: tuple[int, int]) -> tuple[int, int]:
    """(width, height) the whole image is scaled to before crop/pad."""
    w, h = upright
    if spec.resize == "stretch":
        return spec.width, spec.height
    scale = (max if spec.resize == "crop" else min)(spec.width / w, spec.height / h)
    return max(1, round(w * scale)), max(1, round(h * scale))


def decode(data: bytes, spec: DecodeSpec, decoder: str = "pillow", out: np.ndarray | None = None) -> np.ndarray:
    """Decodes one file's bytes to ``spec.shape`` of ``spec.dtype``, into ``out`` when given (then returned).

    ``decoder`` is the resolved name (see :func:`resolve_decoder`). The
    declared size is checked (:func:`check_size`) before anything is decoded.
    With simplejpeg, a JPEG's header is read once, by libjpeg-turbo, and
    Pillow is not asked unless the file holds an APP1 segment (EXIF or XMP,
    whose orientation Pillow reads): :func:`_decode_jpeg`.
    """
    if decoder == "simplejpeg" and spec.channels in (1, 3):
        header = jpeg_header(data)
        if header is not None and header.mode in ("RGB", "L"):
            return _decode_jpeg(data, header, spec, out)
    array = _decode_pillow(data, spec, decoder)
    if out is None:
        return array
    out[...] = array
    return out


def _decode_pillow(data: bytes, spec: DecodeSpec, decoder: str) -> np.ndarray:
    """Every format through Pillow (a JPEG with ``decoder="simplejpeg"`` only past Pillow's header parse)."""
    image = open_header(data)
    Image = pillow()
    try:
        check_size(image, spec.max_image_bytes, spec.channels)
        orientation = _orientation(image)
        content, need = _sizes(spec, image.size, orientation)
        if image.format in ("JPEG", "MPO") and image.mode in ("RGB", "L") and spec.channels in (1, 3):
            if decoder == "simplejpeg":
                return _finish_array(_simplejpeg_decode(data, spec, need, orientation), spec, content)
            image.draft("L" if spec.channels == 1 else "RGB", need)
        image.load()
        if orientation != 1:
            from PIL import ImageOps

            image = ImageOps.exif_transpose(image)
        return _finish_pillow(image, spec, content)
    except ImageDecodeError:
        raise
    except (Image.DecompressionBombError, Image.DecompressionBombWarning) as exc:  # a GIF frame, a TIFF tile
        raise _bomb(exc) from exc
    except (OSError, SyntaxError, ValueError, EOFError, MemoryError) as exc:
        raise ImageDecodeError(
            f"could not decode the {image.format} image ({image.size[0]}x{image.size[1]}, mode {image.mode}): "
            f"{type(exc).__name__}: {exc}"
        ) from exc
    finally:
        image.close()


def _sizes(spec: DecodeSpec, stored: tuple[int, int], orientation: int) -> tuple[tuple[int, int], tuple[int, int]]:
    """(content, need): the (width, height) the upright image is scaled to, and that size in the stored frame."""
    swapped = orientation in (5, 6, 7, 8)
    raw_w, raw_h = stored
    content_w, content_h = _content_size(spec, (raw_h, raw_w) if swapped else (raw_w, raw_h))
    return (content_w, content_h), ((content_h, content_w) if swapped else (content_w, content_h))


def _decode_jpeg(data: bytes, header: JpegHeader, spec: DecodeSpec, out: np.ndarray | None) -> np.ndarray:
    """A JPEG in RGB or grey through simplejpeg, from libjpeg-turbo's header read (:func:`jpeg_header`).

    The size check and the scale come from that one read; the orientation
    is 1 unless an APP1 segment (EXIF or XMP) may precede the scan
    (:func:`_app1_before_scan`), when Pillow reads it as before. When the
    DCT-scaled decode lands on the target (256 -> 224 is 7/8) upright and
    in uint8, libjpeg-turbo writes straight into ``out`` (the fragment's
    row): measured 0.46 against 0.52 ms an image decoding to a new array
    and copying it (1 000 images 256x256 -> 224x224, one core).
    """
    check_size(header, spec.max_image_bytes, spec.channels)
    orientation = _exif_orientation(data) if _app1_before_scan(data) else 1
    content, need = _sizes(spec, header.size, orientation)
    direct = out is not None and orientation == 1 and spec.dtype == "uint8"
    if direct and scaled_size(header.size, need) == (spec.width, spec.height):
        _simplejpeg_decode(data, spec, need, 1, buffer=out)
        return out  # type: ignore[return-value]  # direct: out is not None
    array = _finish_array(_simplejpeg_decode(data, spec, need, orientation), spec, content)
    if out is None:
        return array
    out[...] = array
    return out


_LENGTH_MARKERS = frozenset(range(0xC0, 0xFF)) - frozenset(range(0xD0, 0xDA))  # each followed by its length


def _app1_before_scan(data: bytes) -> bool:
    """Whether an APP1 segment may come before a JPEG's first scan (SOS); True whenever unsure.

    Walks the segments by their lengths as Pillow's parser does, stopping at
    the scan: a search for ``FF E1`` in the whole file took 0.21 ms on a
    200 KB 1024x1024 JPEG (``FF`` is frequent in entropy-coded data), the
    walk a few microseconds. Anything but a clean run of length-prefixed
    markers (junk bytes, a restart marker, a second SOI, the end of the
    bytes) is unsure, and Pillow judges the file as before.
    """
    pos, end = 2, len(data)
    while pos + 4 <= end:
        if data[pos] != 0xFF:
            return True
        marker = data[pos + 1]
        if marker == 0xFF:  # a fill byte
            pos += 1
        elif marker == 0xDA:
            return False
        elif marker == 0xE1 or marker not in _LENGTH_MARKERS:
            return True
        else:
            pos += 2 + ((data[pos + 2] << 8) | data[pos + 3])
    return True


def _exif_orientation(data: bytes) -> int:
    """The EXIF orientation Pillow reads from a JPEG's bytes (its header parse; errors as :func:`open_header`)."""
    with open_header(data) as image:
        return _orientation(image)


def scaled_size(size: tuple[int, int], need: tuple[int, int]) -> tuple[int, int]:
    """(width, height) simplejpeg decodes ``size`` to for ``min_width, min_height = need``.

    libjpeg-turbo scales by the smallest M/8 (M = 1..8) giving at least
    ``need`` on both sides (a need over the image's size counts as its
    size), each side ``ceil(side * M / 8)``: simplejpeg's
    ``calc_height_width``, so no second header read is needed to know it.
    """
    width, height = size
    min_w, min_h = min(width, need[0]), min(height, need[1])
    for eighths in range(1, 9):
        scaled = (-(-width * eighths // 8), -(-height * eighths // 8))
        if scaled[0] >= min_w and scaled[1] >= min_h:
            return scaled
    return size


def _simplejpeg_decode(
    data: bytes, spec: DecodeSpec, need: tuple[int, int], orientation: int, buffer: np.ndarray | None = None
) -> np.ndarray:
    simplejpeg = _simplejpeg()
    colorspace = "GRAY" if spec.channels == 1 else "RGB"
    try:
        array = simplejpeg.decode_jpeg(
            data, colorspace=colorspace, min_width=need[0], min_height=need[1], strict=True, buffer=buffer
        )
    except ValueError as exc:
        raise ImageDecodeError(f"could not decode the JPEG image: {exc}") from exc
    if array.ndim == 2:
        array = array[:, :, None]
    if orientation != 1:
        array = _ORIENT_NUMPY[orientation](array)
    return array


def _resample():
    return pillow().Resampling.BILINEAR


def _place(content: np.ndarray, spec: DecodeSpec, content_size: tuple[int, int]) -> np.ndarray:
    """Crops or pads an already scaled ``content`` array to the target (centre)."""
    ch, cw = content.shape[:2]
    if (ch, cw) == (spec.height, spec.width):
        return content
    if spec.resize == "crop":
        top, left = (ch - spec.height) // 2, (cw - spec.width) // 2
        return content[top : top + spec.height, left : left + spec.width]
    out = np.zeros((spec.height, spec.width) + content.shape[2:], dtype=content.dtype)
    top, left = (spec.height - ch) // 2, (spec.width - cw) // 2
    out[top : top + ch, left : left + cw] = content
    return out


def _finish_array(array: np.ndarray, spec: DecodeSpec, content_size: tuple[int, int]) -> np.ndarray:
    """uint8 (h, w, 1|3) from simplejpeg → the target shape and dtype."""
    if (array.shape[1], array.shape[0]) != content_size:
        Image = pillow()
        squeezed = array[:, :, 0] if array.shape[2] == 1 else array
        resized = Image.fromarray(np.ascontiguousarray(squeezed)).resize(content_size, _resample())
        array = np.asarray(resized)
        if array.ndim == 2:
            array = array[:, :, None]
    array = _place(array, spec, content_size)
    return _to_dtype_uint8(array, spec)


def _to_dtype_uint8(array: np.ndarray, spec: DecodeSpec) -> np.ndarray:
    if spec.dtype == "uint8":
        return np.ascontiguousarray(array, dtype=np.uint8)
    return array.astype(np.float32) * np.float32(1 / 255)


def _normalise_mode(image):
    """An 8-bit image in L, LA, RGB or RGBA (or F, 0..1, for high bit depths)."""
    mode = image.mode
    if mode in _HIGH_DEPTH:
        values = np.asarray(image)
        if mode == "F":
            values = np.clip(values.astype(np.float32), 0.0, 1.0)
        else:
            values = np.clip(values.astype(np.float32), 0, 65535) * np.float32(1 / 65535)
        return pillow().fromarray(np.ascontiguousarray(values, dtype=np.float32), "F")
    if mode in ("L", "LA", "RGB", "RGBA"):
        return image
    if mode == "P":
        return image.convert("RGBA" if "transparency" in image.info else "RGB")
    if mode == "PA" or mode == "La":
        return image.convert("RGBA" if mode == "PA" else "LA")
    if mode == "RGBa":
        return image.convert("RGBA")
    if mode == "1":
        return image.convert("L")
    return image.convert("RGB")  # CMYK, YCbCr, LAB, HSV, I;16 RGB variants


def _finish_pillow(image, spec: DecodeSpec, content_size: tuple[int, int]) -> np.ndarray:
    image = _normalise_mode(image)
    if image.mode == "F":
        return _finish_float(image, spec, content_size)
    target = {1: "L", 3: "RGB", 4: "RGBA"}[spec.channels]
    if image.mode != target:
        image = image.convert(target)
    if image.size != content_size:
        image = image.resize(content_size, _resample())
    array = np.asarray(image)
    if array.ndim == 2:
        array = array[:, :, None]
    return _to_dtype_uint8(_place(array, spec, content_size), spec)


def _finish_float(image, spec: DecodeSpec, content_size: tuple[int, int]) -> np.ndarray:
    """A single-channel 0..1 float image (from 16-bit data) → target."""
    if image.size != content_size:
        image = image.resize(content_size, _resample())
    gray = np.clip(np.asarray(image, dtype=np.float32), 0.0, 1.0)[:, :, None]
    gray = _place(gray, spec, content_size)
    if spec.channels == 3:
        gray = np.repeat(gray, 3, axis=2)
    elif spec.channels == 4:
        gray = np.concatenate([np.repeat(gray, 3, axis=2), np.ones_like(gray)], axis=2)
    if spec.dtype == "float32":
        return np.ascontiguousarray(gray, dtype=np.float32)
    return np.rint(gray * 255.0).astype(np.uint8)
