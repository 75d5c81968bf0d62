"""read_sql(timeout=): a stuck statement fails with NetworkError naming the table (and, for a fragment, its key
range) instead of hanging: on the real PostgreSQL (ADBC and SQLAlchemy + psycopg) a table locked by another
connection and a query sleeping in pg_sleep, on SQLite a file locked by a writer and a query that never ends.

Without the timeout each stuck statement would wait for the lock holder, which lets go after LOCK_HELD_S
seconds: the read would then succeed and ``pytest.raises`` fail, so no test hangs and none measures time."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path
from typing import Callable

import psycopg
import pytest
from _postgres import PASSWORD, USER, PostgresServer

import streamfeed as sf
from streamfeed.errors import ArgumentError, NetworkError

LOCK_HELD_S = 20.0


def _alchemy(url: str) -> str:
    return url.replace("postgresql://", "postgresql+psycopg://", 1)


def _read_all(dataset: sf.Dataset) -> int:
    with dataset.batch(25).iter_epoch(0) as iterator:
        return sum(len(batch["id"]) for batch in iterator)


def _released_later(release: Callable[[], None]) -> threading.Timer:
    timer = threading.Timer(LOCK_HELD_S, release)
    timer.daemon = True
    timer.start()
    return timer


@pytest.mark.parametrize("through", ["adbc", "sqlalchemy"])
def test_a_fragment_blocked_by_a_lock_fails_naming_table_and_key_range(pg: PostgresServer, through: str):
    table = f"locked_{through}"
    pg.load(table, "id bigint PRIMARY KEY, x double precision", [(i, i / 2) for i in range(100)])
    url = pg.url if through == "adbc" else _alchemy(pg.url)
    dataset = sf.read_sql(url, table=table, key="id", fragment_rows=40, timeout=1.0)  # opened before the lock
    holder = psycopg.connect(f"host=127.0.0.1 port={pg.port} user={USER} password={PASSWORD} dbname=postgres")
    holder.execute(f"LOCK TABLE {table} IN ACCESS EXCLUSIVE MODE")  # held by the open transaction
    timer = _released_later(holder.rollback)
    try:
        with pytest.raises(NetworkError) as caught:
            _read_all(dataset)
    finally:
        timer.cancel()
        holder.rollback()
        holder.close()
    message = str(caught.value)
    assert "timeout=1.0" in message and table in message and "keys from" in message and "to 39" in message
    assert PASSWORD not in message
    assert _read_all(dataset) == 100  # the lock gone, the same source reads again


@pytest.mark.parametrize("through", ["adbc", "sqlalchemy"])
def test_a_sleeping_query_fails_at_open_naming_the_query(pg: PostgresServer, through: str):
    pg.load(f"sleepy_{through}", "id bigint PRIMARY KEY", [(i,) for i in range(10)])
    url = pg.url if through == "adbc" else _alchemy(pg.url)
    query = f"SELECT id FROM sleepy_{through}, pg_sleep({LOCK_HELD_S})"
    with pytest.raises(NetworkError) as caught:
        sf.read_sql(url, query=query, key="id", timeout=0.5)
    message = str(caught.value)
    assert "timeout=0.5" in message and "query" in message and "counting key 'id'" in message
    assert "statement timeout" in message


def _events(tmp_path: Path) -> Path:
    path = tmp_path / "events.db"
    with sqlite3.connect(path) as handle:
        handle.execute("CREATE TABLE events (id INTEGER PRIMARY KEY, x REAL)")
        handle.executemany("INSERT INTO events VALUES (?, ?)", [(i, i / 2) for i in range(100)])
    handle.close()
    return path


@pytest.mark.parametrize("through", ["stdlib", "sqlalchemy"])
def test_sqlite_fragment_blocked_by_a_writer_fails_naming_the_key_range(tmp_path: Path, through: str):
    path = _events(tmp_path)
    connection = str(path) if through == "stdlib" else f"sqlite+pysqlite:///{path}"
    dataset = sf.read_sql(connection, table="events", key="id", fragment_rows=30, timeout=0.5)
    writer = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    writer.execute("BEGIN EXCLUSIVE")  # readers of a rollback-journal database wait on it
    timer = _released_later(lambda: writer.execute("ROLLBACK"))
    try:
        with pytest.raises(NetworkError) as caught:
            _read_all(dataset)
    finally:
        timer.cancel()
        if writer.in_transaction:
            writer.execute("ROLLBACK")
        writer.close()
    message = str(caught.value)
    assert "timeout=0.5" in message and "events" in message and "keys from" in message
    assert _read_all(dataset) == 100


@pytest.mark.parametrize("through", ["stdlib", "sqlalchemy"])
def test_sqlite_query_that_never_ends_is_interrupted(tmp_path: Path, through: str):
    """The progress handler: a recursive query counting to 10^10 is interrupted at open."""
    path = _events(tmp_path)
    connection = str(path) if through == "stdlib" else f"sqlite+pysqlite:///{path}"
    query = "WITH RECURSIVE c(id) AS (SELECT 1 UNION ALL SELECT id + 1 FROM c WHERE id < 10000000000) SELECT id FROM c"
    with pytest.raises(NetworkError, match="interrupted") as caught:
        sf.read_sql(connection, query=query, key="id", timeout=0.5)
    assert "counting key 'id'" in str(caught.value)


def test_timeout_must_be_positive_seconds(tmp_path: Path):
    path = _events(tmp_path)
    for wrong in (0, -1.0, "5", True):
        with pytest.raises(ArgumentError, match="timeout"):
            sf.read_sql(path, table="events", key="id", timeout=wrong)  # type: ignore[arg-type]
    untimed = sf.read_sql(path, table="events", key="id")
    timed = sf.read_sql(path, table="events", key="id", timeout=3.0)
    assert timed.fingerprint() == untimed.fingerprint()  # a machine setting: the rows are the same
