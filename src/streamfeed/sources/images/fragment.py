"""Reading image files: the fragment's decode, the header probe at open, and the bad-file errors.

A fragment is a slice of the sorted file list, decoded in one read-thread
call; a file that fails (empty, not an image, corrupt, a decompression
bomb) is a :class:`CorruptFileError` naming it (:func:`corrupt`,
:func:`too_large`), raised or left out and reported by ``on_error``. The
header probe (:func:`probe_files`) finds most bad files when the source
opens, before training. Decoding itself is ``decode.py``'s.
"""

from __future__ import annotations

import os
import stat
from dataclasses import InitVar, dataclass, field
from typing import Protocol

import numpy as np

from ...core import Chunk
from ...errors import BadInputReport, CorruptFileError, FileChangedError, SkippedUnit, describe
from ...files.stamps import Stamp, Stamps, check_stamp, stamps_field, take_stamps
from .decode import (
    JPEG_HEAD_BYTES,
    DecodeSpec,
    ImageDecodeError,
    ImageTooLargeError,
    checked_decoded_bytes,
    decode,
    jpeg_header,
    open_header,
)

_FIX = "remove or replace the file, or pass on_error='skip' to leave it out and report it"


class FragmentSource(Protocol):
    """What a fragment reads through: the :class:`~.source.ImageSource` that made it."""

    root: str
    spec: DecodeSpec
    decode: bool
    decoder: str
    report: BadInputReport
    bad_files: dict[str, CorruptFileError]  # files found bad, at open or when decoding


@dataclass(frozen=True)
class ImageFragment:
    """A slice of the sorted file list, decoded in one read-thread call."""

    key: str
    num_rows: int
    paths: tuple[str, ...]
    labels: np.ndarray | None
    _source: FragmentSource = field(repr=False, compare=False)
    stamps: InitVar[Stamps | None] = None  # the listing's, taken at open; None: taken here
    _stamps: Stamps = stamps_field()

    def __post_init__(self, stamps: Stamps | None) -> None:
        # taken at open, checked by each file's read
        object.__setattr__(self, "_stamps", take_stamps(self.paths) if stamps is None else stamps)

    @property
    def path(self) -> str:
        """The image folder: a fragment's files are reported one by one when they fail."""
        return self._source.root

    @property
    def location(self) -> str:
        return f"files {self.paths[0]} .. {self.paths[-1]}" if self.paths else "no files"

    def read(self) -> Chunk:
        if not self._source.decode:
            return self._read_encoded()
        source = self._source
        spec = source.spec
        images = np.empty((len(self.paths),) + spec.shape, dtype=spec.dtype)
        keep = np.ones(len(self.paths), dtype=bool)
        for index, path in enumerate(self.paths):
            error = source.bad_files.get(path)
            if error is None:
                try:
                    data = self._load(index)
                    if not data:
                        raise ImageDecodeError("the file is empty (0 bytes)")
                    decode(data, spec, source.decoder, out=images[index])  # written in place: no copy
                    continue
                except FileChangedError:
                    raise  # not a bad file: rows of two versions of the folder would be mixed
                except (ImageDecodeError, OSError) as exc:
                    error = source.bad_files.setdefault(path, corrupt(path, exc))
                    if source.report.on_error == "raise":
                        raise error from exc
            if source.report.on_error == "raise":
                raise error
            keep[index] = False
            source.report.add(SkippedUnit(path, "file", str(error), 1))
        chunk: Chunk = {"image": images, "path": np.array(self.paths, dtype=object)}
        if self.labels is not None:
            chunk["label"] = self.labels.copy()
        if not keep.all():
            chunk = {name: column[keep] for name, column in chunk.items()}
        return chunk

    def _read_encoded(self) -> Chunk:
        """The files' bytes as they are (``decode=False``), for storing or later decoding."""
        contents = np.empty(len(self.paths), dtype=object)
        for index, path in enumerate(self.paths):
            try:
                contents[index] = self._load(index)
            except FileChangedError:
                raise
            except (ImageDecodeError, OSError) as exc:  # unreadable since the probe (a link to /proc)
                raise corrupt(path, exc) from exc
        chunk: Chunk = {"image_bytes": contents, "path": np.array(self.paths, dtype=object)}
        if self.labels is not None:
            chunk["label"] = self.labels.copy()
        return chunk

    def _load(self, index: int) -> bytes:
        """File ``index``'s bytes, refused if it is not the file stamped at open (a same-size rewrite included).

        Only a regular file is opened: a link may point anywhere, and a FIFO
        would block the read, a device never end. One ``read`` of the size
        ``stat`` gave (more only after a short read or if the file grew): Python's buffered
        ``open().read()`` made seven system calls a file, this five; with the
        decode, 0.484 against 0.478 CPU ms an image (1 280 files 256x256, one
        thread, best of 7).
        """
        path, taken = self.paths[index], self._stamps[index] if self._stamps else None
        found = os.stat(path)
        if not stat.S_ISREG(found.st_mode):
            raise ImageDecodeError("not a regular file (a device, a FIFO or a socket)")
        handle = os.open(path, os.O_RDONLY | getattr(os, "O_BINARY", 0))
        try:
            data = os.read(handle, found.st_size + 1)
            if len(data) != found.st_size:  # a short read, or grown since the stat (then refused by the stamp)
                parts = [data]
                while part := os.read(handle, 1 << 20):
                    parts.append(part)
                data = b"".join(parts)
            if taken is not None:
                check_stamp(path, taken, Stamp.of(os.fstat(handle)))
        finally:
            os.close(handle)
        return data


def corrupt(path: str, exc: BaseException) -> CorruptFileError:
    if isinstance(exc, ImageTooLargeError):
        return too_large(path, exc)
    reason = str(exc) if isinstance(exc, ImageDecodeError) else f"{type(exc).__name__}: {exc}"
    return CorruptFileError(
        describe(
            "Could not read an image file" if isinstance(exc, OSError) else "Could not decode an image",
            where=path,
            expected="a JPEG, PNG, WebP, TIFF, BMP or GIF image",
            found=reason,
            fix=_FIX,
        )
    )


def too_large(where: str, exc: ImageTooLargeError) -> CorruptFileError:
    """The error for an image whose header declares more than may be decoded (a bad unit: skippable)."""
    return CorruptFileError(
        describe(
            "An image declares a size larger than may be decoded (a decompression bomb, or too large)",
            where=where,
            expected="at most max_image_bytes (and a quarter of memory_limit) decoded, within Pillow's limit",
            found=str(exc),
            fix=(
                "raise the bound it names (and PIL.Image.MAX_IMAGE_PIXELS) if the image is genuine, "
                "remove the file, or pass on_error='skip' to leave it out and report it"
            ),
        )
    )


PROBE_FILES = 64
"""Files per header-probe task. Measured on 10 000 warm 256x256 JPEGs, 2 cores, 8 threads (Pillow headers):
one task per file 2.0-2.4 s wall, 64 files per task 1.6-1.9 s (and 0.66 s with the JPEG header read below)."""


def probe_files(paths: list[str], spec: DecodeSpec | None) -> list[tuple[BaseException | None, int]]:
    """Each file's problem (None: none found) and the bytes its header declares decoded (0 without a ``spec``)."""
    return [_probe(path, spec) for path in paths]


def _probe(path: str, spec: DecodeSpec | None) -> tuple[BaseException | None, int]:
    """Opens one file's header; returns the problem, if any, and its declared decoded bytes.

    With a ``spec`` (images are decoded) the declared size is checked
    against its bound too, so a decompression bomb is found at open, and
    returned: the largest sizes what a read holds while it decodes
    (``ImageSource.read_scratch``).
    """
    try:
        found = os.stat(path)
        if not stat.S_ISREG(found.st_mode):  # a link to a device or FIFO: never opened (it may block or not end)
            return ImageDecodeError("not a regular file (a device, a FIFO or a socket)"), 0
        if found.st_size == 0:
            return ImageDecodeError("the file is empty (0 bytes)"), 0
        # JPEGs by libjpeg-turbo's C header read (Pillow's Python parse holds the GIL: 0.07 ms a file
        # against 0.017; 10 000 files on 2 cores opened in 0.66 s against 1.6-1.9 s), their first bytes read
        # with one os.read; the rest by Pillow.
        handle = os.open(path, os.O_RDONLY | getattr(os, "O_BINARY", 0))
        try:
            head = os.read(handle, min(JPEG_HEAD_BYTES, found.st_size))
        finally:
            os.close(handle)
        header = jpeg_header(head)
        if header is not None:
            return None, checked_decoded_bytes(header, spec)
        with open(path, "rb") as stream, open_header(stream) as image:
            return None, checked_decoded_bytes(image, spec)
    except (ImageDecodeError, OSError) as exc:
        return exc, 0
