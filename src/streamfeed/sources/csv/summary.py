"""A block's record count without the positions of its newlines: the row-count scan's fast path.

Most blocks of a CSV hold only plain records: no newline inside quotes,
no quote opening in the middle of a field, no record longer than the
block, no split point. For such a block the scan needs only how many
records end in it, where the last one ends and the quote parity after it
— not the position of every newline and quote, whose search
(``np.flatnonzero`` and ``np.searchsorted``) was 80 % of the count. This
module answers those questions in the bit domain: each byte class
(newline, quote, delimiter, carriage return) becomes a bit mask packed
into 64-bit words, the quote parity before every byte is a prefix XOR
over those words (six shifts within a word, a cumulative sum of the words'
parities across them), and "a newline inside quotes" or "an opening quote
after an ordinary byte" are ANDs of masks (simdjson's method, in NumPy).

:func:`summarize` computes that for both parities a block may start in;
the scanner takes the fast path only when the summary shows the block
plain at its actual parity and its other conditions hold (``Scanner.feed``),
and otherwise indexes the block in full, so the counts, splits, lines and
errors are the same either way (``tests/sources/test_csv_count.py``).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

import numpy as np

NEWLINE, CR = 10, 13
_ONES = np.uint64(0xFFFF_FFFF_FFFF_FFFF)
_SHIFTS = tuple(np.uint64(shift) for shift in (1, 2, 4, 8, 16, 32))


@dataclass(frozen=True)
class BlockSummary:
    """A block's newlines and quotes, counted; ``plain[p]``: whether it is plain when it starts at parity ``p``.

    Plain: no newline inside quotes and every opening quote after a
    delimiter, a line end or a quote. ``first``/``last``: the offsets of
    its first and last newline (-1: none); ``empty``: its newlines after
    the first that end an empty line (``\\n\\n`` or ``\\n\\r\\n``): both bytes
    before such a newline lie in the block, and the first never counts (the
    scanner checks it against the record's start).
    """

    newlines: int
    quotes: int
    first: int
    last: int
    empty: int
    plain: tuple[bool, bool]


_scratch = threading.local()


def byte_mask(buf: np.ndarray, byte: int) -> np.ndarray:
    """``buf == byte``, in one buffer per thread reused until the thread's next call.

    A new 1 MiB mask each time, while other arrays of the block lived, took
    fresh pages from the kernel: 0.67 ms a block against 0.16 reused.
    """
    mask = getattr(_scratch, "mask", None)
    if mask is None or mask.size < buf.size:
        mask = _scratch.mask = np.empty(buf.size, dtype=bool)
    return np.equal(buf, byte, out=mask[: buf.size])


def _bits(buf: np.ndarray, byte: int) -> np.ndarray:
    """Where ``buf`` holds ``byte``, as a bit mask in 64-bit words."""
    return np.packbits(byte_mask(buf, byte), bitorder="little").view(np.uint64)


def _shift_up(words: np.ndarray, shift: int) -> np.ndarray:
    """The bit stream moved ``shift`` (< 64) bytes later: bit ``i`` becomes bit ``i + shift``."""
    out = words << np.uint64(shift)
    out[1:] |= words[:-1] >> np.uint64(64 - shift)
    return out


def summarize(block: bytes | memoryview, *, quote: int | None, delimiter: int) -> BlockSummary | None:
    """The :class:`BlockSummary` of ``block``; ``None`` for a memoryview or a length not a multiple of 64 bytes."""
    if not isinstance(block, (bytes, bytearray)) or len(block) % 64 or not len(block):
        return None
    buf = np.frombuffer(block, dtype=np.uint8)
    nl = _bits(buf, NEWLINE)
    newlines = int(np.bitwise_count(nl).sum())
    first = block.find(b"\n") if newlines else -1
    last = block.rfind(b"\n") if newlines else -1
    has_cr = block.find(b"\r") >= 0
    empty_ends = nl & _shift_up(nl, 1)
    if has_cr:
        cr = _bits(buf, CR)
        empty_ends |= nl & _shift_up(cr, 1) & _shift_up(nl, 2)
    empty = int(np.bitwise_count(empty_ends).sum())
    if quote is None or block.find(bytes([quote])) < 0:
        # No quote: plain at parity 0; at parity 1 the whole block is inside one quoted field.
        return BlockSummary(newlines, 0, first, last, empty, (True, newlines == 0))
    q = _bits(buf, quote)
    inside = q.copy()  # the quote parity up to and including each byte, from parity 0 at the block's start
    for shift in _SHIFTS:
        inside ^= inside << shift
    odd = (np.bitwise_count(q) & np.uint8(1)).astype(np.uint64)
    inside ^= ((np.cumsum(odd) - odd) & np.uint64(1)) * _ONES  # the parity of the words before, carried across
    quotes = int(np.bitwise_count(q).sum())
    prior_ok = nl | q | _bits(buf, delimiter)  # a quote may open after these (a quote: ``""`` inside a field)
    if has_cr:
        prior_ok |= cr
    after_ok = _shift_up(prior_ok, 1)  # bit i: byte i - 1 is one of them (at byte 0: unknown, so not plain)
    before = inside ^ q  # the parity before each quote
    plain = []
    for parity in (0, 1):
        flip = _ONES if parity else np.uint64(0)
        quoted_newline = bool((nl & (inside ^ flip)).any())
        misplaced = bool((q & ~(before ^ flip) & ~after_ok).any())
        plain.append(not quoted_newline and not misplaced)
    return BlockSummary(newlines, quotes, first, last, empty, (plain[0], plain[1]))
