"""The error for storage that cannot be reached when a dataset opens.

Whichever client failed (pyarrow's own S3 client for a URI read without
``storage_options``, or fsspec's behind ``files/storage.py``), the user gets
one :class:`~streamfeed.errors.NetworkError` naming the URI, the endpoint
it tried, what the network said, and the setting that points it elsewhere:
``storage_options``' ``endpoint_url``, ``key`` and ``secret`` in Python;
``AWS_ENDPOINT_URL`` and the credentials' variables on the command line,
which has no ``storage_options`` (``cli_fix``).
"""

from __future__ import annotations

import os
import re
import urllib.parse

from ..errors import NetworkError, StorageError, describe, network_cause

_CLI_FIX = (
    "set AWS_ENDPOINT_URL to the storage's address (e.g. http://127.0.0.1:8333) and AWS_ACCESS_KEY_ID and "
    "AWS_SECRET_ACCESS_KEY to its credentials, or check the network"
)


def default_endpoint(scheme: str) -> str:
    """The endpoint an S3 client takes when none is given: the environment's, or AWS's (any other scheme: its own)."""
    if scheme in ("gs", "gcs"):
        return "Google's default (https://storage.googleapis.com, or STORAGE_EMULATOR_HOST)"
    if scheme not in ("s3", "s3a"):
        return f"the default of the {scheme}:// filesystem"
    for name in ("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"):
        if os.environ.get(name):
            return f"{os.environ[name]} (from {name})"
    return "AWS's default (s3.<region>.amazonaws.com)"


def pyarrow_endpoint(uri: str) -> str:
    """The endpoint pyarrow's client uses for ``uri``: its ``endpoint_override``, else :func:`default_endpoint`."""
    parts = urllib.parse.urlsplit(uri)
    override = urllib.parse.parse_qs(parts.query).get("endpoint_override")
    return override[0] if override else default_endpoint(parts.scheme)


def _part(message: str, name: str) -> str | None:
    """One part (``Expected``, ``Found``) of a message in :func:`~streamfeed.errors.describe`'s shape."""
    match = re.search(rf"\b{name}: (.*?)\.(?: (?:Expected|Found|Fix): |$)", message)
    return match.group(1) if match else None


def unreachable(uri: str, endpoint: str, error: BaseException, *, storage_options: bool) -> NetworkError | None:
    """The :class:`NetworkError` to raise for ``error`` at open, or None when the network is not what failed.

    The retries' account (the deadline, the tries) is kept from the error
    they raised. ``storage_options``: whether the URI was opened with them
    (the fix then names the keys to change; without them, the keyword to pass).
    """
    network = network_cause(error)
    if network is None:
        return None
    said = " ".join(str(network).split())
    if uri.startswith(("http://", "https://")):
        fix = "check the URL and the network; storage_options={'deadline': ...} sets how long a request retries"
    elif uri.startswith(("gs://", "gcs://")):
        fix = (
            "check storage_options['endpoint_url'] (and 'token' for the credentials) and the network; "
            "storage_options['deadline'] sets how long a request retries"
        )
    elif storage_options:
        fix = (
            "check storage_options['endpoint_url'] (and 'key', 'secret' for the credentials) and the network; "
            "storage_options['deadline'] sets how long a request retries"
        )
    else:
        fix = (
            "pass storage_options={'endpoint_url': 'http://host:port', 'key': ..., 'secret': ...} "
            "(or set AWS_ENDPOINT_URL and the AWS credentials), or check the network"
        )
    return NetworkError(
        describe(
            "The storage could not be reached",
            where=f"{uri} at endpoint {endpoint}",
            expected=_part(said, "Expected"),
            found=_part(said, "Found") or said[:600],
            fix=fix,
        ),
        cli_fix=_CLI_FIX,
    )


# the packages of the storage clients under fsspec and pyarrow, whose own exceptions a listing may raise
_CLIENTS = frozenset({"botocore", "aiobotocore", "s3fs", "fsspec", "aiohttp", "gcsfs", "adlfs"})


def from_storage_client(error: BaseException) -> bool:
    """Whether ``error`` is a storage client's own (botocore's ``NoCredentialsError`` is no ``OSError``)."""
    return isinstance(error, OSError) or type(error).__module__.split(".", 1)[0] in _CLIENTS


def no_credentials(uri: str, endpoint: str, error: BaseException) -> StorageError | None:
    """The :class:`StorageError` for a client that found no credentials to sign with, or None for another error."""
    if "Credentials" not in type(error).__name__:  # botocore's NoCredentialsError, PartialCredentialsError
        return None
    return StorageError(
        describe(
            "The storage's credentials are missing",
            where=f"{uri} at endpoint {endpoint}",
            found=f"{type(error).__name__}: {error}",
            fix=(
                "pass them: storage_options={..., 'key': ..., 'secret': ...} (or set AWS_ACCESS_KEY_ID and "
                "AWS_SECRET_ACCESS_KEY), or storage_options={..., 'anon': True} for a public bucket"
            ),
        ),
        cli_fix="set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY to the storage's credentials",
    )
