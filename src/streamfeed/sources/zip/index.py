"""The index of a zip archive: its central directory, read at open, and each member's bytes, inflated with guards.

:func:`read_index` opens the archive through the storage layer's file
(local, ``s3://``, ``gs://``, ``https://``) and lets :mod:`zipfile` parse
the end record and the central directory: a read of the archive's tail and
one of the directory, nothing else (``zipfile`` reads a local header only
when a member is opened, which is never done here). Every entry is then
checked, so what is refused is known before the first batch:

* **path traversal**: a name that is absolute (``/x``, ``\\x``, ``C:x``),
  has a ``..`` component or a NUL byte. Nothing is ever extracted, but such
  a name would give its image a class it is not filed under;
* **duplicates**: two entries of one name (which one is the file is up to
  the tool that extracts it): every entry of that name is refused;
* **encryption** (flag bit 0 or 6) and any compression but stored and
  deflate (bzip2, LZMA, Deflate64: rare for images, and their ratios are
  not bounded as deflate's is);
* **zip bombs**: a declared size over ``max_member_bytes``; a deflated
  member declaring more than deflate can produce from its compressed bytes
  (1032:1 at most, ``MAX_DEFLATE_RATIO`` with headroom); entries whose
  bytes overlap another entry's (the overlapping-files bomb). When a member
  is read, inflating stops at its declared size (:func:`inflate`): a
  member that inflates further is refused, whatever it declared.

:func:`inflate` reads one member from bytes read at its local header: the
local header's signature and name are checked against the directory's, the
data inflated within its declared size, its length and CRC-32 checked.
"""

from __future__ import annotations

import hashlib
import re
import struct
import zipfile
import zlib
from dataclasses import dataclass, field

import pyarrow.fs as pafs

LOCAL_HEADER = 30  # fixed part of a local file header, before its name and extra field
LOCAL_SIGNATURE = b"PK\x03\x04"
MAX_DEFLATE_RATIO = 1100  # deflate's bound is 1032:1 (258-byte matches in ~2-bit codes); headroom for headers
STORED, DEFLATED = zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED
_METHODS = {STORED: "stored", DEFLATED: "deflate"}
_ENCRYPTED = 0x1 | 0x40  # traditional PKWARE encryption, strong encryption
_DRIVE = re.compile(r"^[A-Za-z]:")
_LINK = 0o120000
_DAMAGE = ": a zip bomb, or a damaged archive"


class MemberError(ValueError):
    """A member cannot be read as it is declared: damaged, truncated, or inflating past its size."""


@dataclass(frozen=True)
class Member:
    """One regular file entry: its name, where its local header is, how it is stored, and its extent."""

    name: str
    header: int  # byte offset of its local header
    method: int
    compressed: int
    size: int  # declared uncompressed size
    crc: int
    end: int  # where the next entry's local header (or the central directory) starts: its bytes end before

    @property
    def extent(self) -> int:
        """Bytes from the local header that hold the member: to the next entry, at most what a local header allows."""
        return min(self.end - self.header, LOCAL_HEADER + 2 * 0xFFFF + self.compressed + 24)


@dataclass(frozen=True)
class Refused:
    """An entry refused at open: its name, local header offset and why."""

    name: str
    header: int
    problem: str
    damage: bool  # a bomb or damaged directory (CorruptFileError), not a name or a feature refused (DataError)


@dataclass
class ZipIndex:
    """An archive's members, in directory order, what was refused, and the directory's digest."""

    path: str
    size: int
    members: list[Member] = field(default_factory=list)
    folders: set[str] = field(default_factory=set)  # names of directory entries ("cat/", "cat/more/")
    links: list[str] = field(default_factory=list)  # symbolic-link entries (never followed)
    refused: list[Refused] = field(default_factory=list)
    digest: str = ""


def read_index(path: str, filesystem: pafs.FileSystem, max_member_bytes: int) -> ZipIndex:
    """The archive's checked index; raises ``zipfile.BadZipFile`` (or ``OSError``) when no directory is found."""
    with filesystem.open_input_file(path) as stream:
        size = stream.size()
        try:
            archive = zipfile.ZipFile(stream)  # a seekable binary file: zipfile reads only its tail and directory
        except NotImplementedError as exc:  # a version of the format zipfile does not read
            raise zipfile.BadZipFile(str(exc)) from exc
        infos = archive.infolist()
        directory = archive.start_dir  # set by zipfile when it reads the directory
    index = ZipIndex(path, size)
    digest = hashlib.sha1()
    for info in infos:
        fields = (info.orig_filename, info.header_offset, info.compress_type, info.compress_size, info.file_size)
        digest.update(repr((*fields, info.CRC, info.flag_bits)).encode())
    index.digest = digest.hexdigest()[:16]
    starts = sorted({info.header_offset for info in infos} | {directory})
    following = {start: starts[i + 1] if i + 1 < len(starts) else directory for i, start in enumerate(starts)}
    counts: dict[str, int] = {}
    for info in infos:
        counts[info.filename] = counts.get(info.filename, 0) + 1
    at_offset: dict[int, int] = {}
    for info in infos:
        at_offset[info.header_offset] = at_offset.get(info.header_offset, 0) + 1
    for info in infos:
        end = following.get(info.header_offset, directory)
        problem = _refusal(info, counts, at_offset, end, max_member_bytes)
        if problem is not None:
            damage = problem.endswith(_DAMAGE)
            index.refused.append(Refused(info.filename, info.header_offset, problem, damage))
        elif info.filename.endswith("/"):
            index.folders.add(info.filename)
        elif (info.external_attr >> 16) & 0o170000 == _LINK:
            index.links.append(info.filename)
        else:
            index.members.append(
                Member(
                    info.filename,
                    info.header_offset,
                    info.compress_type,
                    info.compress_size,
                    info.file_size,
                    info.CRC,
                    end,
                )
            )
    return index


def _refusal(
    info: zipfile.ZipInfo, counts: dict[str, int], at_offset: dict[int, int], end: int, max_member_bytes: int
) -> str | None:
    """Why an entry is refused, or None."""
    name, original = info.filename, info.orig_filename
    if "\0" in original:
        return "its name holds a NUL byte (a name that tools cut short: refused as path traversal)"
    parts = re.split(r"[/\\]", name)
    if name.startswith(("/", "\\")) or _DRIVE.match(name) or ".." in parts:
        return "its name is absolute or climbs out of the archive with '..' (path traversal)"
    if counts[name] > 1:
        return f"{counts[name]} entries have this name (which one is the file is up to the tool extracting it)"
    if info.flag_bits & _ENCRYPTED:
        return "the member is encrypted (streamfeed reads no passwords)"
    if name.endswith("/"):
        return None
    if info.compress_type not in _METHODS:
        return f"compression method {info.compress_type} is not read (only stored and deflate)"
    if info.file_size > max_member_bytes:
        return (
            f"it declares {info.file_size} bytes uncompressed, more than the {max_member_bytes} a member may have "
            "(max_image_bytes plus 1 MiB)" + _DAMAGE
        )
    if info.compress_type == DEFLATED and info.file_size > MAX_DEFLATE_RATIO * info.compress_size + 1024:
        return (
            f"it declares {info.file_size} bytes inflated from {info.compress_size} compressed, more than deflate "
            "can produce" + _DAMAGE
        )
    if info.compress_type == STORED and info.file_size != info.compress_size:
        return f"a stored member declares {info.file_size} bytes but holds {info.compress_size}" + _DAMAGE
    if at_offset[info.header_offset] > 1 or info.header_offset + LOCAL_HEADER + info.compress_size > end:
        return "its bytes overlap another entry's or the central directory (overlapping entries)" + _DAMAGE
    return None


def local_data(member: Member, buffer: bytes | memoryview, start: int) -> memoryview:
    """The member's compressed bytes in ``buffer`` (read from archive byte ``start``), its local header checked."""
    view = memoryview(buffer)
    at = member.header - start
    local = bytes(view[at : at + LOCAL_HEADER])
    if len(local) < LOCAL_HEADER or local[:4] != LOCAL_SIGNATURE:
        raise MemberError("no local file header where the central directory points (the archive is damaged)")
    flags, method = struct.unpack("<HH", local[6:10])
    name_length, extra_length = struct.unpack("<HH", local[26:30])
    raw_name = bytes(view[at + LOCAL_HEADER : at + LOCAL_HEADER + name_length])
    name = raw_name.decode("utf-8" if flags & 0x800 else "cp437", "replace")
    if flags & _ENCRYPTED or method != member.method or name.replace("\\", "/") != member.name.replace("\\", "/"):
        raise MemberError(
            f"the local header (name {name!r}, method {method}) is not the central directory's entry (method "
            f"{member.method}): the archive is damaged"
        )
    data_start = at + LOCAL_HEADER + name_length + extra_length
    data = view[data_start : data_start + member.compressed]
    if member.header + LOCAL_HEADER + name_length + extra_length + member.compressed > member.end:
        raise MemberError("the member's data runs into the next entry (overlapping entries)")
    if len(data) < member.compressed:
        raise MemberError(
            f"the member's data is cut short ({len(data)} of {member.compressed} bytes): the archive is truncated"
        )
    return data


def inflate(member: Member, buffer: bytes | memoryview, start: int) -> bytes:
    """The member's bytes, inflated never past its declared size, length and CRC-32 checked."""
    data = local_data(member, buffer, start)
    if member.method == STORED:
        out = bytes(data)
    else:
        inflater = zlib.decompressobj(-15)
        try:
            out = inflater.decompress(data, member.size + 1)  # one byte more than declared: a bomb shows
        except zlib.error as exc:
            raise MemberError(f"the deflate stream is damaged ({exc})") from exc
        if len(out) > member.size:
            raise MemberError(
                f"it inflates past its declared {member.size} bytes (a zip bomb): inflating was stopped there"
            )
        if not inflater.eof:
            raise MemberError("the deflate stream ends early (the member is truncated or damaged)")
    if len(out) != member.size:
        raise MemberError(f"it holds {len(out)} bytes, not the {member.size} its entry declares")
    if zlib.crc32(out) != member.crc:
        raise MemberError(
            f"its CRC-32 is {zlib.crc32(out):08x}, not the {member.crc:08x} declared: the bytes are damaged"
        )
    return out


def head(member: Member, buffer: bytes | memoryview, start: int, nbytes: int) -> bytes:
    """At most ``nbytes`` of the member's first bytes, from a read of its start (for a header probe)."""
    view = memoryview(buffer)
    at = member.header - start
    local = bytes(view[at : at + LOCAL_HEADER])
    if len(local) < LOCAL_HEADER or local[:4] != LOCAL_SIGNATURE:
        raise MemberError("no local file header where the central directory points (the archive is damaged)")
    name_length, extra_length = struct.unpack("<HH", local[26:30])
    data_start = at + LOCAL_HEADER + name_length + extra_length
    data = view[data_start : data_start + member.compressed]
    if member.method == STORED:
        return bytes(data[:nbytes])
    try:
        return zlib.decompressobj(-15).decompress(data, nbytes)
    except zlib.error as exc:
        raise MemberError(f"the deflate stream is damaged ({exc})") from exc


def member_where(path: str, member: str, offset: int) -> str:
    """How every message names a place in an archive: the archive, the member, its local header's byte offset."""
    return f"{path}, member {member!r} (local header at byte {offset})"
