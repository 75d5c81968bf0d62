"""Publishing a directory of shards whole or not at all: a temporary sibling, a manifest last, one rename.

A reader must never take part of an output for all of it, whatever moment
the writer dies at (SQLite's atomic commit, Hadoop's ``_SUCCESS``). So a
:class:`Publication`:

1. checks the destination: absent or an empty directory; or, with
   ``overwrite``, a directory holding only a previous output (its manifest
   and the files it lists, or files the writer's ``owns`` recognises);
   anything else is refused, so no file streamfeed did not write is
   replaced or deleted;
2. has the shards written into a hidden sibling
   ``.<name>.streamfeed-tmp-<pid>-<token>``, which no reader of the
   destination (nor of its parent: the name is hidden) ever reads;
3. at :meth:`Publication.commit`, fsyncs each shard while hashing it, then
   writes the manifest ``_streamfeed_manifest.json`` (every shard's path,
   rows, bytes and sha256) last, inside the sibling, and fsyncs it;
4. publishes on a local filesystem with one rename of the directory: onto
   an absent or empty destination ``rename`` (POSIX replaces an empty
   directory atomically); over a previous output ``renameat2`` with
   ``RENAME_EXCHANGE`` swaps the two directories in one step, the old one
   is renamed ``.<name>.streamfeed-old-<pid>-<token>`` and deleted. A kill
   at any moment leaves the complete old or the complete new directory
   under the final name, plus at most one such hidden sibling, which the
   next write to that destination deletes once its process is gone. Where
   the exchange is not available (not Linux, or a filesystem without it)
   the old directory is renamed aside and the new one renamed in: a crash
   between those two renames leaves the old output under the ``-old-``
   name and no destination, never a mixture.

Object stores have no rename of a directory: there a *publishing*
manifest (``files.paths.PUBLISHING_FORMAT``) goes into the destination
first (one atomic put), the shards are moved in one by one, and the final
manifest replaces it last (one atomic put). A reader sees the old output,
or the publishing manifest, which it refuses naming the directory, or the
new output. Without that first put a writer killed between two shards left
the new manifest over old and new shards of the same names and sizes, which
names and sizes cannot tell apart (``tests/storage/test_remote_publish.py``).
A flip of one pointer to a new prefix would also do, but would change the
layout every reader lists; checking digests at every open would read every
byte twice. Readers check names and sizes at every open
(``files/paths.check_manifests``); :func:`verify_output` also checks every
checksum.
"""

from __future__ import annotations

import ctypes
import errno
import hashlib
import json
import os
import re
import secrets
import shutil
import stat
import sys
from types import TracebackType
from typing import Any, Callable

import pyarrow.fs as pafs
import xxhash

from ..errors import CorruptFileError, ManifestMismatchError, OutputExistsError, PublishError, describe
from .paths import (
    DIGEST_NAMES,
    MANIFEST_FORMAT,
    MANIFEST_NAME,
    MANIFEST_VERSION,
    PUBLISHING_FORMAT,
    check_manifests,
    load_manifest,
)

_TEMPORARY = re.compile(r"\.(?P<name>.+)\.streamfeed-(?:tmp|old)-(?P<pid>\d+)-[0-9a-f]{8}")
_BLOCK = 4 * 2**20
DIGESTS: dict[str, Callable[..., Any]] = {"sha256": hashlib.sha256, "xxh3_128": xxhash.xxh3_128}
"""The checksums a manifest entry may list (``files.paths.DIGEST_NAMES``), by name."""
assert tuple(DIGESTS) == DIGEST_NAMES


class Publication:
    """One output directory being written: shards go to :meth:`path`, :meth:`commit` publishes them.

    Use it as a context manager: leaving the block without :meth:`commit`
    (an error, ``KeyboardInterrupt``) deletes what was written and leaves
    the destination as it was.

    Args:
        destination: the directory to publish (its parent is created).
        filesystem: where it is; a local one publishes by renaming the
            directory, any other by the manifest-first protocol.
        overwrite: replace a previous output in ``destination``.
        owns: ``owns(base_name)`` is true for a file this writer could have
            written without a manifest (older streamfeed outputs), which
            ``overwrite`` may therefore replace.
        data_format: recorded in the manifest (``"parquet"``, ``"tfrecord"``).
    """

    def __init__(
        self,
        destination: str,
        *,
        filesystem: pafs.FileSystem,
        overwrite: bool,
        owns: Callable[[str], bool],
        data_format: str,
    ) -> None:
        self.fs = filesystem
        self.local = isinstance(filesystem, pafs.LocalFileSystem)
        if self.local:
            destination = os.path.abspath(destination)
            if os.path.islink(destination):  # publish where the link points, keeping the link
                destination = os.path.realpath(destination)
        self.destination = destination.rstrip("/")
        self.parent, self.name = self.destination.rsplit("/", 1)
        self.overwrite, self.owns, self.data_format = overwrite, owns, data_format
        self.shards: list[tuple[str, int]] = []
        self._committed = False
        self.fs.create_dir(self.parent, recursive=True)
        self._check_destination()
        if self.local:
            _delete_dead_temporaries(self.parent, self.name)
        self.staging = self._sibling("tmp")
        if self.local:
            try:
                os.mkdir(self.staging)  # fails if anything (a planted link too) has the name
            except OSError as exc:
                raise PublishError(
                    describe(
                        "Cannot create the temporary directory beside the destination",
                        where=self.staging,
                        found=str(exc),
                        fix="the destination's parent directory must be writable",
                    )
                ) from exc
        else:
            self.fs.create_dir(self.staging, recursive=True)

    def __enter__(self) -> Publication:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        if not self._committed:
            _remove_tree(self.fs, self.staging)

    def path(self, name: str) -> str:
        """Where to write the shard ``name`` (a plain file name) until it is published."""
        return f"{self.staging}/{name}"

    def add(self, name: str, rows: int) -> None:
        """Records a shard written (and closed) at :meth:`path`, in the order the manifest lists it."""
        self.shards.append((name, rows))

    def commit(self) -> dict:
        """Seals the shards, writes the manifest last and publishes the directory; returns the manifest."""
        files = []
        for name, rows in self.shards:
            size, digest = seal_file(self.fs, self.path(name), sync=self.local)
            files.append({"path": name, "rows": rows, "bytes": size, "sha256": digest})
        manifest = {
            "format": MANIFEST_FORMAT,
            "version": MANIFEST_VERSION,
            "data_format": self.data_format,
            "rows": sum(rows for _, rows in self.shards),
            "files": files,
        }
        if self.local:
            write_manifest(self.fs, self.staging, manifest)
            sync_directory(self.staging)
            self._publish_local()
        else:
            self._publish_remote(manifest)
        self._committed = True
        return manifest

    def _sibling(self, kind: str) -> str:
        return f"{self.parent}/.{self.name}.streamfeed-{kind}-{os.getpid()}-{secrets.token_hex(4)}"

    def _check_destination(self) -> bool:
        """Refuses a destination that must not be replaced; True if it holds a previous output to replace."""
        info = self.fs.get_file_info(self.destination)
        if info.type == pafs.FileType.NotFound:
            return False
        if info.type != pafs.FileType.Directory:
            raise OutputExistsError(
                describe("The destination is a file", where=self.destination, fix="give a directory path")
            )
        entries = self.fs.get_file_info(pafs.FileSelector(self.destination, recursive=True))
        if not entries:
            return False
        manifest_path = f"{self.destination}/{MANIFEST_NAME}"
        ours = {manifest_path}
        if any(entry.path == manifest_path for entry in entries):
            try:
                manifest = load_manifest(self.fs, manifest_path, publishing=True)  # an interrupted publish: ours too
                ours.update(f"{self.destination}/{entry['path']}" for entry in manifest["files"])
            except CorruptFileError:  # a damaged output of ours: its shards are still recognised by ``owns``
                pass
        folders = {path[:end] for path in ours for end, char in enumerate(path) if char == "/"}  # their ancestors
        for entry in entries:
            if entry.type == pafs.FileType.Directory:
                mine = entry.path in folders
            else:
                top_level = entry.path.rsplit("/", 1)[0] == self.destination
                mine = entry.path in ours or (top_level and self.owns(entry.base_name))
            if not mine:
                raise OutputExistsError(
                    describe(
                        "The destination holds files streamfeed did not write",
                        where=entry.path,
                        expected="an absent or empty directory, or one holding a previous output of this writer",
                        fix="choose another destination, or move those files away",
                    )
                )
        if not self.overwrite:
            names = sorted((entry.base_name for entry in entries), key=lambda name: (name[:1] in "._", name))
            raise OutputExistsError(
                describe(
                    "The destination holds a previous output",
                    where=self.destination,
                    found=f"{len(entries)} entries: {', '.join(names[:3])}{', ...' if len(names) > 3 else ''}",
                    fix="pass overwrite=True (--overwrite on the command line) to replace it, or another destination",
                )
            )
        return True

    def _publish_local(self) -> None:
        replace = self._check_destination()  # again: the write may have taken hours
        if os.path.isdir(self.destination):
            os.chmod(self.staging, stat.S_IMODE(os.stat(self.destination).st_mode))
        if not replace:
            _rename(self.staging, self.destination)
        else:
            old = self._sibling("old")
            if _exchange(self.staging, self.destination):
                _rename(self.staging, old)
            else:
                _rename(self.destination, old)
                try:
                    _rename(self.staging, self.destination)
                except PublishError:
                    _rename(old, self.destination)  # put the old output back rather than leave none
                    raise
            _remove_tree(self.fs, old)
        sync_directory(self.parent)

    def _publish_remote(self, manifest: dict) -> None:
        replace = self._check_destination()
        listing = self.fs.get_file_info(pafs.FileSelector(self.destination, recursive=True)) if replace else []
        old = {entry.path for entry in listing if entry.type == pafs.FileType.File}
        self.fs.create_dir(self.destination, recursive=True)
        # from here a reader refuses the directory, by name, until the final manifest is in
        write_manifest(self.fs, self.destination, {**manifest, "format": PUBLISHING_FORMAT})
        new = {f"{self.destination}/{entry['path']}" for entry in manifest["files"]}
        for path in sorted(old - new - {f"{self.destination}/{MANIFEST_NAME}"}):
            self.fs.delete_file(path)
        for entry in manifest["files"]:
            move_shard(self.fs, self.path(entry["path"]), f"{self.destination}/{entry['path']}")
        write_manifest(self.fs, self.destination, manifest)  # one put: every shard is in place
        _remove_tree(self.fs, self.staging)


def move_shard(fs: pafs.FileSystem, source: str, target: str) -> None:
    """Moves one staged shard into a remote destination (a copy and a delete on object storage).

    One function per shard so that a crash test can stop the writer between two shards.
    """
    fs.move(source, target)


def write_manifest(fs: pafs.FileSystem, directory: str, manifest: dict) -> str:
    """Writes ``manifest`` as ``directory/_streamfeed_manifest.json`` (synced on a local disk); returns its path."""
    path = f"{directory}/{MANIFEST_NAME}"
    data = (json.dumps(manifest, indent=1) + "\n").encode()
    if isinstance(fs, pafs.LocalFileSystem):
        with open(path, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
    else:
        with fs.open_output_stream(path, compression=None) as out:
            out.write(data)
    return path


def verify_output(directory: str | os.PathLike, filesystem: pafs.FileSystem | None = None) -> dict:
    """Checks a published directory fully: names, sizes and every shard's checksum; returns its manifest.

    Reading back every byte, this is the check a reader cannot afford at
    every open; run it after copying a dataset, or when in doubt.
    """
    fs = filesystem or pafs.LocalFileSystem()
    root = os.path.abspath(os.fspath(directory)) if isinstance(fs, pafs.LocalFileSystem) else os.fspath(directory)
    entries = fs.get_file_info(pafs.FileSelector(root, recursive=True))
    manifest = load_manifest(fs, f"{root}/{MANIFEST_NAME}")
    files = [entry.path for entry in entries if entry.type == pafs.FileType.File]
    check_manifests(fs, root, entries, [path for path in files if not path.endswith("/" + MANIFEST_NAME)])
    for entry in manifest["files"]:
        path = f"{root}/{entry['path']}"
        algorithm = next(name for name in DIGEST_NAMES if name in entry)  # load_manifest checked one is
        _, digest = seal_file(fs, path, sync=False, algorithm=algorithm)
        if digest != entry[algorithm]:
            raise ManifestMismatchError(
                describe(
                    "A shard's contents differ from what was published",
                    where=path,
                    expected=f"{algorithm} {entry[algorithm]}, as the manifest lists",
                    found=f"{algorithm} {digest}",
                    fix="write the directory again, or copy it again from a good copy",
                )
            )
    return manifest


def seal_file(fs: pafs.FileSystem, path: str, *, sync: bool, algorithm: str = "sha256") -> tuple[int, str]:
    """The size and checksum (:data:`DIGESTS`) of a written file, read back from the page cache; fsynced if ``sync``."""
    digest, size = DIGESTS[algorithm](), 0
    if isinstance(fs, pafs.LocalFileSystem):
        with open(path, "rb") as stream:
            while block := stream.read(_BLOCK):
                digest.update(block)
                size += len(block)
            if sync:
                os.fsync(stream.fileno())
    else:
        with fs.open_input_stream(path) as remote:
            while block := remote.read(_BLOCK):
                digest.update(block)
                size += len(block)
    return size, digest.hexdigest()


def _rename(source: str, target: str) -> None:
    """One atomic rename; a non-empty ``target`` directory is refused, an empty one replaced."""
    try:
        os.rename(source, target)
    except OSError as exc:
        raise PublishError(
            describe(
                "The output could not be put in place",
                where=f"{source} -> {target}",
                found=str(exc),
                fix="check that nothing else writes to the destination and that both are on one filesystem",
            )
        ) from exc


def _exchange(first: str, second: str) -> bool:
    """Swaps two paths in one atomic step (Linux ``renameat2``, ``RENAME_EXCHANGE``); False where unsupported."""
    if not sys.platform.startswith("linux"):
        return False
    renameat2 = getattr(ctypes.CDLL(None, use_errno=True), "renameat2", None)
    if renameat2 is None:  # a C library older than glibc 2.28
        return False
    renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    at_fdcwd, rename_exchange = -100, 2
    if renameat2(at_fdcwd, os.fsencode(first), at_fdcwd, os.fsencode(second), rename_exchange) == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):  # the filesystem cannot exchange
        return False
    raise PublishError(
        describe(
            "The new output could not be swapped with the old one",
            where=f"{first} <-> {second}",
            found=os.strerror(code),
            fix="check that nothing else writes to the destination",
        )
    )


def _remove_tree(fs: pafs.FileSystem, path: str) -> None:
    """Deletes a temporary directory (gone already is fine)."""
    if isinstance(fs, pafs.LocalFileSystem):
        shutil.rmtree(path, ignore_errors=True)
    elif fs.get_file_info(path).type != pafs.FileType.NotFound:
        fs.delete_dir(path)


def sync_directory(path: str) -> None:
    """Makes a directory's entries (new files, a rename) durable; a no-op where directories cannot be opened."""
    try:
        descriptor = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(descriptor)
    except OSError:
        pass
    finally:
        os.close(descriptor)


def _delete_dead_temporaries(parent: str, name: str) -> None:
    """Deletes the temporaries a killed writer left beside ``parent/name``, once its process is gone.

    Only those of processes that no longer exist on this machine: a live
    writer's directory is never touched.
    """
    for entry in os.listdir(parent):
        match = _TEMPORARY.fullmatch(entry)
        if match is None or match["name"] != name:
            continue
        pid = int(match["pid"])
        if pid == os.getpid():
            continue
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            shutil.rmtree(os.path.join(parent, entry), ignore_errors=True)
        except OSError:  # alive, another user's
            continue
