"""A local disk cache of byte ranges fetched from object storage, bounded by ``max_bytes``.

Every epoch reads the same ranges of the same objects (one per Parquet row
group, or per block of a CSV/TFRecord stream), so caching ranges as they
were fetched makes the second epoch local. An entry's key includes the
object's version as taken at open (its ETag, else its size and
modification time); since every ranged GET carries that version
(``If-Match``, ``files/storage.py``), the bytes stored under a key are
that version's, never those of an overwrite that came later.

An entry is a file named by that key's hash: a header (magic, the data's
length and its xxh3_64) and the data. Reading checks all three: an entry
cut short or with one flipped byte is removed and the range fetched again,
never served. Entries are written to a new ``mkstemp`` file in the cache
directory (``O_EXCL``: a link planted there is never followed) and renamed
over the entry by one ``os.replace``, so a crash leaves no half entry;
entries are opened with ``O_NOFOLLOW`` and must be regular files. The
least recently used are removed once the total passes ``max_bytes``.
Entries found in the directory at start (an earlier run's) are kept and
counted.

A cache that cannot write (a full disk, a directory removed or not
writable) stops writing and the reads go to the network, with one
:class:`RangeCacheWarning`: a cache costs speed, never a file taken for
corrupt or a row group skipped.
"""

from __future__ import annotations

import collections
import contextlib
import hashlib
import os
import stat
import struct
import threading
import warnings
from pathlib import Path

import xxhash

from .atomic import write_atomic

_SUFFIX = ".range"
_MAGIC = b"SFRC1\0"
_HEADER = struct.Struct("<6sQQ")  # magic, data length, xxh3_64 of the data


class RangeCacheWarning(UserWarning):
    """The range cache cannot write (full disk, unwritable): reads go to the network instead."""


class RangeCache:
    def __init__(self, directory: str | os.PathLike, max_bytes: int) -> None:
        self.directory = Path(directory)
        self.max_bytes = int(max_bytes)
        self._lock = threading.Lock()
        self._sizes: collections.OrderedDict[str, int] = collections.OrderedDict()
        self._total = 0
        self._writable = True
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            entries = sorted(
                (entry.stat().st_mtime_ns, entry.name, entry.stat().st_size)
                for entry in os.scandir(self.directory)
                if entry.name.endswith(_SUFFIX) and entry.is_file(follow_symlinks=False)
            )
        except OSError as exc:
            self._stop_writing(exc)
            return
        for _, name, size in entries:
            self._sizes[name] = size
        self._total = sum(self._sizes.values())
        self._evict()

    @staticmethod
    def key(path: str, version: str, start: int, end: int) -> str:
        return hashlib.sha256(f"{path}\0{version}\0{start}\0{end}".encode()).hexdigest() + _SUFFIX

    def get(self, key: str) -> bytes | None:
        """The range stored under ``key`` if it is there and intact; a damaged entry is removed."""
        path = self.directory / key
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError:
            return None
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode) or info.st_size > _HEADER.size + self.max_bytes:
                data = None
            else:
                with os.fdopen(fd, "rb", closefd=False) as entry:
                    data = _unpack(entry.read())
        except OSError:
            data = None
        finally:
            os.close(fd)
        if data is None:
            self._forget(key)
            return None
        with self._lock:
            if key in self._sizes:
                self._sizes.move_to_end(key)
        return data

    def put(self, key: str, data: bytes) -> None:
        """Stores ``data`` under ``key`` (new file, one rename); a cache that cannot write stops, warning once."""
        if len(data) > self.max_bytes or not self._writable:
            return
        entry = _HEADER.pack(_MAGIC, len(data), xxhash.xxh3_64_intdigest(data)) + data
        try:
            write_atomic(self.directory / key, entry)  # mkstemp (O_EXCL), one rename; nothing left on failure
        except OSError as exc:
            self._stop_writing(exc)
            return
        with self._lock:
            self._total += len(entry) - self._sizes.pop(key, 0)
            self._sizes[key] = len(entry)
            self._evict()

    def _stop_writing(self, exc: OSError) -> None:
        with self._lock:
            if not self._writable:
                return
            self._writable = False
        warnings.warn(
            f"The range cache in {self.directory} cannot write ({type(exc).__name__}: {exc}); "
            "ranges are read from the storage from now on. Fix: free space there, or give "
            "storage_options={'cache': {'dir': ...}} a writable directory.",
            RangeCacheWarning,
            stacklevel=2,
        )

    def _forget(self, key: str) -> None:
        with self._lock:
            self._total -= self._sizes.pop(key, 0)
        with contextlib.suppress(OSError):
            os.unlink(self.directory / key)  # the entry itself (a link planted there, not what it names)

    def _evict(self) -> None:
        while self._total > self.max_bytes and self._sizes:
            name, size = self._sizes.popitem(last=False)
            self._total -= size
            with contextlib.suppress(OSError):
                (self.directory / name).unlink()

    @property
    def total_bytes(self) -> int:
        return self._total


def _unpack(entry: bytes) -> bytes | None:
    """The data of an entry whose header's magic, length and checksum all hold, else None."""
    if len(entry) < _HEADER.size:
        return None
    magic, length, checksum = _HEADER.unpack_from(entry)
    data = entry[_HEADER.size :]
    if magic != _MAGIC or length != len(data) or xxhash.xxh3_64_intdigest(data) != checksum:
        return None
    return data
