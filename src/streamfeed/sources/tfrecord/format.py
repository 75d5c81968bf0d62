"""``tf.train.Example`` decoding and encoding, without TensorFlow.

Each record's data (framed by ``framing.py``) is usually a
serialized ``tf.train.Example``::

    Example  { Features features = 1; }
    Features { map<string, Feature> feature = 1; }   // entries: key = 1, value = 2
    Feature  { oneof { BytesList bytes_list = 1; FloatList float_list = 2; Int64List int64_list = 3; } }
    *List    { repeated <bytes | float (packed) | int64 (packed varint)> value = 1; }

Decoding is columnar: :func:`decode_examples` walks the protobuf wire format
of *all* records of a fragment in lockstep with NumPy (one vector operation
per map entry and step, not one Python loop iteration per record and field),
gathers packed floats with one fancy index and decodes packed int64 varints
with a vectorized varint decoder. Records in an unusual but valid encoding
(unpacked lists, fields out of canonical order, unknown fields) fall back to
a small pure-Python parser, so any valid Example decodes. This is the
general parser; ``fast.py`` decodes records that share one byte
layout much faster and hands every other record to it.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Literal, Sequence, cast

import numpy as np

from ...errors import ArgumentError, describe
from .framing import CRC32C_BACKEND as CRC32C_BACKEND
from .framing import FOOTER_BYTES as FOOTER_BYTES
from .framing import HEADER_BYTES as HEADER_BYTES
from .framing import FramingProblem as FramingProblem
from .framing import crc32c as crc32c
from .framing import crc32c_python as crc32c_python
from .framing import frame as frame
from .framing import masked_crc as masked_crc
from .framing import read_header as read_header
from .framing import split_records as split_records
from .varlen import decode_varints as decode_varints
from .varlen import decode_varlen_column

PAD_BYTES = 16  # zero bytes after a buffer so vectorized varint reads never index past it

Kind = Literal["float", "int64", "bytes"]
KIND_FIELD = {"bytes": 1, "float": 2, "int64": 3}  # field numbers of Feature's oneof
FIELD_KIND = {number: kind for kind, number in KIND_FIELD.items()}
_LIST_NAMES = {"bytes": "bytes_list", "float": "float_list", "int64": "int64_list"}
_EMPTY = 4  # a Feature with no list set: counts as an empty list of any kind


# ------------------------------------------------------------- Example decoding
@dataclass(frozen=True)
class FeatureSpec:
    """One column: a fixed-shape list of ``kind`` values per record, or (``shape`` None) a list of any length."""

    name: str
    kind: Kind
    shape: tuple[int, ...] | None

    @property
    def text(self) -> str:
        """``'x': float (4,)`` or ``'tok': int64, any length``: the spec as errors name it."""
        return (
            f"{self.name!r}: {self.kind}, any length"
            if self.shape is None
            else f"{self.name!r}: {self.kind} {self.shape}"
        )

    @property
    def fixed(self) -> tuple[int, ...]:
        """The shape of a fixed-shape feature (a variable-length list has none: ArgumentError)."""
        if self.shape is None:
            raise ArgumentError(describe(f"Feature {self.name!r} has a variable length, not a fixed shape"))
        return self.shape

    @property
    def size(self) -> int:
        """Values per record of a fixed-shape feature."""
        return int(np.prod(self.fixed, dtype=np.int64)) if self.fixed else 1

    @property
    def dtype(self) -> np.dtype:
        return np.dtype({"float": np.float32, "int64": np.int64, "bytes": object}[self.kind])


def parse_feature_specs(features: dict) -> list[FeatureSpec]:
    """``{"x": ("float", (4,)), "label": ("int64", ())}`` → validated specs."""
    specs = []
    for name, value in features.items():
        try:
            kind, shape = value
            if shape is not None:
                shape = (int(shape),) if isinstance(shape, (int, np.integer)) else tuple(int(n) for n in shape)
        except (TypeError, ValueError) as exc:
            raise ArgumentError(
                describe(
                    f"Invalid features[{name!r}]",
                    expected="(kind, shape) such as ('float', (4,)), or ('int64', None) for a list of any length",
                    found=f"{value!r}",
                )
            ) from exc
        if kind not in KIND_FIELD:
            raise ArgumentError(
                describe(f"Invalid features[{name!r}]: kind", expected="'float', 'int64' or 'bytes'", found=f"{kind!r}")
            )
        if shape is None and kind == "bytes":
            raise ArgumentError(
                describe(
                    f"Invalid features[{name!r}]: a bytes list of any length",
                    expected="a variable-length 'float' or 'int64' list (read as streamfeed.Ragged rows)",
                    fix="give the bytes feature a fixed shape, or decode it in a map",
                )
            )
        if shape is not None and any(n < 0 for n in shape):
            raise ArgumentError(
                describe(f"Invalid features[{name!r}]: shape", expected="fixed and non-negative", found=f"{shape}")
            )
        specs.append(FeatureSpec(str(name), kind, shape))
    return specs


_STEPS = np.arange(10)
_SHIFTS = (7 * np.arange(10)).astype(np.uint64)


def _varints(buf: np.ndarray, pos: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Varints starting at each of ``pos``: values, positions after them, validity."""
    first = buf[pos]
    if not (first & 0x80).any():
        return first.astype(np.int64), pos + 1, np.ones(len(pos), dtype=bool)
    window = buf[pos[:, None] + _STEPS]
    more = (window & 0x80) != 0
    valid = ~more.all(axis=1)
    nbytes = np.argmin(more, axis=1) + 1
    parts = (window & 0x7F).astype(np.uint64) << _SHIFTS
    parts[_STEPS[None, :] >= nbytes[:, None]] = 0
    values = np.bitwise_or.reduce(parts, axis=1)
    valid &= values < (1 << 62)  # a length or tag, never this large in a valid record
    return np.where(valid, values, 0).astype(np.int64), pos + nbytes, valid


class _Walk:
    """Feature payload locations found by the lockstep walk, per spec and record."""

    def __init__(self, specs: Sequence[FeatureSpec], n: int) -> None:
        self.kind = np.zeros((len(specs), n), dtype=np.int8)  # 0 missing, 1-3 list kind, 4 empty Feature
        self.begin = np.zeros((len(specs), n), dtype=np.int64)  # the list message's body
        self.end = np.zeros((len(specs), n), dtype=np.int64)


def _walk(
    buf: np.ndarray, starts: np.ndarray, ends: np.ndarray, specs: Sequence[FeatureSpec]
) -> tuple[_Walk, np.ndarray]:
    """Locates each wanted feature's list in every record, all records at once.

    Returns the locations and a mask of records in a non-canonical encoding
    (or malformed), which the caller parses with the pure-Python parser.
    """
    n = len(starts)
    limit = len(buf) - PAD_BYTES  # positions beyond the data are clamped here (the padding reads as zeros)
    found = _Walk(specs, n)
    odd = np.zeros(n, dtype=bool)
    present = ends > starts
    tags = buf[np.minimum(starts, limit)]
    length, after, valid = _varints(buf, np.minimum(starts + 1, limit))
    odd |= present & ((tags != 0x0A) | ~valid | (after + length != ends))
    cursor = np.where(present & ~odd, after, ends)
    keys = [np.frombuffer(spec.name.encode(), dtype=np.uint8) for spec in specs]
    widest = max((len(key) for key in keys), default=0)
    active = np.flatnonzero(cursor < ends)
    while len(active):
        c = cursor[active]
        ok = buf[c] == 0x0A
        entry_len, c, v1 = _varints(buf, np.minimum(c + 1, limit))
        entry_end = c + entry_len
        ok &= v1 & (entry_end <= ends[active]) & (buf[np.minimum(c, limit)] == 0x0A)
        key_len, key_at, v2 = _varints(buf, np.minimum(c + 1, limit))
        c = np.minimum(key_at + key_len, limit)
        ok &= v2 & (buf[c] == 0x12)
        value_len, c, v3 = _varints(buf, np.minimum(c + 1, limit))
        ok &= v3 & (c + value_len == entry_end)
        has_list = value_len > 0
        list_tag = buf[np.minimum(c, limit)].astype(np.int64)
        list_len, list_at, v4 = _varints(buf, np.minimum(c + 1, limit))
        list_kind = list_tag >> 3
        ok &= ~has_list | (
            v4 & ((list_tag & 7) == 2) & (list_kind >= 1) & (list_kind <= 3) & (list_at + list_len == entry_end)
        )
        if widest:
            key_bytes = buf[np.minimum(key_at[:, None] + np.arange(widest), len(buf) - 1)]
        for number, key in enumerate(keys):
            match = ok & (key_len == len(key))
            if len(key):
                match &= (key_bytes[:, : len(key)] == key).all(axis=1)
            rows = active[match]
            found.kind[number, rows] = np.where(has_list[match], list_kind[match], _EMPTY)
            found.begin[number, rows] = list_at[match]
            found.end[number, rows] = list_at[match] + list_len[match]
        odd[active[~ok]] = True
        cursor[active] = np.where(ok, entry_end, ends[active])
        active = active[ok & (entry_end < ends[active])]
    return found, odd


def _packed(buf: np.ndarray, begin: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The payload of a list holding one packed field 1 (or nothing): bounds and validity."""
    empty = end == begin
    limit = len(buf) - PAD_BYTES
    tag_ok = buf[np.minimum(begin, limit)] == 0x0A
    length, at, valid = _varints(buf, np.minimum(begin + 1, limit))
    ok = empty | (tag_ok & valid & (at + length == end))
    return np.where(empty, begin, at), np.where(empty, begin, at + length), ok


def decode_examples(
    buf: np.ndarray, raw: bytes, starts: np.ndarray, lengths: np.ndarray, specs: Sequence[FeatureSpec]
) -> tuple[dict[str, np.ndarray], dict[int, str]]:
    """Decodes records ``buf[starts[i] : starts[i] + lengths[i]]`` into columns.

    ``buf`` is the uint8 view of ``raw`` followed by ``PAD_BYTES`` zeros.
    Returns columns with one row per record and ``{record position: why}``
    for records that do not match the spec (missing feature, wrong kind or
    length, malformed protobuf); those rows hold zeros and the caller drops
    them or raises.
    """
    ends = starts + lengths
    errors: dict[int, str] = {}
    found, odd = _walk(buf, starts, ends, specs)
    odd |= _not_packed(buf, found, specs)
    if odd.any():
        buf, raw = _redo_odd(buf, raw, starts, ends, odd, specs, found, errors)
    columns: dict[str, np.ndarray] = {}
    for number, spec in enumerate(specs):
        kind, begin, end = found.kind[number], found.begin[number], found.end[number]
        bad = kind == 0
        for row in np.flatnonzero(bad).tolist():
            errors.setdefault(row, f"feature {spec.name!r} is missing")
        wrong = (kind != KIND_FIELD[spec.kind]) & (kind != _EMPTY) & ~bad
        for row in np.flatnonzero(wrong).tolist():
            errors.setdefault(
                row,
                f"feature {spec.name!r} is a {_LIST_NAMES[FIELD_KIND[int(kind[row])]]}, the spec says {spec.kind!r}",
            )
        usable = ~bad & ~wrong
        begin, end = np.where(usable, begin, 0), np.where(usable, end, 0)
        if spec.shape is None:  # a variable-length list: rows of any length
            rows = decode_varlen_column(buf, spec.kind, spec.name, *_packed(buf, begin, end), usable, errors)
            columns[spec.name] = cast(np.ndarray, rows)  # a Ragged stands in for a column (core_ragged.py)
        else:
            columns[spec.name] = _decode_column(buf, raw, spec, begin, end, usable, errors)
    return columns, errors


def _not_packed(buf: np.ndarray, found: _Walk, specs: Sequence[FeatureSpec]) -> np.ndarray:
    """Records holding a wanted float or int64 list that is not one packed field (unpacked, or in pieces)."""
    odd = np.zeros(found.kind.shape[1], dtype=bool)
    for number in range(len(specs)):
        kind = found.kind[number]
        numeric = (kind == KIND_FIELD["float"]) | (kind == KIND_FIELD["int64"])
        if numeric.any():
            odd |= numeric & ~_packed(buf, found.begin[number], found.end[number])[2]
    return odd


def _redo_odd(
    buf: np.ndarray,
    raw: bytes,
    starts: np.ndarray,
    ends: np.ndarray,
    odd: np.ndarray,
    specs: Sequence[FeatureSpec],
    found: _Walk,
    errors: dict[int, str],
) -> tuple[np.ndarray, bytes]:
    """Parses non-canonical records in Python, then walks their canonical form.

    The canonical encodings go after the original data in a new buffer so
    that one vectorized decoder handles every record.
    """
    rows = np.flatnonzero(odd)
    extra, new_starts, new_ends = [], [], []
    at = len(raw)
    for row in rows.tolist():
        try:
            data = _canonical(raw, int(starts[row]), int(ends[row]), specs)
        except (_Malformed, UnicodeDecodeError) as exc:
            errors[row] = f"the record is not a valid tf.train.Example ({exc})"
            data = b""
        extra.append(data)
        new_starts.append(at)
        at += len(data)
        new_ends.append(at)
    raw = raw + b"".join(extra)
    buf = np.frombuffer(raw + bytes(PAD_BYTES), dtype=np.uint8)
    again, still_odd = _walk(buf, np.array(new_starts, dtype=np.int64), np.array(new_ends, dtype=np.int64), specs)
    found.kind[:, rows] = again.kind
    found.begin[:, rows] = again.begin
    found.end[:, rows] = again.end
    for row in rows[still_odd].tolist():  # cannot happen for our own encoding; never decode garbage
        errors.setdefault(row, "the record is not a valid tf.train.Example")
        found.kind[:, row] = 0
    return buf, raw


def _decode_column(
    buf: np.ndarray,
    raw: bytes,
    spec: FeatureSpec,
    begin: np.ndarray,
    end: np.ndarray,
    usable: np.ndarray,
    errors: dict[int, str],
) -> np.ndarray:
    n, size = len(begin), spec.size
    name = spec.name

    def wrong_length(rows: np.ndarray, counts: np.ndarray | int) -> None:
        for row, count in zip(rows.tolist(), np.broadcast_to(counts, rows.shape).tolist()):
            errors.setdefault(row, f"feature {name!r} has {count} values, the spec's shape {spec.shape} needs {size}")

    if spec.kind == "bytes":
        out = np.empty((n, size), dtype=object)
        out[:] = b""
        cursor = begin.copy()
        ok = usable.copy()
        limit = len(buf) - PAD_BYTES
        for column in range(size):
            inside = cursor < end
            short = ok & ~inside
            wrong_length(np.flatnonzero(short), column)
            ok &= inside
            length, at, valid = _varints(buf, np.minimum(cursor + 1, limit))
            good = ok & (buf[np.minimum(cursor, limit)] == 0x0A) & valid & (at + length <= end)
            for row in np.flatnonzero(ok & ~good).tolist():
                errors.setdefault(row, f"feature {name!r} holds a malformed bytes_list")
            ok = good
            rows = np.flatnonzero(ok)
            pieces = [raw[s:e] for s, e in zip(at[rows].tolist(), (at + length)[rows].tolist())]
            out[rows, column] = np.fromiter(
                pieces, dtype=object, count=len(pieces)
            )  # never via a bytes ('S') array: it strips trailing NULs
            cursor = np.where(ok, at + length, cursor)
        extra = ok & (cursor < end)
        for row in np.flatnonzero(extra).tolist():
            errors.setdefault(row, f"feature {name!r} has more than the {size} values its shape {spec.shape} needs")
        return out.reshape((n, *spec.fixed))
    payload_begin, payload_end, ok = _packed(buf, begin, end)
    for row in np.flatnonzero(usable & ~ok).tolist():
        errors.setdefault(row, f"feature {name!r} holds a malformed {_LIST_NAMES[spec.kind]}")
    ok &= usable
    nbytes = np.where(ok, payload_end - payload_begin, 0)
    if spec.kind == "float":
        counts = nbytes // 4
        bad = ok & ((nbytes % 4 != 0) | (counts != size))
        wrong_length(np.flatnonzero(bad), counts[bad])
        ok &= ~bad
        if size == 0:
            return np.zeros((n, *spec.fixed), dtype=np.float32)
        offsets = np.where(ok, payload_begin, 0)
        values = buf[np.minimum(offsets[:, None] + np.arange(4 * size), len(buf) - 1)]
        out = np.ascontiguousarray(values).view("<f4").astype(np.float32, copy=False)
        out[~ok] = 0
        return out.reshape((n, *spec.fixed))
    # int64: varints, gathered from every record into one array and decoded at once
    nbytes = np.where(ok, nbytes, 0)
    total = int(nbytes.sum())
    first = np.cumsum(nbytes) - nbytes
    data = buf[np.repeat(payload_begin - first, nbytes) + np.arange(total)]
    ends = data < 0x80
    row_of_byte = np.repeat(np.arange(n), nbytes)
    counts = np.bincount(row_of_byte[ends], minlength=n)
    last = first + nbytes - 1
    runs_on = ok & (nbytes > 0) & ~ends[np.clip(last, 0, max(total - 1, 0))] if total else np.zeros(n, dtype=bool)
    bad = ok & ((counts != size) | runs_on)
    if bad.any():
        wrong_length(np.flatnonzero(bad & ~runs_on), counts[bad & ~runs_on])
        for row in np.flatnonzero(runs_on).tolist():
            errors.setdefault(row, f"feature {name!r} holds a malformed int64_list")
        keep = np.repeat(~bad, nbytes)
        data = data[keep]
        ok &= ~bad
    if len(data):  # a varint longer than 10 bytes is its record's fault only
        ends = data < 0x80
        starts = np.flatnonzero(np.concatenate(([True], ends[:-1])))
        place = np.arange(len(data)) - np.repeat(starts, np.diff(np.append(starts, len(data))))
        if place.max() > 9:
            row_of_byte = np.repeat(np.arange(n), np.where(ok, nbytes, 0))
            overlong = np.unique(row_of_byte[place > 9])
            for row in overlong.tolist():
                errors.setdefault(row, f"feature {name!r} holds a malformed int64_list (a varint longer than 10 bytes)")
            data = data[~np.isin(row_of_byte, overlong)]
            ok[overlong] = False
    values, _, well_formed = decode_varints(data)
    out = np.zeros((n, size), dtype=np.int64)
    if not well_formed:
        for row in np.flatnonzero(ok).tolist():
            errors.setdefault(row, f"feature {name!r} holds a malformed int64_list (a varint longer than 10 bytes)")
        return out.reshape((n, *spec.fixed))
    if size:
        out[ok] = values.reshape(-1, size)
    return out.reshape((n, *spec.fixed))


# ------------------------------------------------------------- the slow parser
class _Malformed(ValueError):
    pass


def read_varint(data: bytes, at: int, end: int) -> tuple[int, int]:
    """A protobuf varint at ``data[at:end]``: ``(value, position after it)``; a ValueError if it runs past ``end``."""
    value = shift = 0
    while True:
        if at >= end or shift > 63:
            raise _Malformed("a varint runs past its message")
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, at
        shift += 7


def _fields(data: bytes, at: int, end: int):
    """(field number, wire type, value or (begin, end)) of one protobuf message."""
    while at < end:
        key, at = read_varint(data, at, end)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, at = read_varint(data, at, end)
            yield number, wire, value
        elif wire == 1:
            if at + 8 > end:
                raise _Malformed("a fixed64 runs past its message")
            yield number, wire, data[at : at + 8]
            at += 8
        elif wire == 2:
            length, at = read_varint(data, at, end)
            if at + length > end:
                raise _Malformed("a length-delimited field runs past its message")
            yield number, wire, (at, at + length)
            at += length
        elif wire == 5:
            if at + 4 > end:
                raise _Malformed("a fixed32 runs past its message")
            yield number, wire, data[at : at + 4]
            at += 4
        else:
            raise _Malformed(f"wire type {wire} is not valid here")


def parse_example(data: bytes, begin: int = 0, end: int | None = None) -> dict[str, tuple[str | None, list]]:
    """Any valid serialized Example → ``{name: (kind or None if empty, values)}`` (pure Python)."""
    end = len(data) if end is None else end
    features: dict[str, tuple[str | None, list]] = {}
    for number, wire, value in _fields(data, begin, end):
        if number != 1 or wire != 2:
            continue  # unknown Example field
        for entry_number, entry_wire, entry in _fields(data, *value):
            if entry_number != 1 or entry_wire != 2:
                continue
            key, feature = b"", None
            for field, field_wire, part in _fields(data, *entry):
                if field == 1 and field_wire == 2:
                    key = data[part[0] : part[1]]
                elif field == 2 and field_wire == 2:
                    feature = part
            features[key.decode("utf-8", "replace")] = _parse_feature(data, feature) if feature else (None, [])
    return features


def _parse_feature(data: bytes, bounds: tuple[int, int]) -> tuple[str | None, list]:
    kind: str | None = None
    values: list = []
    for number, wire, part in _fields(data, *bounds):
        if number not in FIELD_KIND or wire != 2:
            continue
        kind, values = FIELD_KIND[number], []  # oneof: the last list set wins
        for item_number, item_wire, item in _fields(data, *part):
            if item_number != 1:
                continue
            if kind == "bytes" and item_wire == 2:
                values.append(data[item[0] : item[1]])
            elif kind == "float" and item_wire == 5:
                values.append(struct.unpack("<f", item)[0])
            elif kind == "float" and item_wire == 2:
                values.extend(
                    struct.unpack(f"<{(item[1] - item[0]) // 4}f", data[item[0] : item[1] - (item[1] - item[0]) % 4])
                )
                if (item[1] - item[0]) % 4:
                    raise _Malformed("a packed float list's length is not a multiple of 4")
            elif kind == "int64" and item_wire == 0:
                values.append(item - (1 << 64) if item >= 1 << 63 else item)
            elif kind == "int64" and item_wire == 2:
                at, stop = item
                while at < stop:
                    value, at = read_varint(data, at, stop)
                    values.append(value - (1 << 64) if value >= 1 << 63 else value)
            else:
                raise _Malformed(f"a {kind} list holds wire type {item_wire}")
    return kind, values


def _canonical(raw: bytes, begin: int, end: int, specs: Sequence[FeatureSpec]) -> bytes:
    """Re-encodes the wanted features of any valid Example in the canonical packed form."""
    parsed = parse_example(raw, begin, end)
    wanted: dict[str, tuple[str | None, bytes]] = {}
    for spec in specs:
        if spec.name in parsed:
            kind, values = parsed[spec.name]
            wanted[spec.name] = (kind, list_body(kind, values) if kind else b"")
    return encode_example(wanted)


def list_body(kind: str, values) -> bytes:
    """The body of a BytesList/FloatList/Int64List message holding ``values``."""
    if kind == "bytes":
        return b"".join(tag_len(1, len(value)) + value for value in values)
    if not len(values):
        return b""
    if kind == "float":
        payload = np.asarray(values, dtype="<f4").tobytes()
    else:
        payload = encode_varints(np.asarray(values, dtype=np.int64).ravel())
    return tag_len(1, len(payload)) + payload


def varint_sizes(values: np.ndarray) -> np.ndarray:
    """Bytes each int64 takes as a varint (negatives take 10, as protobuf encodes them)."""
    remaining = values.astype(np.int64).view(np.uint64).copy()
    sizes = np.ones(len(remaining), dtype=np.int64)
    remaining >>= np.uint64(7)
    while remaining.any():
        sizes += remaining > 0
        remaining >>= np.uint64(7)
    return sizes


def encode_varints(values: np.ndarray, sizes: np.ndarray | None = None) -> bytes:
    """Packed varints of int64 ``values``, all at once."""
    unsigned = values.astype(np.int64).view(np.uint64)
    sizes = varint_sizes(values) if sizes is None else sizes
    groups = (unsigned[:, None] >> _SHIFTS[None, :]) & np.uint64(0x7F)
    more = _STEPS[None, :] < (sizes - 1)[:, None]
    encoded = (groups | (more.astype(np.uint64) << np.uint64(7))).astype(np.uint8)
    return encoded[_STEPS[None, :] < sizes[:, None]].tobytes()


def encode_example(features: dict[str, tuple[str | None, bytes]]) -> bytes:
    """A serialized Example from ``{name: (kind or None, list body)}``."""
    entries = []
    for name, (kind, body) in features.items():
        key = name.encode()
        feature = tag_len(KIND_FIELD[kind], len(body)) + body if kind else b""
        entry = tag_len(1, len(key)) + key + tag_len(2, len(feature)) + feature
        entries.append(tag_len(1, len(entry)) + entry)
    joined = b"".join(entries)
    return tag_len(1, len(joined)) + joined


def encode_varint(value: int) -> bytes:
    value &= (1 << 64) - 1
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def tag_len(number: int, length: int) -> bytes:
    """A length-delimited field's tag and length."""
    return bytes([(number << 3) | 2]) + encode_varint(length)
