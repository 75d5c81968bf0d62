"""``storage_options`` checked and turned into an fsspec filesystem: S3's (s3fs) and HTTP(S)'s (``files/http.py``).

Every key is checked by name and value here (a typo or a wrong type is an
``ArgumentError`` naming it, never ignored); ``files/storage.py`` wraps the
filesystem made here in its retrying, counting, caching handler.
"""

from __future__ import annotations

import os
import urllib.parse
from typing import Any, Mapping

from ..errors import ArgumentError, describe, require
from .range_cache import RangeCache

STORAGE_KEYS = {
    "endpoint_url": "the storage's URL, e.g. 'http://127.0.0.1:8333' (default: the provider's, or AWS_ENDPOINT_URL)",
    "key": "access key id",
    "secret": "secret access key",
    "token": "session token",
    "region": "region name",
    "anon": "True for anonymous access to public buckets",
    "deadline": "seconds one request may keep retrying transient network errors (default 60)",
    "connect_timeout": "seconds to wait for a connection (default 5)",
    "read_timeout": "seconds one try may take (default 30; a ranged GET one more per MiB)",
    "block_size": "bytes fetched at least per request of a sequential stream (CSV, TFRecord; default 8 MiB)",
    "cache": "{'dir': local directory, 'max_bytes': bound} to keep fetched ranges on local disk",
    "client": "a dict of further keyword arguments for the fsspec filesystem (e.g. s3fs's)",
    "headers": "http(s):// only: request headers sent with every request (e.g. Authorization), never shown",
    "project": "gs:// only: the Google Cloud project",
}
# the keys that mean something for http(s):// URLs (the others name an S3 endpoint and its credentials)
_HTTP_KEYS = frozenset({"headers", "deadline", "connect_timeout", "read_timeout", "block_size", "cache", "client"})
# gs://: 'token' is gcsfs's (a service account's JSON file or dict, 'google_default', 'anon', ...)
_GCS_KEYS = frozenset({"endpoint_url", "token", "anon", "project"}) | _HTTP_KEYS - {"headers"}
DEFAULT_READ_TIMEOUT = 30.0


def refuse(what: str, found: str) -> ArgumentError:
    return ArgumentError(
        describe(
            what,
            expected="a dict with keys among " + ", ".join(STORAGE_KEYS),
            found=found,
            fix="see the storage_options keys in the reader's docstring",
        )
    )


def positive(options: Mapping[str, Any], name: str, default: float) -> float:
    value = options.get(name, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        raise refuse(f"storage_options[{name!r}] must be a positive number", repr(value))
    return float(value)


def range_cache(spec: Any) -> RangeCache | None:
    if spec is None:
        return None
    if not isinstance(spec, Mapping) or set(spec) != {"dir", "max_bytes"}:
        raise refuse("storage_options['cache'] must name a directory and a bound", repr(spec))
    if isinstance(spec["max_bytes"], bool) or not isinstance(spec["max_bytes"], int) or spec["max_bytes"] <= 0:
        raise refuse("storage_options['cache']['max_bytes'] must be a positive integer", repr(spec["max_bytes"]))
    return RangeCache(spec["dir"], spec["max_bytes"])


def s3_arguments(options: Mapping[str, Any]) -> dict[str, Any]:
    """s3fs's keyword arguments: retries are ours (one try each in s3fs and botocore)."""
    client_kwargs = {"region_name": options["region"]} if "region" in options else {}
    if "endpoint_url" in options:
        client_kwargs["endpoint_url"] = options["endpoint_url"]
    arguments: dict[str, Any] = {
        "client_kwargs": client_kwargs,
        "config_kwargs": {
            "connect_timeout": positive(options, "connect_timeout", 5.0),
            "read_timeout": positive(options, "read_timeout", DEFAULT_READ_TIMEOUT),
            "retries": {"total_max_attempts": 1},
        },
        "skip_instance_cache": True,  # a new listing (and so new ETags) for every dataset opened
    }
    for name in ("key", "secret", "token", "anon"):
        if name in options:
            arguments[name] = options[name]
    return arguments


def is_http(scheme: str) -> bool:
    return scheme in ("http", "https")


def redacted(url: str) -> str:
    """``url`` with any ``user:password@`` replaced by ``***@``, for messages."""
    parts = urllib.parse.urlsplit(url)
    if "@" not in parts.netloc:
        return url
    return urllib.parse.urlunsplit(parts._replace(netloc="***@" + parts.netloc.rsplit("@", 1)[1]))


def all_http(paths: Any) -> bool:
    """Whether ``paths`` are all http(s):// URLs: read through :class:`HttpFiles` with or without options
    (pyarrow has no HTTP filesystem; fsspec's own would neither retry nor pin a version)."""
    items = [paths] if isinstance(paths, (str, os.PathLike)) else list(paths)
    return bool(items) and all(is_http(os.fspath(item).split("://", 1)[0]) for item in items)


def http_files(options: Mapping[str, Any], urls: list[Any]) -> Any:
    """The HTTP filesystem for ``urls``: S3's keys are refused (they would be ignored), and so are
    credentials in a URL (``user:password@``), which every error and state would show."""
    require("aiohttp", "http")
    from .http import HttpFiles  # aiohttp's: imported only for http(s):// URLs

    other = sorted(set(options) - _HTTP_KEYS)
    if other:
        raise refuse(f"storage_options {', '.join(map(repr, other))} do not apply to http(s):// URLs", repr(other))
    for url in urls:
        if "@" in urllib.parse.urlsplit(os.fspath(url)).netloc:
            raise ArgumentError(
                describe(
                    "An HTTP(S) URL holds credentials",
                    where=redacted(os.fspath(url)),
                    expected="a URL without user:password@ (every error, log and state names the URL)",
                    fix="pass them as a header: storage_options={'headers': {'Authorization': ...}}",
                )
            )
    headers = options.get("headers") or {}
    if not isinstance(headers, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in headers.items()
    ):
        raise refuse("storage_options['headers'] must be a dict of strings", type(headers).__name__)
    return HttpFiles(
        headers=headers,
        connect_timeout=positive(options, "connect_timeout", 5.0),
        read_timeout=positive(options, "read_timeout", DEFAULT_READ_TIMEOUT),
        **dict(options.get("client") or {}),
    )


def gcs_files(options: Mapping[str, Any]) -> Any:
    """The gs:// filesystem (``files/gcs.py``): gcsfs's core class, its retries ours, reads pinned to generations."""
    require("gcsfs", "gcs")
    from .gcs import GcsFiles  # gcsfs's: imported only for gs:// URIs

    other = sorted(set(options) - _GCS_KEYS)
    if other:
        raise refuse(f"storage_options {', '.join(map(repr, other))} do not apply to gs:// URIs", repr(other))
    arguments: dict[str, Any] = {"token": "anon" if options.get("anon") else options.get("token")}
    for name in ("endpoint_url", "project"):
        if name in options:
            arguments[name] = options[name]
    return GcsFiles(
        connect_timeout=positive(options, "connect_timeout", 5.0),
        read_timeout=positive(options, "read_timeout", DEFAULT_READ_TIMEOUT),
        **arguments,
        **dict(options.get("client") or {}),
    )
