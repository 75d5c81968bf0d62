"""The images an inspection looks at: an image folder's files, or a zip archive's members, and how to open one.

``inspect``, its quality pass and its HTML thumbnails look at images one
file at a time. For a folder a file is a path on disk; for a zip archive
(``read_images("images.zip")``) it is a member, named as the source's
``path`` column names it (``<archive>/<member name>``) and opened by
inflating that member alone from a ranged read of the archive
(``sources/zip/index.inflate``: declared size, CRC, the bomb bound). The
archive is never extracted: listing it reads its central directory
(:class:`~streamfeed.sources.zip.ZipImageSource` with the header probe
off), so the members listed, their classes, and the entries refused (path
traversal, encryption, zip bombs, damage) are exactly what ``read_images``
serves and refuses. One :class:`ImageFiles` serves both, so every image
inspection has one code path.
"""

from __future__ import annotations

import io
import os
from dataclasses import dataclass, field
from typing import IO, Any, Callable

from ..errors import NotFoundError
from ..files.storage import open_storage
from ..sources.images.listing import list_images
from ..sources.zip import ZipImageSource
from ..sources.zip.index import inflate

IMAGE_FORMATS: tuple[str, ...] = ("images", "zip")  # the formats whose rows are image files


@dataclass
class ImageFiles:
    """Image files in the source's order, their classes and sizes, what was left out, and how to open one.

    ``root`` is what ``files`` are below (the folder, or the archive:
    ``relative(file)`` is then the member's name).
    """

    root: str
    files: list[str]
    classes: list[str | None]
    sizes: list[int]
    folders: list[str]  # every top-level class folder, empty ones too
    has_classes: bool
    not_images: list[str] = field(default_factory=list)
    outside_root: list[str] = field(default_factory=list)  # folder links not followed (a folder only)
    archive: bool = False
    archive_bytes: int = 0  # the archive's size (an archive only)
    opener: Callable[[str], IO[bytes]] | None = field(default=None, repr=False)

    def open(self, file: str) -> IO[bytes]:
        """One image's bytes as a binary file: the file itself, or the member inflated (in memory)."""
        if self.opener is None:
            return open(file, "rb")
        return self.opener(file)

    def relative(self, file: str) -> str:
        """``file`` as the user sees it: relative to the folder, or the member's name in the archive."""
        if self.archive:
            return file[len(self.root) + 1 :] if file.startswith(self.root + "/") else file
        return os.path.relpath(file, self.root)


def image_files(path: str | os.PathLike, format: str = "images") -> ImageFiles:  # noqa: A002 - as inspect's
    """A folder's images (``format="images"``) or a zip archive's (``"zip"``), listed as read_images lists them."""
    if format == "zip":
        return _archive(os.fspath(path))
    root = os.path.abspath(os.fspath(path))
    with os.scandir(root) as entries:
        has_classes = any(entry.is_dir() and not entry.name.startswith(".") for entry in entries)
    listing = list_images(root, "inferred" if has_classes else None)
    return ImageFiles(
        root=root,
        files=list(listing.files),
        classes=list(listing.classes),
        sizes=list(listing.sizes),
        folders=list(listing.folders),
        has_classes=has_classes,
        not_images=list(listing.ignored["not_image"]),
        outside_root=list(listing.links["outside_root"]),
    )


def _archive(path: str) -> ImageFiles:
    """A zip archive's image members from its central directory (no member read): refused entries raise."""
    text = path if "://" in path else os.path.abspath(path)
    filesystem, located = open_storage(text, None, None)
    options: dict[str, Any] = {"verify_headers": False, "decode": False, "filesystem": filesystem}
    from ..sources.images.decode import DecodeSpec

    spec = DecodeSpec(224, 224)
    try:
        source = ZipImageSource(located, spec=spec, labels="inferred", **options)
    except NotFoundError:  # no image inside a class folder: the archive is read unlabelled, as read_images would
        source = ZipImageSource(located, spec=spec, labels=None, **options)
    return archive_files(source)


def archive_files(source: ZipImageSource) -> ImageFiles:
    """The image members of an open zip source, each opened by inflating it alone (a ranged read of the archive)."""
    archive = source.archive
    has_classes = bool(source.label_map)
    members = {f"{archive}/{member.name}": member for member in source.members}

    def opener(file: str) -> IO[bytes]:
        member = members[file]
        with source.filesystem.open_input_file(archive) as stream:
            buffer = stream.read_at(member.extent, member.header)
        return io.BytesIO(inflate(member, buffer, member.header))

    return ImageFiles(
        root=archive,
        files=list(members),
        classes=[m.name.split("/", 1)[0] if has_classes else None for m in source.members],
        sizes=[member.size for member in source.members],
        folders=list(source.class_names) if has_classes else [],
        has_classes=has_classes,
        not_images=list(source.ignored["not_image"]),
        archive=True,
        archive_bytes=int(source.filesystem.get_file_info(archive).size or 0),
        opener=opener,
    )
