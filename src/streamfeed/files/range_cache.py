"""A local disk cache of byte ranges fetched from object storage, bounded by ``max_bytes``.

Every epoch reads the same ranges of the same objects (one per Parquet row
group, or per block of a CSV/TFRecord stream), so caching ranges as they
were fetched makes the second epoch local. An entry's key includes the
object's version (its ETag, else its size and modification time), so an
object that changed is fetched again rather than served stale. Entries are
files named by that key's hash, written to a temporary name and renamed, so
a crash leaves no half entry; the least recently used are removed once the
total passes ``max_bytes``. Entries found in the directory at start (an
earlier run's) are kept and counted.
"""

from __future__ import annotations

import collections
import contextlib
import hashlib
import os
import threading
from pathlib import Path

_SUFFIX = ".range"


class RangeCache:
    def __init__(self, directory: str | os.PathLike, max_bytes: int) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.max_bytes = int(max_bytes)
        self._lock = threading.Lock()
        self._sizes: collections.OrderedDict[str, int] = collections.OrderedDict()
        entries = sorted(self.directory.glob(f"*{_SUFFIX}"), key=lambda path: path.stat().st_mtime_ns)
        for path in entries:
            self._sizes[path.name] = path.stat().st_size
        self._total = sum(self._sizes.values())
        self._evict()

    @staticmethod
    def key(path: str, version: str, start: int, end: int) -> str:
        return hashlib.sha256(f"{path}\0{version}\0{start}\0{end}".encode()).hexdigest() + _SUFFIX

    def get(self, key: str) -> bytes | None:
        try:
            data = (self.directory / key).read_bytes()
        except OSError:
            return None
        with self._lock:
            if key in self._sizes:
                self._sizes.move_to_end(key)
        return data

    def put(self, key: str, data: bytes) -> None:
        if len(data) > self.max_bytes:
            return
        temporary = self.directory / f".{key}.{threading.get_ident()}.tmp"
        temporary.write_bytes(data)
        os.replace(temporary, self.directory / key)
        with self._lock:
            self._total += len(data) - self._sizes.pop(key, 0)
            self._sizes[key] = len(data)
            self._evict()

    def _evict(self) -> None:
        while self._total > self.max_bytes and self._sizes:
            name, size = self._sizes.popitem(last=False)
            self._total -= size
            with contextlib.suppress(OSError):
                (self.directory / name).unlink()

    @property
    def total_bytes(self) -> int:
        return self._total
