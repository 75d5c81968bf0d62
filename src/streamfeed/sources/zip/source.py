"""A zip archive of images, one folder per class, read member by member without extracting.

What ``read_images`` serves for a folder, it serves for an archive holding
that folder's contents (``read_images("images.zip")``): the members are
what extracting the archive into an empty folder would give. Classes are
the top-level folders (nested folders belong to theirs), labels their index
among the sorted names or the given ``label_map``; images are listed by the
same suffixes, in the same order (path components sorted), decoded by the
same ``decode.py`` with the same ``DecodeSpec`` and bomb bound. Hidden
names (a component starting with ``.``) and macOS's ``__MACOSX/`` metadata
folder are ignored and counted, as other suffixes are (a nested ``.zip`` is
one: never followed); symbolic-link entries are counted, not followed.
The ``path`` column is ``<archive>/<member name>``.

The archive is local or remote (``s3://``, ``gs://``, ``https://``, through
``files/storage.py``): its central directory is read at open
(``index.py``), so the count is exact before the first batch; fragments are
``fragment_size`` consecutive images read with one ranged read per run of
adjacent members (``fragment.py``). Entries refused at open (path
traversal, duplicate names, encryption, unsupported compression, zip bombs,
overlapping entries) and members found bad by the header probe or when read
(damaged, truncated, a CRC that does not match, inflating past their size)
are bad units named by archive, member and byte offset: raised, or left
out and reported under ``on_error="skip"``.
"""

from __future__ import annotations

import concurrent.futures
import functools
import logging
import os
import zipfile
from typing import Any, Mapping

import numpy as np
import pyarrow.fs as pafs

from ...core import AlikeRows, SourceInfo, fragmenting_digest, records_settings
from ...errors import ArgumentError, BadInputReport, CorruptFileError, DataError, NotFoundError, describe
from ...files.paths import PathLike, file_digest, file_stats, resolve_files
from ..images.decode import DecodeSpec, read_scratch, resolve_decoder
from ..images.formats import IMAGE_SUFFIXES
from ..images.listing import Labels, Listing
from ..images.source import ImageSource
from ..labels import class_names, write_label_map
from .fragment import PROBE_MEMBERS, ZipImageFragment, bad_member, probe_members, read_bytes
from .index import Member, ZipIndex, member_where, read_index

logger = logging.getLogger("streamfeed")
MEMBER_SLACK = 1 << 20  # bytes an encoded image may have beyond max_image_bytes (headers, EXIF, ICC profiles)
METADATA_FOLDERS = ("__MACOSX",)  # macOS Archive Utility's resource forks: never images


def is_zip_archive(path: Any) -> bool:
    """Whether ``read_images`` reads ``path`` as a zip archive: a ``.zip`` name, or a local file signed ``PK``.

    A URI is judged by its name only (no request is made to find out); a
    local file by its first four bytes too, so an archive named otherwise
    (``images.cbz``, no suffix) is read as one.
    """
    if not isinstance(path, (str, os.PathLike)):
        return False
    text = os.fspath(path)
    if isinstance(text, bytes) or text.lower().endswith(".zip"):
        return not isinstance(text, bytes)
    if "://" in text or not os.path.isfile(text):
        return False
    try:
        with open(text, "rb") as handle:
            return handle.read(4) in (b"PK\x03\x04", b"PK\x05\x06")
    except OSError:
        return False


def _ignored() -> dict[str, list[str]]:
    return {"hidden": [], "not_image": [], "outside_class_folders": [], "links": []}


class ZipImageSource(AlikeRows):
    """Indexes a zip archive's central directory, assigns labels by top-level folder, splits it into fragments."""

    settings: dict[str, Any]  # every constructor argument but core.NOT_ROW_SETTINGS (records_settings)

    @records_settings
    def __init__(
        self,
        paths: PathLike,
        *,
        spec: DecodeSpec,
        labels: Labels | None = "inferred",
        label_map: Mapping[str, int] | str | None = None,
        fragment_size: int = 128,
        verify_headers: bool = True,
        decode: bool = True,
        filesystem: pafs.FileSystem | None = None,
        report: BadInputReport | None = None,
        threads: int = 8,
    ) -> None:
        if labels not in ("inferred", None):
            raise ArgumentError(describe("Invalid labels", expected="'inferred' or None", found=f"{labels!r}"))
        if fragment_size < 1:
            raise ArgumentError(describe("Invalid fragment_size", expected=">= 1", found=f"{fragment_size}"))
        resolved = resolve_files(paths, suffixes=(".zip",), filesystem=filesystem)
        if len(resolved.files) != 1:
            raise ArgumentError(
                describe("read_images reads one zip archive", where=str(paths), found=f"{len(resolved.files)} files")
            )
        self.filesystem, self.archive = resolved.filesystem, resolved.files[0]
        self.spec, self.decode = spec, decode
        self.decoder = resolve_decoder(spec.decoder)
        self.report = report or BadInputReport()
        self.bad_members: dict[str, CorruptFileError] = {}
        try:
            index = read_index(self.archive, self.filesystem, spec.max_image_bytes + MEMBER_SLACK)
        except (zipfile.BadZipFile, OSError) as exc:
            raise CorruptFileError(
                describe(
                    "Could not read a zip archive's central directory",
                    where=self.archive,
                    expected="a zip archive (its end record and central directory at its end)",
                    found=f"{type(exc).__name__}: {exc}",
                    fix="re-download or rewrite the archive (a truncated download loses its directory)",
                )
            ) from exc
        self._digest = index.digest
        refused = self._refuse(index)
        members, classes, folders, self.ignored = self._list(index, labels)
        if not members:
            raise NotFoundError(
                describe(
                    "No image to read in the zip archive",
                    where=self.archive,
                    expected=f"image members ({' '.join(IMAGE_SUFFIXES)}) in one folder per class",
                    found=", ".join(f"{len(names)} {kind}" for kind, names in self.ignored.items() if names)
                    or "no image member",
                    fix="pass labels=None to read images outside class folders" if labels else "check the archive",
                )
            )
        if labels == "inferred" and len(folders) == 1 and all(m.name.count("/") >= 2 for m in members):
            logger.warning(
                "Zip archive %s: every image is inside one folder %r, so there is one class; an archive made by "
                "zipping the dataset's folder (zip -r images.zip images/) holds its class folders one level down: "
                "rewrite it from inside that folder (cd images && zip -r ../images.zip .)",
                self.archive,
                folders[0],
            )
        self.label_map = ImageSource._label_map(self.archive, Listing(folders=folders), labels, label_map)
        listed = len(members)
        largest_decode = 0  # the most bytes one good member's header declares decoded (the probe's)
        if verify_headers:
            members, classes, largest_decode = self._probe(members, classes, threads)
        self.members = tuple(members)
        label_array = (
            np.array([self.label_map[str(c)] for c in classes], dtype=np.int64) if labels == "inferred" else None
        )
        self.fragments = [
            ZipImageFragment(
                key=f"{self.archive}#members={start}-{min(start + fragment_size, len(members)) - 1}",
                num_rows=min(fragment_size, len(members) - start),
                first=start,
                members=self.members[start : start + fragment_size],
                labels=None if label_array is None else label_array[start : start + fragment_size],
                _source=self,
            )
            for start in range(0, len(members), fragment_size)
        ]
        self.class_counts: dict[str, int] = dict.fromkeys(self.class_names, 0) if labels == "inferred" else {}
        for name in classes:
            if name is not None:
                self.class_counts[name] += 1
        self.report.total_rows = listed + refused
        self.report.total_files = listed + refused
        self.report.check_budget()
        pixels = float(np.prod(spec.shape) * np.dtype(spec.dtype).itemsize)
        # A read holds its fragment's members, read in runs and inflated at once (``fragment.read_bytes``).
        held = [read_bytes(f.members) + sum(m.size for m in f.members) for f in self.fragments]
        self._columns = ["image" if decode else "image_bytes"] + (["label"] if labels == "inferred" else []) + ["path"]
        self._fingerprint: dict | None = None
        self.exact_counts = self.report.on_error == "raise"  # a member can fail its CRC or decode when read
        self.read_parallelism: int | None = None
        self.read_scratch: float | None = None  # undecoded: the library's figure for the members served
        if decode:  # served: the image, its label and path, as from the folder the archive holds
            self.row_bytes = pixels + 8 + 64
            # Beside the fragment's array a read holds its members, and one member's decode, sized by the
            # probe (decode.read_scratch); without the probe, the library's figure for the decode. Counted in
            # the row bytes instead, the members shrank the default window: 1 fragment where the folder had 5.
            decoded = largest_decode if verify_headers else None
            rows, fragments = len(self.members), len(self.fragments)
            self.read_scratch = read_scratch(
                decoded, 0, rows, fragments, self.row_bytes, held_bytes=max(held, default=0)
            )
        else:  # served: the members' bytes; per row, the largest fragment's with the runs read for them
            self.row_bytes = max((total / f.num_rows for total, f in zip(held, self.fragments)), default=0.0) + 8 + 64

    def _refuse(self, index: ZipIndex) -> int:
        """Reports every entry refused at open; returns how many were images (rows lost)."""
        rows = 0
        for entry in index.refused:
            image = entry.name.lower().endswith(IMAGE_SUFFIXES)
            rows += image
            kind = CorruptFileError if entry.damage else DataError
            error = kind(
                describe(
                    "A zip member is refused",
                    where=member_where(self.archive, entry.name, entry.header),
                    found=entry.problem,
                    fix="rewrite the archive without it, or pass on_error='skip' to leave it out and report it",
                )
            )
            location = f"member {entry.name!r} (local header at byte {entry.header})"
            self.report.reject(error, path=self.archive, location=location, rows=1 if image else None)
        return rows

    def _list(
        self, index: ZipIndex, labels: Labels | None
    ) -> tuple[list[Member], list[str | None], list[str], dict[str, list[str]]]:
        """The image members in read_images order, their classes, the class folders, and what was ignored."""
        ignored = _ignored()
        ignored["links"] = sorted(index.links)
        folders: set[str] = set()
        found: list[tuple[tuple[str, ...], Member]] = []
        names = [(name, None) for name in index.folders] + [(m.name, m) for m in index.members]
        for name, member in names:
            parts = tuple(part for part in name.split("/") if part)
            if not parts:
                continue
            if any(part.startswith(".") for part in parts) or parts[0] in METADATA_FOLDERS:
                ignored["hidden"].append(name)
                continue
            if len(parts) > 1 or member is None:
                folders.add(parts[0])
            if member is None:
                continue
            if not name.lower().endswith(IMAGE_SUFFIXES):
                ignored["not_image"].append(name)
            elif labels == "inferred" and len(parts) == 1:
                ignored["outside_class_folders"].append(name)
            else:
                found.append((parts, member))
        found.sort(key=lambda item: item[0])
        for kept in ignored.values():
            kept.sort()
        classes: list[str | None] = [parts[0] if labels == "inferred" else None for parts, _ in found]
        return [member for _, member in found], classes, sorted(folders), ignored

    def _probe(
        self, members: list[Member], classes: list[str | None], threads: int
    ) -> tuple[list[Member], list[str | None], int]:
        """The members whose header probe passes, and the most bytes one declares decoded; the others reported."""
        probe = functools.partial(
            probe_members, archive=self.archive, filesystem=self.filesystem, spec=self.spec if self.decode else None
        )
        parts = [members[start : start + PROBE_MEMBERS] for start in range(0, len(members), PROBE_MEMBERS)]
        with concurrent.futures.ThreadPoolExecutor(threads, thread_name_prefix="streamfeed-probe") as pool:
            probed = [found for part in pool.map(probe, parts) for found in part]
        kept: list[int] = []
        largest_decode = 0
        for position, (problem, decoded) in enumerate(probed):
            if problem is None:
                kept.append(position)
                largest_decode = max(largest_decode, decoded)
                continue
            member = members[position]
            error = bad_member(self.archive, member, problem)
            location = f"member {member.name!r} (local header at byte {member.header})"
            self.report.reject(error, path=self.archive, location=location, rows=1, cause=problem)
            self.bad_members[member.name] = error
        return [members[i] for i in kept], [classes[i] for i in kept], largest_decode

    @property
    def class_names(self) -> list[str]:
        """Class names in label order."""
        return class_names(self.label_map)

    def save_label_map(self, path: str) -> None:
        """Writes ``{"class name": label, ...}`` as JSON (reuse it with ``label_map=path``)."""
        write_label_map(self.label_map, path)

    def summary(self) -> dict:
        """Counts of what was read, ignored and found bad when the source opened."""
        return {
            "images": len(self.members),
            "classes": dict(self.class_counts),
            "ignored": {reason: len(names) for reason, names in self.ignored.items()},
            "bad_at_open": len(self.report.entries),
        }

    @property
    def files(self) -> tuple[str, ...]:
        """The archive (the one file read)."""
        return (self.archive,)

    @property
    def column_names(self) -> list[str]:
        return list(self._columns)

    @property
    def info(self) -> SourceInfo:
        """Format, classes, the archive as root (``core.SourceInfo``): what layers that see only the protocol read."""
        return SourceInfo(
            "zip",
            label_map=self.label_map,
            filesystem=self.filesystem,
            root=self.archive,  # the ``path`` column is ``<archive>/<member>``: relative to it, the member's name
            fragment_setting="fragment_size",
        )

    def fingerprint(self) -> dict:
        if self._fingerprint is None:
            spec = self.spec
            self._fingerprint = {
                "format": "zip",
                "files": len(self.members),
                "digest": file_digest(file_stats([self.archive], self.filesystem), extra=[self._digest]),
                "columns": self.column_names,
                "image": [spec.height, spec.width, spec.channels, spec.dtype, spec.resize]
                if self.decode
                else "encoded",
                "label_map": self.label_map,
                "settings": self.settings,  # every constructor argument (core.records_settings)
                "fragmenting": fragmenting_digest(self.fragments),
            }
        return self._fingerprint
