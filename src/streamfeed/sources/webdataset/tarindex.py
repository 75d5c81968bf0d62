"""The index of a tar shard: every member's name, data offset and size, from its 512-byte headers.

Built when the source opens, by reading headers only (member data is
skipped; a window of ``WINDOW`` bytes is read at a time, so a shard of
small members costs few range requests on object storage). The index is
what makes the sample count exact before the first batch and lets a
fragment read its samples by offset, anywhere in a shard, in any order.

Own parser rather than :mod:`tarfile`: ``tarfile`` reads through a file
object, one seek and read per header; here each header is parsed from the
window, checksummed, and the first damage found (a header whose checksum
fails, a member whose data runs past the end of the file, a header cut
short) ends the index with the byte offset and member where it happened.
Understood: ustar/GNU/PAX headers (``prefix`` field, GNU ``L`` long names,
PAX ``path`` records); every member that is not a regular file (a
directory, link, device) is ignored, as webdataset does.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

BLOCK = 512
WINDOW = 1 << 20


@dataclass(frozen=True)
class Member:
    """One regular file of the tar: its name, where its header and data start, and its size."""

    name: str
    header: int  # byte offset of its (first) header
    offset: int  # byte offset of its data
    size: int


@dataclass(frozen=True)
class Damage:
    """Where the tar cannot be followed any further: the byte offset, the member named there, what was wrong."""

    offset: int
    member: str | None
    problem: str


@dataclass
class TarIndex:
    """A shard's regular members in order and the damage that ended the walk, if any."""

    path: str
    size: int
    members: list[Member] = field(default_factory=list)
    damage: Damage | None = None
    walked: int = 0  # the offset of the header being read


class HeaderError(ValueError):
    """A header's fields do not parse: caught by :func:`scan_tar`, which makes it the index's damage."""


class _Window:
    """Reads ``read_at(n, offset)`` through a buffer of ``WINDOW`` bytes: consecutive headers cost one read."""

    def __init__(self, read_at: Callable[[int, int], bytes], size: int) -> None:
        self._read_at, self.size = read_at, size
        self._start, self._data = 0, b""

    def read(self, offset: int, n: int) -> bytes:
        if not (self._start <= offset and offset + n <= self._start + len(self._data)):
            self._start = offset
            self._data = self._read_at(min(max(n, WINDOW), max(self.size - offset, 0)), offset)
        return self._data[offset - self._start : offset - self._start + n]


def _number(field_bytes: bytes) -> int:
    """A header's numeric field: octal text, or GNU base-256 when the top bit of the first byte is set."""
    if field_bytes and field_bytes[0] & 0x80:
        value = int.from_bytes(field_bytes[1:], "big")
        return -value if field_bytes[0] & 0x40 else value
    text = field_bytes.split(b"\0", 1)[0].strip(b" \0")
    return int(text, 8) if text else 0


def _text(field_bytes: bytes) -> str:
    return field_bytes.split(b"\0", 1)[0].decode("utf-8", "surrogateescape")


def _checksum_ok(header: bytes) -> bool:
    try:
        stored = _number(header[148:156])
    except ValueError:  # not even a number: not a tar header
        return False
    unsigned = sum(header[:148]) + 8 * 32 + sum(header[156:])
    signed = sum(b - 256 if b > 127 else b for b in header[:148] + header[156:]) + 8 * 32
    return stored in (unsigned, signed)


def _pax_path(data: bytes) -> str | None:
    """The ``path`` record of a PAX extended header (``"<len> path=<name>\\n"`` records)."""
    position = 0
    path = None
    while position < len(data):
        space = data.find(b" ", position)
        if space < 0:
            break
        length = int(data[position:space])
        if length <= space - position:
            raise HeaderError("a PAX record's length is shorter than the record")
        record = data[space + 1 : position + length - 1]
        key, _, value = record.partition(b"=")
        if key == b"path":
            path = value.decode("utf-8", "surrogateescape")
        position += length
    return path


def _padded(size: int) -> int:
    return (size + BLOCK - 1) // BLOCK * BLOCK


def scan_tar(path: str, read_at: Callable[[int, int], bytes], size: int) -> TarIndex:
    """Walks the headers of a tar of ``size`` bytes read by ``read_at(n, offset)`` (data skipped).

    A header whose fields do not parse (a size that is not a number, a
    malformed PAX record) is damage at its offset, as a failed checksum is.
    """
    index = TarIndex(path, size)
    try:
        return _walk(index, read_at, size)
    except ValueError as exc:  # fields of a header that passed its checksum but are not what tar writes
        index.damage = Damage(index.walked, None, f"a tar header's fields do not parse ({exc})")
        return index


def _walk(index: TarIndex, read_at: Callable[[int, int], bytes], size: int) -> TarIndex:
    window = _Window(read_at, size)
    offset = 0
    long_name: str | None = None
    first_header: int | None = None
    while offset < size:
        index.walked = offset
        header = window.read(offset, BLOCK)
        if offset == 0 and header[:2] == b"\x1f\x8b":
            problem = "the file is GZIP-compressed (a .tar.gz / .tgz shard); only uncompressed tar shards are read"
            index.damage = Damage(0, None, problem + ": decompress it (gunzip) first")
            return index
        if len(header) < BLOCK:
            index.damage = Damage(offset, long_name, f"the file ends inside a tar header ({len(header)} of 512 bytes)")
            return index
        if header == bytes(BLOCK):
            return index  # the end-of-archive marker
        name_here = _text(header[0:100])
        if not _checksum_ok(header):
            problem = "a tar header's checksum does not match (the bytes are damaged, or this is not a tar file)"
            index.damage = Damage(offset, None, problem)  # the name field of damaged bytes names nothing
            return index
        kind = header[156:157]
        member_size = _number(header[124:136])
        if member_size < 0:
            raise HeaderError(f"a negative member size at byte {offset}")
        data = offset + BLOCK
        if data + member_size > size:
            index.damage = Damage(
                offset if first_header is None else first_header,  # a PAX or long-name header first: from there
                long_name or name_here,
                f"the member's data ({member_size} bytes from byte {data}) runs past the end of the file "
                f"({size} bytes): the tar is truncated",
            )
            return index
        if first_header is None:
            first_header = offset
        if kind in (b"L", b"x"):  # the next member's long name: GNU, or a PAX record
            payload = window.read(data, member_size) if member_size <= WINDOW else read_at(member_size, data)
            long_name = _text(payload) if kind == b"L" else (_pax_path(payload) or long_name)
        elif kind in (b"0", b"\0", b"7"):
            prefix = _text(header[345:500]) if header[257:262] == b"ustar" and header[345] else ""
            name = long_name or (f"{prefix}/{name_here}" if prefix else name_here)
            index.members.append(Member(name, first_header, data, member_size))
            long_name, first_header = None, None
        else:  # a directory, link, device or global PAX header: not a sample's file
            if kind != b"g":
                long_name = None
            first_header = None
        offset = data + _padded(member_size)
    return index
