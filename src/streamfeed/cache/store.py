"""The conversion cache of one source, read through: a fragment's part when it is intact, else the source.

:class:`FragmentStore` serves :class:`~.source.CachedFragment` reads. A
part is served only if it is a regular file of the cache's own
(``parts.read_part_bytes``: never a link, FIFO or device), its record is
sealed by the cache's secret (``trust.py``), its size and checksum (of
the whole file, footer included) are the recorded ones and its rows are
the fragment's;
otherwise it is dropped (``staging.py``) and the fragment read from the
source, whose rows are handed to the writer (``writer.py``) to become its
part. The store owns the one lock under which every change of state of
its :class:`~.staging.Staging` (which parts exist) and its
:class:`~.writer.PartWriter` (which are being written) happens; parts are
read and written outside it, so the read threads decode in parallel.
"""

from __future__ import annotations

import os
import threading
import warnings

import pyarrow as pa

from ..core import Chunk, Fragment, Source, chunk_len
from .key import cache_key
from .parts import PART_DIGEST, read_part
from .staging import Staging
from .writer import PartWriter


class CacheWarning(RuntimeWarning):
    """The cache stopped (bound reached, disk full or not writable): reading continues from the source."""


class FragmentStore:
    """The cache of one source: its fragments read from their parts, or from the source and then written.

    ``staging`` knows which parts exist (published or staged); ``writer``
    writes new ones. Every change of state happens under one lock; a part
    is written outside it (the threads write in parallel) to a temporary
    name and renamed in under it.
    """

    def __init__(
        self,
        inner: Source,
        directory: str,
        max_bytes: int | None,
        *,
        trust_directory: bool = False,
        content: str | None = None,
    ) -> None:
        """``trust_directory``: take a ``directory`` others own or can write (``trust.py``); else refused.

        ``content``: the digest of the source files' bytes, in the key under ``verify="content"`` (``content.py``).
        """
        self.fragments = tuple(inner.fragments)
        self.exact = bool(inner.exact_counts)
        self.key = cache_key(inner, content)
        self._lock = threading.Lock()
        self.staging = Staging(self.key, directory, self.fragments, self.exact, max_bytes, trust_directory)
        self.writer = PartWriter(self.staging, self._lock)
        self.root, self.published = self.staging.root, self.staging.published
        self.source_reads = 0  # fragments read from the source (what the cache did not serve)

    def read(self, index: int) -> Chunk:
        try:
            return self._read(index)
        finally:
            self._warn()

    def _read(self, index: int) -> Chunk:
        fragment, staging = self.fragments[index], self.staging
        for _ in range(2):  # twice: another thread may move the parts (publish, a damaged part) meanwhile
            with self._lock:
                self.writer.wait_for(index)  # its part is being written (after an epoch that stopped early)
                if staging.manifest is None and staging.enabled:
                    staging.open()  # before any lookup: a dead run's parts are adopted first
                published = staging.manifest is not None
                entry = staging.manifest.get(index) if staging.manifest is not None else staging.parts.get(index)
                folder = staging.published if published else staging.directory
            if entry is None or folder is None:
                break
            chunk = self._read_part(folder, entry, fragment)
            if chunk is not None:
                return chunk
            with self._lock:
                if staging.forget(index, entry, published):
                    break
        chunk = fragment.read()
        with self._lock:
            self.source_reads += 1
        self.writer.store(index, chunk)
        return chunk

    def _read_part(self, folder: str, entry: dict, fragment: Fragment) -> Chunk | None:
        """The part's rows, or None if it is not exactly what was written (a file of ours, size, checksum, rows)."""
        try:
            chunk = read_part(os.path.join(folder, entry["path"]), entry["bytes"], entry[PART_DIGEST])
        except (OSError, KeyError, pa.ArrowException, ValueError):  # OSError: CorruptFileError, a changed byte
            return None
        rows = chunk_len(chunk)
        if rows != entry["rows"] or (self.exact and rows != fragment.num_rows):
            return None
        return chunk

    def _warn(self) -> None:
        """Issues the warning of a stopped cache outside the lock (a warnings filter may make it raise)."""
        with self._lock:
            message = self.staging.take_warning()
        if message is not None:
            warnings.warn(message, CacheWarning, stacklevel=3)
