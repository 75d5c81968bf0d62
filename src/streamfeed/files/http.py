"""HTTP(S) objects for the file readers: one HEAD at open, then ranged GETs pinned to the version it saw.

fsspec's ``HTTPFileSystem`` (aiohttp), with the calls that ``files/storage.py``
makes on a read path redone so that

* ``info`` is one ``HEAD`` (``Accept-Encoding: identity``, so the size is the
  file's) whose ``ETag`` and ``Last-Modified`` are the object's version: they
  go into the fingerprint (``object_version``) and pin every read. A server
  that refuses ``HEAD`` (405/501) is asked a ``GET`` of byte 0 instead. A 404
  is a missing file; a 5xx, 429 or 408 is transient (:class:`HttpBusy`, a
  ``ConnectionError``, retried to the deadline by ``files/retry.py``) — fsspec
  turned all of them into ``FileNotFoundError``, so an unreachable server read
  as a missing file;
* a read is one ``GET`` with ``Range`` and ``If-Match: <ETag>`` (a weak ETag,
  which ``If-Match`` never matches, or none: ``If-Unmodified-Since:
  <Last-Modified>``). The answer must be a 206 for exactly that range of an
  object of the size seen at open, naming the same ETag and Last-Modified
  (checked too, for a server that ignores the conditions): else
  :class:`VersionChanged` (412, 404, 416, another validator or size), which
  the storage layer raises as ``ObjectChangedError`` — never a stale or
  mixed byte. A server without either validator is refused at open: nothing
  could tell an overwrite. Last-Modified is whole seconds, so where a server
  gives no ETag a same-size overwrite within the second of the last one
  cannot be seen (any static file server gives an ETag);
* HTTP has no listing: a URL ending in ``/`` (a directory) and a glob are
  refused naming the fix (list the files' URLs); fsspec would have scraped
  the links of an HTML page.

Request headers (``storage_options={"headers": {...}}``, e.g. a bearer
token) are sent with every request and never said: the errors here name
the URL and the status only.
"""

from __future__ import annotations

import email.utils
from typing import Any, Mapping

import aiohttp
from fsspec.implementations.http import HTTPFileSystem

from ..errors import ArgumentError, NotFoundError, StorageError, describe

# statuses that say "try again": the server is busy, restarting or timed out (RFC 9110)
_TRANSIENT = frozenset({408, 425, 429, 500, 502, 503, 504})
_GONE = frozenset({404, 410})


class HttpBusy(ConnectionError):
    """A status that says to try again (5xx, 429, 408): transient, so retried to the deadline."""


class HttpRefused(PermissionError):
    """401 or 403: the server refused the request (the headers, e.g. a token, are not named)."""


class VersionChanged(Exception):
    """The object answered is not the version taken at open; ``found`` says what was found instead."""

    def __init__(self, found: str) -> None:
        super().__init__(found)
        self.found = found


def is_http(scheme: str) -> bool:
    return scheme in ("http", "https")


def no_listing(url: str) -> ArgumentError:
    """The error for a directory URL or a glob: HTTP cannot list."""
    return ArgumentError(
        describe(
            "An HTTP(S) URL cannot be listed",
            where=url,
            expected="the URL of a file (HTTP has no directory listing, so no directory URL or glob)",
            fix="pass the list of the files' URLs, e.g. [f'https://host/data/part-{i}.parquet' for i in range(8)]",
        )
    )


def _status(response: aiohttp.ClientResponse, url: str) -> None:
    """Raises for an answer that is not a success: missing, busy (transient) or refused."""
    status = response.status
    if status in _GONE:
        raise NotFoundError(describe(f"HTTP {status} from {url}"))
    if status in _TRANSIENT:
        raise HttpBusy(f"HTTP {status} {response.reason or ''} from {url}".strip())
    if status in (401, 403):
        raise HttpRefused(f"HTTP {status} {response.reason or ''} from {url} (check storage_options['headers'])")
    if status >= 400:
        raise StorageError(describe(f"HTTP {status} {response.reason or ''} from {url}"))


class HttpFiles(HTTPFileSystem):
    """fsspec's HTTP filesystem with a HEAD-only ``info``, no listing, and :meth:`pinned_range`."""

    def __init__(self, *, headers: Mapping[str, str], connect_timeout: float, read_timeout: float, **client: Any):
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=connect_timeout, sock_read=read_timeout)
        client_kwargs = {"timeout": timeout, **client.pop("client_kwargs", {})}
        super().__init__(client_kwargs=client_kwargs, skip_instance_cache=True, headers=dict(headers), **client)

    def _headers(self, **extra: str) -> dict[str, str]:
        return {**self.kwargs.get("headers", {}), "Accept-Encoding": "identity", **extra}

    @staticmethod
    def version_text(info: Mapping[str, Any]) -> str:
        """The version taken at open, in words (for messages): ``ETag "..."`` or ``Last-Modified ...``."""
        if info.get("ETag"):
            return f"ETag {info['ETag']}"
        return f"Last-Modified {info.get('Last-Modified')}"

    def _request_options(self) -> dict[str, Any]:
        return {name: value for name, value in self.kwargs.items() if name != "headers"}

    async def _info(self, url: str, **kwargs: Any) -> dict[str, Any]:
        if url.split("?", 1)[0].endswith("/"):
            raise no_listing(url)
        session = await self.set_session()
        async with session.head(
            self.encode_url(url), headers=self._headers(), allow_redirects=True, **self._request_options()
        ) as response:
            if response.status in (405, 501):  # HEAD not allowed: the first byte's GET says the same
                return await self._info_by_get(url)
            _status(response, url)
            headers = response.headers
            size = headers.get("Content-Length")
        if size is None:
            return await self._info_by_get(url)
        return _info(url, int(size), headers)

    async def _info_by_get(self, url: str) -> dict[str, Any]:
        session = await self.set_session()
        async with session.get(
            self.encode_url(url), headers=self._headers(Range="bytes=0-0"), **self._request_options()
        ) as response:
            _status(response, url)
            total = response.headers.get("Content-Range", "").rsplit("/", 1)[-1]
            if response.status != 206 or not total.isdigit():
                raise StorageError(
                    describe(f"HTTP {response.status} from {url}: the server does not serve byte ranges")
                )
            return _info(url, int(total), response.headers)

    async def _ls(self, url: str, detail: bool = True, **kwargs: Any) -> list:
        raise no_listing(url)

    async def _find(self, path: str, **kwargs: Any) -> list:
        raise no_listing(path)

    async def _glob(self, path: str, **kwargs: Any) -> list:
        raise no_listing(path)

    async def _isdir(self, path: str) -> bool:
        raise no_listing(path)  # asked only to list (pyarrow's selector): a file is never a directory here

    async def pinned_range(self, url: str, start: int, end: int, info: Mapping[str, Any]) -> bytes:
        """Bytes ``start:end`` of the object as ``info`` (taken at open) saw it, in one ranged GET."""
        etag, modified, size = info.get("ETag"), info.get("Last-Modified"), int(info["size"])
        conditions = {"Range": f"bytes={start}-{end - 1}"}
        if etag and not etag.startswith("W/"):
            conditions["If-Match"] = etag
        elif modified:
            conditions["If-Unmodified-Since"] = modified
        session = await self.set_session()
        async with session.get(
            self.encode_url(url), headers=self._headers(**conditions), **self._request_options()
        ) as response:
            if response.status == 412:
                raise VersionChanged("another (the server refused the condition: 412 Precondition Failed)")
            if response.status in _GONE:
                raise VersionChanged(f"none: the server answers {response.status} (the file was removed)")
            if response.status == 416:
                raise VersionChanged("a shorter file (416 Range Not Satisfiable)")
            _status(response, url)
            headers = response.headers
            answered = _check_answer(response.status, headers, start, end, size, url)
            for name, taken in (("ETag", etag), ("Last-Modified", modified)):
                if taken and headers.get(name) and headers[name] != taken:
                    raise VersionChanged(f"{name} {headers[name]}")
            if answered is not None:
                raise VersionChanged(answered)
            data = await response.read()
        if len(data) != end - start:  # a body cut short that aiohttp let through: the network's fault
            raise HttpBusy(f"{len(data)} of {end - start} bytes from {url}")
        return data


def _check_answer(status: int, headers: Mapping[str, str], start: int, end: int, size: int, url: str) -> str | None:
    """What is wrong with a ranged GET's answer as a version (None: nothing); raises if it is no range at all."""
    if status == 200 and start == 0 and end == size and headers.get("Content-Length") == str(size):
        return None  # the whole object, asked as a range: a server may answer 200
    if status != 206:
        raise StorageError(
            describe(
                f"HTTP {status} from {url} to a Range request: the server does not serve byte ranges "
                "(streamfeed reads a file by ranges; serve it from a server that does, as any static file server does)"
            )
        )
    unit, _, spec = headers.get("Content-Range", "").partition(" ")
    span, _, total = spec.partition("/")
    if unit != "bytes" or span != f"{start}-{end - 1}":
        raise StorageError(
            describe(
                f"HTTP 206 from {url} with Content-Range {headers.get('Content-Range')!r}, not bytes {start}-{end - 1}"
            )
        )
    if total not in ("*", str(size)):
        return f"a file of {total} bytes, not {size}"
    return None


def _info(url: str, size: int, headers: Mapping[str, str]) -> dict[str, Any]:
    """fsspec's info dict for a file, with its validators; refused when it has none (nothing could pin it)."""
    info: dict[str, Any] = {"name": url, "size": size, "type": "file"}
    for name in ("ETag", "Last-Modified"):
        if headers.get(name):
            info[name] = headers[name]
    if not info.keys() & {"ETag", "Last-Modified"}:
        raise ArgumentError(
            describe(
                "The HTTP server gives no version of the file",
                where=url,
                expected="an ETag or a Last-Modified header, which every read is pinned to",
                found="neither: a file replaced while it is read could not be told from the one opened",
                fix="serve the files from a server that sends ETag or Last-Modified (any static file server does)",
            )
        )
    try:  # the modification time pyarrow's file info shows; a malformed date leaves it out
        info["mtime"] = email.utils.parsedate_to_datetime(info["Last-Modified"])
    except (KeyError, TypeError, ValueError):
        pass
    return info
