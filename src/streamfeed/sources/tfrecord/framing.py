"""TFRecord framing and its CRC32C checksums, without TensorFlow.

A TFRecord file is a sequence of records, each framed as::

    uint64 length (little endian) | uint32 masked_crc32c(length bytes)
    data[length]                  | uint32 masked_crc32c(data)

Walking from header to header is sequential (each length says where the
next header is), but most files hold long runs of records of one length
(fixed-size features): :func:`walk` follows the first records in Python and
then confirms a whole run at once with NumPy (every length at the stride the
run predicts), so the walk costs a few vector operations per run rather than
a Python step per record. A header's CRC depends only on its length, so the
headers are checked once per distinct length and compared with NumPy.

CRC32C comes from the ``crc32c`` package, else ``google-crc32c``, else a
pure-Python table (correct but ~1000x slower; a warning says so once).
"""

from __future__ import annotations

import functools
import logging
import struct
from dataclasses import dataclass
from typing import Callable

import numpy as np

logger = logging.getLogger("streamfeed")

HEADER_BYTES = 12  # uint64 length + uint32 masked CRC of the length
FOOTER_BYTES = 4  # uint32 masked CRC of the data
_MASK_DELTA = 0xA282EAD8
_LENGTH = struct.Struct("<Q")
_CRC = struct.Struct("<I")
_GALLOP_AFTER = 8  # records of one length in a row after which the walk confirms the rest of the run with NumPy
_FIRST_WINDOW = 64  # records the first confirmation looks at; each full window makes the next 4x larger


# ----------------------------------------------------------------------- CRC32C
def _crc32c_table() -> list[int]:
    table = []
    for byte in range(256):
        crc = byte
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
        table.append(crc)
    return table


_TABLE = _crc32c_table()


def crc32c_python(data: bytes | memoryview) -> int:
    """CRC32C (Castagnoli) in pure Python: the fallback when no C package is installed."""
    crc = 0xFFFFFFFF
    table = _TABLE
    for byte in bytes(data):
        crc = table[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def _pick_crc32c() -> tuple[str, Callable[[bytes | memoryview], int]]:
    try:
        import crc32c  # accepts memoryviews; releases the GIL on large buffers

        return "crc32c", crc32c.crc32c
    except ImportError:
        pass
    try:
        import google_crc32c

        return "google-crc32c", lambda data: google_crc32c.value(bytes(data))
    except ImportError:
        pass
    return "python", crc32c_python


CRC32C_BACKEND, crc32c = _pick_crc32c()
_warned_slow_crc = False


def masked_crc(data: bytes | memoryview) -> int:
    """TFRecord's masked CRC32C: rotate right by 15 bits and add a constant."""
    global _warned_slow_crc
    if CRC32C_BACKEND == "python" and not _warned_slow_crc:
        _warned_slow_crc = True
        logger.warning(
            "TFRecord checksums use a pure-Python CRC32C (about 10 MB/s); "
            "pip install 'streamfeed[tfrecord]' (the crc32c package) for hardware speed"
        )
    crc = crc32c(data)
    return ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + _MASK_DELTA) & 0xFFFFFFFF


def frame(data: bytes) -> bytes:
    """One TFRecord record: header, data, footer."""
    length = _LENGTH.pack(len(data))
    return b"".join((length, _CRC.pack(masked_crc(length)), data, _CRC.pack(masked_crc(data))))


# ---------------------------------------------------------------------- framing
@dataclass(frozen=True)
class FramingProblem:
    """Why the framing of a file stops being readable at ``offset``.

    ``index`` is the number of the first record that could not be framed;
    after a bad length nothing later can be located reliably, so the rest
    of the file (``offset`` to its end) is lost. ``records_lost`` is 1 when
    the file simply ends inside its last record, else unknown (None).
    """

    index: int
    offset: int
    problem: str
    records_lost: int | None


def read_header(block: bytes | memoryview, at: int) -> tuple[int, bool]:
    """The length declared by the header at ``at`` and whether its CRC matches."""
    (length,) = _LENGTH.unpack_from(block, at)
    (expected,) = _CRC.unpack_from(block, at + 8)
    return length, masked_crc(memoryview(block)[at : at + 8]) == expected


def _masked(crcs: list[int]) -> np.ndarray:
    crc = np.array(crcs, dtype=np.uint64)
    return (
        (((crc >> np.uint64(15)) | (crc << np.uint64(17))) & np.uint64(0xFFFFFFFF)) + np.uint64(_MASK_DELTA)
    ) & np.uint64(0xFFFFFFFF)


def _stored_crcs(buf: np.ndarray, at: np.ndarray) -> np.ndarray:
    raw = buf[np.minimum(at[:, None] + np.arange(4), len(buf) - 1)].astype(np.uint64)
    return raw[:, 0] | (raw[:, 1] << np.uint64(8)) | (raw[:, 2] << np.uint64(16)) | (raw[:, 3] << np.uint64(24))


def walk(data: bytes | bytearray | memoryview, count: int, need: int = 8) -> tuple[np.ndarray, np.ndarray, int]:
    """Follows up to ``count`` record headers from the start of ``data``: heads, lengths, next head.

    A header is followed while its first ``need`` bytes lie inside ``data``
    (8: the length field; 12: the whole header). Headers are not checked
    here; a bad length sends the walk anywhere, and the caller stops at the
    first header whose CRC does not match. The result is the same as one
    Python step per record: a run is only taken where every length read at
    the run's stride equals the length that predicted that stride.
    """
    unpack = _LENGTH.unpack_from
    limit = len(data)
    runs: list[tuple[int, int, int]] = []  # (first head, length, records)
    found, at, same, previous = 0, 0, 0, -1
    while found < count and at + need <= limit:
        (length,) = unpack(data, at)
        step = length + HEADER_BYTES + FOOTER_BYTES
        same = same + 1 if length == previous else 0
        previous = length
        run = 1
        if same >= _GALLOP_AFTER and at + step + need <= limit:
            room = min(count - found, (limit - need - at) // step + 1)  # records of this length that could fit
            run, window = 1, _FIRST_WINDOW
            while run < room:
                take = min(window, room - run)
                lengths = np.ndarray((take,), dtype="<u8", buffer=data, offset=at + step * run, strides=(step,))
                differ = np.flatnonzero(lengths != length)
                if len(differ):
                    run += int(differ[0])
                    break
                run += take
                window *= 4
            same = 0
        runs.append((at, length, run))
        found += run
        at += step * run
    if not runs:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.uint64), at
    first, lengths, counts = (np.array(column, dtype=np.uint64) for column in zip(*runs))
    counts = counts.astype(np.int64)
    lengths = np.repeat(lengths, counts)
    within = np.arange(found, dtype=np.int64) - np.repeat(np.cumsum(counts) - counts, counts)
    steps = np.minimum(lengths, np.uint64(1 << 62)).astype(np.int64) + (HEADER_BYTES + FOOTER_BYTES)
    heads = np.repeat(first.astype(np.int64), counts) + within * steps  # only the last run can hold a bad length
    return heads, lengths, at


def headers_ok(buf: np.ndarray, heads: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Whether each header's stored CRC matches its length (one CRC per distinct length)."""
    if not len(heads):
        return np.zeros(0, dtype=bool)
    distinct, which = np.unique(lengths, return_inverse=True)
    expected = _masked([crc32c(_LENGTH.pack(int(length))) for length in distinct.tolist()])
    if CRC32C_BACKEND == "python":
        masked_crc(b"")  # the one-time warning
    return expected[which.reshape(-1)] == _stored_crcs(buf, heads + 8)


def split_records(data: bytes, count: int) -> tuple[np.ndarray, np.ndarray, list[int], FramingProblem | None]:
    """Frames ``count`` records from ``data``: data starts, lengths, bad data CRCs.

    Offsets are relative to ``data``. A record whose data CRC does not match
    is listed (by its position in this block) in the third result and still
    framed, since its length was good; a bad length or a block that ends
    early stops framing and is returned as the problem (with index and
    offset relative to this block). The data CRCs are one C call per record,
    masked and compared with NumPy.
    """
    size = len(data)
    heads, lengths, at = walk(data, count)
    buf = np.frombuffer(data, dtype=np.uint8)
    header_ok = headers_ok(buf, heads, lengths)
    framed = len(heads) if header_ok.all() else int(np.argmin(header_ok))
    problem = None
    if framed < len(heads):
        problem = FramingProblem(framed, int(heads[framed]), "the length field's CRC does not match", None)
    head = heads[:framed]
    starts = head + HEADER_BYTES
    ends = starts + lengths[:framed].astype(np.int64)  # good lengths are < 2**63: a longer record fails below
    past = np.flatnonzero((ends + FOOTER_BYTES > size) | (ends < starts))
    if len(past):
        framed = int(past[0])
        problem = FramingProblem(framed, int(heads[framed]), "a record runs past the end of the data", None)
    elif problem is None and framed < count:
        problem = FramingProblem(framed, at, "the data ends inside a record header", None)
    starts, ends = starts[:framed], ends[:framed]
    return starts, ends - starts, _bad_data_crcs(data, buf, starts, ends), problem


def _bad_data_crcs(data: bytes, buf: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> list[int]:
    """Positions of the records whose data CRC does not match.

    Records in long runs of one length are checked all at once: the CRC of
    the whole block of framed records (one C call) must equal what the
    stored CRCs combine to (:func:`_combined_crc`); only when it does not is
    every record checked on its own, one call each, to name the bad ones.
    """
    stored = _stored_crcs(buf, ends)
    if not len(starts):
        return []
    lengths = ends - starts
    runs = np.flatnonzero(np.diff(lengths)) + 1
    if CRC32C_BACKEND != "python" and len(runs) < len(starts) // _RECORDS_PER_RUN:
        begin, end = int(starts[0]) - HEADER_BYTES, int(ends[-1]) + FOOTER_BYTES
        if crc32c(memoryview(data)[begin:end]) == _combined_crc(data, starts, lengths, stored, runs):
            return []
    view = memoryview(data)
    data_ok = _masked([crc32c(view[b:e]) for b, e in zip(starts.tolist(), ends.tolist())]) == stored
    return np.flatnonzero(~data_ok).tolist()


# ------------------------------------------------- CRCs of runs of records at once
# A CRC is linear over GF(2): crc(A + B) = crc(A) * x^(8 |B|) + crc(B) modulo the
# polynomial (zlib's crc32_combine), so the CRC of a block of framed records
# follows from each record's header, stored data CRC and footer, without
# reading the data. The products by x^(8 n) of many CRCs at once are table
# look-ups, one table of 256 per byte of the CRC.
_POLY = 0x82F63B78  # CRC32C, reflected
_RECORDS_PER_RUN = 32  # fewer records per run of one length on average: check each record on its own


def _multiply(a: int, b: int) -> int:
    """a * b modulo the CRC polynomial (bit-reflected, as zlib's multmodp)."""
    if a == 0:
        return 0
    m, product = 1 << 31, 0
    while True:
        if a & m:
            product ^= b
            if a & (m - 1) == 0:
                return product
        m >>= 1
        b = (b >> 1) ^ _POLY if b & 1 else b >> 1


def _powers() -> list[int]:
    table = [1 << 30]  # x^1; then x^(2^k)
    for _ in range(63):
        table.append(_multiply(table[-1], table[-1]))
    return table


_X2N = _powers()


def _shift(count: int) -> int:
    """x^(8 count) modulo the polynomial: what appending ``count`` bytes multiplies a CRC by."""
    product, k = 1 << 31, 3
    while count:
        if count & 1:
            product = _multiply(_X2N[k], product)
        count >>= 1
        k += 1
    return product


@functools.lru_cache(maxsize=256)
def _shift_tables(count: int) -> np.ndarray:
    """(4, 256) uint32: row b, column v is (v << 8 b) * x^(8 count), so a product is 4 look-ups."""
    factor = _shift(count)
    basis = np.array([_multiply(factor, 1 << bit) for bit in range(32)], dtype=np.uint32).reshape(4, 8)
    values = np.arange(256)
    tables = np.zeros((4, 256), dtype=np.uint32)
    for bit in range(8):
        tables ^= np.where((values >> bit) & 1, basis[:, bit : bit + 1], np.uint32(0))
    return tables


def _times(crcs: np.ndarray, tables: np.ndarray) -> np.ndarray:
    return (
        tables[0][crcs & 0xFF] ^ tables[1][(crcs >> 8) & 0xFF] ^ tables[2][(crcs >> 16) & 0xFF] ^ tables[3][crcs >> 24]
    )


@functools.lru_cache(maxsize=1)
def _footer_tables() -> tuple[int, np.ndarray]:
    """The CRC of 4 bytes is affine in them: crc(0000) and, per byte place and value, what it adds."""
    zero = crc32c(bytes(4))
    tables = np.zeros((4, 256), dtype=np.uint32)
    for place in range(4):
        for value in range(256):
            message = bytearray(4)
            message[place] = value
            tables[place, value] = crc32c(bytes(message)) ^ zero
    return zero, tables


def _combined_crc(data: bytes, starts: np.ndarray, lengths: np.ndarray, stored: np.ndarray, runs: np.ndarray) -> int:
    """The CRC the framed records from ``starts[0]`` on must have if every stored data CRC is right."""
    stored32 = stored.astype(np.uint32)
    data_crcs = (stored32 - np.uint32(_MASK_DELTA)) & np.uint32(0xFFFFFFFF)
    data_crcs = (data_crcs >> np.uint32(17)) | (data_crcs << np.uint32(15))  # unmasked
    zero, footer = _footer_tables()
    footer_crcs = np.uint32(zero) ^ _times(stored32, footer)
    total = 0
    for first, last in zip([0, *runs.tolist()], [*runs.tolist(), len(starts)]):
        length = int(lengths[first])
        head = int(starts[first]) - HEADER_BYTES
        header = _multiply(crc32c(memoryview(data)[head : head + HEADER_BYTES]), _shift(length + FOOTER_BYTES))
        records = _times(data_crcs[first:last], _shift_tables(FOOTER_BYTES)) ^ footer_crcs[first:last]
        records ^= np.uint32(header)
        framed = length + HEADER_BYTES + FOOTER_BYTES
        level = 0
        while len(records) > 1:  # pairs of blocks of 2^level records: left * x^(8 |right|) + right
            if len(records) % 2:
                records = np.concatenate([np.zeros(1, dtype=np.uint32), records])  # a zero block adds nothing
            records = _times(records[0::2], _shift_tables(framed << level)) ^ records[1::2]
            level += 1
        total = _multiply(_shift(framed * (last - first)), total) ^ int(records[0])
    return total
