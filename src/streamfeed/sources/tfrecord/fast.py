"""Fast decoding of ``tf.train.Example`` records that share one byte layout.

Most TFRecord files hold records of one shape: the same features, in the
same map order, each a list of the same number of floats or ints. Such
records differ only in their values: every key, tag and length byte is the
same, every float sits at the same offset. :func:`decode_examples` learns
that layout from one record (a strict, pure-Python walk of the canonical
encoding), then decodes all records of the same length at once, a chunk of
records small enough to stay in the cache at a time:

* the records' bytes, as rows of uint64 words (viewed in place when the
  records follow one another at one stride, which is the usual case), are
  compared with the learned record under a mask: key, tag and length bytes
  must be equal; of an int64 varint only the continuation bits, so every
  varint has the same width; float and bytes payloads and the lists of
  features not asked for are free. A record that differs anywhere is left
  to the general parser;
* each float feature is one strided view of the records' bytes, each int64
  feature one strided view of its varint bytes, a few shifts and one
  ``bitwise_or.reduceat``, each bytes value one slice per record.

Everything else (records of a length too rare to learn, records in another
map order or another encoding, missing features, lists of another length,
malformed data) goes to the general parser (``format.py``), so
results, errors and their messages are the general parser's, record for
record: a record the layout accepts is one the general parser decodes
without error to the same values (a layout is only learned from a record in
the canonical form the general parser walks, and every byte that could
change its reading is compared).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from . import format as fmt

MIN_GROUP = 64  # records of one length worth learning a layout for (a layout costs ~0.2 ms); fewer: general parser
MIN_SHARE = 0.25  # share of a fragment's records in such groups below which all go to the general parser
MAX_LAYOUTS = 4  # layouts tried per record length (records in another map order, say) before giving up on it
CHUNK_BYTES = 1 << 19  # bytes of records compared and decoded at a time: in the cache, and a bound on scratch
_STRUCTURE, _CONTINUATION, _FREE = 0xFF, 0x80, 0x00


class _NotCanonical(Exception):
    """The record is not in the canonical form a layout is learned from."""


@dataclass(frozen=True)
class _IntList:
    """Where one int64 feature's packed varints sit: its payload and how each byte adds to its value."""

    number: int  # the spec's position
    begin: int  # payload offset in the record
    shifts: np.ndarray  # per payload byte: 7 * its place in its varint (uint64)
    firsts: np.ndarray  # per value: the payload byte where its varint starts
    one_byte: bool  # every varint one byte long


@dataclass(frozen=True)
class Layout:
    """Where every wanted value sits in records of one length and which bytes must match.

    Records are compared as rows of uint64 words: the length rounded up to 8
    bytes, the bytes past the record free.
    """

    length: int
    template: np.ndarray  # uint64 words of the record learned from
    mask: np.ndarray  # uint64 words; per byte: 0xFF compare, 0x80 compare the continuation bit, 0x00 free
    floats: tuple[tuple[int, int], ...]  # (spec position, payload offset)
    ints: tuple[_IntList, ...]
    bytes_values: tuple[tuple[int, tuple[tuple[int, int], ...]], ...]  # (spec position, ((offset, length), ...))

    @property
    def width(self) -> int:
        return 8 * len(self.template)

    def matches(self, words: np.ndarray) -> np.ndarray:
        """Which rows of a ``(records, width / 8)`` uint64 matrix have this layout."""
        if not len(words):
            return np.zeros(0, dtype=bool)
        differ = np.bitwise_xor(words, self.template)
        np.bitwise_and(differ, self.mask, out=differ)
        return ~differ.any(axis=1)


# ------------------------------------------------------------------- learning
def _varint(record: bytes, at: int, end: int) -> tuple[int, int]:
    """The general parser's varint reader; a varint it refuses is simply not a layout to learn."""
    try:
        return fmt.read_varint(record, at, end)
    except ValueError:
        raise _NotCanonical from None


def learn(record: bytes, specs: Sequence[fmt.FeatureSpec]) -> Layout | None:
    """The layout of ``record``, or None if it is not canonical or does not fit the spec.

    Canonical is what the general parser's lockstep walk reads directly: an
    Example holding only its features, each map entry a key then a value,
    each value one list; every wanted list packed in one field 1 (a bytes
    list: one field 1 per value) holding exactly the spec's number of
    values. Anything else is left to the general parser, which handles (or
    names) it.
    """
    try:
        return _learn(record, specs)
    except _NotCanonical:
        return None


def _learn(record: bytes, specs: Sequence[fmt.FeatureSpec]) -> Layout:
    size = len(record)
    mask = np.full(-(-size // 8) * 8, _STRUCTURE, dtype=np.uint8)
    mask[size:] = _FREE
    wanted = {spec.name.encode(): number for number, spec in enumerate(specs)}
    floats: list[tuple[int, int]] = []
    ints: list[_IntList] = []
    bytes_values: list[tuple[int, tuple[tuple[int, int], ...]]] = []
    seen: set[int] = set()
    if size < 2 or record[0] != 0x0A:
        raise _NotCanonical
    length, at = _varint(record, 1, size)
    if at + length != size:
        raise _NotCanonical
    while at < size:
        if record[at] != 0x0A:
            raise _NotCanonical
        entry_length, at = _varint(record, at + 1, size)
        entry_end = at + entry_length
        if entry_end > size or at >= entry_end or record[at] != 0x0A:
            raise _NotCanonical
        key_length, key_at = _varint(record, at + 1, entry_end)
        at = key_at + key_length
        if at >= entry_end or record[at] != 0x12:
            raise _NotCanonical
        value_length, at = _varint(record, at + 1, entry_end)
        if at + value_length != entry_end:
            raise _NotCanonical
        number = wanted.get(record[key_at : key_at + key_length])
        if value_length == 0:  # an empty Feature; a wanted one is the general parser's case
            if number is not None:
                raise _NotCanonical
            continue
        list_tag = record[at]
        kind = list_tag >> 3
        if list_tag & 7 != 2 or not 1 <= kind <= 3:
            raise _NotCanonical
        list_length, list_at = _varint(record, at + 1, entry_end)
        if list_at + list_length != entry_end:
            raise _NotCanonical
        at = entry_end
        if number is None:
            mask[list_at:entry_end] = _FREE  # not decoded: only its size and place matter
            continue
        if number in seen:  # a repeated key: which one wins is the general parser's business
            raise _NotCanonical
        seen.add(number)
        spec = specs[number]
        if fmt.FIELD_KIND[kind] != spec.kind:
            raise _NotCanonical
        if spec.kind == "bytes":
            bytes_values.append((number, _bytes_list(record, list_at, entry_end, spec, mask)))
            continue
        begin, end = _packed(record, list_at, entry_end)
        if spec.kind == "float":
            if end - begin != 4 * spec.size:
                raise _NotCanonical
            mask[begin:end] = _FREE
            floats.append((number, begin))
        else:
            ints.append(_int_list(record, begin, end, number, spec))
            mask[begin:end] = _CONTINUATION
    if len(seen) != len(specs):
        raise _NotCanonical
    template = np.zeros(len(mask), dtype=np.uint8)
    template[:size] = np.frombuffer(record, dtype=np.uint8)
    return Layout(size, template.view("<u8"), mask.view("<u8"), tuple(floats), tuple(ints), tuple(bytes_values))


def _packed(record: bytes, begin: int, end: int) -> tuple[int, int]:
    """The payload bounds of a list body holding one packed field 1 (or nothing)."""
    if begin == end:
        return begin, begin
    if record[begin] != 0x0A:
        raise _NotCanonical
    length, at = _varint(record, begin + 1, end)
    if at + length != end:
        raise _NotCanonical
    return at, end


def _int_list(record: bytes, begin: int, end: int, number: int, spec: fmt.FeatureSpec) -> _IntList:
    places: list[int] = []
    firsts: list[int] = []
    at = begin
    while at < end:
        firsts.append(at - begin)
        place = 0
        while True:
            if place == 10:
                raise _NotCanonical
            places.append(place)
            at += 1
            if record[at - 1] < 0x80:
                break
            if at >= end:
                raise _NotCanonical
            place += 1
    if len(firsts) != spec.size:
        raise _NotCanonical
    shifts = np.array(places, dtype=np.uint64) * np.uint64(7)
    return _IntList(number, begin, shifts, np.array(firsts, dtype=np.intp), len(firsts) == end - begin)


def _bytes_list(
    record: bytes, begin: int, end: int, spec: fmt.FeatureSpec, mask: np.ndarray
) -> tuple[tuple[int, int], ...]:
    values = []
    at = begin
    while at < end:
        if record[at] != 0x0A:
            raise _NotCanonical
        length, at = _varint(record, at + 1, end)
        if at + length > end:
            raise _NotCanonical
        values.append((at, length))
        mask[at : at + length] = _FREE
        at += length
    if len(values) != spec.size:
        raise _NotCanonical
    return tuple(values)


# ------------------------------------------------------------------- decoding
@dataclass(frozen=True)
class _Rows:
    """A chunk of records of one length: row ``i`` is ``base``'s bytes from ``offset + i * stride``."""

    base: np.ndarray
    offset: int
    stride: int
    count: int
    starts: np.ndarray  # where each record starts in the fragment's data

    def view(self, at: int, dtype: str, values: int) -> np.ndarray:
        """``(count, values)`` of ``dtype`` from byte ``at`` of every record, in place."""
        itemsize = np.dtype(dtype).itemsize
        return np.ndarray(
            (self.count, values),
            dtype=dtype,
            buffer=self.base,
            offset=self.offset + at,
            strides=(self.stride, itemsize),
        )

    def subset(self, keep: np.ndarray, buf: np.ndarray, width: int) -> _Rows:
        return _rows(buf, self.starts[keep], width)


def _rows(buf: np.ndarray, starts: np.ndarray, width: int) -> _Rows:
    """``width`` bytes from each of ``starts``: in place at one stride, else copied."""
    count = len(starts)
    stride = int(starts[1] - starts[0]) if count > 1 else width
    if stride >= width and (count < 3 or (np.diff(starts) == stride).all()):
        return _Rows(buf, int(starts[0]), stride, count, starts)
    matrix = np.lib.stride_tricks.sliding_window_view(buf, width)[starts]
    return _Rows(matrix, 0, width, count, starts)


def _extract(
    layout: Layout,
    rows: _Rows,
    into: np.ndarray | slice,
    raw: bytes,
    specs: Sequence[fmt.FeatureSpec],
    columns: dict[str, np.ndarray],
) -> None:
    """Writes the values of ``rows`` (records of ``layout``) into ``columns`` at ``into``."""
    count = rows.count
    for number, offset in layout.floats:
        spec = specs[number]
        columns[spec.name][into] = rows.view(offset, "<f4", spec.size).reshape((count, *spec.fixed))
    for varints in layout.ints:
        spec = specs[varints.number]
        payload = rows.view(varints.begin, "u1", len(varints.shifts))
        if varints.one_byte:
            values = payload.astype(np.int64)
        else:
            parts = (payload & 0x7F).astype(np.uint64)
            parts <<= varints.shifts
            values = np.bitwise_or.reduceat(parts, varints.firsts, axis=1).view(np.int64)
        columns[spec.name][into] = values.reshape((count, *spec.fixed))
    if layout.bytes_values:
        at = rows.starts.tolist()
        for number, places in layout.bytes_values:
            spec = specs[number]
            out = np.empty((count, len(places)), dtype=object)
            for column, (offset, length) in enumerate(places):
                pieces = (raw[a + offset : a + offset + length] for a in at)
                out[:, column] = np.fromiter(pieces, dtype=object, count=count)  # never via 'S': it strips NULs
            columns[spec.name][into] = out.reshape((count, *spec.fixed))


def decode_examples(
    buf: np.ndarray, raw: bytes, starts: np.ndarray, lengths: np.ndarray, specs: Sequence[fmt.FeatureSpec]
) -> tuple[dict[str, np.ndarray], dict[int, str]]:
    """The general parser's :func:`~.format.decode_examples`, records of a shared layout at once.

    Same arguments (``buf`` is ``raw`` followed by ``PAD_BYTES`` zeros), same
    results: columns and ``{record position: why}``.
    """
    n = len(starts)
    if any(spec.shape is None for spec in specs):  # lists of any length: the general parser gathers them at once
        return fmt.decode_examples(buf, raw, starts, lengths, specs)
    general = np.ones(n, dtype=bool)
    columns: dict[str, np.ndarray] | None = None
    if n >= MIN_GROUP:
        distinct, which, counts = np.unique(lengths, return_inverse=True, return_counts=True)
        groups = np.flatnonzero(counts >= MIN_GROUP)
        if counts[groups].sum() < MIN_SHARE * n:  # records of many lengths: the general parser is quicker
            groups = groups[:0]
        order = np.argsort(which.reshape(-1), kind="stable")  # the rows of each length, in file order
        bounds = np.cumsum(counts)
        for group in groups.tolist():
            if columns is None:
                columns = {spec.name: np.zeros((n, *spec.fixed), dtype=spec.dtype) for spec in specs}
                for spec in specs:
                    if spec.kind == "bytes":
                        columns[spec.name][...] = b""
            rows = order[bounds[group] - counts[group] : bounds[group]]
            _decode_group(buf, raw, starts, int(distinct[group]), rows, specs, columns, general)
    if columns is None:
        return fmt.decode_examples(buf, raw, starts, lengths, specs)
    errors: dict[int, str] = {}
    rest = np.flatnonzero(general)
    if len(rest):
        decoded, found = fmt.decode_examples(buf, raw, starts[rest], lengths[rest], specs)
        for name, column in decoded.items():
            columns[name][rest] = column
        errors = {int(rest[row]): why for row, why in found.items()}
    return columns, errors


def _decode_group(
    buf: np.ndarray,
    raw: bytes,
    starts: np.ndarray,
    length: int,
    rows: np.ndarray,
    specs: Sequence[fmt.FeatureSpec],
    columns: dict[str, np.ndarray],
    general: np.ndarray,
) -> None:
    """Decodes the records ``rows`` (all ``length`` bytes long) that fit a layout learned from one of them.

    Records that fit no layout keep their ``general`` flag.
    """
    for _ in range(MAX_LAYOUTS):
        if len(rows) < MIN_GROUP:
            return
        first = int(starts[rows[0]])
        layout = learn(raw[first : first + length], specs)
        if layout is None:  # this record is the general parser's; maybe the next one has a layout
            rows = rows[1:]
            continue
        width = layout.width  # buf holds PAD_BYTES after the data: a row may run up to 7 bytes past it
        words = width // 8
        step = max(1, CHUNK_BYTES // width)
        left = []
        for at in range(0, len(rows), step):
            part = rows[at : at + step]
            chunk = _rows(buf, starts[part], width)
            fits = layout.matches(chunk.view(0, "<u8", words))
            into: np.ndarray | slice = part
            if not fits.all():
                left.append(part[~fits])
                if not fits.any():
                    continue
                chunk, into = chunk.subset(fits, buf, width), part[fits]
            elif part[-1] - part[0] == len(part) - 1:  # consecutive records: write slices
                into = slice(int(part[0]), int(part[-1]) + 1)
            _extract(layout, chunk, into, raw, specs, columns)
            general[into] = False
        if not left:
            return
        rows = np.concatenate(left)
