"""The SQL tests' servers: one PostgreSQL cluster for the session (``_postgres.shared``), stopped by pid."""

from __future__ import annotations

from typing import Iterator

import pytest
from _postgres import PostgresServer, release, shared


@pytest.fixture(scope="session")
def pg() -> Iterator[PostgresServer]:
    server = shared()
    yield server
    release()
