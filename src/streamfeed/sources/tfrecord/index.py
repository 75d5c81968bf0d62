"""The framing index of a TFRecord file: record counts and record-range fragments, before training.

**Exact counts before training.** When the source opens, every file's
framing is scanned (record headers only, each length's CRC checked, data
skipped; cached per file path, size and modification time). That gives
exact record counts, finds truncated, non-TFRecord and corrupt-length files
before the first batch, and cuts large uncompressed files into record-range
fragments of about ``fragment_bytes``.

A GZIP file is cut the same way, in decompressed bytes: its counting pass
(one decompression) also keeps a decompressor checkpoint per range
(``files/inflate.py``), and a fragment resumes from its checkpoint and
decompresses only up to its last record, so memory is bounded by the
fragment, never the file. The checkpoints (about 40 KiB each, one per
range) live in the in-process scan index with the counts, so opening the
same unchanged file again in the process costs no pass.

After a *length* field whose CRC does not match, no later record can be
located reliably (a wrong length points anywhere; a valid-looking header
found by searching could be data): the scan stops there and records the
problem (:class:`~.format.FramingProblem`), which the source reports.
"""

from __future__ import annotations

import collections
import threading
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import pyarrow.fs as pafs

from ...errors import ArgumentError, describe
from ...files import inflate as _inflate
from . import format as fmt
from . import framing

Compression = Literal["GZIP"] | None
_BLOCK = 1 << 20
_FRAME_BYTES = 16  # header + footer


@dataclass(frozen=True)
class FileIndex:
    """What one framing scan of a file found (cached; never holds record data)."""

    path: str
    compressed: bool
    size: int  # bytes on disk
    records: int  # records framed
    ranges: tuple[tuple[int, int, int, int], ...]  # (first record, records, start byte, end byte) per fragment
    problem: fmt.FramingProblem | None
    data_bytes: int  # bytes of framed records (decompressed)
    checkpoints: _inflate.Checkpoints | None = field(
        default=None, compare=False, repr=False
    )  # GZIP: where ranges resume


_scan_cache: dict[tuple, FileIndex] = {}
_scan_lock = threading.Lock()


def record_where(path: str, index: int, offset: int, compressed: bool) -> str:
    """Where a record is, as messages name it: file, record index, byte offset."""
    unit = "byte offset (decompressed)" if compressed else "byte offset"
    return f"{path}, record {index} ({unit} {offset})"


def _scan_plain(stream: Any, path: str, size: int, fragment_bytes: int) -> FileIndex:
    """Walks the record headers of an uncompressed file, skipping the data.

    Block by block: the headers inside a block are followed by
    ``framing.walk`` (runs of one length at once) and checked with one CRC
    per distinct length; the first bad header or record running past the
    end of the file stops the scan, as a record-by-record walk would.
    """
    ranges: list[tuple[int, int, int, int]] = []
    records, position, first, begin = 0, 0, 0, 0
    problem = None
    while position < size:
        block = stream.read_at(min(_BLOCK, size - position), position)
        if len(block) < fmt.HEADER_BYTES:
            problem = fmt.FramingProblem(
                records, position, f"the file ends inside a record header ({size - position} of 12 bytes)", 1
            )
            break
        heads, lengths, after = framing.walk(block, len(block), need=fmt.HEADER_BYTES)
        good = framing.headers_ok(np.frombuffer(block, dtype=np.uint8), heads, lengths)
        bad = len(heads) if good.all() else int(np.argmin(good))
        ends = position + heads + np.minimum(lengths, np.uint64(size)).astype(np.int64) + _FRAME_BYTES
        past = np.flatnonzero(ends[:bad] > size)
        framed = int(past[0]) if len(past) else bad
        while framed:  # a new range at the first record end at least fragment_bytes past its start
            cut = int(np.searchsorted(ends[:framed], begin + fragment_bytes))
            if cut == framed:
                break
            ranges.append((first, records + cut + 1 - first, begin, int(ends[cut])))
            first, begin = records + cut + 1, int(ends[cut])
        if framed < len(heads):
            at = position + int(heads[framed])
            if framed == bad:
                what = "the length field's CRC does not match"
                if records + framed == 0:
                    what += (
                        " in the very first record: this is not a TFRecord file, "
                        "or it is compressed (pass compression='GZIP')"
                    )
                problem = fmt.FramingProblem(records + framed, at, what, None)
            else:
                problem = fmt.FramingProblem(
                    records + framed,
                    at,
                    f"the file ends inside a record of {int(lengths[framed])} bytes ({size - at} bytes are left)",
                    1,
                )
            records += framed
            position = at
            break
        records += framed
        position += after
    if records > first:
        ranges.append((first, records - first, begin, position))
    data_bytes = ranges[-1][3] if ranges else 0
    return FileIndex(path, False, size, records, tuple(ranges), problem, data_bytes)


def _scan_gzip(stream: Any, path: str, size: int, fragment_bytes: int) -> FileIndex:
    """Decompresses once, walking record headers; keeps a checkpoint per record range.

    Ranges are cut at record starts every ``fragment_bytes`` of decompressed
    data, as in an uncompressed file. Each range's checkpoint is the one at
    the start of the decompressed block holding the range's first byte (a
    header may straddle two blocks, so the last two blocks' are at hand).
    """
    records = 0  # records whose header was read (the last may still be incomplete)
    start = 0  # decompressed offset of the last header read
    position = 0  # decompressed offset just past the last header's record
    pending = bytearray()  # decompressed bytes from ``position`` on, while no record is being passed
    skip = 0  # bytes of the current record still to pass
    problem = None
    damage = None
    ranges: list[tuple[int, int, int, int]] = []
    first, begin = 0, 0
    points = _inflate.Checkpoints()
    recent: collections.deque[_inflate.Checkpoint] = collections.deque(maxlen=2)
    try:
        for before, block in _inflate.blocks(stream.read, _inflate.block_bytes(fragment_bytes)):
            recent.append(before)
            view = memoryview(block)
            if skip:
                taken = min(skip, len(view))
                skip -= taken
                view = view[taken:]
            pending += view
            while not skip and len(pending) >= fmt.HEADER_BYTES:
                length, good = fmt.read_header(memoryview(pending), 0)
                if not good:
                    what = "the length field's CRC does not match"
                    if records == 0:
                        what += " in the very first record: the decompressed data is not TFRecord"
                    problem = fmt.FramingProblem(records, position, what, None)
                    break
                if position - begin >= fragment_bytes and records > first:  # a record start: a new range
                    ranges.append((first, records - first, begin, position))
                    first, begin = records, position
                    point = _inflate.latest(recent, position)
                    if point is not None:  # else the range resumes from an earlier checkpoint
                        points.keep(point)
                record_bytes = fmt.HEADER_BYTES + length + fmt.FOOTER_BYTES
                taken = min(record_bytes, len(pending))
                del pending[:taken]
                skip = record_bytes - taken
                records += 1
                start, position = position, position + record_bytes
            if problem:
                break
    except _inflate.InflateError as exc:
        damage = str(exc)
    if problem is None:
        if skip:  # the last record read is incomplete
            records -= 1
            position = start
        if damage is not None:
            problem = fmt.FramingProblem(records, position, damage, None)
        elif skip:
            problem = fmt.FramingProblem(records, position, "the decompressed data ends inside a record", 1)
        elif pending:
            problem = fmt.FramingProblem(
                records, position, f"the decompressed data ends inside a record header ({len(pending)} of 12 bytes)", 1
            )
    if records > first:
        ranges.append((first, records - first, begin, position))
    return FileIndex(path, True, size, records, tuple(ranges), problem, position, points)


def is_gzip(path: str, compression: Compression) -> bool:
    if compression == "GZIP":
        return True
    if compression is not None:
        raise ArgumentError(
            describe(
                "Invalid compression",
                expected="None (detect from the '.gz' extension) or 'GZIP'",
                found=f"{compression!r}",
            )
        )
    return path.lower().endswith((".gz", ".gzip"))


def scan_file(fs: pafs.FileSystem, path: str, *, compressed: bool, fragment_bytes: int) -> FileIndex:
    """The framing index of a file, from the cache when it has not changed."""
    info = fs.get_file_info(path)
    key = (type(fs).__name__, path, info.size, info.mtime_ns, compressed, fragment_bytes)
    with _scan_lock:
        cached = _scan_cache.get(key)
    if cached is not None:
        return cached
    if compressed:
        with fs.open_input_stream(path, compression=None) as stream:
            index = _scan_gzip(stream, path, info.size, fragment_bytes)
    else:
        with fs.open_input_file(path) as stream:
            index = _scan_plain(stream, path, info.size, fragment_bytes)
    with _scan_lock:
        _scan_cache[key] = index
    return index
