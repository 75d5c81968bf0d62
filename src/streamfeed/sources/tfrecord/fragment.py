"""Reading a TFRecord fragment: a range of records, loaded, split, decoded into columns.

Records are decoded here, columnar, in the pipeline's read threads.
Records that share one byte layout (a fixed-shape file: the same features
in the same order, lists of the same length) are decoded at once by
``fast.py``, with strided NumPy views; every other record by the
general parser (``format.py``), which reads any valid Example.
TensorFlow's parser is not used even when it is installed: on a fragment of
28 729 fixed-shape records, ``tf.io.parse_example`` took 0.15 CPU s, the
layout decoder 0.03 (``benchmarks/tfrecord.py`` compares whole reads with
tf.data).

A record whose *data* CRC does not match (or that does not match the
feature spec) is that one record: ``on_error="raise"`` names file, record
index and byte offset; ``"skip"`` leaves it out and reports it (rows=1).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, Mapping

import numpy as np
import pyarrow.fs as pafs

from ...core import Chunk
from ...errors import BadInputReport, CorruptFileError, DataError, OnError, SkippedUnit, describe
from ...files import inflate as _inflate
from ...files.stamps import Stamps, stamps_field, take_stamps, unchanged
from . import fast
from . import format as fmt
from .index import record_where

Parser = Literal["layout", "general"]
_SKIP_FIX = "rewrite the file, or pass on_error='skip' to leave the damaged records out and report them"


def _decode_image(data: bytes, target: tuple[int, ...] | None) -> np.ndarray:
    """One encoded image → (height, width, channels) uint8: the swap point for image decoding.

    With a target ``(height, width[, channels])`` this uses the shared image
    decoder (``sources/images/decode.py``: EXIF orientation, resize, channel
    rules); without one, Pillow at the stored size as RGB, after the same
    check of the header's declared size (a bomb is a bad record, not an allocation).
    """
    from ..images import decode as _decode

    if target is not None:
        spec = _decode.DecodeSpec(*target[:3])  # type: ignore[arg-type]  # (height, width[, channels]): ints only
        return _decode.decode(data, spec, _decode.resolve_decoder(spec.decoder))
    with _decode.open_header(data) as image:
        _decode.check_size(image, _decode.image_byte_limit(None), channels=3)
        return np.asarray(image.convert("RGB"))


@dataclass(frozen=True)
class Decoder:
    """What every fragment needs to turn its bytes into columns (shared, read-only)."""

    filesystem: pafs.FileSystem
    specs: tuple[fmt.FeatureSpec, ...]
    images: Mapping[str, tuple[int, ...] | None]
    on_error: OnError
    report: BadInputReport = field(compare=False)
    parser: Parser = "layout"


@dataclass(frozen=True)
class TFRecordFragment:
    """A range of consecutive records of one file (GZIP: resumed from a decompressor checkpoint)."""

    key: str
    num_rows: int
    path: str
    first_record: int
    start: int  # byte offset of the first record (decompressed for GZIP)
    end: int
    compressed: bool
    _decoder: Decoder = field(repr=False, compare=False)
    _checkpoints: _inflate.Checkpoints | None = field(default=None, repr=False, compare=False)
    _stamps: Stamps = stamps_field()

    def __post_init__(self) -> None:
        object.__setattr__(
            self, "_stamps", take_stamps((self.path,), self._decoder.filesystem)
        )  # taken at open, checked by read()

    @property
    def location(self) -> str:
        return f"records {self.first_record}-{self.first_record + self.num_rows - 1}"

    def read(self) -> Chunk:
        """:meth:`_read`, refused if the file changed since the source opened it (``files/stamps.py``)."""
        with unchanged((self.path,), self._stamps):
            return self._read()

    def _read(self) -> Chunk:
        data = self.load()
        starts, lengths, bad_crc, problem = fmt.split_records(data, self.num_rows)
        if problem is not None:
            raise CorruptFileError(
                describe(
                    "A TFRecord file changed or became unreadable after it was opened",
                    where=record_where(
                        self.path, self.first_record + problem.index, self.start + problem.offset, self.compressed
                    ),
                    found=problem.problem,
                    fix="do not modify input files while streaming them; open the dataset again",
                )
            )
        buf = np.frombuffer(data + bytes(fmt.PAD_BYTES), dtype=np.uint8)
        decode = fmt.decode_examples if self._decoder.parser == "general" else fast.decode_examples
        columns, errors = decode(buf, data, starts, lengths, self._decoder.specs)
        for row in bad_crc:
            errors[row] = "the record's data CRC does not match (the bytes were damaged)"
        self._decode_images(columns, errors)
        if errors:
            columns = self._handle(columns, errors, starts, bad_crc)
        return columns

    def load(self) -> bytes:
        """The fragment's records with their framing (GZIP: decompressed from its checkpoint on)."""
        fs = self._decoder.filesystem
        try:
            if not self.compressed:
                with fs.open_input_file(self.path) as stream:
                    data = stream.read_at(self.end - self.start, self.start)
                if len(data) != self.end - self.start:
                    raise CorruptFileError(
                        describe(
                            "The file is shorter than when it was opened",
                            found=f"read {len(data)} of {self.end - self.start} bytes",
                        )
                    )
                return data
            points = self._checkpoints or _inflate.Checkpoints()
            return _inflate.read_range(lambda: fs.open_input_file(self.path), points, self.start, self.end)
        except (OSError, _inflate.InflateError) as exc:
            raise CorruptFileError(
                describe(
                    "Could not read a TFRecord file",
                    where=f"{self.path}, records {self.first_record}-{self.first_record + self.num_rows - 1}",
                    found=f"{type(exc).__name__}: {exc}",
                    fix="check the file; it may have changed since the dataset was opened",
                )
            ) from exc

    def _decode_images(self, columns: Chunk, errors: dict[int, str]) -> None:
        for name, target in self._decoder.images.items():
            encoded = columns[name]
            decoded: dict[int, np.ndarray] = {}
            shape = None
            for row, data in enumerate(encoded.tolist()):
                if row in errors:
                    continue
                try:
                    image = _decode_image(data, target)
                except (OSError, ValueError, SyntaxError, EOFError) as exc:
                    errors[row] = f"feature {name!r} is not a decodable image ({type(exc).__name__}: {exc})"
                    continue
                if shape is None:
                    shape = image.shape
                elif image.shape != shape:
                    errors[row] = (
                        f"feature {name!r} decodes to an image of shape {image.shape}, the others to {shape} "
                        f"(give decode_images={{{name!r}: (height, width, channels)}} to resize)"
                    )
                    continue
                decoded[row] = image
            out = np.zeros((len(encoded), *(shape or (0, 0, 3))), dtype=np.uint8)
            for row, image in decoded.items():
                out[row] = image
            columns[name] = out

    def _handle(self, columns: Chunk, errors: dict[int, str], starts: np.ndarray, bad_crc: list[int]) -> Chunk:
        """Raises for the first bad record, or drops and reports every bad record."""

        def offset(row: int) -> int:
            return self.start + int(starts[row]) - fmt.HEADER_BYTES

        if self._decoder.on_error == "raise":
            row = min(errors)
            error = CorruptFileError if row in bad_crc else DataError
            raise error(
                describe(
                    "A TFRecord record is damaged"
                    if row in bad_crc
                    else "A TFRecord record does not match the feature spec",
                    where=record_where(self.path, self.first_record + row, offset(row), self.compressed),
                    found=errors[row],
                    expected=None
                    if row in bad_crc
                    else "features " + ", ".join(spec.text for spec in self._decoder.specs),
                    fix=_SKIP_FIX
                    if row in bad_crc
                    else "fix features={...}, or pass on_error='skip' to leave such records out and report them",
                )
            )
        for row in sorted(errors):
            location = (
                f"record {self.first_record + row} "
                f"(byte offset {'decompressed ' if self.compressed else ''}{offset(row)})"
            )
            self._decoder.report.add(SkippedUnit(self.path, location, errors[row], 1))
        keep = np.ones(self.num_rows, dtype=bool)
        keep[list(errors)] = False
        return {name: column[keep] for name, column in columns.items()}
