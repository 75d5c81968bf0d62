"""A slow-loris endpoint: answers that arrive one byte at a time must not hang a read past its deadline.

A loopback proxy trickles SeaweedFS's answers (one byte per 0.2 s, so a
row group would take hours). Every try of a request is cut after
``read_timeout`` seconds, the tries stop at the ``deadline``, and the
other requests in flight stop with the first ``NetworkError``: the error
must come within the deadline plus one timeout. The read runs in a thread
joined with a generous bound (the deadline plus the timeout plus slack for
a loaded machine), so a hang fails the test instead of hanging the suite.
"""

from __future__ import annotations

import threading

import numpy as np
import pytest
from _storage_data import numbered_table, parquet_bytes, storage_options

import streamfeed as sf

DEADLINE, TIMEOUT, SLACK = 6.0, 3.0, 30.0  # a timeout of 3 s: a loaded machine answers a HEAD in time


@pytest.fixture
def uri(seaweed, bucket):
    client = seaweed.client()
    for index in range(2):
        table = numbered_table(index * 10_000, 10_000, features=8)
        client.put_object(Bucket=bucket, Key=f"data/part-{index}.parquet", Body=parquet_bytes(table, 500))
    return f"s3://{bucket}/data/"


def _bounded(action) -> BaseException | None:
    """What ``action()`` raised (None if nothing), failing the test if it is still running after the bound."""
    raised: list[BaseException] = []

    def run() -> None:
        try:
            action()
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            raised.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(DEADLINE + TIMEOUT + SLACK)
    assert not thread.is_alive(), f"the read still hangs {DEADLINE + TIMEOUT + SLACK:g} s after the trickle began"
    return raised[0] if raised else None


def _options(proxy) -> dict:
    return storage_options(proxy.endpoint, deadline=DEADLINE, read_timeout=TIMEOUT, connect_timeout=TIMEOUT)


@pytest.mark.parametrize("on_error", ["raise", "skip"])
def test_a_trickling_endpoint_mid_epoch_raises_network_error_by_the_deadline(uri, proxy, on_error):
    data = sf.read_parquet(uri, storage_options=_options(proxy), on_error=on_error)

    def epoch() -> None:
        with data.batch(500).iter_epoch(0) as stream:
            for index, batch in enumerate(stream):
                assert len(batch["id"]) == 500
                if index == 1:
                    proxy.trickle(0.2)

    error = _bounded(epoch)
    proxy.stop_trickle()
    assert isinstance(error, sf.NetworkError), repr(error)
    assert "data/part-" in str(error) and f"deadline of {DEADLINE:g} s" in str(error)
    assert data.report.entries == []


def test_a_trickling_endpoint_at_open_raises_network_error_by_the_deadline(uri, proxy):
    proxy.trickle(0.2)
    error = _bounded(lambda: sf.read_parquet(uri, storage_options=_options(proxy), on_error="skip"))
    proxy.stop_trickle()
    assert isinstance(error, sf.NetworkError), repr(error)
    assert f"deadline of {DEADLINE:g} s" in str(error)


def test_reads_work_again_once_the_endpoint_is_fast(uri, proxy):
    """The trickle mode itself: off, the same proxy serves the exact rows."""
    data = sf.read_parquet(uri, storage_options=_options(proxy))
    with data.batch(1000).iter_epoch(0) as stream:
        ids = np.concatenate([batch["id"] for batch in stream])
    assert sorted(ids.tolist()) == list(range(20_000))
