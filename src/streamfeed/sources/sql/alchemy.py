"""What SQLAlchemy reaches, through SQLAlchemy Core: an ``Engine`` (or a URL naming another dialect) as a connection.

The same keyset statements as the PostgreSQL and SQLite paths run as
``text()`` with bound parameters (``:p1``, ``:p2``), each in its own
short transaction rolled back after the rows are fetched (no snapshot or
lock is held between fragments); the rows become Arrow column by column
(one ``pa.array`` per column, no DataFrame). The per-statement timeout is
the dialect's own: PostgreSQL ``SET LOCAL statement_timeout``, SQLite a
progress handler on the driver's connection (:func:`deadline`). The
statements need window functions and ``LIMIT`` (PostgreSQL, SQLite,
MySQL 8, MariaDB, DuckDB...); a dialect without them fails at open with
the database's own message, retold as a ``StorageError``.
"""

from __future__ import annotations

import time
import urllib.parse
from contextlib import contextmanager
from typing import Any, Iterator, Sequence

from ...errors import ArgumentError, MissingDependencyError, describe

TIMED_DIALECTS = ("postgresql", "sqlite")
_SECRET_QUERY_KEYS = ("password", "passfile", "sslpassword")


def engine_of(connection: Any) -> Any | None:
    """``connection`` if it is a SQLAlchemy ``Engine`` (SQLAlchemy imported only when one may be)."""
    if not type(connection).__module__.startswith("sqlalchemy"):
        return None
    from sqlalchemy.engine import Engine

    return connection if isinstance(connection, Engine) else None


def create_engine(url: str, shown: str) -> Any:
    """An engine for a URL string, owning no idle connections.

    A missing SQLAlchemy or dialect driver is told without the URL's password.
    """
    try:
        import sqlalchemy
    except ImportError as exc:
        raise MissingDependencyError(
            describe("Reading this SQL connection needs SQLAlchemy", fix="pip install 'sqlalchemy>=2.0.42'")
        ) from exc
    try:
        # NullPool: a connection the source closes is closed (the source keeps its own idle ones, pool.py)
        return sqlalchemy.create_engine(url, poolclass=sqlalchemy.pool.NullPool)
    except Exception as exc:  # noqa: BLE001  NoSuchModuleError, the dialect's ImportError, ArgumentError
        raise MissingDependencyError(
            describe(
                "SQLAlchemy cannot open this kind of connection",
                where=shown,
                found=type(exc).__name__,
                fix="install the dialect's driver (e.g. psycopg for postgresql+psycopg://) or pass an Engine",
            )
        ) from None  # the message may quote the URL


def name_and_secrets(engine: Any) -> tuple[str, tuple[str, ...]]:
    """``dialect+driver://user@host:port/db`` (no password, no query string) and the secrets to scrub."""
    url = engine.url
    secrets = [str(url.password)] if url.password else []
    secrets += [urllib.parse.quote(secret, safe="") for secret in secrets]
    for key in _SECRET_QUERY_KEYS:
        value = url.query.get(key)
        secrets += [value] if isinstance(value, str) else list(value or ())
    user = f"{url.username}@" if url.username else ""
    host = url.host or ""
    port = f":{url.port}" if url.port else ""
    database = f"/{url.database}" if url.database else ""
    return f"{url.drivername}://{user}{host}{port}{database}", tuple(secrets)


def check_timeout(engine: Any, timeout: float | None) -> None:
    """Refuses ``timeout=`` on a dialect without a known per-statement limit (rather than ignore it)."""
    if timeout is not None and engine.dialect.name not in TIMED_DIALECTS:
        raise ArgumentError(
            describe(
                "read_sql(timeout=) is applied on PostgreSQL and SQLite only",
                found=f"dialect {engine.dialect.name!r}",
                fix="pass timeout=None and set the limit in the engine (its connect_args or the server)",
            )
        )


@contextmanager
def deadline(raw: Any, timeout: float | None) -> Iterator[None]:
    """A sqlite3 connection's statements bounded by ``timeout`` seconds: a progress handler interrupts a
    running one (``OperationalError: interrupted``) and the busy timeout bounds the wait on another
    connection's lock (``database is locked``); both are put back afterwards."""
    if timeout is None:
        yield
        return
    end = time.monotonic() + timeout
    (busy,) = raw.execute("PRAGMA busy_timeout").fetchone()
    raw.execute(f"PRAGMA busy_timeout = {int(timeout * 1000)}")  # an int: nothing of the caller's interpolated
    raw.set_progress_handler(lambda: int(time.monotonic() > end), 1000)
    try:
        yield
    finally:
        raw.set_progress_handler(None, 1000)
        raw.execute(f"PRAGMA busy_timeout = {int(busy)}")


def execute(
    handle: Any, sql: str, params: Sequence[Any], timeout: float | None
) -> tuple[list[str], list[tuple[Any, ...]]]:
    """Runs one statement on a SQLAlchemy ``Connection``: column names and rows.

    Outside an explicit transaction (the open's snapshot) the statement gets
    its own, rolled back after the fetch so no snapshot or lock outlives it.
    """
    from sqlalchemy import text

    explicit = handle.in_transaction()
    bound = {f"p{number}": value for number, value in enumerate(params, start=1)}
    try:
        if timeout is not None and handle.dialect.name == "postgresql":
            handle.exec_driver_sql(f"SET LOCAL statement_timeout = {int(timeout * 1000)}")  # an int: no input
        raw = handle.connection.driver_connection
        with deadline(raw, timeout) if handle.dialect.name == "sqlite" else _nothing():
            result = handle.execute(text(sql), bound)
            names = list(result.keys())
            rows = list(result.fetchall())  # Row objects are tuples to zip(*rows): no copy per row
        return names, rows
    finally:
        if not explicit:
            handle.rollback()


@contextmanager
def _nothing() -> Iterator[None]:
    yield


def begin(handle: Any, timeout: float | None) -> None:
    """The open's one read-only snapshot: REPEATABLE READ on PostgreSQL, a plain transaction elsewhere."""
    if handle.dialect.name == "postgresql":
        handle.execution_options(isolation_level="REPEATABLE READ")
        handle.begin()
        handle.exec_driver_sql("SET TRANSACTION READ ONLY")
        if timeout is not None:
            handle.exec_driver_sql(f"SET LOCAL statement_timeout = {int(timeout * 1000)}")
    else:
        handle.begin()
