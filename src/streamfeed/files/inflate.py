"""Entering a gzip (or raw deflate) stream in the middle: decompressor checkpoints.

Deflate has no random access: a byte can only be decompressed after every
byte before it, because each refers back into the 32 KiB before it. So a
compressed file is read once, forward (the pass that counts its records),
and at chosen points a *checkpoint* is kept: the compressed offset of the
next input byte, the decompressed offset, and a copy of the decompressor
(``zlib.decompressobj().copy()``, its state and 32 KiB window: about
40 KiB). A fragment of the file then starts from the nearest checkpoint at
or before its first byte, decompresses forward, discards what precedes its
start and stops at its end, so memory is bounded by the fragment, not the
file.

The copies live only in memory (they cannot be serialised): whoever keeps
them keeps one per fragment, so their count is the file's decompressed size
over the fragment size, and their memory about 40 KiB per fragment (0.25%
of the data at 16 MiB fragments). Building them takes one decompression
pass when a file is opened.

Concatenated gzip members (``cat a.gz b.gz``, pigz, bgzip) are followed as
one stream, as ``gzip`` and TensorFlow do; bytes after the last member that
are not another member are damage.
"""

from __future__ import annotations

import bisect
import zlib
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator

GZIP = 31  # zlib wbits: a gzip header and trailer
RAW = -15  # zlib wbits: bare deflate (zip members)
_INPUT_BLOCK = 256 * 1024
_MIN_BLOCK = 16 * 1024
_MAX_BLOCK = 1 << 20

Read = Callable[[int], bytes]


class InflateError(Exception):
    """The compressed data is corrupt or ends early (the message says which and where)."""


@dataclass(frozen=True)
class Checkpoint:
    """Where decompression can resume: offsets and the decompressor's state there.

    ``state`` is ``None`` at the start of a gzip member (nothing to copy:
    a new decompressor starts there), else a decompressor never used
    itself, only copied.
    """

    out_offset: int  # decompressed bytes before this point
    in_offset: int  # compressed offset of the next byte to feed
    state: Any = None


START = Checkpoint(0, 0)


def block_bytes(fragment_bytes: int) -> int:
    """Decompressed bytes per block of a counting pass: at most half a fragment (16 KiB-1 MiB).

    A fragment resumes from the checkpoint at the start of the block that
    holds its first byte, so each fragment decompresses at most one block
    more than its own bytes.
    """
    return max(_MIN_BLOCK, min(_MAX_BLOCK, fragment_bytes // 2))


class Checkpoints:
    """One file's checkpoints, sorted by decompressed offset; always holds the start."""

    def __init__(self) -> None:
        self._points: list[Checkpoint] = [START]
        self._offsets: list[int] = [0]

    def keep(self, point: Checkpoint) -> None:
        """Adds ``point`` if it lies past every kept one (passes only move forward)."""
        if point.out_offset > self._offsets[-1]:
            self._points.append(point)
            self._offsets.append(point.out_offset)

    def before(self, offset: int) -> Checkpoint:
        """The last checkpoint at or before decompressed byte ``offset``."""
        return self._points[bisect.bisect_right(self._offsets, offset) - 1]

    def __len__(self) -> int:
        return len(self._points)


class Inflater:
    """Decompresses forward from a checkpoint, in pieces of bounded size."""

    def __init__(self, read: Read, *, wbits: int = GZIP, at: Checkpoint = START, limit: int | None = None) -> None:
        """``read`` reads compressed bytes from ``at.in_offset`` on (the caller seeks).

        ``limit``: the stream's end offset.
        """
        self._read = read
        self._wbits = wbits
        self._limit = limit
        self._decompressor = at.state.copy() if at.state is not None else zlib.decompressobj(wbits)
        self._started = at.state is not None  # the current member has consumed input
        self._tail = b""  # compressed bytes read but not yet consumed
        self.out_offset = at.out_offset
        self.in_offset = at.in_offset

    def read(self, size: int) -> bytes:
        """Up to ``size`` (> 0) decompressed bytes; ``b""`` only at the clean end of the stream."""
        while True:
            if not self._tail:
                self._tail = self._fill()
                if not self._tail:
                    if self._decompressor.eof or not self._started:
                        return b""
                    raise InflateError(
                        "the compressed stream is truncated: "
                        f"it ends at decompressed byte {self.out_offset}, before its end marker"
                    )
            if self._decompressor.eof:
                if self._wbits != GZIP:
                    return b""  # one raw deflate stream: what follows is not ours
                self._decompressor, self._started = zlib.decompressobj(self._wbits), False  # the next gzip member
            try:
                out = self._decompressor.decompress(self._tail, size)
            except zlib.error as exc:
                raise InflateError(
                    f"the compressed data is corrupt after decompressed byte {self.out_offset} ({exc})"
                ) from exc
            rest = self._decompressor.unused_data if self._decompressor.eof else self._decompressor.unconsumed_tail
            self.in_offset += len(self._tail) - len(rest)
            self._started = True
            self._tail = rest
            if out:
                self.out_offset += len(out)
                return out

    def read_exact(self, count: int) -> bytes:
        """Exactly ``count`` decompressed bytes, decoded in pieces of at most 1 MiB.

        The caller sizes ``count`` (checked against its memory limit before
        asking); a stream that ends before is damage, an :class:`InflateError`.
        """
        parts: list[bytes] = []
        have = 0
        while have < count:
            piece = self.read(min(count - have, _MAX_BLOCK))
            if not piece:
                raise InflateError(f"the decompressed data ends at byte {self.out_offset}, {count - have} bytes short")
            parts.append(piece)
            have += len(piece)
        return parts[0] if len(parts) == 1 else b"".join(parts)

    def checkpoint(self) -> Checkpoint:
        """A checkpoint at the current position (between two reads)."""
        fresh = self._decompressor.eof or not self._started
        return Checkpoint(self.out_offset, self.in_offset, None if fresh else self._decompressor.copy())

    def skip(self, count: int) -> None:
        """Decompresses and discards ``count`` bytes."""
        while count > 0:
            piece = self.read(min(count, _MAX_BLOCK))
            if not piece:
                raise InflateError(f"the decompressed data ends at byte {self.out_offset}, {count} bytes short")
            count -= len(piece)

    def _fill(self) -> bytes:
        want = _INPUT_BLOCK
        if self._limit is not None:
            want = min(want, self._limit - self.in_offset)
        return self._read(want) if want > 0 else b""


def blocks(read: Read, size: int, *, wbits: int = GZIP) -> Iterator[tuple[Checkpoint, bytes]]:
    """A whole stream in decompressed blocks of ``size`` (the last may be shorter).

    Each block comes with the checkpoint at its start.
    """
    inflater = Inflater(read, wbits=wbits)
    while True:
        before = inflater.checkpoint()
        parts: list[bytes] = []
        have, damage = 0, None
        try:
            while have < size:
                piece = inflater.read(size - have)
                if not piece:
                    break
                parts.append(piece)
                have += len(piece)
        except InflateError as exc:
            damage = exc  # raised after the bytes before it are handed on
        if parts:
            yield before, parts[0] if len(parts) == 1 else b"".join(parts)
        if damage is not None:
            raise damage
        if have < size:
            return


def latest(points: Iterable[Checkpoint], offset: int) -> Checkpoint | None:
    """The last of ``points`` (in stream order) at or before decompressed byte ``offset``."""
    found = None
    for point in points:
        if point.out_offset <= offset:
            found = point
    return found


def checkpoints_at(read: Read, starts: Iterable[int], size: int, *, wbits: int = GZIP) -> Checkpoints:
    """Checkpoints for ranges starting at decompressed ``starts``: one pass, stopping after the last start."""
    wanted = sorted(set(starts))
    points = Checkpoints()
    number = 0
    for before, block in blocks(read, size, wbits=wbits) if wanted else ():
        end = before.out_offset + len(block)
        while number < len(wanted) and wanted[number] < end:
            points.keep(before)
            number += 1
        if number == len(wanted):
            break
    return points


def read_range(open_file: Callable[[], Any], points: Checkpoints, start: int, end: int, *, wbits: int = GZIP) -> bytes:
    """Decompressed bytes ``[start, end)``, resumed from the nearest checkpoint before ``start``.

    ``open_file()`` opens the compressed file for reading and seeking (a
    context manager). Damage after ``end`` is never reached.
    """
    at = points.before(start)
    with open_file() as handle:
        handle.seek(at.in_offset)
        inflater = Inflater(handle.read, wbits=wbits, at=at)
        inflater.skip(start - at.out_offset)
        return inflater.read_exact(end - start)
