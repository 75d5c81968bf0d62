"""read_sql through SQLAlchemy Core (an Engine, or a URL of another scheme): the real PostgreSQL through
SQLAlchemy + psycopg and SQLite through SQLAlchemy serve what the ADBC and stdlib paths serve (rows, order,
count, shards, resume), and the password in the URL stays out of every surface, a failing query included."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import numpy as np
import pytest
import sqlalchemy
from _postgres import PASSWORD, PostgresServer

import streamfeed as sf
from streamfeed.errors import ArgumentError, MissingDependencyError, SchemaError, StateError, StorageError


def _alchemy(url: str) -> str:
    return url.replace("postgresql://", "postgresql+psycopg://", 1)


def _served(dataset: sf.Dataset, epoch: int = 0, state: dict | None = None) -> dict[str, list]:
    columns: dict[str, list] = {}
    with dataset.iter_epoch(epoch, state=state) as iterator:
        for batch in iterator:
            for name, values in batch.items():
                columns.setdefault(name, []).extend(np.asarray(values).tolist())
    return columns


def _views(dataset: sf.Dataset) -> dict[str, object]:
    """What the two paths must agree on: rows in order, shuffled order, shards, a resumed tail, sizes."""
    batched = dataset.batch(23)
    with batched.iter_epoch(0) as iterator:
        next(iterator)
        next(iterator)
        state = iterator.get_state()
    return {
        "len": len(dataset),
        "fragments": [(f.num_rows, f.lo, f.hi) for f in dataset.source.fragments],
        "rows": _served(dataset.batch(50)),
        "shuffled": _served(dataset.shuffle(seed=11).batch(50), epoch=2),
        "shards": [_served(dataset.shard(i, 3).batch(40))["id"] for i in range(3)],
        "resumed": _served(batched, state=state)["id"],
    }


def _load_pg(pg: PostgresServer, table: str) -> None:
    pg.load(
        table,
        "id bigint PRIMARY KEY, x double precision, name text, price numeric(10, 2), day date",
        [(3 * i + 1, i / 4, f"n{i}", f"{i}.25", "2024-01-02") for i in reversed(range(430))],
    )


def test_postgres_through_sqlalchemy_serves_what_adbc_serves(pg: PostgresServer):
    _load_pg(pg, "alchemy_pg")
    adbc = sf.read_sql(pg.url, table="alchemy_pg", key="id", fragment_rows=37)
    engine = sqlalchemy.create_engine(_alchemy(pg.url))
    try:
        through_engine = sf.read_sql(engine, table="alchemy_pg", key="id", fragment_rows=37)
        through_url = sf.read_sql(_alchemy(pg.url), table="alchemy_pg", key="id", fragment_rows=37)
        assert through_engine.source.connection.dialect == "sqlalchemy"
        expected = _views(adbc)
        assert expected["len"] == 430 and expected["rows"]["id"] == [3 * i + 1 for i in range(430)]
        assert _views(through_engine) == expected
        assert through_url.fingerprint() == through_engine.fingerprint()
        # a state saved through SQLAlchemy resumes through SQLAlchemy; the table changed, it is refused
        with through_engine.batch(23).iter_epoch(0) as iterator:
            next(iterator)
            state = iterator.get_state()
        pg.psql("INSERT INTO alchemy_pg VALUES (5000, 0, 'late', 0, '2024-01-02')")
        reopened = sf.read_sql(engine, table="alchemy_pg", key="id", fragment_rows=37).batch(23)
        with pytest.raises(StateError, match="alchemy_pg"):
            reopened.iter_epoch(0, state=state)
    finally:
        engine.dispose()


def test_sqlite_through_sqlalchemy_serves_what_the_stdlib_serves(tmp_path: Path):
    path = tmp_path / "events.db"
    with sqlite3.connect(path) as handle:
        handle.execute("CREATE TABLE events (id INTEGER PRIMARY KEY, x REAL, label TEXT)")
        order = np.random.default_rng(5).permutation(400)
        handle.executemany("INSERT INTO events VALUES (?, ?, ?)", [(int(i) * 2, i / 2, f"c{i % 3}") for i in order])
    handle.close()
    stdlib = sf.read_sql(path, table="events", key="id", fragment_rows=41)
    alchemized = sf.read_sql(f"sqlite+pysqlite:///{path}", table="events", key="id", fragment_rows=41)
    assert alchemized.source.connection.dialect == "sqlalchemy"
    expected = _views(stdlib)
    assert _views(alchemized) == expected
    query = "SELECT label, id, x FROM events WHERE id < 500"
    for connection in (path, f"sqlite+pysqlite:///{path}"):
        with pytest.raises(SchemaError, match="unique"):  # three labels: not a key
            sf.read_sql(connection, query=query, key="label")
    keyed = {"query": query, "key": "id", "columns": ["x", "id"], "fragment_rows": 19}
    assert _views(sf.read_sql(f"sqlite+pysqlite:///{path}", **keyed)) == _views(sf.read_sql(path, **keyed))
    # a write changes the file's stamp: a saved state is refused as on the stdlib path
    with alchemized.batch(30).iter_epoch(0) as iterator:
        next(iterator)
        state = iterator.get_state()
    with sqlite3.connect(path) as handle:
        handle.execute("UPDATE events SET x = 0 WHERE id = 4")
    handle.close()
    with pytest.raises(StateError, match="events"):
        sf.read_sql(f"sqlite+pysqlite:///{path}", table="events", key="id", fragment_rows=41).iter_epoch(0, state=state)


def test_sqlalchemy_statements_bind_keys_and_hold_no_transaction(pg: PostgresServer):
    """Keys are bound parameters (a text key with a quote is served, not interpolated) and no fragment read
    leaves its connection inside a transaction (which would hold a snapshot and locks)."""
    pg.load("alchemy_text", "k text PRIMARY KEY, x int", [(f"o'{i:03d}", i) for i in range(90)])
    engine = sqlalchemy.create_engine(_alchemy(pg.url))
    try:
        dataset = sf.read_sql(engine, table="alchemy_text", key="k", fragment_rows=20)
        assert [f.hi for f in dataset.source.fragments][:2] == ["o'019", "o'039"]
        assert _served(dataset.batch(90))["x"] == list(range(90))
        idle = pg.psql(
            "SELECT count(*) FROM pg_stat_activity WHERE state LIKE 'idle in transaction%' AND pid <> pg_backend_pid()"
        )
        assert idle.strip() == "0"
    finally:
        engine.dispose()


def test_password_never_appears_through_sqlalchemy(pg: PostgresServer):
    pg.load("alchemy_secret", "id bigint PRIMARY KEY, x double precision", [(i, i / 2) for i in range(120)])
    url = _alchemy(pg.url)
    dataset = sf.read_sql(url, table="alchemy_secret", key="id", fragment_rows=50, on_error="skip").batch(30)
    with dataset.iter_epoch(0) as iterator:
        next(iterator)
        state = iterator.get_state()
    surfaces = {
        "repr(connection)": repr(dataset.source.connection),
        "fragments": repr([(f.key, f.path, f.location) for f in dataset.source.fragments]),
        "fingerprint": json.dumps(dataset.fingerprint()),
        "state": json.dumps(state),
        "report": json.dumps(dataset.report.to_dict()),
        "source settings": json.dumps(dataset.source.settings),
    }
    errors = []
    for attempt in (
        lambda: sf.read_sql(url, table="no_such_table", key="id"),
        lambda: _served(sf.read_sql(url, query="SELECT id, 1 / (id - 7) AS x FROM alchemy_secret", key="id")),
        lambda: sf.read_sql(url.replace(PASSWORD, PASSWORD + "x"), table="alchemy_secret", key="id"),
        lambda: sf.read_sql(url.replace(str(pg.port), "1"), table="alchemy_secret", key="id"),
        lambda: sf.read_sql(f"nosuchdialect://u:{PASSWORD}@127.0.0.1/db", table="t", key="id"),
        lambda: sf.read_sql(f"mssql+pymssql://u:{PASSWORD}@127.0.0.1/db", table="t", key="id", timeout=3),
    ):
        with pytest.raises(sf.StreamfeedError) as caught:
            attempt()
        errors.append(caught.value)
    assert isinstance(errors[0], StorageError) and "no_such_table" in str(errors[0])
    assert "division by zero" in str(errors[1])
    assert isinstance(errors[2], sf.errors.NetworkError) and isinstance(errors[3], sf.errors.NetworkError)
    assert isinstance(errors[4], MissingDependencyError)
    assert isinstance(errors[5], (MissingDependencyError, ArgumentError))
    for number, error in enumerate(errors):
        surfaces[f"error {number}"] = f"{error!s} {error!r} {error.__cause__!r} {error.__context__!r}"
    quoted = PASSWORD.replace("-", "%2D")
    leaked = [name for name, text in surfaces.items() if PASSWORD in text or quoted in text]
    assert leaked == [], f"the password appears in {leaked}"
    assert "postgresql+psycopg://streamfeed@127.0.0.1" in surfaces["fingerprint"]


def test_a_connection_of_another_type_is_refused():
    with pytest.raises(ArgumentError, match="SQLAlchemy Engine"):
        sf.read_sql(42, table="t", key="id")  # type: ignore[arg-type]
