"""The conversion cache: a slow source's fragments kept as Parquet, written while an epoch reads them.

:meth:`Dataset.cache <streamfeed.pipeline.Dataset.cache>` wraps the source
in a :class:`CachedSource`. Each fragment is read from the cache when it is
there, otherwise from the source, and what was read is written to the
cache by one writer thread while the read threads decode on, or, for
decoded images, by the read thread (:meth:`FragmentStore._store` says
why): the first epoch is the conversion, with no
extra pass. What is cached is the source's output (decoded rows, before the
user's ``map``/``filter``, which still run every epoch), so the cached
dataset keeps the source's fingerprint, fragments, row counts and plan:
batches, order and saved states are the same with and without the cache.

Layout under ``directory`` (default ``$STREAMFEED_CACHE_DIR`` or
``~/.cache/streamfeed/cache``):

- ``<key>/``: a published cache: a part per fragment ``i``, exactly its
  rows, uncompressed: ``part-<i:06d>.parquet`` (one row group), or, for a
  fragment with n-D numeric columns such as decoded images,
  ``part-<i:06d>.arrow`` (an Arrow IPC file: :func:`.cache_parts.part_format` says why),
  n-D columns as one fixed-size binary value of raw bytes per row
  (:func:`.cache_parts.part_table`); and ``_streamfeed_manifest.json`` (the manifest
  of ``writers/publish.py``: rows, bytes, xxh3_128 per part), written last;
- ``.<key>.caching-<pid>-<token>/``: a cache being written, with a journal
  ``_parts.jsonl`` (rows, bytes, xxh3_128 of every part renamed into place).
  One rename makes it ``<key>/`` once every fragment is in. A run whose
  writer process is dead is adopted by the next one, which keeps the parts
  whose size, checksum and rows match the journal and rewrites the others.

The key hashes the source's type, its fingerprint (files with size and
modification time, null policy, columns, decode options such as the image
size) and :data:`CACHE_FORMAT_VERSION`: a changed file or setting reads
and writes another key. A part is served only if its size and checksum
(of the whole file, footer included) are the recorded ones and its rows
are the fragment's; otherwise it is rewritten from the source. ``max_bytes`` bounds the parts
written; passing it, or any ``OSError`` while writing (a full disk), stops
caching with one :class:`CacheWarning`, removes the unpublished directory
and reads on from the source.
"""

from __future__ import annotations

import collections
import hashlib
import json
import logging
import os
import re
import secrets
import shutil
import tempfile
import threading
import time
import warnings
import weakref
from dataclasses import dataclass
from typing import Any, Literal, Sequence

import pyarrow as pa
import pyarrow.fs as pafs

from ..core import Chunk, Fragment, Source, SourceInfo, chunk_len
from ..errors import ArgumentError, CorruptFileError, describe
from ..files.paths import MANIFEST_FORMAT, MANIFEST_NAME, MANIFEST_VERSION, load_manifest
from ..files.publish import seal_file, sync_directory, write_manifest
from .parts import PART_DIGEST, part_format, read_part, write_part

logger = logging.getLogger("streamfeed")

CacheMode = Literal["always", "auto"]
CACHE_FORMAT_VERSION = 4  # 2: n-D columns as fixed-size binary; 3: xxh3_128, no page checksums; 4: .arrow parts
"""Bumped when what a part holds changes: older caches then get another key and are not reused."""
WRITE_QUEUE = 1  # parts waiting for the writer thread (one fragment each); past it the read thread writes
AUTO_MIN_RATIO = 2.0  # mode="auto" caches when the source costs at least this many times the cache read
_JOURNAL = "_parts.jsonl"
_PART = re.compile(r"part-(?P<index>\d{6})\.(?:parquet|arrow)")
_STAGING = re.compile(r"\.(?P<key>[0-9a-f]{20})\.caching-(?P<pid>\d+)-[0-9a-f]{8}")
_CLAIMED: set[str] = set()  # staging directories that a live store of this process writes
_CLAIMED_LOCK = threading.Lock()


class CacheWarning(RuntimeWarning):
    """The cache stopped (bound reached, disk full or not writable): reading continues from the source."""


def default_directory() -> str:
    """``$STREAMFEED_CACHE_DIR``, else ``~/.cache/streamfeed/cache``."""
    return os.environ.get("STREAMFEED_CACHE_DIR") or os.path.join(
        os.path.expanduser("~"), ".cache", "streamfeed", "cache"
    )


def cache_key(source: Source) -> str:
    """The cache's name for ``source``: its type, fingerprint and columns, and the cache format version."""
    identity = {
        "cache_format": CACHE_FORMAT_VERSION,
        "type": f"{type(source).__module__}.{type(source).__qualname__}",
        "source": source.fingerprint(),
        "columns": list(source.column_names),
    }
    return hashlib.sha256(json.dumps(identity, sort_keys=True, default=str).encode()).hexdigest()[:20]


def _part_name(index: int, chunk: Chunk) -> str:
    return f"part-{index:06d}.{part_format(chunk)}"


class CachedFragment:
    """A source fragment read through the cache; its identity and row count are the source's."""

    def __init__(self, store: "FragmentStore", index: int, inner: Fragment) -> None:
        self._store, self._index, self.inner = store, index, inner

    @property
    def key(self) -> str:
        return self.inner.key

    @property
    def num_rows(self) -> int:
        return self.inner.num_rows

    @property
    def path(self) -> str:
        return self.inner.path

    @property
    def location(self) -> str:
        return self.inner.location

    def read(self) -> Chunk:
        return self._store.read(self._index)


class CachedSource:
    """``inner`` with its fragments read through a :class:`FragmentStore`; what it declares (``info``) is ``inner``'s.

    The fingerprint is the source's own, so states move freely between the
    cached and the uncached dataset.
    """

    def __init__(self, inner: Source, directory: str, max_bytes: int | None) -> None:
        self.inner = inner
        self.store = FragmentStore(inner, directory, max_bytes)
        self.fragments = tuple(CachedFragment(self.store, i, f) for i, f in enumerate(inner.fragments))

    @property
    def column_names(self) -> list[str]:
        return self.inner.column_names

    @property
    def files(self) -> Sequence[str]:
        return self.inner.files

    @property
    def row_bytes(self) -> float:
        return self.inner.row_bytes

    @property
    def exact_counts(self) -> bool:
        return self.inner.exact_counts

    @property
    def read_parallelism(self) -> int | None:
        # No limit: the layout, chosen once, serves every epoch, and every epoch after the first reads
        # parts (Parquet, Arrow IPC), whose decoding runs in parallel. A source that cannot read in
        # parallel (HDF5: one lock) is decode-bound in its first epoch whatever the threads.
        return None

    @property
    def info(self) -> SourceInfo:
        return self.inner.info  # the rows are the source's: so are their schema and classes

    def fingerprint(self) -> Any:
        return self.inner.fingerprint()


class FragmentStore:
    """The cache of one source: what is published or staged, and writing parts from the read threads.

    Every change of state happens under one lock; a part is written outside
    it (the threads write in parallel) to a temporary name and renamed in
    under it.
    """

    def __init__(self, inner: Source, directory: str, max_bytes: int | None) -> None:
        self.fragments = tuple(inner.fragments)
        self.exact = bool(inner.exact_counts)
        self.key = cache_key(inner)
        self.root = os.path.abspath(directory)
        self.published = os.path.join(self.root, self.key)
        self.max_bytes = max_bytes
        self.required = {i for i, fragment in enumerate(self.fragments) if fragment.num_rows > 0}
        self._lock = threading.Lock()
        self._manifest: dict[int, dict] | None = None  # published parts by fragment index
        self._staging: str | None = None
        self._parts: dict[int, dict] = {}  # staged parts by fragment index: rows, bytes, checksum
        self._enabled = True
        self._pending: str | None = None  # the warning of _disable, issued once the lock is released
        self._writing = 0  # parts queued or being written
        self._queue: collections.deque[tuple[int, Chunk, str]] = collections.deque()  # parts for the writer thread
        self._queued: set[int] = set()  # fragments whose part is queued or being written
        self._writer: threading.Thread | None = None
        self._idle = threading.Condition(self._lock)  # notified when a part is in (or dropped) and when the writer ends
        self._bytes = 0
        self.source_reads = 0  # fragments read from the source (what the cache did not serve)
        self._claims: set[str] = set()
        self._load_published()
        weakref.finalize(self, _unclaim, self._claims)

    # ------------------------------------------------------------------ reading
    def read(self, index: int) -> Chunk:
        try:
            return self._read(index)
        finally:
            self._warn()

    def _read(self, index: int) -> Chunk:
        fragment = self.fragments[index]
        for _ in range(2):  # twice: another thread may move the parts (publish, a damaged part) meanwhile
            with self._lock:
                while index in self._queued:  # its part is being written (after an epoch that stopped early)
                    self._idle.wait()
                if self._manifest is None and self._enabled:
                    self._open_staging()  # before any lookup: a dead run's parts are adopted first
                published = self._manifest is not None
                entry = self._manifest.get(index) if self._manifest is not None else self._parts.get(index)
                folder = self.published if published else self._staging
            if entry is None or folder is None:
                break
            chunk = self._read_part(folder, entry, fragment)
            if chunk is not None:
                return chunk
            if self._forget(index, entry, published):
                break
        chunk = fragment.read()
        with self._lock:
            self.source_reads += 1
        self._store(index, chunk)
        return chunk

    def _read_part(self, folder: str, entry: dict, fragment: Fragment) -> Chunk | None:
        """The part's rows, or None if it is not exactly what was written (size, checksum, rows)."""
        try:
            path = os.path.join(folder, entry["path"])
            if os.path.getsize(path) != entry["bytes"]:
                return None
            chunk = read_part(path, entry[PART_DIGEST])
        except (OSError, KeyError, pa.ArrowException, ValueError):  # OSError: CorruptFileError, a changed byte
            return None
        rows = chunk_len(chunk)
        if rows != entry["rows"] or (self.exact and rows != fragment.num_rows):
            return None
        return chunk

    def _forget(self, index: int, entry: dict, published: bool) -> bool:
        """A part that did not read back is dropped, to be rewritten from the source, never served.

        False if it was not the part that failed: the parts moved meanwhile (look again).
        """
        with self._lock:
            if published and self._manifest is not None and self._manifest.get(index) is entry:
                logger.warning("cache: %s does not match its manifest: rewriting it", entry["path"])
                self._reopen_published(index)
                return True
            if not published and self._parts.get(index) is entry:
                logger.warning("cache: %s does not match its journal: rewriting it", entry["path"])
                del self._parts[index]
                self._bytes -= entry["bytes"]
                return True
            return False

    # ------------------------------------------------------------------ writing
    def _store(self, index: int, chunk: Chunk) -> None:
        """Has ``chunk`` written as fragment ``index``'s part: by the writer thread, or here.

        A chunk of 1-D columns goes to one writer thread through a queue of
        :data:`WRITE_QUEUE` parts (its writable columns copied, as the
        pipeline's ops may change them in place; Arrow-backed numbers, as
        CSV gives, are read-only and not copied), and the read thread goes
        on decoding; when the queue is full the read thread writes the part
        itself, so the queue stays bounded. A chunk with a writable n-D
        column (decoded images) is written here, before the ops can change
        it: queuing it would need a copy (147 KiB an image, held beside the
        pipeline's), and on 10 000 JPEGs the writer thread with the copy was
        not faster than writing here (docs/self-healing.md).
        The read of the last fragment still to be written waits for the
        writer: when the first epoch's last batch is served, the cache is
        published.
        """
        with self._lock:
            if not self._enabled or self._manifest is not None or index in self._parts or index in self._queued:
                return
            staging = self._open_staging()
            if staging is None:
                return
            self._writing += 1
            self._queued.add(index)
            inline = len(self._queue) >= WRITE_QUEUE or any(
                values.flags.writeable and values.ndim > 1 for values in chunk.values()
            )
            if not inline:  # writable columns (strings as objects: a copy of pointers) copied, read-only ones not
                copy = {name: values.copy() if values.flags.writeable else values for name, values in chunk.items()}
                self._queue.append((index, copy, staging))
                if self._writer is None:
                    self._writer = threading.Thread(target=self._drain, name="streamfeed-cache-writer")
                    self._writer.start()
        if inline:
            self._write_or_stop(index, chunk, staging)
        with self._lock:
            writer = self._writer if self.required <= self._parts.keys() | self._queued else None
        if writer is not None:
            writer.join()  # it ends once the queue is empty: the last parts are in, the cache published

    def _drain(self) -> None:
        """The writer thread: writes queued parts until the queue is empty, then ends (a new one starts on demand)."""
        while True:
            with self._lock:
                if not self._queue:
                    self._writer = None
                    self._idle.notify_all()
                    return
                index, chunk, staging = self._queue.popleft()
                stopped = not self._enabled or self._staging != staging
                if stopped:  # caching stopped meanwhile: the part is dropped unwritten
                    self._queued.discard(index)
                    self._writing -= 1
                    self._cleanup()
                    self._idle.notify_all()
                    continue
            self._write_or_stop(index, chunk, staging)

    def _write_or_stop(self, index: int, chunk: Chunk, staging: str) -> None:
        """:meth:`_write`; an error it does not handle (a column Arrow cannot write) stops caching, not reading."""
        try:
            self._write(index, chunk, staging)
        except BaseException as exc:
            with self._lock:
                if isinstance(exc, Exception):
                    self._disable(f"writing {_part_name(index, chunk)} failed: {exc!r}")
                if index in self._queued:  # _write failed before it counted the part out
                    self._queued.discard(index)
                    self._writing -= 1
                self._cleanup()
                self._idle.notify_all()
            if not isinstance(exc, Exception):
                raise

    def _write(self, index: int, chunk: Chunk, staging: str) -> None:
        """Writes one part to a temporary name, then (under the lock) renames it in, journals it, maybe publishes."""
        name = _part_name(index, chunk)
        temporary = os.path.join(staging, f".{name}.{secrets.token_hex(4)}.tmp")
        problem: str | None = None
        entry: dict = {}
        try:
            rows, size, digest = write_part(chunk, temporary)
            entry = {"index": index, "path": name, "rows": rows, "bytes": size, PART_DIGEST: digest}
        except OSError as exc:  # a full disk, a directory not writable or gone
            problem = f"writing {name} failed: {exc}"
        except BaseException:
            _remove(temporary)
            raise
        with self._lock:
            self._writing -= 1
            self._queued.discard(index)
            if problem is None and self._enabled and self._staging == staging:
                if self.max_bytes is not None and self._bytes + entry["bytes"] > self.max_bytes:
                    problem = f"the cache would pass max_bytes={self.max_bytes} ({self._bytes + entry['bytes']} bytes)"
                else:
                    try:
                        os.rename(temporary, os.path.join(staging, name))
                        with open(os.path.join(staging, _JOURNAL), "a", encoding="utf-8") as journal:
                            journal.write(json.dumps(entry) + "\n")
                        self._parts[index] = entry
                        self._bytes += entry["bytes"]
                    except OSError as exc:
                        problem = f"writing {name} failed: {exc}"
            if problem is not None:
                self._disable(problem)
            if index not in self._parts:
                _remove(temporary)
            self._cleanup()
            if self._enabled and self._manifest is None and self.required <= self._parts.keys():
                self._publish()
            self._idle.notify_all()

    def _cleanup(self) -> None:
        """Once caching stopped and no part is being written, removes the staging directory (under the lock)."""
        if not self._enabled and self._writing == 0 and self._staging is not None:
            shutil.rmtree(self._staging, ignore_errors=True)
            self._staging = None

    def _disable(self, reason: str) -> None:
        """Stops caching for this run (once; one warning follows); the caller removes the staging directory."""
        if not self._enabled:
            return
        self._enabled = False
        self._parts.clear()
        self._pending = describe(
            "The conversion cache stopped; reading continues from the source",
            where=self._staging or self.root,
            found=reason,
            fix="raise max_bytes or free disk space (cache(max_bytes=...), $STREAMFEED_CACHE_DIR) to cache",
        )

    def _warn(self) -> None:
        """Issues the warning of :meth:`_disable` outside the lock (a warnings filter may make it raise)."""
        with self._lock:
            message, self._pending = self._pending, None
        if message is not None:
            warnings.warn(message, CacheWarning, stacklevel=3)

    def _open_staging(self) -> str | None:
        """This run's staging directory: one a dead run left (adopted), else a new one; None if it cannot be made."""
        if self._staging is not None:
            return self._staging
        try:
            os.makedirs(self.root, exist_ok=True)
            mine = os.path.join(self.root, f".{self.key}.caching-{os.getpid()}-{secrets.token_hex(4)}")
            for entry in sorted(os.listdir(self.root)):
                match = _STAGING.fullmatch(entry)
                if match and match["key"] == self.key and _abandoned(os.path.join(self.root, entry), int(match["pid"])):
                    try:
                        os.rename(os.path.join(self.root, entry), mine)  # one run wins the rename
                    except OSError:
                        continue
                    self._claim(mine)
                    self._adopt(mine)
                    return mine
            os.mkdir(mine)
        except OSError as exc:
            self._disable(f"cannot create the cache directory: {exc}")
            return None
        self._claim(mine)
        return mine

    def _claim(self, staging: str) -> None:
        self._staging = staging
        self._claims.add(staging)
        with _CLAIMED_LOCK:
            _CLAIMED.add(staging)

    def _adopt(self, staging: str) -> None:
        """Keeps the parts of an adopted run that match its journal (size, checksum, rows); deletes the rest."""
        recorded: dict[int, dict] = {}
        try:
            with open(os.path.join(staging, _JOURNAL), encoding="utf-8") as journal:
                for line in journal:
                    try:
                        entry = json.loads(line)
                        recorded[int(entry["index"])] = entry
                    except (ValueError, KeyError, TypeError):  # a line cut short by the kill
                        continue
        except FileNotFoundError:
            pass
        kept = []
        for index, entry in sorted(recorded.items()):
            named = _PART.fullmatch(str(entry.get("path")))
            if (
                named is not None
                and int(named["index"]) == index < len(self.fragments)
                and self._intact(os.path.join(staging, entry["path"]), entry, self.fragments[index])
            ):
                self._parts[index] = entry
                self._bytes += entry["bytes"]
                kept.append(entry)
        keep = {entry["path"] for entry in kept}
        for name in os.listdir(staging):
            if name not in keep:
                _remove(os.path.join(staging, name))
        with open(os.path.join(staging, _JOURNAL), "w", encoding="utf-8") as journal:
            journal.writelines(json.dumps(entry) + "\n" for entry in kept)
        logger.info("cache: continuing %s: %d of %d fragments already written", staging, len(kept), len(self.required))

    def _intact(self, path: str, entry: dict, fragment: Fragment) -> bool:
        try:
            if os.path.getsize(path) != entry["bytes"]:
                return False
            size, digest = seal_file(pafs.LocalFileSystem(), path, sync=False, algorithm=PART_DIGEST)
        except (OSError, KeyError):
            return False
        return digest == entry.get(PART_DIGEST) and (not self.exact or entry.get("rows") == fragment.num_rows)

    # --------------------------------------------------------------- publishing
    def _publish(self) -> None:
        """Writes the manifest last and renames the staging directory to the key (under the lock)."""
        staging = self._staging
        if staging is None:  # only called with parts staged
            return
        files = []
        try:
            # Parts are not fsynced (unlike convert's shards): a part lost or torn by a power cut fails the
            # size, checksum or row check at its next read and is rewritten from the source, and
            # syncing 528 MB of parts at the end of the 2 M-row CSV epoch costs its wall time.
            for index in sorted(self._parts):
                entry = self._parts[index]
                files.append(
                    {
                        "path": entry["path"],
                        "rows": entry["rows"],
                        "bytes": entry["bytes"],
                        PART_DIGEST: entry[PART_DIGEST],
                    }
                )
            manifest = {
                "format": MANIFEST_FORMAT,
                "version": MANIFEST_VERSION,
                "data_format": "+".join(sorted({os.path.splitext(entry["path"])[1][1:] for entry in files})),
                "rows": sum(entry["rows"] for entry in files),
                "files": files,
                "cache": {"version": CACHE_FORMAT_VERSION, "key": self.key, "fragments": len(self.fragments)},
            }
            _remove(os.path.join(staging, _JOURNAL))
            write_manifest(pafs.LocalFileSystem(), staging, manifest)
            sync_directory(staging)
            try:
                os.rename(staging, self.published)
            except OSError:
                if not os.path.isfile(os.path.join(self.published, MANIFEST_NAME)):
                    raise
                shutil.rmtree(staging, ignore_errors=True)  # another run published the same key first
            sync_directory(self.root)
        except OSError as exc:
            self._disable(f"publishing the cache failed: {exc}")
            shutil.rmtree(staging, ignore_errors=True)
            self._staging = None
            return
        self._staging, self._parts = None, {}
        self._load_published()
        logger.info("cache: published %s (%d fragments, %d bytes)", self.published, len(files), self._bytes)

    def _load_published(self) -> None:
        path = os.path.join(self.published, MANIFEST_NAME)
        if not os.path.isfile(path):
            return
        try:
            manifest = load_manifest(pafs.LocalFileSystem(), path)
            names = {entry["path"]: entry for entry in manifest["files"]}
            parts = {int(match["index"]): names[name] for name in names if (match := _PART.fullmatch(name))}
            cache = manifest.get("cache")
            if len(parts) != len(names) or not isinstance(cache, dict) or cache.get("key") != self.key:
                raise CorruptFileError(describe("Not a cache manifest of this source", where=path))
        except CorruptFileError:
            logger.warning("cache: the manifest %s is not one of this cache: writing the cache again", path)
            shutil.rmtree(self.published, ignore_errors=True)
            return
        self._manifest = parts

    def _reopen_published(self, damaged: int) -> None:
        """The published cache becomes this run's staging directory without ``damaged``, to be rewritten."""
        manifest, self._manifest = self._manifest or {}, None
        staging = os.path.join(self.root, f".{self.key}.caching-{os.getpid()}-{secrets.token_hex(4)}")
        try:
            os.rename(self.published, staging)
            _remove(os.path.join(staging, MANIFEST_NAME))
            _remove(os.path.join(staging, manifest[damaged]["path"]))
            kept = [{"index": index, **entry} for index, entry in sorted(manifest.items()) if index != damaged]
            with open(os.path.join(staging, _JOURNAL), "w", encoding="utf-8") as journal:
                journal.writelines(json.dumps(entry) + "\n" for entry in kept)
        except OSError as exc:
            self._disable(f"cannot rewrite the damaged cache: {exc}")
            return
        self._claim(staging)
        self._parts = {entry["index"]: entry for entry in kept}
        self._bytes = sum(entry["bytes"] for entry in kept)


def _unclaim(claims: set[str]) -> None:
    """Lets a collected store's staging directories be adopted by another store of this process."""
    with _CLAIMED_LOCK:
        _CLAIMED.difference_update(claims)


def _abandoned(path: str, pid: int) -> bool:
    """Whether a staging directory's writer is gone: a dead process, or a store of this one that let it go."""
    if pid == os.getpid():
        with _CLAIMED_LOCK:
            return path not in _CLAIMED
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:  # alive, another user's
        return False
    return False


def _remove(path: str) -> None:
    """Best-effort removal of a file of ours: gone, or its directory unusable, is the degrade path's normal case."""
    try:
        os.remove(path)
    except OSError:
        pass


def cache_source(
    source: Source,
    directory: str | os.PathLike | None = None,
    *,
    max_bytes: int | None = None,
    mode: CacheMode = "always",
) -> Source:
    """``source`` read through the conversion cache, or (``mode="auto"`` deciding against it) as it is."""
    if isinstance(source, CachedSource):
        source = source.inner
    if mode not in ("always", "auto"):
        raise ArgumentError(describe("Invalid cache mode", expected="'always' or 'auto'", found=repr(mode)))
    if max_bytes is not None and (isinstance(max_bytes, bool) or not isinstance(max_bytes, int) or max_bytes < 0):
        raise ArgumentError(describe("Invalid max_bytes", expected="an integer >= 0 or None", found=repr(max_bytes)))
    root = os.fspath(directory) if directory is not None else default_directory()
    if mode == "auto" and not should_cache(source, root):
        return source
    return CachedSource(source, root, max_bytes)


def should_cache(source: Source, directory: str) -> bool:
    """``mode="auto"``: whether reading the source costs at least :data:`AUTO_MIN_RATIO` x reading the cache.

    Measured on the smallest non-empty fragment: its read from the source,
    then the same rows written to and read back from Parquet in a temporary
    file. A cache already published for this source is used without
    measuring. The decision and both costs are logged once.
    """
    key = cache_key(source)
    if os.path.isfile(os.path.join(directory, key, MANIFEST_NAME)):
        logger.info("cache(mode='auto'): a cache of this source exists in %s: using it", directory)
        return True
    sized = [fragment for fragment in source.fragments if fragment.num_rows > 0]
    if not sized:
        return False
    fragment = min(sized, key=lambda f: f.num_rows)
    probe = probe_cache(fragment)
    decision = probe.source_seconds >= AUTO_MIN_RATIO * probe.read_seconds
    logger.info(
        "cache(mode='auto'): %s: reading %s costs %.3g us/row from the source and %.3g us/row from the cache "
        "(written once at %.3g us/row), measured on %d rows; caching needs the source >= %.0fx slower",
        "caching" if decision else "not caching",
        fragment.path,
        1e6 * probe.source_seconds / probe.rows,
        1e6 * probe.read_seconds / probe.rows,
        1e6 * probe.write_seconds / probe.rows,
        probe.rows,
        AUTO_MIN_RATIO,
    )
    return decision


@dataclass(frozen=True)
class CacheProbe:
    """One fragment read from its source, and the same rows written to and read back from a cache part."""

    path: str
    rows: int
    source_seconds: float
    read_seconds: float  # the part read back, its checksum verified, as the cache serves it
    write_seconds: float


def probe_cache(fragment: Fragment) -> CacheProbe:
    """Times ``fragment.read()`` against writing its rows as a part and reading them back (a temporary file).

    The measurement of ``mode="auto"``; ``streamfeed doctor`` repeats it on several fragments.
    """
    started = time.perf_counter()
    chunk = fragment.read()
    source_seconds = time.perf_counter() - started
    with tempfile.TemporaryDirectory(prefix="streamfeed-cache-probe-") as scratch:
        path = os.path.join(scratch, f"probe.{part_format(chunk)}")
        started = time.perf_counter()
        _, _, digest = write_part(chunk, path)
        written = time.perf_counter()
        read_part(path, digest)
        read_seconds = time.perf_counter() - written
    return CacheProbe(fragment.path, max(1, chunk_len(chunk)), source_seconds, read_seconds, written - started)
