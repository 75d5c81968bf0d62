"""Retrying transient network errors with exponential backoff and jitter, up to a deadline.

A request to object storage that fails because the network did (refused,
reset, timed out, a 5xx "slow down") is tried again after a pause that
doubles each time (0.1 s, 0.2 s, ... capped at 5 s), each pause drawn from
its upper half so that many readers hitting one outage do not retry in step.
When the next pause would pass the deadline (counted from the first try),
the request fails with :class:`~streamfeed.errors.NetworkError`, naming the
object and the deadline: a network failure, never corrupt data, and never
skipped by ``on_error="skip"`` (``BadInputReport.reject`` re-raises it).
Anything else (a missing object, refused credentials) fails at once.

Requests that run together (a reader's pool) give up together: once one
has failed past its deadline, the others stop at their next retry
(``given_up``) rather than each retrying to its own deadline, so the error
reaches the user within the deadline plus one try's timeout (before, the
pool waited for them: 14.9-19.3 s at ``deadline=10``).
"""

from __future__ import annotations

import random
import time
from typing import Callable, TypeVar

from ..errors import NetworkError, StreamfeedError, describe

T = TypeVar("T")

FIRST_PAUSE = 0.1
MAX_PAUSE = 5.0

# Exception classes of the HTTP stacks under fsspec/s3fs (aiohttp, botocore, urllib3, http.client) that
# mean the network failed, matched by name so that none of those packages is imported here.
_TRANSIENT_NAMES = frozenset(
    {
        "EndpointConnectionError",
        "ConnectionClosedError",
        "ConnectTimeoutError",
        "ReadTimeoutError",
        "ResponseStreamingError",
        "HTTPClientError",
        "ProxyConnectionError",
        "ClientConnectionError",
        "ClientOSError",
        "ClientPayloadError",
        "ServerDisconnectedError",
        "ServerTimeoutError",
        "IncompleteRead",
        "RemoteDisconnected",
        "ProtocolError",
        "FSTimeoutError",
        "ProxyError",  # gcsfs's translation of a 502
    }
)
# TLS failures (an untrusted or wrong certificate, TLS spoken to a plain port): aiohttp's are ClientOSErrors,
# but trying again gives the same answer, so they fail at once (before, one was retried to the deadline)
_TLS_NAMES = frozenset({"ClientSSLError", "ClientConnectorCertificateError", "SSLError", "SSLCertVerificationError"})
# HTTP statuses that say "try again" on the exceptions that carry one (aiohttp's ``status``, gcsfs's ``code``)
_TRANSIENT_STATUSES = frozenset({408, 429, 500, 502, 503, 504})
_TRANSIENT_CODES = frozenset({"SlowDown", "InternalError", "ServiceUnavailable", "RequestTimeout", "500", "503"})


def is_transient(exc: BaseException) -> bool:
    """Whether ``exc`` (or what it was raised from) is the network failing rather than the request."""
    seen = 0
    current: BaseException | None = exc
    while current is not None and seen < 8:
        if isinstance(current, StreamfeedError):
            return False  # already decided, e.g. a NetworkError from a retried call below
        if any(cls.__name__ in _TLS_NAMES for cls in type(current).__mro__):
            return False
        if isinstance(current, (ConnectionError, TimeoutError)):
            return True
        if any(cls.__name__ in _TRANSIENT_NAMES for cls in type(current).__mro__):
            return True
        response = getattr(current, "response", None)
        if isinstance(response, dict) and str(response.get("Error", {}).get("Code")) in _TRANSIENT_CODES:
            return True
        status = getattr(current, "status", None) or getattr(current, "code", None)
        if type(current).__name__ in ("HttpError", "ClientResponseError") and status in _TRANSIENT_STATUSES:
            return True
        current = current.__cause__ or current.__context__
        seen += 1
    return False


def with_retries(
    action: Callable[[], T],
    *,
    what: str,
    deadline: float,
    on_retry: Callable[[], None] | None = None,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
    given_up: Callable[[float], bool] | None = None,
) -> T:
    """``action()``, retried on transient network errors until ``deadline`` seconds have passed.

    ``what`` names the object (and range) in the error; ``on_retry`` is
    called before each new try (the request counter's); ``sleep`` and
    ``clock`` are the pause and the time it is measured by;
    ``given_up(started)`` says whether a request that began at ``started``
    should stop retrying now (another one of its pool failed).
    """
    started = clock()
    attempt = 0
    while True:
        try:
            return action()
        except Exception as exc:
            if not is_transient(exc):
                raise
            pause = min(MAX_PAUSE, FIRST_PAUSE * 2**attempt) * random.uniform(0.5, 1.0)  # noqa: S311 - jitter
            waited = clock() - started
            if given_up is not None and given_up(started):
                raise _given_up(what, deadline, attempt, waited, exc) from exc
            if waited + pause > deadline:
                raise NetworkError(
                    describe(
                        "The storage could not be reached",
                        where=what,
                        expected=f"an answer within the deadline of {deadline:g} s",
                        found=f"{attempt + 1} tries over {waited:.1f} s; the last: {type(exc).__name__}: {exc}",
                        fix="check the network and the endpoint, or wait longer with storage_options={'deadline': ...}",
                    )
                ) from exc
            sleep(pause)
            if given_up is not None and given_up(started):  # another request failed during the pause
                raise _given_up(what, deadline, attempt, clock() - started, exc) from exc
            attempt += 1
            if on_retry is not None:
                on_retry()


def _given_up(what: str, deadline: float, attempt: int, waited: float, exc: BaseException) -> NetworkError:
    """The error of a request that stops retrying because another of its pool failed past the deadline.

    Marked ``given_up`` so that the pool does not take it for a new failure.
    """
    error = NetworkError(
        describe(
            "The storage could not be reached",
            where=what,
            expected=f"an answer within the deadline of {deadline:g} s",
            found=(
                f"another request failed past the deadline; this one after {attempt + 1} tries over "
                f"{waited:.1f} s, the last: {type(exc).__name__}: {exc}"
            ),
            fix="check the network and the endpoint, or wait longer with storage_options={'deadline': ...}",
        )
    )
    error.given_up = True  # type: ignore[attr-defined]
    return error
