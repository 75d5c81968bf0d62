"""A SQL table or query as a source: fragments are keyset ranges of a unique key column, never OFFSET.

At open, in one connection, three queries: the key's count, non-null
count and distinct count (the key must be unique and never null, else the
ranges would not partition the rows); every ``fragment_rows``-th key in key
order and the last one (``row_number() OVER (ORDER BY key)``), which bound
the fragments and give the exact row count; and the served columns' types
(PostgreSQL: the Arrow schema ADBC reports for ``WHERE 1 = 0``; SQLite: the
``typeof`` of each column's first non-null value). Fragment ``i`` then reads
``WHERE key > lo AND key <= hi ORDER BY key`` over its own connection.

**Snapshot semantics.** What an epoch serves is the rows the open counted,
by key range: a row inserted later with a key beyond the last boundary is
never served, and a fragment whose range now holds another number of rows
(an insert, a delete) is refused with :class:`FileChangedError` naming the
table and the range, never served half-changed. The fingerprint holds the
row count, the first and last key and every boundary (the fragments' keys),
and for SQLite the database file's size and modification time, so a state
saved before the table changed is refused on resume (:class:`StateError`).
An in-place UPDATE on PostgreSQL that keeps count and keys is not seen.

Types as for Parquet: integers, floats and booleans as themselves, text as
strings, dates and timestamps as float64 seconds since the epoch (UTC),
PostgreSQL ``numeric`` as float64 (ADBC hands it over as text, cast here);
any other type is refused at open naming the column and the cast to write.
Through SQLAlchemy (``alchemy.py``) the same statements run with bound
parameters; the types are those of each column's first non-null value
(``decimal.Decimal`` as float64).

**Timeout.** ``timeout`` seconds bound every statement (PostgreSQL's
``statement_timeout``, SQLite's progress handler): a stuck one fails with
:class:`NetworkError` naming the table and the fragment's key range.
"""

from __future__ import annotations

import hashlib
import os
import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Iterator, Sequence

import pyarrow as pa
import pyarrow.compute as pc

from ...core import AlikeRows, Chunk, SourceInfo, fragmenting_digest, records_settings
from ...errors import ArgumentError, BadInputReport, FileChangedError, NetworkError, SchemaError, StorageError, describe
from ...files.arrow import DEFAULT_POLICY, ColumnPolicy, Where, table_to_chunk
from . import alchemy
from .connection import Connection
from .pool import IDLE_CONNECTIONS, ConnectionPool

DEFAULT_FRAGMENT_ROWS = 50_000
_SQLITE_TYPES = {"integer": pa.int64(), "real": pa.float64(), "text": pa.string(), "blob": pa.binary()}
_NUMERIC = b"numeric"


def quote(name: str) -> str:
    """A SQL identifier, quoted (``schema.table`` quoted part by part); the same in both dialects."""
    return ".".join('"' + part.replace('"', '""') + '"' for part in name.split("."))


def _json_key(value: Any) -> Any:
    """A key value as JSON (fingerprints and fragment keys): ints, floats and text as they are, else text."""
    return value if value is None or isinstance(value, (bool, int, float, str)) else str(value)


@dataclass(frozen=True)
class SqlFragment:
    """The rows whose key is in ``(lo, hi]`` (``lo`` None: from the first key)."""

    key: str
    num_rows: int
    path: str
    lo: Any
    hi: Any
    _source: "SqlSource"

    @property
    def location(self) -> str:
        low = "the first key" if self.lo is None else f"{self.lo!r} (exclusive)"
        return f"keys from {low} to {self.hi!r}"

    def read(self) -> Chunk:
        table = self._source.read_range(self.lo, self.hi, self.location)
        if table.num_rows != self.num_rows:
            raise FileChangedError(
                describe(
                    "The table changed since the source opened it: a key range holds another number of rows",
                    where=f"{self._source.what}, {self.location}",
                    expected=f"{self.num_rows} rows, as counted at open",
                    found=f"{table.num_rows} rows",
                    fix="read a table that is not written during training (or a snapshot of it), and open it again",
                )
            )
        return table_to_chunk(table, self._source.policy, Where(f"{self._source.what}, {self.location}"))


class SqlSource(AlikeRows):
    """Opens a table or query: key boundaries, exact count, types; fragments are key ranges."""

    settings: dict[str, Any]  # every constructor argument but core.NOT_ROW_SETTINGS (records_settings)

    @records_settings
    def __init__(
        self,
        connection: Connection,
        *,
        table: str | None = None,
        query: str | None = None,
        key: str,
        columns: Sequence[str] | None = None,
        fragment_rows: int = DEFAULT_FRAGMENT_ROWS,
        policy: ColumnPolicy = DEFAULT_POLICY,
        report: BadInputReport | None = None,
        timeout: float | None = None,
    ) -> None:
        if (table is None) == (query is None):
            raise ArgumentError(describe("read_sql needs exactly one of table= or query=", fix="pass one of them"))
        if isinstance(fragment_rows, bool) or not isinstance(fragment_rows, int) or fragment_rows < 1:
            raise ArgumentError(describe("Invalid fragment_rows", expected="an int >= 1", found=repr(fragment_rows)))
        if not isinstance(key, str) or not key:
            raise ArgumentError(describe("read_sql needs key=, a unique column to cut ranges by", found=repr(key)))
        if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0):
            raise ArgumentError(describe("Invalid timeout", expected="seconds > 0, or None", found=repr(timeout)))
        if connection.dialect == "sqlalchemy":
            alchemy.check_timeout(connection.engine, timeout)
        self.connection = connection
        self.timeout = timeout
        self.key_column = key
        self.policy = policy
        self.report = report or BadInputReport()
        if table is not None:
            self.what = f"table {table!r} of {connection.name}"
            self._base = f"(SELECT * FROM {quote(table)})"
            relation = f"table:{table}"
        else:
            digest = hashlib.sha1(str(query).encode()).hexdigest()[:12]
            self.what = f"query {digest} on {connection.name}"
            self._base = f"({str(query).strip().rstrip(';')})"
            relation = f"query:{digest}"
        idle = 0 if connection.pools_itself else IDLE_CONNECTIONS
        self.pool = ConnectionPool(connection, self.what, idle, timeout=timeout)
        self._select = "*" if columns is None else ", ".join(f"q.{quote(name)}" for name in columns)
        self._key = f"q.{quote(key)}"
        self._mark = {"sqlite": "?", "postgresql": "$"}.get(connection.dialect, ":")
        boundaries, self.schema = self._open(fragment_rows)
        self.num_rows = 0 if not boundaries else (len(boundaries) - 1) * fragment_rows + boundaries[-1][1]
        self.fragments: list[SqlFragment] = []
        path = f"{connection.name}/{relation}"
        lo: Any = None
        for hi, rows in boundaries:
            self.fragments.append(
                SqlFragment(f"{path}#{key}=({_json_key(lo)!r},{_json_key(hi)!r}]", rows, path, lo, hi, self)
            )
            lo = hi
        self.files = [path]
        self._stamp = self._file_stamp()
        self.report.total_rows = self.num_rows
        self.report.total_files = 1
        self.exact_counts = policy.nulls != "drop"
        self.read_parallelism: int | None = None
        self.read_scratch: float | None = None  # the library's figure for its decode (core.Source)
        self._fingerprint: dict | None = None

    # ------------------------------------------------------------------ queries
    def _params(self, sql: str) -> str:
        """``sql`` with ``{1}``, ``{2}`` turned into the dialect's placeholders (``?``, ``$1``, ``:p1``)."""
        marks = {"?": "?{}", "$": "${}", ":": ":p{}"}[self._mark]
        for number in (1, 2):
            sql = sql.replace(f"{{{number}}}", marks.replace("?{}", "?").format(number))
        return sql

    def _run(self, handle: Any, sql: str, params: Sequence[Any], doing: str) -> pa.Table:
        """Runs one statement on an open connection, as an Arrow table; driver failures told as ours."""
        alchemized = self.connection.dialect == "sqlalchemy"
        cursor: Any = None if alchemized else handle.cursor()
        try:
            if alchemized:
                names, rows = alchemy.execute(handle, sql, params, self.timeout)
                return self._sqlite_table(names, rows, doing, typed=False)
            with alchemy.deadline(handle, self.timeout) if self._mark == "?" else _nothing():
                cursor.execute(sql, tuple(params)) if params else cursor.execute(sql)
                if self.connection.dialect == "postgresql":
                    return cursor.fetch_arrow_table()
                names = [item[0] for item in cursor.description or ()]
                rows = cursor.fetchall()
            return self._sqlite_table(names, rows, doing)
        except (SchemaError, ArgumentError):
            raise
        except Exception as exc:  # sqlite3.Error, ADBC's and SQLAlchemy's errors: nothing of the driver's escapes
            if self.timeout is not None and _timed_out(exc):
                raise NetworkError(
                    describe(
                        f"A SQL query ran longer than timeout={self.timeout} seconds and was cancelled",
                        where=f"{self.what}, {doing}",
                        found=self.connection.scrub(f"{type(exc).__name__}: {str(exc).splitlines()[0]}"),
                        fix="check for locks held on the table or a slow server; raise timeout= or fragment_rows "
                        "smaller",
                    )
                ) from None
            kind = NetworkError if self.connection.sql_dialect == "postgresql" and _lost(exc) else StorageError
            raise kind(
                describe(
                    "A SQL query failed",
                    where=f"{self.what}, {doing}",
                    found=self.connection.scrub(f"{type(exc).__name__}: {exc}"),
                    fix="check that the server is up, the table and columns exist and the key is comparable",
                )
            ) from None
        finally:
            if cursor is not None:
                cursor.close()

    def _statement(self, handle: Any, sql: str) -> None:
        """Runs a statement without rows (BEGIN, COMMIT); a failure told as ours."""
        if self.connection.dialect == "sqlalchemy":
            try:
                alchemy.begin(handle, self.timeout) if sql.startswith("BEGIN") else handle.commit()
                return
            except Exception as exc:  # noqa: BLE001  the driver's errors, retold
                raise StorageError(
                    describe(
                        "A SQL statement failed",
                        where=f"{self.what}, {sql}",
                        found=self.connection.scrub(f"{type(exc).__name__}: {exc}"),
                        fix="check that the server is up",
                    )
                ) from None
        cursor = handle.cursor()
        try:
            cursor.execute(sql)
        except Exception as exc:  # noqa: BLE001  the driver's errors, retold
            raise StorageError(
                describe(
                    "A SQL statement failed",
                    where=f"{self.what}, {sql}",
                    found=self.connection.scrub(f"{type(exc).__name__}: {exc}"),
                    fix="check that the server is up",
                )
            ) from None
        finally:
            cursor.close()

    def _open(self, fragment_rows: int) -> tuple[list[tuple[Any, int]], pa.Schema]:
        """Count, boundaries and types, in one read-only snapshot (one transaction, REPEATABLE READ on PostgreSQL)."""
        begin = "BEGIN" if self.connection.dialect == "sqlite" else "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"
        with self.pool.borrowed() as (handle, _):
            self._statement(handle, begin)
            found = self._snapshot(handle, fragment_rows)
            self._statement(handle, "COMMIT")  # the connection goes back to the pool outside any transaction
        return found

    def _snapshot(self, handle: Any, fragment_rows: int) -> tuple[list[tuple[Any, int]], pa.Schema]:
        counts = self._run(
            handle,
            f"SELECT count(*), count({self._key}), count(DISTINCT {self._key}), min({self._key}) "
            f"FROM {self._base} AS q",
            (),
            f"counting key {self.key_column!r}",
        )
        total, non_null, distinct = (int(counts.column(i)[0].as_py()) for i in range(3))
        self.first_key = counts.column(3)[0].as_py()
        if not total == non_null == distinct:
            raise SchemaError(
                describe(
                    "The key column must be unique and never null: its ranges cut the rows into fragments",
                    where=f"{self.what}, key {self.key_column!r}",
                    expected=f"{total} distinct non-null keys",
                    found=f"{non_null} non-null, {distinct} distinct",
                    fix="pass key= a primary key or another unique, non-null column",
                )
            )
        cut = self._run(
            handle,
            f"SELECT k FROM (SELECT {self._key} AS k, row_number() OVER (ORDER BY {self._key}) AS rn "
            f"FROM {self._base} AS q) AS b WHERE rn % {fragment_rows} = 0 OR rn = {total} ORDER BY k",
            (),
            "finding the fragments' key boundaries",
        )
        keys = cut.column(0).to_pylist()
        boundaries = [(hi, fragment_rows) for hi in keys]
        if boundaries and total % fragment_rows:
            boundaries[-1] = (keys[-1], total % fragment_rows)
        schema = self._schema(handle)
        return boundaries, schema

    def _schema(self, handle: Any) -> pa.Schema:
        """The served columns' Arrow types (numeric as float64), refused at open when streamfeed cannot serve one."""
        if self.connection.dialect == "sqlalchemy":
            return self._sampled_schema(handle)
        if self.connection.dialect == "sqlite":
            names = self._run(handle, f"SELECT {self._select} FROM {self._base} AS q WHERE 1 = 0", (), "columns")
            fields = []
            for name in names.column_names:
                found = self._run(
                    handle,
                    f"SELECT typeof({quote(name)}) FROM {self._base} AS q WHERE {quote(name)} IS NOT NULL LIMIT 1",
                    (),
                    f"the type of column {name!r}",
                )
                kind = found.column(0)[0].as_py() if found.num_rows else "text"
                fields.append(pa.field(name, _SQLITE_TYPES[kind]))
            return pa.schema(fields)
        empty = self._run(handle, f"SELECT {self._select} FROM {self._base} AS q WHERE 1 = 0", (), "columns")
        fields = []
        for item in empty.schema:
            if _NUMERIC in (item.metadata or {}).get(b"ADBC:postgresql:typname", b""):
                item = pa.field(item.name, pa.float64())
            kind = item.type
            if not (
                pa.types.is_integer(kind)
                or pa.types.is_floating(kind)
                or pa.types.is_boolean(kind)
                or pa.types.is_string(kind)
                or pa.types.is_large_string(kind)
                or pa.types.is_date(kind)
                or pa.types.is_timestamp(kind)
            ):
                raise SchemaError(
                    describe(
                        "A column's SQL type has no streamfeed equivalent",
                        where=f"{self.what}, column {item.name!r}",
                        expected="integers, floats, booleans, text, numeric, dates or timestamps",
                        found=f"{kind} {(item.metadata or {}).get(b'ADBC:postgresql:typname', b'').decode()}".strip(),
                        fix=f"select it cast in query=, e.g. CAST({item.name} AS text) or AS double precision",
                    )
                )
            fields.append(item)
        return pa.schema(fields)

    def _sampled_schema(self, handle: Any) -> pa.Schema:
        """Through SQLAlchemy: each served column's Arrow type is its first non-null value's (text if none)."""
        names = self._run(handle, f"SELECT {self._select} FROM {self._base} AS q WHERE 1 = 0", (), "columns")
        fields = []
        for name in names.column_names:
            found = self._run(
                handle,
                f"SELECT q.{quote(name)} FROM {self._base} AS q WHERE q.{quote(name)} IS NOT NULL LIMIT 1",
                (),
                f"the type of column {name!r}",
            )
            kind = found.schema.field(0).type if found.num_rows else pa.string()
            kind = pa.float64() if pa.types.is_decimal(kind) else kind
            if not (_fixed(kind) or pa.types.is_string(kind) or pa.types.is_large_string(kind)) or (
                pa.types.is_time(kind) or pa.types.is_duration(kind)
            ):
                raise SchemaError(
                    describe(
                        "A column's SQL type has no streamfeed equivalent",
                        where=f"{self.what}, column {name!r}",
                        expected="integers, floats, booleans, text, numeric, dates or timestamps",
                        found=str(kind),
                        fix=f"select it cast in query=, e.g. CAST({name} AS text) or AS double precision",
                    )
                )
            fields.append(pa.field(name, kind))
        return pa.schema(fields)

    def _sqlite_table(self, names: list[str], rows: list[tuple], doing: str, typed: bool = True) -> pa.Table:
        """Rows as Arrow, one ``pa.array`` per column: typed by the schema (sqlite3), or inferred (SQLAlchemy,
        cast to the schema by :meth:`read_range`)."""
        schema = getattr(self, "schema", None) if typed else None
        columns = list(zip(*rows)) if rows else [() for _ in names]
        arrays = []
        for number, name in enumerate(names):
            kind = schema.field(name).type if schema is not None and name in schema.names else None
            try:
                arrays.append(pa.array(list(columns[number]), type=kind))
            except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, OverflowError) as exc:
                raise SchemaError(
                    describe(
                        "A SQLite column holds values of another type than its first",
                        where=f"{self.what}, column {name!r}, {doing}",
                        expected=str(kind),
                        found=str(exc),
                        fix=f"select it cast in query=, e.g. CAST({name} AS REAL)",
                    )
                ) from None
        return pa.table(arrays, names=names)

    def read_range(self, lo: Any, hi: Any, location: str) -> pa.Table:
        """The rows with key in ``(lo, hi]`` in key order, as Arrow with the schema found at open."""
        where = f"{self._key} <= {{1}}" if lo is None else f"{self._key} > {{1}} AND {self._key} <= {{2}}"
        sql = self._params(f"SELECT {self._select} FROM {self._base} AS q WHERE {where} ORDER BY {self._key}")
        params = (hi,) if lo is None else (lo, hi)
        for attempt in (0, 1):  # a pooled connection may have been dropped by a restarted server: one fresh try
            with self.pool.borrowed() as (handle, fresh):
                started = time.monotonic()
                try:
                    table = self._run(handle, sql, params, location)
                    break
                except StorageError:
                    timed_out = self.timeout is not None and time.monotonic() - started >= self.timeout
                    if fresh or attempt or timed_out:  # a timeout is not retried: it would wait as long again
                        raise
            self.pool.close()  # the server that dropped one dropped every idle one: the try must open a new one
        for number, item in enumerate(self.schema):
            column = table.column(number)
            if column.type != item.type:
                if isinstance(column.type, pa.ExtensionType):  # numeric: ADBC's opaque type over its text
                    column = pa.chunked_array([chunk.storage for chunk in column.chunks], column.type.storage_type)
                table = table.set_column(number, item.name, pc.cast(column, item.type))
        return table

    # ----------------------------------------------------------------- protocol
    def _file_stamp(self) -> list[int] | None:
        """A SQLite database file's size and mtime (and its WAL's): any write changes the identity."""
        if self.connection.sql_dialect != "sqlite":
            return None
        path = (
            self.connection.name.removeprefix("sqlite:")
            if self.connection.dialect == "sqlite"
            else str(self.connection.engine.url.database or "")
        )
        stamp: list[int] = []
        for name in (path, path + "-wal"):
            if os.path.exists(name):
                info = os.stat(name)
                stamp += [info.st_size, info.st_mtime_ns]
        return stamp

    @property
    def column_names(self) -> list[str]:
        return list(self.schema.names)

    @property
    def row_bytes(self) -> float:
        # fixed-width columns are served as 8-byte NumPy values (dates and times as float64); text about 64
        return float(max(8, sum(8 if _fixed(item.type) else 64 for item in self.schema)))

    @property
    def info(self) -> SourceInfo:
        """Format and schema (``core.SourceInfo``); dates and times by type, as Parquet's."""
        # SQLite: the file's stamp sees every write; PostgreSQL: count and keys only (an UPDATE in place is not seen)
        sees = self._stamp is not None
        return SourceInfo("sql", schema=self.schema, fragment_setting="fragment_rows", sees_values=sees)

    def fingerprint(self) -> dict:
        """Connection (no password), relation, columns, count, first and last key, boundaries, settings."""
        if self._fingerprint is None:
            first = self.first_key
            last = self.fragments[-1].hi if self.fragments else None
            self._fingerprint = {
                "format": "sql",
                "files": 1,
                "connection": self.connection.name,
                "rows": self.num_rows,
                "keys": [_json_key(first), _json_key(last)],
                "file": self._stamp,
                "columns": self.column_names,
                "settings": self.settings,  # every constructor argument (core.records_settings)
                "fragmenting": fragmenting_digest(self.fragments),
            }
        return self._fingerprint


def _fixed(kind: pa.DataType) -> bool:
    return (
        pa.types.is_integer(kind)
        or pa.types.is_floating(kind)
        or pa.types.is_boolean(kind)
        or pa.types.is_temporal(kind)
    )


@contextmanager
def _nothing() -> Iterator[None]:
    yield


def _timed_out(exc: BaseException) -> bool:
    """Whether a driver error is a statement cancelled by the timeout (PostgreSQL's or SQLite's wording: a
    progress handler's interrupt, or the busy timeout waiting on another connection's lock)."""
    text = str(exc).lower()
    return any(words in text for words in ("statement timeout", "interrupted", "database is locked"))


def _lost(exc: BaseException) -> bool:
    """Whether a driver error says the server or the connection went away (then a NetworkError)."""
    text = f"{type(exc).__name__} {exc}".lower()
    words = ("connection", "server closed", "terminat", "could not connect", "operationalerror", "timeout")
    return any(word in text for word in words)
