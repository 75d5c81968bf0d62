"""The retry loop on its own: which errors are retried, the backoff with jitter, the deadline.

A fake clock that the fake sleep advances makes the schedule exact, so the
pauses themselves are checked, not how long a test took.
"""

from __future__ import annotations

import pytest

import streamfeed as sf
from streamfeed.files.retry import FIRST_PAUSE, MAX_PAUSE, is_transient, with_retries


class FakeTime:
    def __init__(self) -> None:
        self.now = 0.0
        self.pauses: list[float] = []

    def sleep(self, seconds: float) -> None:
        self.pauses.append(seconds)
        self.now += seconds

    def clock(self) -> float:
        return self.now


def failing(times: int, error: Exception):
    calls = []

    def action() -> str:
        calls.append(1)
        if len(calls) <= times:
            raise error
        return "data"

    return action, calls


def test_transient_errors_are_retried_with_doubling_jittered_pauses():
    fake = FakeTime()
    action, calls = failing(6, ConnectionResetError(104, "Connection reset by peer"))
    retried = []
    result = with_retries(
        action, what="b/k", deadline=60, on_retry=lambda: retried.append(1), sleep=fake.sleep, clock=fake.clock
    )
    assert result == "data" and len(calls) == 7 and len(retried) == 6
    for attempt, pause in enumerate(fake.pauses):
        full = min(MAX_PAUSE, FIRST_PAUSE * 2**attempt)
        assert full / 2 <= pause <= full


def test_the_deadline_ends_the_retries_with_a_network_error_naming_the_object():
    fake = FakeTime()
    action, calls = failing(1000, ConnectionRefusedError(111, "Connection refused"))
    with pytest.raises(sf.NetworkError) as excinfo:
        with_retries(action, what="bucket/data/a.parquet, bytes 0-10", deadline=20, sleep=fake.sleep, clock=fake.clock)
    assert sum(fake.pauses) <= 20 and len(calls) == len(fake.pauses) + 1
    message = str(excinfo.value)
    assert "bucket/data/a.parquet" in message and "deadline of 20 s" in message and "ConnectionRefusedError" in message
    assert isinstance(excinfo.value.__cause__, ConnectionRefusedError)


@pytest.mark.parametrize("error", [FileNotFoundError("b/k"), PermissionError("denied"), ValueError("bad")])
def test_other_errors_are_not_retried(error):
    fake = FakeTime()
    action, calls = failing(1, error)
    with pytest.raises(type(error)):
        with_retries(action, what="b/k", deadline=60, sleep=fake.sleep, clock=fake.clock)
    assert len(calls) == 1 and fake.pauses == []


def test_network_errors_of_the_http_stacks_are_transient():
    from aiohttp import ClientPayloadError, ServerDisconnectedError
    from botocore.exceptions import ClientError, EndpointConnectionError, ReadTimeoutError

    assert is_transient(EndpointConnectionError(endpoint_url="http://127.0.0.1:9"))
    assert is_transient(ReadTimeoutError(endpoint_url="http://127.0.0.1:9"))
    assert is_transient(ClientPayloadError("Response payload is not completed"))
    assert is_transient(ServerDisconnectedError())
    wrapped = OSError("read failed")
    wrapped.__cause__ = ConnectionResetError()
    assert is_transient(wrapped)
    slow_down = ClientError({"Error": {"Code": "SlowDown", "Message": "slow down"}}, "GetObject")
    assert is_transient(slow_down)
    assert not is_transient(ClientError({"Error": {"Code": "AccessDenied", "Message": "no"}}, "GetObject"))
    assert not is_transient(sf.NetworkError("already retried"))
