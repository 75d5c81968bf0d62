"""Variable-length TFRecord features (``features={"tok": ("int64", None)}``) decoded into a ``Ragged``.

``tf.io.VarLenFeature``'s case: each record's list holds any number of
values (a token sequence, a session's clicks). The general decoder finds
every record's packed list; here the payloads of all
records are gathered into one byte array and decoded at once — floats as
a view, varints with one vectorised pass — and the per-record counts
become the offsets. No loop over records, as for fixed shapes.

A malformed list (a float payload not a multiple of 4 bytes, a varint
running past its list or longer than 10 bytes) is its record's fault: the
record is named in ``errors`` (dropped or raised by the caller, as every
other record error) and holds no values.
"""

from __future__ import annotations

import numpy as np

from ...core_ragged import Ragged


def decode_varints(data: np.ndarray) -> tuple[np.ndarray, np.ndarray, bool]:
    """All varints in ``data`` (uint8): int64 values, where each ends, well-formed?"""
    ends = data < 0x80
    if len(data) == 0:
        return np.zeros(0, dtype=np.int64), ends, True
    starts = np.flatnonzero(np.concatenate(([True], ends[:-1])))
    position = np.arange(len(data)) - np.repeat(starts, np.diff(np.append(starts, len(data))))
    if position.max() > 9 or not ends[-1]:
        return np.zeros(0, dtype=np.int64), ends, False
    parts = (data & 0x7F).astype(np.uint64) << (7 * position).astype(np.uint64)
    return np.bitwise_or.reduceat(parts, starts).view(np.int64), ends, True


def _gather(buf: np.ndarray, begin: np.ndarray, nbytes: np.ndarray) -> np.ndarray:
    """The bytes ``buf[begin[i] : begin[i] + nbytes[i]]`` of every record, end to end."""
    first = np.cumsum(nbytes) - nbytes
    return buf[np.repeat(begin - first, nbytes) + np.arange(int(nbytes.sum()))]


def decode_varlen_column(
    buf: np.ndarray,
    kind: str,
    name: str,
    payload_begin: np.ndarray,
    payload_end: np.ndarray,
    packed: np.ndarray,
    usable: np.ndarray,
    errors: dict[int, str],
) -> Ragged:
    """Feature ``name`` (``"float"`` or ``"int64"``) of every record as rows: its packed payload is
    ``buf[payload_begin:payload_end]`` where the list is ``packed`` one field and the record ``usable``."""
    n = len(payload_begin)
    for row in np.flatnonzero(usable & ~packed).tolist():
        errors.setdefault(row, f"feature {name!r} holds a malformed {kind}_list")
    ok = usable & packed
    nbytes = np.where(ok, payload_end - payload_begin, 0)
    if kind == "float":
        bad = nbytes % 4 != 0
        for row in np.flatnonzero(bad).tolist():
            errors.setdefault(row, f"feature {name!r} holds a malformed float_list (not a whole number of floats)")
        nbytes = np.where(bad, 0, nbytes)
        values = _gather(buf, payload_begin, nbytes).view("<f4").astype(np.float32)
        return Ragged(values, np.concatenate([[0], np.cumsum(nbytes // 4)]))
    data = _gather(buf, payload_begin, nbytes)
    ends = data < 0x80
    row_of_byte = np.repeat(np.arange(n), nbytes)
    # a record's list must end on a varint's last byte, and no varint is longer than 10 bytes
    last = np.cumsum(nbytes) - 1
    runs_on = (nbytes > 0) & ~ends[np.clip(last, 0, max(len(data) - 1, 0))] if len(data) else np.zeros(n, bool)
    starts = np.flatnonzero(np.concatenate(([True], ends[:-1]))) if len(data) else np.zeros(0, np.int64)
    place = np.arange(len(data)) - np.repeat(starts, np.diff(np.append(starts, len(data))))
    overlong = np.zeros(n, dtype=bool)
    overlong[row_of_byte[place > 9]] = True
    bad = runs_on | overlong
    if bad.any():
        for row in np.flatnonzero(bad).tolist():
            errors.setdefault(row, f"feature {name!r} holds a malformed int64_list")
        data = data[np.repeat(~bad, nbytes)]
        nbytes = np.where(bad, 0, nbytes)
        ends = data < 0x80
        row_of_byte = np.repeat(np.arange(n), nbytes)
    values, _, _ = decode_varints(data)
    counts = np.bincount(row_of_byte[ends], minlength=n)
    return Ragged(values, np.concatenate([[0], np.cumsum(counts)]))
