"""Inspecting ``.npy``/``.npz``: headers only (dtype, shape, order, compression), plus a few rows.

Only a bounded sample is ever decoded. A compressed member of a few MB may
inflate to many GB, so nothing is loaded whole: the bytes to decode are
sized from the header (rows x row bytes) and checked against the sample
budget (a share of the memory limit) before anything is allocated, and a
deflated member is decompressed forward only as far as the sample's last
byte, with the readers' streaming inflater (``files/inflate.py``).
``full=True`` counts NaN over every value in pieces of bounded size, and
checks the member's CRC and length on the way.
"""

from __future__ import annotations

import os
import struct
import zipfile
import zlib
from dataclasses import dataclass
from typing import BinaryIO, Iterable, Iterator

import numpy as np

from ..errors import CorruptFileError, SchemaError, describe
from ..files import inflate as _inflate
from ..files.paths import resolve_files
from ..memory import decode_bytes_limit
from ..sources.numpy import MAX_WHOLE_MEMBER_BYTES, npy_header
from .report import Column, InspectReport, add_files, index_like, sample_values, warn_index

SAMPLE_BYTES = 16 * 2**20  # most bytes decoded for one array's sample (further capped at the decode share)
SCAN_BYTES = 4 * 2**20  # bytes decoded per piece when ``full`` counts NaN over every value
_INDEX_PROBE_ROWS = 1000  # rows of a 1-D array checked for counting 0, 1, 2, ...


@dataclass(frozen=True)
class _Stored:
    """Where one array's bytes are in its file, and how they are stored (from the headers only)."""

    file: str
    name: str  # the column: the file's or the member's name without ".npy"
    label: str  # "x.npy" or "d.npz:member", for messages
    dtype: np.dtype
    shape: tuple[int, ...]
    fortran: bool
    start: int  # file offset where the .npy bytes (header, then data) begin
    header: int  # bytes of the .npy header
    deflated: int | None = None  # compressed bytes of a deflated zip member, else None
    size: int | None = None  # a zip member's uncompressed .npy bytes
    crc: int | None = None  # a zip member's CRC-32

    @property
    def row_bytes(self) -> int:
        return self.dtype.itemsize * int(np.prod(self.shape[1:], dtype=np.int64))

    @property
    def data_bytes(self) -> int:
        return self.shape[0] * self.row_bytes


def inspect_numpy(path: str, *, full: bool, sample_rows: int, memory_limit: int, report: InspectReport) -> None:
    files = list(resolve_files(path, suffixes=(".npy", ".npz")).files)
    add_files(report, files, [os.path.getsize(file) for file in files])
    budget = max(1, min(SAMPLE_BYTES, decode_bytes_limit(memory_limit)))
    arrays: list[_Stored] = []
    unreadable: list[tuple[str, str]] = []
    for file in files:
        try:
            arrays += _arrays(file)
        except (CorruptFileError, SchemaError) as exc:  # what the source would refuse, e.g. object arrays
            unreadable.append((file, str(exc)))
    report.details["arrays"] = [_facts(array) for array in arrays[:100]]
    lengths = {array.shape[0] for array in arrays}
    report.rows = lengths.pop() if len(lengths) == 1 else None
    report.rows_exact = report.rows is not None
    if len(lengths) > 0:
        report.warn(
            "schema_drift",
            "Arrays have different lengths",
            where=path,
            found=", ".join(f"{a.name}: {list(a.shape[:1])}" for a in arrays[:10]),
            fix="every array must have one row per sample",
        )
    not_sampled: list[str] = []
    for array in arrays[:50]:
        column = Column(array.name, str(array.dtype), shape=list(array.shape[1:]))
        report.columns.append(column)
        try:
            values = _sample(array, sample_rows, budget, not_sampled)
            if values is not None:
                column.samples = sample_values(values, sample_rows)
            if full and array.dtype.kind == "f":
                column.nulls, column.nulls_exact = _count_nan(array), True
        except CorruptFileError as exc:  # damage past the headers, found while decoding
            unreadable.append((array.file, str(exc)))
            continue
        if values is not None and values.ndim == 1 and index_like(column.name, values):
            warn_index(report, column.name, array.file)
    if not_sampled:
        report.details["not_sampled"] = not_sampled
    if unreadable:
        report.warn(
            "unreadable_files",
            f"{len(unreadable)} NumPy file(s) cannot be streamed",
            where=unreadable[0][0],
            found=unreadable[0][1][:300],
            fix="rewrite them with numpy.save / numpy.savez, with a fixed-size dtype",
        )


def _facts(array: _Stored) -> dict:
    return {
        "file": array.file, "name": array.name, "dtype": str(array.dtype), "shape": list(array.shape),
        "fortran_order": array.fortran, "compressed": array.deflated is not None,
    }  # fmt: skip


def _arrays(file: str) -> list[_Stored]:
    """Each array's header and storage, read as the source reads them (never unpickles, refuses object arrays)."""
    if not file.endswith(".npz"):
        with open(file, "rb") as handle:
            dtype, shape, fortran = npy_header(handle, file)
            name = os.path.basename(file).removesuffix(".npy")
            return [_Stored(file, name, file, dtype, shape, fortran, 0, handle.tell())]
    arrays = []
    try:
        with zipfile.ZipFile(file) as archive, open(file, "rb") as raw:
            for info in archive.infolist():
                label = f"{file}:{info.filename}"
                if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED) or info.flag_bits & 0x1:
                    raise SchemaError(
                        describe(
                            "An .npz member is encrypted or uses another zip compression method",
                            where=label,
                            expected="stored (numpy.savez) or deflated (numpy.savez_compressed)",
                            found=f"compression method {info.compress_type}, flags {info.flag_bits:#x}",
                        )
                    )
                with archive.open(info) as member:
                    dtype, shape, fortran = npy_header(member, label)
                    header = member.tell()
                deflated = info.compress_size if info.compress_type == zipfile.ZIP_DEFLATED else None
                start = _member_start(raw, info, label)
                name = info.filename.removesuffix(".npy")
                arrays.append(
                    _Stored(file, name, label, dtype, shape, fortran, start, header, deflated, info.file_size, info.CRC)
                )
    except (zipfile.BadZipFile, zlib.error, EOFError) as exc:
        raise CorruptFileError(
            describe(
                "Not a readable .npz archive (empty, truncated, or another format)",
                where=file,
                found=f"{type(exc).__name__}: {exc}",
                fix="rewrite the file with numpy.savez or numpy.savez_compressed",
            )
        ) from exc
    return arrays


def _member_start(raw: BinaryIO, info: zipfile.ZipInfo, label: str) -> int:
    """The file offset of a zip member's data: after its local header, whose name and extra fields vary."""
    raw.seek(info.header_offset)
    local = raw.read(30)
    if len(local) < 30 or local[:4] != b"PK\x03\x04":
        raise CorruptFileError(describe("The .npz member's zip header is damaged", where=label, fix="rewrite the file"))
    name_len, extra_len = struct.unpack("<HH", local[26:30])
    return info.header_offset + 30 + name_len + extra_len


def _sample(array: _Stored, sample_rows: int, budget: int, not_sampled: list[str]) -> np.ndarray | None:
    """The first rows, as many as fit in ``budget`` bytes (checked before decoding); None if not one row fits."""
    wanted = max(sample_rows, _INDEX_PROBE_ROWS) if len(array.shape) == 1 else sample_rows
    rows = min(wanted, array.shape[0])
    if array.row_bytes:
        rows = min(rows, budget // array.row_bytes)
    if rows == 0 and array.shape[0] and sample_rows:
        not_sampled.append(f"{array.name}: a row is {array.row_bytes:,} bytes, over the {budget:,}-byte sample budget")
        return None
    spread = array.fortran and len(array.shape) > 1 and rows < array.shape[0]
    if spread and array.deflated is not None and array.data_bytes > MAX_WHOLE_MEMBER_BYTES:
        not_sampled.append(
            f"{array.name}: a compressed Fortran-order member's rows are spread over the whole stream, "
            f"and it is over {MAX_WHOLE_MEMBER_BYTES:,} bytes (read_numpy refuses it)"
        )
        return None
    item = array.dtype.itemsize
    spans: Iterable[tuple[int, int]] = [(0, rows * array.row_bytes)]
    if spread:  # Fortran order: the first rows of column c are items [c * all rows, c * all rows + rows)
        columns = int(np.prod(array.shape[1:], dtype=np.int64))
        spans = ((c * array.shape[0] * item, rows * item) for c in range(columns))
    data = b"".join(_read_spans(array, spans))
    shape = (rows, *array.shape[1:])
    return np.frombuffer(data, dtype=array.dtype).reshape(shape, order="F" if array.fortran else "C")


def _count_nan(array: _Stored) -> int:
    """NaN over every value, decoded in pieces of :data:`SCAN_BYTES` (order does not matter for a count)."""
    item = array.dtype.itemsize
    piece = max(item, SCAN_BYTES // item * item)
    spans = ((offset, min(piece, array.data_bytes - offset)) for offset in range(0, array.data_bytes, piece))
    return sum(
        int(np.count_nonzero(np.isnan(np.frombuffer(data, dtype=array.dtype))))
        for data in _read_spans(array, spans, whole=True)
    )


def _read_spans(array: _Stored, spans: Iterable[tuple[int, int]], *, whole: bool = False) -> Iterator[bytes]:
    """The data bytes of each ``(offset, length)`` span (in order, not overlapping), one span at a time.

    A deflated member is decompressed forward once, only as far as the last
    span; ``whole`` (the spans cover all the data) also checks that a zip
    member ends there and matches the CRC-32 the zip records.
    """
    try:
        with open(array.file, "rb") as handle:
            handle.seek(array.start)
            stream = _Stream(handle, array)
            crc = zlib.crc32(stream.read(array.header)) if whole else 0
            if not whole:
                stream.skip(array.header)
            position = 0
            for offset, length in _merged(spans):
                stream.skip(offset - position)
                data = stream.read(length)
                position = offset + length
                if whole:
                    crc = zlib.crc32(data, crc)
                yield data
            if whole and array.crc is not None:
                _check_end(array, crc, stream.at_end())
    except _inflate.InflateError as exc:
        raise CorruptFileError(
            describe(
                "A compressed .npz member cannot be decompressed (corrupt or truncated)",
                where=array.label,
                found=str(exc),
                fix="rewrite the file; read_numpy(on_error='skip') leaves the damaged rows out and reports them",
            )
        ) from exc


def _merged(spans: Iterable[tuple[int, int]]) -> Iterator[tuple[int, int]]:
    """Adjacent spans (a Fortran-order sample of every row) as one, up to :data:`SCAN_BYTES`; lazily."""
    pending: tuple[int, int] | None = None
    for offset, length in spans:
        if pending and pending[0] + pending[1] == offset and pending[1] + length <= SCAN_BYTES:
            pending = (pending[0], pending[1] + length)
            continue
        if pending:
            yield pending
        pending = (offset, length)
    if pending:
        yield pending


class _Stream:
    """One array's .npy bytes read forward: from the file, or inflated on the way for a deflated member."""

    def __init__(self, handle: BinaryIO, array: _Stored) -> None:
        self._handle = handle
        self._array = array
        self._inflater = (
            None if array.deflated is None else _inflate.Inflater(handle.read, wbits=_inflate.RAW, limit=array.deflated)
        )

    def read(self, count: int) -> bytes:
        """Exactly ``count`` bytes (sized by the caller from the header and its budget)."""
        if self._inflater is not None:
            return self._inflater.read_exact(count)
        data = self._handle.read(count)
        if len(data) != count:
            raise CorruptFileError(
                describe(
                    "A NumPy array is truncated: its header promises more bytes than the file holds",
                    where=self._array.label,
                    expected=f"{count} more bytes",
                    found=f"{len(data)}",
                    fix="rewrite the file (it was probably cut off while copying or saving)",
                )
            )
        return data

    def skip(self, count: int) -> None:
        if self._inflater is not None:
            self._inflater.skip(count)
        else:
            self._handle.seek(count, os.SEEK_CUR)

    def at_end(self) -> bool:
        """Whether a deflated member's stream ends here (a stored member's end is its recorded size)."""
        return self._inflater is None or not self._inflater.read(1)


def _check_end(array: _Stored, crc: int, at_end: bool) -> None:
    """A whole member was read: it must end there, and its bytes must match the zip's CRC-32."""
    if not at_end or crc != array.crc or array.header + array.data_bytes != array.size:
        raise CorruptFileError(
            describe(
                "An .npz member's bytes are not the ones the zip recorded (damaged)",
                where=array.label,
                expected=f"{array.size} bytes with CRC-32 {array.crc:#010x}",
                found=f"{array.header + array.data_bytes} bytes"
                + (" and more after them" if not at_end else "")
                + f", CRC-32 {crc:#010x}",
                fix="rewrite the file",
            )
        )
