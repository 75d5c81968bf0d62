"""Object storage given by ``storage_options``: fsspec behind pyarrow, with retries, request counts and a cache.

``storage_options`` (a dict) on ``read_parquet``, ``read_csv`` and
``read_tfrecord`` opens the URIs (``s3://bucket/prefix``, or any scheme
fsspec knows) through fsspec (s3fs for S3) instead of pyarrow's own client,
behind a :class:`pyarrow.fs.PyFileSystem` whose handler

* reads a byte range in **one request** (``cat_file(path, start, end)``);
  with Parquet's pre-buffering for remote files that is one request per row
  group (pyarrow's S3 client made one per column chunk, ~7 per row group
  measured);
* **retries** transient network errors with backoff and jitter up to
  ``deadline`` seconds per request, then raises ``NetworkError``
  (``files/retry.py``);
* **counts** requests, retries and bytes (:class:`StorageCounters`, shown by ``bench``);
* optionally **caches** fetched ranges on local disk (``files/range_cache.py``);
* takes each object's **version** at open (its ETag, and its version id on a
  versioned bucket) and makes every ranged GET carry it (``If-Match``, and
  ``VersionId``), checking the ETag the answer names too: an object replaced
  while it is read raises :class:`~streamfeed.errors.ObjectChangedError`
  naming both versions, never served mixed (the version is in
  ``file_stats``, so in the fingerprint too);
* bounds **every try in time**: a listing or HEAD gets ``read_timeout``
  seconds, a ranged GET ``read_timeout`` plus one second per MiB (a
  slow-loris endpoint trickling bytes never trips botocore's per-read
  timeout); a try cut so is retried like any network failure, and when one
  request fails past the deadline the others stop retrying and their GETs
  in flight are cancelled (a listing or HEAD in flight ends its try), so
  ``NetworkError`` comes within the deadline plus one timeout.

``http(s)://`` URLs always come here, with or without ``storage_options``
(pyarrow has no HTTP filesystem): one HEAD a file at open, each read one
ranged GET pinned to the ETag or Last-Modified it gave (``files/http.py``),
retried, counted and cached as S3's.

Accepted keys (anything else is refused, naming it): see
:data:`~streamfeed.files.options.STORAGE_KEYS` (``files/options.py``
checks them and builds the fsspec filesystem).
"""

from __future__ import annotations

import concurrent.futures
import functools
import os
import threading
import time
import urllib.parse
from dataclasses import dataclass, field
from typing import Any, Mapping

import pyarrow as pa
import pyarrow.fs as pafs

from ..errors import ArgumentError, NetworkError, ObjectChangedError, describe, require
from .options import (
    DEFAULT_READ_TIMEOUT,
    STORAGE_KEYS,
    all_http,
    gcs_files,
    http_files,
    is_http,
    positive,
    range_cache,
    refuse,
    s3_arguments,
)
from .range_cache import RangeCache
from .reach import default_endpoint
from .retry import with_retries

DEFAULT_DEADLINE = 60.0
DEFAULT_BLOCK = 8 << 20
# a ranged GET's try may take read_timeout plus this many seconds per byte: 1 s per MiB, so a 100 MB
# row group gets 130 s by default, and an endpoint sending less than 1 MiB/s is cut as a slow loris
SECONDS_PER_BYTE = 1.0 / (1 << 20)
# the fsspec calls pyarrow's FSSpecHandler makes on a read path, given the per-try timeout when they
# are fsspec's sync wrappers of coroutines (fsspec.asyn.sync cancels the coroutine when it runs out)
_TIMED_CALLS = frozenset({"info", "find", "isdir", "isfile", "exists", "ls", "cat_file"})


@dataclass
class StorageCounters:
    """Requests made to the storage (retries included), bytes fetched, and ranges served by the cache."""

    requests: int = 0
    retries: int = 0
    bytes: int = 0
    cache_hits: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add(self, requests: int = 0, retries: int = 0, nbytes: int = 0, cache_hits: int = 0) -> None:
        with self._lock:
            self.requests += requests
            self.retries += retries
            self.bytes += nbytes
            self.cache_hits += cache_hits

    def snapshot(self) -> dict[str, int]:
        with self._lock:
            return {
                "requests": self.requests,
                "retries": self.retries,
                "bytes": self.bytes,
                "cache_hits": self.cache_hits,
            }


@dataclass(frozen=True)
class _Settings:
    deadline: float
    block_size: int
    cache: RangeCache | None
    read_timeout: float = DEFAULT_READ_TIMEOUT
    scheme: str = "s3"
    endpoint: str = ""  # as said in errors: storage_options' endpoint_url, or the client's default


def open_storage(
    paths: Any, storage_options: Mapping[str, Any] | None, filesystem: pafs.FileSystem | None
) -> tuple[pafs.FileSystem | None, Any]:
    """The filesystem and paths a reader should use: unchanged without ``storage_options``.

    With them, every path must be a URI of one scheme; the result is the
    wrapped fsspec filesystem and the paths without their scheme.
    """
    if storage_options is None and (filesystem is not None or not all_http(paths)):
        return filesystem, paths
    storage_options = {} if storage_options is None else storage_options  # http(s):// always comes here
    if not isinstance(storage_options, Mapping):
        raise refuse("storage_options must be a dict", type(storage_options).__name__)
    unknown = sorted(set(storage_options) - set(STORAGE_KEYS))
    if unknown:
        raise refuse("Unknown storage_options", ", ".join(map(repr, unknown)))
    if filesystem is not None:
        raise ArgumentError(
            describe(
                "Both filesystem and storage_options were given",
                expected="one of them",
                fix="pass storage_options (streamfeed builds the filesystem) or a ready filesystem, not both",
            )
        )
    items = [paths] if isinstance(paths, (str, os.PathLike)) else list(paths)
    schemes = {os.fspath(item).split("://", 1)[0] if "://" in os.fspath(item) else "" for item in items}
    if len(schemes) != 1 or "" in schemes:
        raise ArgumentError(
            describe(
                "storage_options apply to URIs of one storage",
                expected="paths like 's3://bucket/prefix', all of one scheme",
                found=", ".join(sorted(repr(s or "a local path") for s in schemes)),
                fix="read local files without storage_options",
            )
        )
    scheme = schemes.pop()
    fsspec = require("fsspec", "http" if is_http(scheme) else "gcs" if scheme in ("gs", "gcs") else "s3")
    if is_http(scheme):
        fs = http_files(storage_options, items)
    elif scheme in ("gs", "gcs"):
        fs = gcs_files(storage_options)
    else:
        if scheme in ("s3", "s3a"):
            require("s3fs", "s3")
            arguments = s3_arguments(storage_options)
        else:
            arguments = {}
        arguments.update(storage_options.get("client") or {})
        fs = fsspec.filesystem(scheme, **arguments)
    if hasattr(fs, "retries"):
        fs.retries = 1  # s3fs's own retry loop (a class attribute, 5 tries): the retries are ours
    settings = _Settings(
        deadline=positive(storage_options, "deadline", DEFAULT_DEADLINE),
        block_size=int(positive(storage_options, "block_size", DEFAULT_BLOCK)),
        cache=range_cache(storage_options.get("cache")),
        read_timeout=positive(storage_options, "read_timeout", DEFAULT_READ_TIMEOUT),
        scheme=scheme,
        endpoint=str(storage_options.get("endpoint_url") or default_endpoint(scheme)),
    )
    handler = RetryingHandler(fs, settings)
    stripped = [fs._strip_protocol(os.fspath(item)) for item in items]
    return pafs.PyFileSystem(handler), stripped[0] if isinstance(paths, (str, os.PathLike)) else stripped


def storage_counters(filesystem: pafs.FileSystem | None) -> StorageCounters | None:
    """The request counters of a filesystem made by :func:`open_storage` (None for any other)."""
    handler = getattr(filesystem, "handler", None)
    return handler.counters if isinstance(handler, RetryingHandler) else None


def storage_location(filesystem: pafs.FileSystem | None, path: str) -> tuple[str, str] | None:
    """``(URI, endpoint)`` of a path of a filesystem made by :func:`open_storage` (None for any other), for errors."""
    handler = getattr(filesystem, "handler", None)
    if not isinstance(handler, RetryingHandler):
        return None
    if "://" in path:  # a URL (http(s)), whole: its endpoint is its origin
        parts = urllib.parse.urlsplit(path)
        return path, f"{parts.scheme}://{parts.netloc}"
    return f"{handler.settings.scheme}://{path}", handler.settings.endpoint


def object_version(filesystem: pafs.FileSystem | None, path: str) -> str | None:
    """The version of an object as :func:`open_storage`'s filesystem took it at open (None for any other).

    Its ETag, with the version id where the bucket keeps versions: what
    ``file_stats`` puts in the fingerprint, so that an overwrite within
    the same second, of the same size, still changes it.
    """
    handler = getattr(filesystem, "handler", None)
    if not isinstance(handler, RetryingHandler):
        return None
    etag, version_id = handler.version(path)
    return None if etag is None else f"{etag}{'@' + version_id if version_id else ''}"


def is_remote(filesystem: pafs.FileSystem | None) -> bool:
    """Whether reads go over a network (anything but the local filesystem)."""
    return filesystem is not None and not isinstance(filesystem, pafs.LocalFileSystem)


class RetryingHandler(pafs.FSSpecHandler):
    """pyarrow's fsspec bridge, with every call retried and counted and every read one ranged request."""

    def __init__(self, fs: Any, settings: _Settings) -> None:
        super().__init__(_Timed(fs, settings.read_timeout) if getattr(fs, "async_impl", False) else fs)
        # http(s)://: reads are pinned ranged GETs (files/http.py); one HEAD a file serves every info
        self._pinned: Any = getattr(fs, "pinned_range", None)
        self.settings = settings
        self.counters = StorageCounters()
        # when a request last failed past its deadline; requests begun before it stop retrying
        self._failed_at = float("-inf")
        self._wake = threading.Condition()
        self._in_flight: set[concurrent.futures.Future] = set()
        # size and version of each object, asked once: pyarrow opens a Parquet file again for every row
        # group, and the dataset's fingerprint already assumes the objects do not change while it is open
        self._infos: dict[str, dict] = {}

    def info(self, path: str) -> dict:
        if path not in self._infos:
            self._infos[path] = self.call(path, lambda: self.fs.info(path))
        return self._infos[path]

    def version(self, path: str) -> tuple[str | None, str | None]:
        """``(ETag, version id)`` of the object as taken at its first open (None where the store has none).

        An HTTP server's file without an ETag is versioned by its Last-Modified;
        a GCS object's version id is its generation.
        """
        info = self.info(path)
        etag = info.get("ETag") or info.get("etag") or info.get("Last-Modified")
        version_id = info.get("VersionId") or info.get("generation")
        return (str(etag) if etag else None), (str(version_id) if version_id else None)

    def get_file_info(self, paths: list[str]) -> list[pafs.FileInfo]:
        if self._pinned is None:
            return self.call(", ".join(paths[:3]), lambda: pafs.FSSpecHandler.get_file_info(self, paths))
        infos = []
        for path in paths:  # http(s): the HEAD taken at open, whose version pins the reads, gives the size too
            try:
                infos.append(self._create_file_info(path, self.info(path)))
            except FileNotFoundError:
                infos.append(pafs.FileInfo(path, pafs.FileType.NotFound))
        return infos

    def read_range(self, path: str, start: int, end: int) -> bytes:
        """Bytes ``start:end`` of the object as it was at open, in one request (not retried here).

        On S3 (s3fs) the GET carries ``If-Match: <ETag taken at open>`` (and
        the version id where there is one), and the ETag of the answer is
        compared too, for a store that ignores the condition; other fsspec
        filesystems read the range as it is (no version to check).
        """
        if self._pinned is not None:
            return self._pinned_read(path, start, end)
        etag, version_id = self.version(path)
        fs = self.fs
        if etag is None or not hasattr(fs, "_call_s3"):
            return fs.cat_file(path, start=start, end=end)
        bucket, key, _ = fs.split_path(path)
        arguments = {"Bucket": bucket, "Key": key, "Range": f"bytes={start}-{end - 1}", "IfMatch": etag}
        if version_id:
            arguments["VersionId"] = version_id

        async def get() -> tuple[str | None, bytes]:
            response = await fs._call_s3("get_object", **arguments)
            try:
                return response.get("ETag"), await response["Body"].read()
            finally:
                response["Body"].close()

        try:
            answered, data = self._run(get, self.settings.read_timeout + (end - start) * SECONDS_PER_BYTE)
        except OSError as exc:
            if _precondition_failed(exc):
                raise self._changed(path, f"ETag {etag}", "another (the store refused If-Match)") from exc
            raise
        if answered is not None and answered != etag:
            raise self._changed(path, f"ETag {etag}", str(answered))
        return data

    def _pinned_read(self, path: str, start: int, end: int) -> bytes:
        """A range of the version taken at open (``files/http.py``, ``files/gcs.py``), cut like S3's GETs."""
        from .http import VersionChanged

        info = self.info(path)
        timeout = self.settings.read_timeout + (end - start) * SECONDS_PER_BYTE
        try:
            return self._run(lambda: self._pinned(path, start, end, info), timeout)
        except VersionChanged as exc:
            raise self._changed(path, self.fs.version_text(info), exc.found) from None

    def _changed(self, path: str, taken: str, found: str) -> ObjectChangedError:
        current = found
        if found.startswith("another") and self._pinned is None:
            try:  # the new version, for the message only
                current = str(self.fs.info(path, refresh=True).get("ETag") or found)
            except Exception:  # noqa: BLE001 - the message is what matters; the error stands either way
                current = found
        return ObjectChangedError(
            describe(
                "An object was replaced while it was being read",
                where=path,
                expected=f"the version taken when the data was opened ({taken})",
                found=f"version {current}",
                fix=(
                    "do not overwrite objects while they are read: write a new prefix and open it, "
                    "or open the data again to read the new version from the start"
                ),
            )
        )

    def _run(self, coroutine: Any, timeout: float) -> Any:
        """``coroutine()`` on fsspec's loop, cut after ``timeout`` s, cancelled if another request fails."""
        import asyncio

        future = asyncio.run_coroutine_threadsafe(asyncio.wait_for(coroutine(), timeout), self.fs.loop)
        with self._wake:
            self._in_flight.add(future)
        try:
            return future.result()
        except concurrent.futures.CancelledError:
            raise _TryCut("cancelled: another request to the storage failed past its deadline") from None
        except TimeoutError as exc:
            raise _TryCut(f"no complete answer within {timeout:.1f} s (storage_options['read_timeout'])") from exc
        finally:
            with self._wake:
                self._in_flight.discard(future)

    def _pause(self, seconds: float) -> None:
        """A pause between tries, ended early when a request fails past its deadline."""
        with self._wake:
            self._wake.wait(seconds)

    def _failed(self) -> None:
        """One request failed past its deadline: the others' tries and retries stop (their NetworkError follows)."""
        with self._wake:
            self._failed_at = time.monotonic()
            in_flight = list(self._in_flight)
            self._wake.notify_all()
        for future in in_flight:
            future.cancel()

    def _given_up(self, started: float) -> bool:
        """Whether a request should stop retrying: one of its pool failed past the deadline, lately.

        Lately is within the last ``deadline`` seconds: requests begun
        before the failure stop at once, and those the pool begins after it
        (the epoch waits for fragments in order, so the failed one may not be
        next) get one try each instead of a deadline of their own. Later
        requests (an epoch begun after the network came back) retry as usual.
        """
        return time.monotonic() - self._failed_at < self.settings.deadline or self._failed_at >= started

    def call(self, what: str, action: Any) -> Any:
        self.counters.add(requests=1)

        def retried() -> None:
            self.counters.add(requests=1, retries=1)

        try:
            return with_retries(
                action,
                what=what,
                deadline=self.settings.deadline,
                on_retry=retried,
                sleep=self._pause,
                given_up=self._given_up,
            )
        except NetworkError as exc:
            if not getattr(exc, "given_up", False):
                self._failed()
            raise

    def get_file_info_selector(self, selector: pafs.FileSelector) -> list[pafs.FileInfo]:
        return self.call(selector.base_dir, lambda: pafs.FSSpecHandler.get_file_info_selector(self, selector))

    def open_input_file(self, path: str) -> pa.PythonFile:
        return pa.PythonFile(RangeReader(self, path, fetch_at_least=0), mode="r")

    def open_input_stream(self, path: str) -> pa.PythonFile:
        return pa.PythonFile(RangeReader(self, path, fetch_at_least=self.settings.block_size), mode="r")


class _TryCut(TimeoutError):
    """One try cut short (timed out, or cancelled): transient, so retried and at worst a NetworkError."""


class _Timed:
    """An async fsspec filesystem whose read-path calls (:data:`_TIMED_CALLS`) each get a timeout."""

    def __init__(self, fs: Any, timeout: float) -> None:
        self._fs = fs
        self._timeout = timeout

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._fs, name)
        if name in _TIMED_CALLS and hasattr(attribute, "__wrapped__"):  # fsspec's sync wrapper: takes timeout=
            return functools.partial(attribute, timeout=self._timeout)
        return attribute


class RangeReader:
    """A read-only file over one object: each read not served by the last block is one ranged request.

    ``fetch_at_least`` makes sequential streams fetch blocks rather than
    the small reads a decoder asks for; random access (Parquet) fetches
    exactly what pyarrow asks for (its pre-buffering already coalesces a
    row group's column chunks into one range).
    """

    def __init__(self, handler: RetryingHandler, path: str, fetch_at_least: int) -> None:
        info = handler.info(path)
        self._handler = handler
        self._path = path
        self._size = int(info["size"])
        self._version = str(
            info.get("ETag")
            or info.get("etag")
            or f"{self._size}:{info.get('LastModified') or info.get('Last-Modified')}"
        )
        self._fetch_at_least = fetch_at_least
        self._position = 0
        self._block_start = 0
        self._block = b""
        self.closed = False

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def writable(self) -> bool:
        return False

    def tell(self) -> int:
        return self._position

    def seek(self, offset: int, whence: int = 0) -> int:
        base = {0: 0, 1: self._position, 2: self._size}[whence]
        self._position = max(0, base + offset)
        return self._position

    def read(self, size: int = -1) -> bytes:
        start = self._position
        end = self._size if size is None or size < 0 else min(self._size, start + size)
        if start >= end:
            return b""
        block_end = self._block_start + len(self._block)
        if not (self._block_start <= start and end <= block_end):
            fetch_end = min(self._size, max(end, start + self._fetch_at_least))
            self._block, self._block_start = self._fetch(start, fetch_end), start
        self._position = end
        return self._block[start - self._block_start : end - self._block_start]

    def _fetch(self, start: int, end: int) -> bytes:
        handler = self._handler
        cache = handler.settings.cache
        key = cache.key(self._path, self._version, start, end) if cache is not None else ""
        if cache is not None:
            cached = cache.get(key)
            if cached is not None and len(cached) == end - start:
                handler.counters.add(cache_hits=1)
                return cached
        what = f"{self._path}, bytes {start}-{end}"
        data = handler.call(what, lambda: handler.read_range(self._path, start, end))
        handler.counters.add(nbytes=len(data))
        if cache is not None:
            cache.put(key, data)
        return data

    def close(self) -> None:
        self.closed = True
        self._block = b""


def _precondition_failed(exc: BaseException) -> bool:
    """Whether ``exc`` (s3fs's translation of botocore's error) is the store's 412 PreconditionFailed."""
    current: BaseException | None = exc
    for _ in range(8):
        if current is None:
            return False
        response = getattr(current, "response", None)
        if isinstance(response, dict):
            code = str(response.get("Error", {}).get("Code"))
            status = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
            if code in ("PreconditionFailed", "412") or status == 412:
                return True
        current = current.__cause__ or current.__context__
    return False
