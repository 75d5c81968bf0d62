"""Real servers for the storage tests, each started once per session on loopback, as the tests ask for them.

An S3 server (SeaweedFS), an HTTP server with ranges and injected faults
(``_http_server.py``) and a GCS emulator (``_gcs_emulator.py``). Each runs in a temporary directory and is stopped by
pid (its whole process group) when the session ends, whether or not the
tests passed.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Iterator

import pytest
from _gcs_emulator import GcsEmulator
from _http_server import HttpServer
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


@pytest.fixture(scope="session")
def http_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpServer]:
    with HttpServer(tmp_path_factory.mktemp("http")) as server:
        yield server


@pytest.fixture
def web(http_server: HttpServer) -> Iterator[tuple[HttpServer, Path, str]]:
    """``(server, directory, its URL)``: a new directory served with no faults (and an empty log) for one test."""
    directory = http_server.root / f"t{next(_buckets)}"
    directory.mkdir()
    http_server.configure()
    yield http_server, directory, f"{http_server.url}/{directory.name}"
    http_server.configure()


@pytest.fixture(scope="session")
def gcs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GcsEmulator]:
    with GcsEmulator(tmp_path_factory.mktemp("gcs")) as emulator:
        yield emulator


@pytest.fixture
def gcs_proxy(gcs: GcsEmulator) -> Iterator[TcpProxy]:
    """A loopback proxy in front of the emulator: its request lines, and outages."""
    with TcpProxy(gcs.port) as running:
        yield running
