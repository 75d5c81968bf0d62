"""Contract-test factories for read_sql: SQLite files written by sqlite3, PostgreSQL tables loaded by psql \\copy."""

from __future__ import annotations

import sqlite3
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "sources" / "sql"))
from _postgres import shared  # noqa: E402  (the SQL tests' server helper, one per test process)

from streamfeed.readers_sql import read_sql  # noqa: E402


def _sqlite(path: Path, ids: np.ndarray, key_text: bool = False) -> Path:
    database = path / "data.db"
    with sqlite3.connect(database) as handle:
        handle.execute("CREATE TABLE rows (k TEXT, id INTEGER PRIMARY KEY, x REAL, name TEXT)")
        order = np.random.default_rng(3).permutation(ids)  # inserted out of key order: the key orders them
        handle.executemany(
            "INSERT INTO rows VALUES (?, ?, ?, ?)", [(f"k{i:05d}", int(i), i / 2, f"n{i}") for i in order]
        )
    handle.close()
    return database


def sql_sqlite_table(tmp_path: Path):
    """A SQLite table of 700 rows keyed by its integer primary key, fragments of 97 rows."""
    ids = np.arange(700)
    return read_sql(_sqlite(tmp_path, ids), table="rows", key="id", fragment_rows=97), ids


def sql_sqlite_query_text_key(tmp_path: Path):
    """A query over SQLite keyed by a text column, two columns served, fragments of 61 rows."""
    ids = np.arange(3, 503)
    database = _sqlite(tmp_path, ids)
    query = "SELECT k, id, x FROM rows WHERE id >= 3"
    return read_sql(f"sqlite:///{database}", query=query, key="k", columns=["id", "x"], fragment_rows=61), ids


def sql_postgres_table(tmp_path: Path):
    """A PostgreSQL table of 650 rows loaded with psql \\copy, fragments of 83 rows."""
    server = shared()
    ids = np.arange(650)
    server.load("contract", "id bigint PRIMARY KEY, x double precision", [(int(i), i / 2) for i in ids[::-1]])
    return read_sql(server.url, table="contract", key="id", fragment_rows=83), ids


def sql_postgres_sqlalchemy(tmp_path: Path):
    """The same PostgreSQL server read through SQLAlchemy + psycopg (a URL of another scheme), fragments of 71."""
    server = shared()
    ids = np.arange(5, 605)
    server.load("contract_alchemy", "id bigint PRIMARY KEY, x double precision", [(int(i), i / 2) for i in ids[::-1]])
    url = server.url.replace("postgresql://", "postgresql+psycopg://", 1)
    return read_sql(url, table="contract_alchemy", key="id", fragment_rows=71), ids


def sql_sqlite_sqlalchemy(tmp_path: Path):
    """A SQLite file read through SQLAlchemy's pysqlite dialect, fragments of 89 rows."""
    ids = np.arange(640)
    return read_sql(f"sqlite+pysqlite:///{_sqlite(tmp_path, ids)}", table="rows", key="id", fragment_rows=89), ids


FACTORIES = [
    pytest.param(sql_sqlite_table, id="sql-sqlite-table"),
    pytest.param(sql_sqlite_query_text_key, id="sql-sqlite-query-text-key"),
    pytest.param(sql_postgres_table, id="sql-postgres-table"),
    pytest.param(sql_postgres_sqlalchemy, id="sql-postgres-sqlalchemy"),
    pytest.param(sql_sqlite_sqlalchemy, id="sql-sqlite-sqlalchemy"),
]


def sql_sqlite_empty(tmp_path: Path):
    return read_sql(_sqlite(tmp_path, np.arange(0)), table="rows", key="id"), np.arange(0)


def sql_postgres_empty(tmp_path: Path):
    server = shared()
    server.load("contract_empty", "id bigint PRIMARY KEY, x double precision", [])
    return read_sql(server.url, table="contract_empty", key="id"), np.arange(0)


EMPTY_FACTORIES = [
    pytest.param(sql_sqlite_empty, id="sql-sqlite-empty"),
    pytest.param(sql_postgres_empty, id="sql-postgres-empty"),
]
