"""``read_sql``: a table or a query of a database, as a :class:`~streamfeed.Dataset`.

Beside :mod:`streamfeed.readers` (whose bad-input policy it shares), at the
top of the layering: it opens :class:`~streamfeed.sources.sql.SqlSource`
with the caller's policy and wraps it in a ``Dataset``.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Sequence

from .files.arrow import ColumnPolicy
from .pipeline import Dataset
from .readers import error_policy_of
from .sources.sql import SqlSource, parse_connection

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine
    from typing_extensions import Unpack

    from .core import NullPolicy
    from .errors import ErrorOptions


def read_sql(
    connection: str | os.PathLike | Engine,
    *,
    table: str | None = None,
    query: str | None = None,
    key: str,
    columns: Sequence[str] | None = None,
    fragment_rows: int = 50_000,
    nulls: NullPolicy = "raise",
    fill: Any = None,
    timeout: float | None = None,
    **errors: Unpack[ErrorOptions],
) -> Dataset:
    """Streams a SQL table or query: PostgreSQL (through ADBC, as Arrow), SQLite, or anything SQLAlchemy reaches.

    Args:
        connection: ``"postgresql://user:password@host:port/db"``,
            ``"sqlite:///path.db"``, a path ending ``.db``/``.sqlite``, or a
            SQLAlchemy ``Engine`` or URL of another scheme (``"mysql+pymysql://..."``,
            ``"postgresql+psycopg://..."``), read through SQLAlchemy Core. The
            password never appears in errors, states, fingerprints or reports.
        table: a table (``"schema.table"`` allowed); or ``query``: a SELECT
            whose rows are read (exactly one of the two).
        key: a unique, non-null column; fragments are ranges of it
            (``WHERE key > lo AND key <= hi ORDER BY key``, never OFFSET),
            found with the exact row count when the source opens.
        columns: the columns served (default: all of them).
        fragment_rows: rows per fragment (the unit of shuffling, sharding
            and resume).
        nulls, fill: the null policy, as for Parquet.
        timeout: seconds any one statement may run (PostgreSQL
            ``statement_timeout``, SQLite a progress handler) before it is
            cancelled with a ``NetworkError`` naming the table and the key
            range; None (the default): the server's own limit, usually none.
            Not in the fingerprint (it does not change the rows).

    What an epoch serves is the rows counted at open: a row inserted beyond
    the last key is not served, a key range whose count changed is refused
    (``FileChangedError``), and a state saved before the table changed is
    refused on resume (``StateError``). Types as for Parquet: dates and
    timestamps as float64 seconds, PostgreSQL ``numeric`` as float64.

    Returns:
        A :class:`streamfeed.Dataset`.
    """
    report = error_policy_of(read_sql, errors).new_report()
    source = SqlSource(
        parse_connection(connection),
        table=table,
        query=query,
        key=key,
        columns=columns,
        fragment_rows=fragment_rows,
        policy=ColumnPolicy(nulls=nulls, fill=fill),
        report=report,
        timeout=timeout,
    )
    return Dataset(source, report=report)
