"""Turning what the user typed into a filesystem and a sorted list of files.

Accepts a file, a directory (walked recursively), a glob, or a list of any
of these, as local paths or URIs (``s3://bucket/prefix``) that pyarrow's
filesystems — or fsspec's, wrapped — understand (URIs opened with
``storage_options`` come here with the filesystem ``_storage.open_storage``
built: retried, counted, optionally cached). Hidden and bookkeeping
files (``.crc``, ``_SUCCESS``, ``_metadata``) are left out.

A directory that streamfeed's writers published holds a manifest
(``_streamfeed_manifest.json``, written last, see ``files/publish.py``);
reading such a directory checks its files against it (:func:`check_manifests`).
"""

from __future__ import annotations

import glob as globlib
import hashlib
import json
import os
import urllib.parse
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence, Union, overload

import pyarrow as pa
import pyarrow.fs as pafs

from ..errors import (
    CorruptFileError,
    ManifestMismatchError,
    MissingDependencyError,
    NotFoundError,
    StorageError,
    StreamfeedError,
    describe,
    require,
)
from .reach import from_storage_client, no_credentials, pyarrow_endpoint, unreachable
from .storage import object_version, storage_location

PathLike = Union[str, os.PathLike, Sequence[Union[str, os.PathLike]]]


@dataclass(frozen=True)
class ResolvedFiles:
    filesystem: pafs.FileSystem
    files: tuple[str, ...]
    root: str  # common base directory, for hive partition paths


def _is_hidden(path: str) -> bool:
    name = path.rstrip("/").rsplit("/", 1)[-1]
    return name.startswith((".", "_"))


def filesystem_for(path: str, filesystem: pafs.FileSystem | None) -> tuple[pafs.FileSystem, str]:
    if filesystem is not None:
        return filesystem, path
    if "://" in path:
        for uri in (path, urllib.parse.quote(path, safe=":/=&?%")):  # URIs with spaces need quoting
            try:
                return pafs.FileSystem.from_uri(uri)
            except pa.ArrowInvalid:
                continue
        # a scheme pyarrow lacks (gcs via gcsfs, memory://, ...): go through fsspec
        fsspec = require("fsspec", "s3")
        try:
            fs, stripped = fsspec.core.url_to_fs(path)
        except ImportError as exc:
            raise MissingDependencyError(
                describe(
                    f"No filesystem is installed for {path!r}",
                    found=str(exc),
                    fix="install the fsspec implementation it names",
                )
            ) from exc
        return pafs.PyFileSystem(pafs.FSSpecHandler(fs)), stripped
    return pafs.LocalFileSystem(), os.path.abspath(path)


def resolve_files(
    paths: PathLike,
    *,
    suffixes: tuple[str, ...],
    filesystem: pafs.FileSystem | None = None,
    keep: Callable[[str], bool] | None = None,
    wanted: str | None = None,
) -> ResolvedFiles:
    """Expands paths, directories and globs into a sorted, de-duplicated file list.

    Files found inside a directory are kept by ``suffixes`` and, when given,
    by ``keep(base_name)``; files named explicitly or by a glob are always kept.
    A directory (or a directory below it) holding a streamfeed manifest must
    match it (:func:`check_manifests`); files named explicitly or by a glob
    are taken as they are.

    A directory in which no file is kept raises :class:`NotFoundError`, as a
    glob matching nothing does: an empty folder, or one holding only hidden
    files, a writer's crash leftovers (``.name.streamfeed-tmp-*``) or other
    formats, is a wrong path far more often than a dataset meant to be
    empty. The message names the directory, what was looked for (``wanted``
    describes ``keep``'s rule; by default the ``suffixes``) and what was
    there. A manifest listing no files counts as nothing (no streamfeed
    writer publishes one: no rows is one empty shard, which reads as 0 rows).
    """
    items = [paths] if isinstance(paths, (str, os.PathLike)) else list(paths)
    if not items:
        raise NotFoundError(
            describe(
                "No paths were given", expected="a file, directory, glob, URI or a list of them", found="an empty list"
            )
        )
    found: list[str] = []
    fs: pafs.FileSystem | None = filesystem
    roots: list[str] = []
    for item in items:
        path = os.fspath(item)
        try:
            item_fs, path = filesystem_for(path, filesystem)
            fs = fs or item_fs
            matches, item_root = _resolve_item(item_fs, path, suffixes, keep, wanted)
        except Exception as exc:  # the storage's own: a missing bucket, refused or no credentials, no route
            error = _unopened(os.fspath(item), path, filesystem, exc) if from_storage_client(exc) else exc
            if error is exc:  # ours already (a missing path), or not the storage's
                raise
            raise error from exc
        found.extend(matches)
        roots.append(item_root)
    files = tuple(sorted(set(found)))
    root = os.path.commonpath(roots) if len(roots) > 1 else roots[0]
    return ResolvedFiles(filesystem=fs, files=files, root=root)


def _looked_for(suffixes: tuple[str, ...], keep: Callable[[str], bool] | None) -> str:
    """What a directory listing keeps, in words: ``.csv, .tsv (each optionally .gz, .bz2)``."""
    if not suffixes:
        return "files whose names this reader recognises" if keep else "any file"
    plain = [suffix for suffix in suffixes if suffix.count(".") == 1]
    packed = dict.fromkeys(  # ".csv.gz" -> ".gz": compression suffixes, in order
        suffix[len(base) :] for suffix in suffixes for base in plain if suffix.startswith(base) and suffix != base
    )
    text = ", ".join(plain) + (f" (each optionally {', '.join(packed)})" if packed else "")
    return f"files ending in {text}, or with no suffix"


def _plural(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 's'}"


def _nothing_to_read(directory: str, entries: Sequence[pafs.FileInfo], looked_for: str) -> NotFoundError:
    """The error for a directory holding no file to read, counting what it holds instead."""
    hidden: list[str] = []
    other: list[str] = []
    for entry in entries:
        if entry.type == pafs.FileType.File:
            relative = entry.path[len(directory) :].lstrip("/")
            (hidden if any(_is_hidden(part) for part in relative.split("/")) else other).append(relative)

    def counted(names: list[str], kind: str) -> str:
        shown = ", ".join(sorted(names)[:3]) + (", ..." if len(names) > 3 else "")
        return f"{_plural(len(names), kind)} ({shown})"

    found = [counted(names, kind) for names, kind in ((hidden, "hidden or temporary file"), (other, "other file"))]
    return NotFoundError(
        describe(
            "No file to read in the directory",
            where=directory,
            expected=f"{looked_for}, not hidden (no file or folder name starting with . or _)",
            found=" and ".join(text for text, names in zip(found, (hidden, other)) if names) or "no file at all",
            fix=(
                "check the path (a directory with nothing to read would read no data); "
                "files named explicitly or by a glob are read whatever their names"
            ),
        )
    )


def _resolve_item(
    fs: pafs.FileSystem,
    path: str,
    suffixes: tuple[str, ...],
    keep: Callable[[str], bool] | None,
    wanted: str | None,
) -> tuple[list[str], str]:
    """The files one path, directory or glob names, and the root they hang from."""
    if _is_pattern(fs, path):
        matches = _glob(fs, path)
        if not matches:
            raise NotFoundError(
                describe(
                    "No file matches the pattern",
                    where=path,
                    fix="check the pattern: a glob that matches nothing would read no data",
                )
            )
        return matches, path.split("*")[0].rsplit("/", 1)[0]
    info = fs.get_file_info(path)
    if info.type == pafs.FileType.NotFound:
        raise NotFoundError(describe("No such file or directory", where=path, fix="check the path"))
    if info.type != pafs.FileType.Directory:
        return [path], path.rsplit("/", 1)[0]
    entries = fs.get_file_info(pafs.FileSelector(path, recursive=True))
    matches = [
        entry.path
        for entry in entries
        if entry.type == pafs.FileType.File
        and not any(_is_hidden(part) for part in entry.path[len(path) :].split("/") if part)
        and (not suffixes or entry.path.lower().endswith(suffixes) or "." not in entry.base_name)
        and (keep is None or keep(entry.base_name))
    ]
    check_manifests(fs, path, entries, matches)
    if not matches:
        raise _nothing_to_read(path, entries, wanted or _looked_for(suffixes, keep))
    return matches, path


def _unopened(typed: str, path: str, filesystem: pafs.FileSystem | None, exc: Exception) -> StreamfeedError:
    """The error for a path that could not be listed: unreachable storage or no credentials (``files/reach.py``),
    or :func:`_unlistable`; ``exc`` itself when it is already ours (a missing path, a manifest mismatch).

    ``typed`` is the path as given, ``path`` as the filesystem names it (a
    URI opened with ``storage_options`` comes here without its scheme).
    """
    location = storage_location(filesystem, path)
    uri, endpoint = location or (typed, pyarrow_endpoint(typed) if "://" in typed else "the local filesystem")
    known = unreachable(uri, endpoint, exc, storage_options=location is not None) or no_credentials(uri, endpoint, exc)
    if known is not None:
        return known
    if isinstance(exc, StreamfeedError):
        return exc
    if not isinstance(exc, OSError):
        return StorageError(
            describe(
                "The storage would not list the data",
                where=f"{uri} at endpoint {endpoint}",
                found=f"{type(exc).__name__}: {' '.join(str(exc).split())[:500]}",
                fix="check the endpoint, the credentials and the network",
            )
        )
    return _unlistable(path, exc)


def _unlistable(path: str, exc: OSError) -> StreamfeedError:
    """The error for a path the storage would not list: not found when it says so, else a storage error."""
    said = " ".join(str(exc).split())[:500]
    if isinstance(exc, FileNotFoundError) or "NO_SUCH_BUCKET" in said or "NoSuchBucket" in said:
        return NotFoundError(
            describe("The bucket or path does not exist", where=path, found=said, fix="check the bucket and the path")
        )
    return StorageError(
        describe(
            "The storage would not list the data",
            where=path,
            found=f"{type(exc).__name__}: {said}",
            fix="check the endpoint, the credentials and the network",
        )
    )


def _is_pattern(fs: pafs.FileSystem, path: str) -> bool:
    """Wildcards make a glob, unless a file or directory has that very name (``run[1]/``)."""
    return any(ch in path for ch in "*?[") and fs.get_file_info(path).type == pafs.FileType.NotFound


def _glob(fs: pafs.FileSystem, pattern: str) -> list[str]:
    if isinstance(fs, pafs.LocalFileSystem):
        return [str(Path(p)) for p in globlib.glob(pattern, recursive=True) if os.path.isfile(p)]
    import fnmatch

    base = pattern.split("*")[0].rsplit("/", 1)[0]
    entries = fs.get_file_info(pafs.FileSelector(base, recursive=True))
    return [e.path for e in entries if e.type == pafs.FileType.File and fnmatch.fnmatch(e.path, pattern)]


FileStat = Union[tuple[str, int, int], tuple[str, int, int, str]]


@overload
def file_stats(paths: Sequence[str], filesystem: None = None) -> list[tuple[str, int, int]]: ...
@overload
def file_stats(paths: Sequence[str], filesystem: pafs.FileSystem | None) -> list[FileStat]: ...
def file_stats(paths: Sequence[str], filesystem: pafs.FileSystem | None = None) -> list[Any]:
    """``(path, size, modification time in ns)`` of each file (local by default), in one listing call.

    A missing time (some object stores) is ``-1``: the digest then rests on
    sizes alone for that file. An object opened through ``storage_options``
    has a fourth field, its version as taken at open (ETag, and version id:
    :func:`~streamfeed.files.storage.object_version`), so an overwrite of
    the same size within the same second (S3 times are whole seconds)
    still changes the digest.
    """
    infos = (filesystem or pafs.LocalFileSystem()).get_file_info(list(paths))
    stats: list[Any] = []
    for info in infos:
        stat = (info.path, int(info.size or 0), -1 if info.mtime_ns is None else int(info.mtime_ns))
        version = object_version(filesystem, info.path)
        stats.append(stat if version is None else (*stat, version))
    return stats


def file_digest(files: Iterable[FileStat], extra: Iterable[str] = ()) -> str:
    """A short hash of ``(path, size, mtime_ns[, version])`` tuples and ``extra`` lines: a source's identity in state.

    Size and modification time together catch a same-size rewrite (an
    ``.npy`` of other values, plain-encoded Parquet) without reading the
    data; a filesystem whose clock ticks coarser than the rewrite cannot,
    except for objects whose version (ETag) is in the tuple.
    """
    digest = hashlib.sha1()
    for stat in files:
        digest.update(("\0".join(str(part) for part in stat) + "\n").encode())
    for line in extra:
        digest.update(f"{line}\n".encode())
    return digest.hexdigest()[:16]


MANIFEST_NAME = "_streamfeed_manifest.json"
MANIFEST_FORMAT = "streamfeed-manifest"
MANIFEST_VERSION = 1
# The format of the manifest an object-store publish puts first and replaces by the final one last
# (``files/publish.py``): a reader that finds it refuses the directory (older versions too: they
# do not know the format).
PUBLISHING_FORMAT = "streamfeed-manifest-publishing"
# A shard's checksum, by the name its manifest entry lists it under: ``convert`` lists sha256; the
# conversion cache, which hashes every part it writes and reads, the ~10x cheaper xxh3_128 (7.4 GB/s
# against 0.7 on this machine's cores).
DIGEST_NAMES = ("sha256", "xxh3_128")


def load_manifest(fs: pafs.FileSystem, path: str, *, publishing: bool = False) -> dict:
    """The manifest at ``path``, checked for shape: ``{"format", "version", "rows", "files": [...]}``.

    Each entry of ``files`` is ``{"path", "rows", "bytes"}`` and a checksum
    (one of :data:`DIGEST_NAMES`), its path relative to the manifest's
    directory (``/``-separated, never leaving it).

    The manifest of a publish on object storage that has not finished
    (:data:`PUBLISHING_FORMAT`: its shards may be part old, part new, with
    the same names and sizes) raises :class:`ManifestMismatchError` naming
    the directory, unless ``publishing`` (the writer replacing it asks so).
    """

    def refuse(found: str) -> CorruptFileError:
        return CorruptFileError(
            describe(
                "A streamfeed manifest is not readable",
                where=path,
                expected=f"JSON of format {MANIFEST_FORMAT!r}, version {MANIFEST_VERSION}",
                found=found,
                fix="write the directory again (with overwrite), or delete the manifest to read the files as they are",
            )
        )

    try:
        with fs.open_input_stream(path) as stream:
            manifest = json.loads(stream.read())
    except (OSError, ValueError) as exc:
        raise refuse(str(exc)) from exc
    if isinstance(manifest, dict) and manifest.get("format") == PUBLISHING_FORMAT:
        if not publishing:
            raise ManifestMismatchError(
                describe(
                    "A publish of this directory was interrupted, or is still under way",
                    where=path.rsplit("/", 1)[0],
                    expected="a complete output: its final manifest is put once every shard is in place",
                    found=f"{path} of a publish not finished: its shards may be part old, part new",
                    fix="wait for the writer to finish, or write the directory again (with overwrite)",
                )
            )
        manifest = {**manifest, "format": MANIFEST_FORMAT}  # checked for shape as a final one
    if not isinstance(manifest, dict) or manifest.get("format") != MANIFEST_FORMAT:
        raise refuse(f"a {type(manifest).__name__} without format {MANIFEST_FORMAT!r}")
    if manifest.get("version") != MANIFEST_VERSION:
        raise refuse(f"version {manifest.get('version')!r}")
    files = manifest.get("files")
    if not isinstance(files, list) or not isinstance(manifest.get("rows"), int):
        raise refuse("no list of files or no row count")
    for entry in files:
        name = entry.get("path") if isinstance(entry, dict) else None
        if (
            not isinstance(name, str)
            or not name
            or name.startswith("/")
            or ".." in name.split("/")
            or not all(isinstance(entry.get(key), int) and entry[key] >= 0 for key in ("rows", "bytes"))
            or not any(isinstance(entry.get(digest), str) for digest in DIGEST_NAMES)
        ):
            raise refuse(f"the entry {entry!r}")
    return manifest


def check_manifests(fs: pafs.FileSystem, root: str, entries: Sequence[pafs.FileInfo], data: Iterable[str]) -> None:
    """Refuses a directory tree whose files are not what its manifests list.

    ``entries`` is the recursive listing of ``root`` and ``data`` the files
    a reader would read from it. Every manifest found (outside hidden
    directories) must have each listed shard present with the listed size,
    and every data file below a manifest's directory must be listed by the
    nearest such manifest: a shard missing or cut short, or a leftover of
    another write among the shards, raises :class:`ManifestMismatchError`
    naming the file; so does the manifest of a publish to object storage
    that did not finish (:func:`load_manifest`), whose shards may have the
    listed names and sizes and still be part old, part new. Names and sizes only, from the listing the reader
    makes anyway: checksums would read every byte at every open, which is
    the cost of a full pass (``streamfeed.files.publish.verify_output``
    does that on demand).
    """
    sizes = {entry.path: entry.size for entry in entries if entry.type == pafs.FileType.File}
    listed: dict[str, set[str]] = {}
    for path in sizes:
        relative = path[len(root) :].split("/")
        if relative[-1] != MANIFEST_NAME or any(_is_hidden(part) for part in relative[:-1] if part):
            continue
        directory = path.rsplit("/", 1)[0]
        manifest = load_manifest(fs, path)
        listed[directory] = set()
        for entry in manifest["files"]:
            shard = f"{directory}/{entry['path']}"
            listed[directory].add(shard)
            if sizes.get(shard) != entry["bytes"]:
                raise ManifestMismatchError(
                    describe(
                        "A shard of a published directory is not as its manifest lists it",
                        where=shard,
                        expected=f"{entry['bytes']} bytes, as {path} lists",
                        found="missing" if shard not in sizes else f"{sizes[shard]} bytes",
                        fix="write the directory again (with overwrite); it is not the output that was published",
                    )
                )
    if not listed:
        return
    for path in data:
        directory = path.rsplit("/", 1)[0]
        while directory not in listed and len(directory) > len(root):
            directory = directory.rsplit("/", 1)[0]
        if directory in listed and path not in listed[directory]:
            raise ManifestMismatchError(
                describe(
                    "A file among the shards of a published directory is not in its manifest",
                    where=path,
                    expected=f"only the {len(listed[directory])} files {directory}/{MANIFEST_NAME} lists",
                    found="a file not listed (a leftover of another write, or added after publishing)",
                    fix="remove it, or write the directory again (with overwrite)",
                )
            )
