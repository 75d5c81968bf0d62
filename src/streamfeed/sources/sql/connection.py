"""Where a SQL source's rows live: the connection string parsed, its credentials kept out of every text.

``sqlite:///path/to/file.db`` (or a path ending ``.db``, ``.sqlite``,
``.sqlite3``) opens the file with the standard library's ``sqlite3``, read
only; ``postgresql://user:password@host:port/db`` opens PostgreSQL through
ADBC (``adbc-driver-postgresql``), which hands each fragment over as Arrow.

A password given in the string is needed to connect and nowhere else: the
:class:`Connection`'s ``repr``, ``identity()`` (what fingerprints and states
record) and :meth:`Connection.scrub` (applied to every driver message
streamfeed quotes) show ``user@host:port/db`` and never the password.

A SQLAlchemy ``Engine``, or a URL whose scheme is neither of those two
(``mysql+pymysql://``, ``postgresql+psycopg://``, ``sqlite+pysqlite://``...),
is read through SQLAlchemy Core (``alchemy.py``), named the same way.
"""

from __future__ import annotations

import os
import re
import sqlite3
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from ...errors import ArgumentError, MissingDependencyError, NetworkError, NotFoundError, StorageError, describe
from . import alchemy

Dialect = Literal["sqlite", "postgresql", "sqlalchemy"]
_SQLITE_SUFFIXES = (".db", ".sqlite", ".sqlite3")
CONNECT_TIMEOUT_S = 10


@dataclass(frozen=True)
class Connection:
    """A parsed connection string: the dialect, a credential-free name, and (hidden) what connecting needs."""

    dialect: Dialect
    name: str  # "sqlite:/abs/path.db" or "postgresql://user@host:port/db": safe to show
    _uri: str = field(repr=False, compare=False)  # the full string, password included: only for connecting
    _secrets: tuple[str, ...] = field(repr=False, compare=False, default=())
    engine: Any = field(repr=False, compare=False, default=None)  # the SQLAlchemy Engine ("sqlalchemy" only)

    def __repr__(self) -> str:
        return f"Connection({self.name!r})"

    def identity(self) -> str:
        """What a fingerprint records (``core._canonical`` calls it): the name, never the password."""
        return self.name

    def scrub(self, text: str) -> str:
        """``text`` with the connection string and every secret in it replaced by ``***``."""
        for secret in sorted({self._uri, *self._secrets}, key=len, reverse=True):
            if secret:
                text = text.replace(secret, "***")
        return text

    @property
    def pools_itself(self) -> bool:
        """A caller's SQLAlchemy Engine: its own pool keeps the idle connections (so ``engine.dispose()``
        closes them all); an engine made here from a URL has none (NullPool) and the source's pool does."""
        return self.dialect == "sqlalchemy" and not self._uri

    @property
    def sql_dialect(self) -> str:
        """The SQL spoken: ``"sqlite"``, ``"postgresql"``, or the SQLAlchemy engine's dialect name."""
        return str(self.engine.dialect.name) if self.dialect == "sqlalchemy" else self.dialect

    def connect(self, what: str, timeout: float | None = None) -> Any:
        """A new connection: sqlite3's, ADBC's for PostgreSQL (``statement_timeout`` set for its session when
        ``timeout`` is given, in seconds), or a SQLAlchemy ``Connection``; ``what`` names the table in errors."""
        if self.dialect == "sqlalchemy":
            try:
                return self.engine.connect()
            except Exception as exc:  # noqa: BLE001  the DBAPI's OperationalError, wrapped by SQLAlchemy
                raise NetworkError(
                    describe(
                        "Could not connect through SQLAlchemy",
                        where=what,
                        found=self.scrub(f"{type(exc).__name__}: {exc}"),
                        fix="check that the server is running and reachable and that the user and password are right",
                    )
                ) from None  # the driver's exception may quote the connection string
        if self.dialect == "sqlite":
            try:
                return sqlite3.connect(f"{Path(self._uri).as_uri()}?mode=ro", uri=True, check_same_thread=False)
            except sqlite3.Error as exc:
                raise StorageError(
                    describe(
                        "Could not open a SQLite database",
                        where=what,
                        found=self.scrub(f"{type(exc).__name__}: {exc}"),
                        fix="check the path and its permissions",
                    )
                ) from exc
        try:
            import adbc_driver_postgresql.dbapi as pg
        except ImportError as exc:
            raise MissingDependencyError(
                describe(
                    "Reading PostgreSQL needs adbc-driver-postgresql",
                    fix="pip install 'adbc-driver-postgresql>=1.13'",
                )
            ) from exc
        try:
            handle = pg.connect(self._uri, autocommit=True)  # no transaction left open (it would hold locks)
            if timeout is not None:
                cursor = handle.cursor()
                cursor.execute(f"SET statement_timeout = {int(timeout * 1000)}")  # an int: nothing interpolated
                cursor.close()
            return handle
        except Exception as exc:  # the driver's OperationalError, ProgrammingError...: told as ours
            raise NetworkError(
                describe(
                    "Could not connect to PostgreSQL",
                    where=what,
                    found=self.scrub(f"{type(exc).__name__}: {exc}"),
                    fix="check that the server is running and reachable and that the user and password are right",
                )
            ) from None  # the driver's exception may quote the connection string


def parse_connection(connection: str | os.PathLike | Any) -> Connection:
    """The :class:`Connection` a ``connection=`` argument (a string, a path or a SQLAlchemy ``Engine``) names;
    refused (credentials hidden) if unknown."""
    engine = alchemy.engine_of(connection)
    if engine is not None:
        shown_name, hidden = alchemy.name_and_secrets(engine)
        return Connection("sqlalchemy", shown_name, "", hidden, engine)
    if not isinstance(connection, (str, os.PathLike)):
        raise ArgumentError(
            describe(
                "connection must be a string, a path or a SQLAlchemy Engine",
                found=type(connection).__name__,
            )
        )
    text = os.fspath(connection)
    if not isinstance(text, str):
        raise ArgumentError(describe("connection must be a string", found=type(text).__name__))
    if text.startswith("sqlite://") or (("://" not in text) and text.lower().endswith(_SQLITE_SUFFIXES)):
        # SQLAlchemy's spelling: sqlite:///relative.db, sqlite:////absolute.db
        path = os.path.abspath(text.removeprefix("sqlite:///") if text.startswith("sqlite:///") else text)
        if not os.path.isfile(path):
            raise NotFoundError(describe("SQLite database not found", where=path, fix="pass an existing file"))
        return Connection("sqlite", f"sqlite:{path}", path)
    if re.match(r"^postgres(ql)?://", text):
        parts = urllib.parse.urlsplit(text)
        secrets: list[str] = []
        if parts.password:
            secrets += [parts.password, urllib.parse.quote(parts.password, safe="")]
        query = urllib.parse.parse_qs(parts.query)
        for key in ("password", "passfile", "sslpassword"):
            secrets += query.get(key, [])
        host = parts.hostname or "localhost"
        port = f":{parts.port}" if parts.port else ""
        user = f"{parts.username}@" if parts.username else ""
        name = f"postgresql://{user}{host}{port}{parts.path}"
        uri = (
            text
            if "connect_timeout" in query
            else text + ("&" if parts.query else "?") + f"connect_timeout={CONNECT_TIMEOUT_S}"
        )
        return Connection("postgresql", name, uri, tuple(secrets))
    shown = text.split("://", 1)[0] + "://…" if "://" in text else "a path without a .db/.sqlite suffix"
    if re.match(r"^[A-Za-z][A-Za-z0-9+.-]*://", text):  # another scheme: a SQLAlchemy URL
        engine = alchemy.create_engine(text, shown)
        shown_name, hidden = alchemy.name_and_secrets(engine)
        return Connection("sqlalchemy", shown_name, text, hidden, engine)
    raise ArgumentError(
        describe(
            "Unknown kind of SQL connection",
            expected="'postgresql://user:password@host:port/db', 'sqlite:///path.db', a path ending .db/.sqlite, "
            "a SQLAlchemy URL or Engine",
            found=shown,
        )
    )
