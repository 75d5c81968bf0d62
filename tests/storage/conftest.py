"""A real S3 server (SeaweedFS) for the storage tests, started once per session on loopback.

The server runs in a temporary directory and is stopped by pid (its whole
process group) when the session ends, whether or not the tests passed.
"""

from __future__ import annotations

import itertools
from typing import Iterator

import pytest
from _seaweed import SeaweedServer
from _tcp_proxy import TcpProxy

_buckets = itertools.count()


@pytest.fixture(scope="session")
def seaweed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SeaweedServer]:
    server = SeaweedServer(tmp_path_factory.mktemp("seaweedfs"))
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def bucket(seaweed: SeaweedServer) -> str:
    """A new, empty bucket for one test."""
    name = f"streamfeed-test-{next(_buckets)}"
    seaweed.client().create_bucket(Bucket=name)
    return name


@pytest.fixture
def proxy(seaweed: SeaweedServer) -> Iterator[TcpProxy]:
    """A loopback proxy in front of the S3 port, for counting requests and cutting the network."""
    with TcpProxy(seaweed.ports["s3"]) as running:
        yield running
