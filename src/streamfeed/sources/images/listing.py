"""What an image folder holds: its files, their classes, and the label map.

Layout (the same as ``keras.utils.image_dataset_from_directory``): one
sub-folder of ``root`` per class, nested folders belonging to their
top-level folder. :func:`list_images` walks it once, before anything is
decoded, so classes, counts and problems are known when the source opens;
:func:`load_label_map` reads and checks a given ``label_map``. Kept apart
from the source because ``inspect`` lists folders the same way.

* **Files.** Only the suffixes of the supported formats are listed,
  case-insensitively: ``.jpg .jpeg .jpe .jfif`` (JPEG, MPO), ``.png``,
  ``.webp``, ``.tif .tiff``, ``.bmp .dib``, ``.gif``. The format is then
  sniffed from the content: a file in another format under such a name (a
  PPM saved as ``.png``) is a bad file naming the format found. Hidden
  entries (names starting with ``.``) and files with other extensions
  (``.ppm``, ``.ico``, ``.tga``, ...) are ignored and counted in
  ``source.ignored`` — they are not errors. Only local directories are
  supported.
* **Links.** Every file and folder is resolved to its real path (with
  :func:`os.scandir`; only links cost a ``realpath``). A folder or file
  reachable under two classes (``cat/dogalias -> ../dog``) is a
  :class:`SchemaError` naming both paths, whatever ``on_error``: it would
  mislabel every image behind it. Reached twice within one class (a cycle,
  two links to one place) it is read once and counted (``summary()``).
  A link to a *file* is followed wherever it points (each is an explicit
  choice: ``train/cat/x.jpg -> ../../pool/x.jpg`` cuts splits out of one
  pool). With ``follow_links="inside"`` (default) a link to a *folder*
  outside the root (``dog/slash -> /``) is not followed, only counted;
  ``follow_links="all"`` follows it. A link that cannot be resolved (its
  target is not the reader's to see: ``/proc/1/cwd/x.jpg``) is listed when
  its name is an image's, so the header probe or the read reports it as a
  bad file naming the link, under ``on_error``; any other is counted in
  ``links["unreadable"]``. Whatever is not followed is said once, in one
  warning with the counts, on the ``streamfeed`` logger.
* **Label maps.** A given map is checked when the source opens: every label
  an ``int`` with ``0 <= label < 2**31`` (a sparse class index; gaps are
  allowed, bools, floats and strings are not), no two alike.
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass, field
from typing import Any, Literal, Mapping

from ...errors import ArgumentError, CorruptFileError, NotFoundError, SchemaError, describe
from ...files.stamps import Stamp
from ..labels import LABEL_EXPECTED, is_label
from .formats import IMAGE_SUFFIXES

Labels = Literal["inferred"]
FollowLinks = Literal["inside", "all"]
FOLLOW_LINKS = ("inside", "all")

logger = logging.getLogger("streamfeed")


@dataclass
class Listing:
    """What :func:`list_images` found: the image files with their classes and sizes, and what it left out."""

    files: list[str] = field(default_factory=list)  # absolute paths as listed (through links), sorted
    classes: list[str | None] = field(default_factory=list)  # top-level folder per file
    sizes: list[int] = field(default_factory=list)
    # each file's stamp from the walk's own stat (None: not to be had), so the source stats no file again for its
    # fragments' stamps and its fingerprint: at open, 10 000 files were stat'ed four times (0.057 CPU ms an image)
    stamps: list[Stamp | None] = field(default_factory=list)
    folders: list[str] = field(default_factory=list)  # every top-level class folder
    ignored: dict[str, list[str]] = field(
        default_factory=lambda: {"hidden": [], "not_image": [], "outside_class_folders": [], "repeated_directory": []}
    )
    # folder links not followed (their target is outside the root), links to a file already listed in its
    # class, and links not listed that cannot be resolved (not the reader's to see)
    links: dict[str, list[str]] = field(
        default_factory=lambda: {"outside_root": [], "repeated_file": [], "unreadable": []}
    )


@dataclass(frozen=True)
class _Place:
    """Where a real directory (or linked file) was first listed: its path and class."""

    path: str
    label: str | None
    top: bool = False  # the root itself (files directly in it have no class)


def _inside(real: str, real_root: str) -> bool:
    return real == real_root or real.startswith(real_root.rstrip(os.sep) + os.sep)


def _alias_error(kind: str, first: _Place, second: _Place) -> SchemaError:
    return SchemaError(
        describe(
            f"The same {kind} is reachable under two classes (through a symbolic link)",
            where=f"{first.path} (class {first.label!r}) and {second.path} (class {second.label!r})",
            expected="every image in exactly one class folder",
            fix="remove the link, or copy the file if it really belongs to both classes",
        )
    )


def list_images(root: str, labels: Labels | None, follow_links: FollowLinks = "inside") -> Listing:
    """Walks ``root`` with :func:`os.scandir`, sorted, resolving every entry to its real path.

    A real directory is listed once: reached again in the same class (a
    cycle, or two links to it) it is counted in ``ignored["repeated_directory"]``;
    reached under another class it is an error naming both paths. A link to
    a file already listed is counted in ``links["repeated_file"]`` (the
    same class) or an error (another class). File links are followed
    wherever they point; with ``follow_links="inside"`` a folder link whose
    target is outside the root is not followed, only counted in
    ``links["outside_root"]`` and said in one warning. Only links cost a
    ``realpath``; other entries' real paths are their folder's plus the name.
    """
    if follow_links not in FOLLOW_LINKS:
        raise ArgumentError(
            describe("Invalid follow_links", expected=f"one of {list(FOLLOW_LINKS)}", found=repr(follow_links))
        )
    listing = Listing()
    seen: dict[str, Stamp] = {}
    real_root = os.path.realpath(root)
    found: list[tuple[tuple[str, ...], str, int]] = []
    linked: list[tuple[tuple[str, ...], str, str, int]] = []  # (parts, path, real target, size) of file links
    places: dict[str, _Place] = {real_root: _Place(root, None, top=True)}
    pending: list[tuple[str, str, tuple[str, ...]]] = [(root, real_root, ())]
    while pending:
        directory, real_dir, parts = pending.pop()
        try:
            with os.scandir(directory) as scan:
                entries = sorted(scan, key=lambda entry: entry.name)
        except OSError:
            continue  # an unreadable folder is skipped, as os.walk does
        subfolders: list[tuple[str, str]] = []
        for entry in entries:
            name, path = entry.name, entry.path
            if name.startswith("."):
                listing.ignored["hidden"].append(path)
                continue
            link = entry.is_symlink()
            if link:
                try:
                    real = os.path.realpath(path)  # raises when a link on the way may not be read (/proc/1/cwd)
                except OSError:
                    if name.lower().endswith(IMAGE_SUFFIXES) and not (labels == "inferred" and not parts):
                        found.append((parts + (name,), path, -1))  # the probe or the read reports it by on_error
                    else:
                        listing.links["unreadable"].append(path)
                    continue
            else:
                real = os.path.join(real_dir, name)
            is_dir = _is_dir(entry)
            if link and is_dir and follow_links == "inside" and not _inside(real, real_root):
                listing.links["outside_root"].append(path)
                continue
            if is_dir:
                subfolders.append((name, real))
            elif not name.lower().endswith(IMAGE_SUFFIXES):
                listing.ignored["not_image"].append(path)
            elif labels == "inferred" and not parts:
                listing.ignored["outside_class_folders"].append(path)
            else:
                size = _size(entry, seen)
                if link:
                    linked.append((parts + (name,), path, real, size))
                else:
                    found.append((parts + (name,), path, size))
        if not parts:
            listing.folders = [name for name, _ in subfolders]
        for name, real in reversed(subfolders):  # popped in sorted order
            path = os.path.join(directory, name)
            place = _Place(path, (parts + (name,))[0] if labels == "inferred" else None)
            first = places.get(real)
            if first is None:
                places[real] = place
                pending.append((path, real, parts + (name,)))
            elif first.top or _inside(real_dir, real) or first.label == place.label:
                listing.ignored["repeated_directory"].append(path)  # a cycle, or listed already in this class
            else:
                raise _alias_error("folder", first, place)
    found.extend(_linked_files(linked, places, labels, listing))
    found.sort()
    for parts, path, size in found:
        listing.files.append(path)
        listing.classes.append(parts[0] if labels == "inferred" else None)
        listing.sizes.append(size)
        listing.stamps.append(seen.get(path))
    for paths in (*listing.ignored.values(), *listing.links.values()):
        paths.sort()
    _say_not_followed(root, listing)
    return listing


def _say_not_followed(root: str, listing: Listing) -> None:
    """One warning with the counts of the links not followed: nothing vanishes from an epoch without a word."""
    outside, unreadable = listing.links["outside_root"], listing.links["unreadable"]
    if not outside and not unreadable:
        return
    parts = []
    if outside:
        parts.append(
            f"{len(outside)} folder links out of the root (first {outside[0]}; follow_links='all' follows them)"
        )
    if unreadable:
        parts.append(f"{len(unreadable)} links that cannot be resolved (first {unreadable[0]})")
    logger.warning("Image folder %s: not followed: %s", root, "; ".join(parts))


def no_images(root: str, listing: Listing, labels: Labels | None) -> NotFoundError:
    """The error for a root where no image file is listed: an empty dataset is a wrong path, not one to train on.

    Counts what the root holds instead (empty class folders, hidden entries
    such as crash leftovers, other suffixes, images outside class folders).
    """

    def count(number: int, one: str, many: str) -> str:
        return f"{number} {one if number == 1 else many}"

    ignored, links = listing.ignored, listing.links
    outside = ignored["outside_class_folders"]
    parts = [
        count(len(listing.folders), "class folder", "class folders" if labels == "inferred" else "folders")
        + " without images",
        count(len(ignored["hidden"]), "hidden entry", "hidden entries"),
        count(len(ignored["not_image"]), "file with another suffix", "files with another suffix"),
        count(len(outside), "image outside class folders", "images outside class folders"),
        count(len(ignored["repeated_directory"]), "folder reached again", "folders reached again"),
        count(len(links["outside_root"]), "folder link out of the root", "folder links out of the root")
        + " (not followed; follow_links='all' follows them)",
    ]
    amounts = [
        len(listing.folders),
        len(ignored["hidden"]),
        len(ignored["not_image"]),
        len(outside),
        len(ignored["repeated_directory"]),
        len(links["outside_root"]),
    ]
    found = ", ".join(part for part, amount in zip(parts, amounts) if amount)
    suffixes = " ".join(IMAGE_SUFFIXES)
    return NotFoundError(
        describe(
            "No image to read in the folder",
            where=root,
            expected=f"image files ({suffixes}) in one sub-folder per class"
            if labels == "inferred"
            else f"image files ({suffixes}) anywhere below it",
            found=found or "no image file and no folder",
            fix="move the images into one sub-folder per class, or pass labels=None to read them without labels"
            if outside
            else "check the path",
        )
    )


def _linked_files(
    linked: list[tuple[tuple[str, ...], str, str, int]],
    places: dict[str, _Place],
    labels: Labels | None,
    listing: Listing,
) -> list[tuple[tuple[str, ...], str, int]]:
    """The file links to keep: those whose target is not listed already (by a folder or an earlier link).

    A target is listed by its folder when that real folder was walked and
    the name passes the same rules (not hidden, an image suffix, in a
    class folder); a target listed under another class is an error.
    """
    kept: list[tuple[tuple[str, ...], str, int]] = []
    targets: dict[str, _Place] = {}
    for parts, path, real, size in sorted(linked):
        place = _Place(path, parts[0] if labels == "inferred" else None)
        folder, name = os.path.split(real)
        owner = places.get(folder)
        first = targets.get(real)
        if first is None and owner is not None and _listed(name, owner, labels):
            first = _Place(os.path.join(owner.path, name), owner.label)
        if first is None:
            targets[real] = place
            kept.append((parts, path, size))
        elif first.label == place.label:
            listing.links["repeated_file"].append(path)
        else:
            raise _alias_error("image file", first, place)
    return kept


def _listed(name: str, folder: _Place, labels: Labels | None) -> bool:
    """Whether a file of this name in a walked folder is listed there."""
    if name.startswith(".") or not name.lower().endswith(IMAGE_SUFFIXES):
        return False
    return not (labels == "inferred" and folder.top)


def _is_dir(entry: os.DirEntry) -> bool:
    try:
        return entry.is_dir()  # follows a link (its target is a folder)
    except OSError:
        return False


def _size(entry: os.DirEntry, seen: dict[str, Stamp]) -> int:
    """The entry's size (following a link), its stamp kept in ``seen``; -1 for a broken link."""
    try:
        found = entry.stat()
    except OSError:
        return -1  # a broken link: reported as unreadable when probed or read
    seen[entry.path] = Stamp.of(found)
    return found.st_size


# Labels (sources/labels.py): gaps are allowed (a validation folder holding some of a larger model's
# classes); the column is int64.


def load_label_map(label_map: Mapping[str, int] | str | os.PathLike) -> dict[str, int]:
    """``{class: label}`` from a dict or a JSON file, checked at open: valid, distinct labels.

    Every label must pass :func:`~streamfeed.sources.labels.is_label`; anything else (``-1``, ``3.0``,
    ``True``, ``2**70``) is a :class:`SchemaError` naming the class and the
    value, rather than a label truncated, wrapped or an ``OverflowError``
    when the label column is built.
    """
    where = "label_map"
    if isinstance(label_map, (str, os.PathLike)):
        where = os.fspath(label_map)
        given = _read_label_file(where)
    else:
        given = label_map
    if not isinstance(given, Mapping):
        raise SchemaError(
            describe(
                "The label map is not a mapping of class names to labels",
                where=where,
                expected='{"class name": label, ...} (a JSON object, as source.save_label_map writes)',
                found=f"a {type(given).__name__}",
            )
        )
    mapping: dict[str, int] = {}
    for name, index in given.items():
        if not is_label(index):
            raise SchemaError(
                describe(
                    f"The label map gives class {str(name)!r} a label that is not a class index",
                    where=where,
                    expected=LABEL_EXPECTED,
                    found=f"{index!r} ({type(index).__name__})",
                    fix="give every class its own integer label, counting from 0",
                )
            )
        mapping[str(name)] = int(index)
    if len(set(mapping.values())) != len(mapping):
        raise SchemaError(
            describe(
                "The label map gives two classes the same label",
                where=where,
                found=str(mapping),
                fix="give every class its own integer",
            )
        )
    return mapping


def _read_label_file(path: str) -> Any:
    """The JSON in a label-map file; a missing, unreadable or non-JSON file raises naming it."""
    try:
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)
    except FileNotFoundError as exc:
        raise NotFoundError(
            describe("No such label map file", where=path, fix="check the path, or pass the map as a dict")
        ) from exc
    except OSError as exc:
        raise CorruptFileError(
            describe("The label map file cannot be read", where=path, found=f"{type(exc).__name__}: {exc}")
        ) from exc
    except ValueError as exc:  # not JSON, or not UTF-8
        raise SchemaError(
            describe(
                "The label map file is not JSON",
                where=path,
                expected='{"class name": label, ...}, as source.save_label_map writes',
                found=f"{type(exc).__name__}: {exc}",
            )
        ) from exc
