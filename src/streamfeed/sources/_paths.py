"""Turning what the user typed into a filesystem and a sorted list of files.

Accepts a file, a directory (walked recursively), a glob, or a list of any
of these, as local paths or URIs (``s3://bucket/prefix``) that pyarrow's
filesystems — or fsspec's, wrapped — understand. Hidden and bookkeeping
files (``.crc``, ``_SUCCESS``, ``_metadata``) are left out.
"""

from __future__ import annotations

import glob as globlib
import hashlib
import os
import urllib.parse
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Sequence, Union

import pyarrow as pa
import pyarrow.fs as pafs

from ..errors import MissingDependencyError, NotFoundError, describe, require

PathLike = Union[str, os.PathLike, Sequence[Union[str, os.PathLike]]]


@dataclass(frozen=True)
class ResolvedFiles:
    filesystem: pafs.FileSystem
    files: tuple[str, ...]
    root: str  # common base directory, for hive partition paths


def _is_hidden(path: str) -> bool:
    name = path.rstrip("/").rsplit("/", 1)[-1]
    return name.startswith((".", "_"))


def _filesystem_for(path: str, filesystem: pafs.FileSystem | None) -> tuple[pafs.FileSystem, str]:
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
) -> ResolvedFiles:
    """Expands paths, directories and globs into a sorted, de-duplicated file list.

    Files found inside a directory are kept by ``suffixes`` and, when given,
    by ``keep(base_name)``; files named explicitly or by a glob are always kept.
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
        item_fs, path = _filesystem_for(os.fspath(item), filesystem)
        fs = fs or item_fs
        if _is_pattern(item_fs, path):
            matches = _glob(item_fs, path)
            if not matches:
                raise NotFoundError(
                    describe(
                        "No file matches the pattern",
                        where=path,
                        fix="check the pattern: a glob that matches nothing would read no data",
                    )
                )
            roots.append(path.split("*")[0].rsplit("/", 1)[0])
        else:
            info = item_fs.get_file_info(path)
            if info.type == pafs.FileType.NotFound:
                raise NotFoundError(describe("No such file or directory", where=path, fix="check the path"))
            if info.type == pafs.FileType.Directory:
                selector = pafs.FileSelector(path, recursive=True)
                matches = [
                    entry.path
                    for entry in item_fs.get_file_info(selector)
                    if entry.type == pafs.FileType.File
                    and not any(_is_hidden(part) for part in entry.path[len(path) :].split("/") if part)
                    and (not suffixes or entry.path.lower().endswith(suffixes) or "." not in entry.base_name)
                    and (keep is None or keep(entry.base_name))
                ]
                roots.append(path)
            else:
                matches = [path]
                roots.append(path.rsplit("/", 1)[0])
        found.extend(matches)
    files = tuple(sorted(set(found)))
    root = os.path.commonpath(roots) if len(roots) > 1 else roots[0]
    return ResolvedFiles(filesystem=fs, files=files, root=root)


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


def file_digest(files: Iterable[tuple[str, int]], extra: Iterable[str] = ()) -> str:
    """A short hash of ``(path, size)`` pairs and ``extra`` lines: a source's identity in saved state."""
    digest = hashlib.sha1()
    for path, size in files:
        digest.update(f"{path}\0{size}\n".encode())
    for line in extra:
        digest.update(f"{line}\n".encode())
    return digest.hexdigest()[:16]
