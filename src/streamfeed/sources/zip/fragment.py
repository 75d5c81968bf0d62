"""Reading a zip fragment: consecutive images (in name order) read by ranged reads of the archive and decoded.

A fragment's members are sorted by where they are in the archive and cut
into runs of adjacent members; each run is one ``read_at`` through the
source's filesystem (one range request on object storage), and each member
is inflated from it (``index.inflate``: declared size, CRC). A member that
fails (damaged, truncated, a bomb, not an image) is a bad unit named by
archive, member and local header offset: ``on_error="raise"`` raises it,
``"skip"`` leaves the image out and reports it (rows=1). The header probe
at open (:func:`probe_members`) reads each member's first bytes only.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol, Sequence

import numpy as np
import pyarrow.fs as pafs

from ...core import Chunk
from ...errors import BadInputReport, CorruptFileError, SkippedUnit, describe
from ...files.stamps import Stamps, stamps_field, take_stamps, unchanged
from ..images.decode import (
    JPEG_HEAD_BYTES,
    DecodeSpec,
    ImageDecodeError,
    ImageTooLargeError,
    checked_decoded_bytes,
    decode,
    jpeg_header,
    open_header,
)
from ..images.fragment import too_large
from .index import LOCAL_HEADER, Member, MemberError, head, inflate, member_where

_FIX = "repair or rewrite the archive, or pass on_error='skip' to leave the member out and report it"


class ZipReading(Protocol):
    """What a fragment reads through: the :class:`~.source.ZipImageSource` that made it."""

    archive: str
    filesystem: pafs.FileSystem
    spec: DecodeSpec
    decode: bool
    decoder: str
    report: BadInputReport
    bad_members: dict[str, CorruptFileError]


def bad_member(archive: str, member: Member, exc: BaseException) -> CorruptFileError:
    """The error for a member that cannot be read or decoded, naming archive, member and byte offset."""
    where = member_where(archive, member.name, member.header)
    if isinstance(exc, ImageTooLargeError):
        return too_large(where, exc)
    if isinstance(exc, MemberError):
        title = "A zip member cannot be read"
    elif isinstance(exc, OSError):
        title = "Could not read a zip archive"
    else:
        title = "Could not decode an image in a zip archive"
    return CorruptFileError(describe(title, where=where, found=str(exc), fix=_FIX))


MERGE_GAP = 64 << 10
"""Bytes of other members one read may span to save a request. An archive written out of name order (the
fragment's members scattered) took one request per member: 243 GETs for an epoch of 270 images over HTTP;
spanning gaps, 9 (one a fragment; a 54 KB archive). What a fragment reads is counted at open (``read_bytes``)."""


def runs(members: Sequence[Member], gap: int = MERGE_GAP) -> list[list[Member]]:
    """The members by archive offset, cut where the next one starts more than ``gap`` bytes after the run ends."""
    out: list[list[Member]] = []
    for member in sorted(members, key=lambda member: member.header):
        if out and member.header - run_end(out[-1]) <= gap:
            out[-1].append(member)
        else:
            out.append([member])
    return out


def run_end(run: list[Member]) -> int:
    return max(member.header + member.extent for member in run)


def read_bytes(members: Sequence[Member]) -> int:
    """The bytes a fragment of these members reads: its runs' spans."""
    return sum(run_end(run) - run[0].header for run in runs(members))


@dataclass(frozen=True)
class ZipImageFragment:
    """Images ``first`` to ``first + num_rows - 1`` of an archive (in name order), with their members."""

    key: str
    num_rows: int
    first: int
    members: tuple[Member, ...] = field(repr=False)
    labels: np.ndarray | None = field(repr=False)
    _source: ZipReading = field(repr=False, compare=False)
    _stamps: Stamps = stamps_field()

    def __post_init__(self) -> None:
        object.__setattr__(self, "_stamps", take_stamps((self.path,), self._source.filesystem))

    @property
    def path(self) -> str:
        return self._source.archive

    @property
    def location(self) -> str:
        return f"members {self.members[0].name} .. {self.members[-1].name}" if self.members else "no members"

    def read(self) -> Chunk:
        """:meth:`_read`, refused if the archive changed since the source opened it (``files/stamps.py``)."""
        with unchanged((self.path,), self._stamps):
            return self._read()

    def _load(self) -> dict[str, bytes | BaseException]:
        """Every member's bytes (or why not), one ranged read per run of adjacent members."""
        source = self._source
        out: dict[str, bytes | BaseException] = {}
        with source.filesystem.open_input_file(self.path) as stream:
            for run in runs(self.members):
                start = run[0].header
                length = run_end(run) - start
                try:
                    buffer = stream.read_at(length, start)
                except OSError as exc:  # the archive, not a member: never skipped
                    raise CorruptFileError(
                        describe(
                            "Could not read a zip archive",
                            where=f"{self.path}, {self.location} (bytes {start}-{start + length})",
                            found=f"{type(exc).__name__}: {exc}",
                            fix="check the archive; it may have changed since the dataset was opened",
                        )
                    ) from exc
                for member in run:
                    try:
                        out[member.name] = inflate(member, buffer, start)
                    except MemberError as exc:
                        out[member.name] = exc
        return out

    def _read(self) -> Chunk:
        source = self._source
        loaded = self._load()
        spec = source.spec
        count = len(self.members)
        images = np.empty((count,) + spec.shape, dtype=spec.dtype) if source.decode else np.empty(count, object)
        keep = np.ones(count, dtype=bool)
        for row, member in enumerate(self.members):
            error = source.bad_members.get(member.name)
            data = loaded[member.name]
            if error is None and not isinstance(data, BaseException):
                try:
                    if not source.decode:
                        images[row] = data
                    elif not data:
                        raise ImageDecodeError("the member is empty (0 bytes)")
                    else:
                        decode(data, spec, source.decoder, out=images[row])
                    continue
                except ImageDecodeError as exc:
                    data = exc
            if error is None:
                assert isinstance(data, BaseException)
                error = source.bad_members.setdefault(member.name, bad_member(self.path, member, data))
            if source.report.on_error == "raise":
                raise error
            keep[row] = False
            location = f"member {member.name!r} (local header at byte {member.header})"
            source.report.add(SkippedUnit(self.path, location, str(error), 1))
        paths = np.array([f"{self.path}/{member.name}" for member in self.members], dtype=object)
        chunk: Chunk = {"image" if source.decode else "image_bytes": images, "path": paths}
        if self.labels is not None:
            chunk["label"] = self.labels.copy()
        if not keep.all():
            chunk = {name: column[keep] for name, column in chunk.items()}
        return chunk


PROBE_MEMBERS = 64  # members per probe task (as images.fragment.PROBE_FILES: one task per file costs more)


PROBE_WHOLE = 256 << 10  # a member of at most this many bytes is probed whole: read in runs, inflated, CRC checked


def probe_members(
    members: list[Member], archive: str, filesystem: pafs.FileSystem, spec: DecodeSpec | None
) -> list[tuple[BaseException | None, int]]:
    """Each member's problem at open, or None: its local header, its image header and declared size.

    Beside each problem, the bytes the member's header declares decoded (0
    without a ``spec`` or when it is bad): the largest sizes what a read
    holds while it decodes (``ZipImageSource.read_scratch``).

    Small members are read whole, a ranged read per run (``runs``), and
    inflated with every check (CRC, a bomb's inflating past its size);
    larger ones by their first bytes (:func:`_probe`).
    """
    problems: dict[str, tuple[BaseException | None, int]] = {}
    try:
        stream = filesystem.open_input_file(archive)
    except OSError as exc:
        return [(exc, 0) for _ in members]
    with stream:
        for run in runs([member for member in members if member.extent <= PROBE_WHOLE]):
            start = run[0].header
            try:
                buffer = stream.read_at(run_end(run) - start, start)
            except OSError as exc:
                problems.update((member.name, (exc, 0)) for member in run)
                continue
            for member in run:
                problems[member.name] = _whole(member, buffer, start, spec)
        for member in members:
            if member.name not in problems:
                problems[member.name] = _probe(member, stream, spec)
    return [problems[member.name] for member in members]


def _whole(member: Member, buffer: bytes, start: int, spec: DecodeSpec | None) -> tuple[BaseException | None, int]:
    try:
        data = inflate(member, buffer, start)
        if not data:
            raise ImageDecodeError("the member is empty (0 bytes)")
        return None, _check_header(data, spec)
    except (ImageDecodeError, MemberError) as exc:
        return exc, 0


def _probe(member: Member, stream: pafs.NativeFile, spec: DecodeSpec | None) -> tuple[BaseException | None, int]:
    """One member's header probe: a read of its local header and first bytes (the whole member if it is small).

    A member within the read is inflated whole, so its CRC and a bomb
    inflating past its declared size are found at open; of a larger one,
    the first ``JPEG_HEAD_BYTES`` (inflated never past its declared size)
    and, when they do not hold its header (a TIFF whose IFD is at its end),
    the whole member.
    """
    try:
        if member.size == 0:
            return ImageDecodeError("the member is empty (0 bytes)"), 0
        wanted = min(member.extent, LOCAL_HEADER + 2 * len(member.name.encode()) + 1024 + JPEG_HEAD_BYTES)
        buffer = stream.read_at(wanted, member.header)
        if wanted == member.extent:
            return None, _check_header(inflate(member, buffer, member.header), spec)
        first = head(member, buffer, member.header, min(JPEG_HEAD_BYTES, member.size + 1))
        if len(first) > member.size:
            raise MemberError(f"it inflates past its declared {member.size} bytes (a zip bomb): inflating was stopped")
        try:
            return None, _check_header(first, spec)
        except ImageTooLargeError:
            raise
        except ImageDecodeError:
            whole = inflate(member, stream.read_at(member.extent, member.header), member.header)
            return None, _check_header(whole, spec)
    except (ImageDecodeError, MemberError, OSError) as exc:
        return exc, 0


def _check_header(data: bytes, spec: DecodeSpec | None) -> int:
    """The image header in ``data`` checked (:func:`checked_decoded_bytes`): the bytes it declares decoded."""
    header = jpeg_header(data)
    if header is not None:
        return checked_decoded_bytes(header, spec)
    with open_header(data) as image:
        return checked_decoded_bytes(image, spec)
