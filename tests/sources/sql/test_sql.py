"""read_sql against a real PostgreSQL (started by conftest.py) and SQLite files: types, keyset fragments,
snapshot semantics (changed tables refused, rows inserted mid-epoch), a server stopped mid-epoch, and the
password kept out of every surface."""

from __future__ import annotations

import datetime
import gc
import json
import sqlite3
import time
from pathlib import Path

import numpy as np
import pytest
from _postgres import PASSWORD, PostgresServer

import streamfeed as sf
from streamfeed.errors import FileChangedError, NetworkError, SchemaError, StateError, StorageError


def _ids(dataset: sf.Dataset, epoch: int = 0, state: dict | None = None) -> list[int]:
    with dataset.iter_epoch(epoch, state=state) as iterator:
        return [int(i) for batch in iterator for i in batch["id"]]


def _sqlite(tmp_path: Path, rows: int = 300) -> Path:
    path = tmp_path / "events.db"
    with sqlite3.connect(path) as handle:
        handle.execute("CREATE TABLE events (id INTEGER PRIMARY KEY, x REAL, label TEXT, day TEXT)")
        handle.executemany(
            "INSERT INTO events VALUES (?, ?, ?, ?)", [(i, i / 2, f"c{i % 3}", "2024-05-01") for i in range(rows)]
        )
    handle.close()
    return path


# ----------------------------------------------------------------------- types
def test_postgres_types_as_for_parquet(pg: PostgresServer):
    pg.load(
        "typed",
        "id int PRIMARY KEY, small smallint, big bigint, f real, d double precision, ok boolean, name text, "
        "day date, at timestamp, price numeric(10, 2)",
        [
            (i, i, 2**40 + i, i / 4, i / 8, i % 2 == 0, f"n{i}", "2024-01-02", "2024-01-02 00:00:01", f"{i}.25")
            for i in range(50)
        ],
    )
    dataset = sf.read_sql(pg.url, table="typed", key="id", fragment_rows=16)
    with dataset.batch(50).iter_epoch(0) as iterator:
        (batch,) = list(iterator)
    assert batch["id"].dtype == np.int32 and batch["small"].dtype == np.int16 and batch["big"].dtype == np.int64
    np.testing.assert_array_equal(batch["big"], 2**40 + np.arange(50))
    assert batch["f"].dtype == np.float32 and batch["d"].dtype == np.float64
    np.testing.assert_array_equal(batch["ok"], np.arange(50) % 2 == 0)
    assert list(batch["name"][:2]) == ["n0", "n1"]
    day = 1704153600.0  # 2024-01-02T00:00:00Z in seconds, as Parquet dates are served
    np.testing.assert_array_equal(batch["day"], np.full(50, day))
    np.testing.assert_array_equal(batch["at"], np.full(50, day + 1))
    assert batch["price"].dtype == np.float64
    np.testing.assert_array_equal(batch["price"], np.arange(50) + 0.25)


def test_postgres_type_without_equivalent_is_refused_naming_the_column(pg: PostgresServer):
    pg.load("blobs", "id int PRIMARY KEY, payload bytea", [(1, "\\x00ff")])
    with pytest.raises(SchemaError, match="payload") as caught:
        sf.read_sql(pg.url, table="blobs", key="id")
    assert "blobs" in str(caught.value) and "CAST" in str(caught.value)
    dataset = sf.read_sql(pg.url, query="SELECT id, encode(payload, 'hex') AS payload FROM blobs", key="id")
    with dataset.iter_epoch(0) as iterator:
        assert [list(batch["payload"]) for batch in iterator] == [["00ff"]]


def test_sqlite_types_and_a_mixed_column_refused(tmp_path: Path):
    path = _sqlite(tmp_path, 20)
    with sf.read_sql(path, table="events", key="id").batch(20).iter_epoch(0) as iterator:
        (batch,) = list(iterator)
    assert batch["id"].dtype == np.int64 and batch["x"].dtype == np.float64
    assert list(batch["label"][:3]) == ["c0", "c1", "c2"] and batch["day"][0] == "2024-05-01"
    with sqlite3.connect(path) as handle:
        handle.execute("UPDATE events SET x = 'oops' WHERE id = 17")
    handle.close()
    dataset = sf.read_sql(path, table="events", key="id", fragment_rows=8)
    with pytest.raises(SchemaError, match="'x'") as caught, dataset.iter_epoch(0) as iterator:
        list(iterator)
    assert "events" in str(caught.value) and "keys from 15 (exclusive) to 19" in str(caught.value)  # id 17's range


# ------------------------------------------------------------------- fragments
def test_fragments_are_key_ranges_with_exact_counts(pg: PostgresServer):
    keys = [3 * i + 1 for i in range(100)]  # gaps between keys: ranges, not positions
    pg.load("ranges", "id bigint PRIMARY KEY, x double precision", [(k, k / 2) for k in reversed(keys)])
    dataset = sf.read_sql(pg.url, table="ranges", key="id", fragment_rows=30)
    fragments = dataset.source.fragments
    assert [f.num_rows for f in fragments] == [30, 30, 30, 10] and len(dataset) == 100
    assert [f.hi for f in fragments] == [keys[29], keys[59], keys[89], keys[99]]
    assert [f.lo for f in fragments] == [None, keys[29], keys[59], keys[89]]
    assert _ids(dataset) == keys
    assert sorted(_ids(dataset.shuffle(seed=4))) == keys


def test_key_that_is_not_unique_is_refused(pg: PostgresServer):
    pg.load("dupes", "id int, x double precision", [(1, 0.5), (1, 0.5), (2, 1.0)])
    with pytest.raises(SchemaError, match="unique") as caught:
        sf.read_sql(pg.url, table="dupes", key="id")
    assert "dupes" in str(caught.value) and "'id'" in str(caught.value)


# ------------------------------------------------------------------- snapshots
def test_state_of_a_changed_postgres_table_is_refused(pg: PostgresServer):
    pg.load("changing", "id bigint PRIMARY KEY, x double precision", [(i, i / 2) for i in range(200)])
    dataset = sf.read_sql(pg.url, table="changing", key="id", fragment_rows=50).batch(40)
    with dataset.iter_epoch(0) as iterator:
        next(iterator)
        next(iterator)
        state = iterator.get_state()
    assert _ids(sf.read_sql(pg.url, table="changing", key="id", fragment_rows=50).batch(40), state=state) == list(
        range(80, 200)
    )
    pg.psql("INSERT INTO changing VALUES (500, 250)")
    reopened = sf.read_sql(pg.url, table="changing", key="id", fragment_rows=50).batch(40)
    with pytest.raises(StateError) as caught:
        reopened.iter_epoch(0, state=state)
    assert "changing" in str(caught.value) and "200" in str(caught.value) and "201" in str(caught.value)


def test_state_of_a_changed_sqlite_file_is_refused(tmp_path: Path):
    path = _sqlite(tmp_path)
    with sf.read_sql(path, table="events", key="id", fragment_rows=64).batch(32).iter_epoch(0) as iterator:
        next(iterator)
        state = iterator.get_state()
    with sqlite3.connect(path) as handle:
        handle.execute("UPDATE events SET x = 0 WHERE id = 5")  # same count and keys: the file's stamp sees it
    handle.close()
    with pytest.raises(StateError, match="events"):
        sf.read_sql(path, table="events", key="id", fragment_rows=64).batch(32).iter_epoch(0, state=state)


def test_rows_inserted_during_an_epoch(pg: PostgresServer):
    """Beyond the last key at open: not served (this epoch or the next). Inside a range not yet read: refused."""
    pg.load("live", "id bigint PRIMARY KEY, x double precision", [(2 * i, i) for i in range(100)])
    dataset = sf.read_sql(pg.url, table="live", key="id", fragment_rows=25).batch(25)
    served = []
    with dataset.iter_epoch(0) as iterator:
        served += list(next(iterator)["id"])
        pg.psql("INSERT INTO live SELECT g, 0 FROM generate_series(1000, 1099) AS g")
        served += [i for batch in iterator for i in batch["id"]]
    assert served == [2 * i for i in range(100)]
    # after the open, before the range is read (an epoch reads ahead: a small table's ranges are all read by the
    # time its first batch is out, so the insert lands between open and epoch, which is the same to the source)
    pg.psql("INSERT INTO live VALUES (151, 0)")  # inside the range (148, 198] of the last fragment
    with pytest.raises(FileChangedError) as caught, dataset.iter_epoch(1) as iterator:
        list(iterator)
    message = str(caught.value)
    assert "live" in message and "148" in message and "25 rows" in message and "26 rows" in message


# --------------------------------------------------------------------- faults
def test_server_stopped_mid_epoch_is_a_network_error_naming_the_table(pg: PostgresServer):
    pg.load("faulty", "id bigint PRIMARY KEY, x double precision", [(i, i / 2) for i in range(400)])
    dataset = sf.read_sql(pg.url, table="faulty", key="id", fragment_rows=50).batch(50)
    try:
        with dataset.iter_epoch(0) as iterator:
            next(iterator)
            pg.stop()
            started = time.monotonic()
            with pytest.raises(NetworkError) as caught:
                list(iterator)
            assert time.monotonic() - started < 30
    finally:
        pg.start()
    message = str(caught.value)
    assert "faulty" in message and f"127.0.0.1:{pg.port}" in message and PASSWORD not in message
    assert _ids(dataset) == list(range(400))  # the server back: the pool's dropped connections are replaced


def test_connections_are_released_with_the_dataset(pg: PostgresServer):
    pg.load("pooled", "id bigint PRIMARY KEY, x double precision", [(i, i / 2) for i in range(300)])

    def open_connections() -> int:
        count = "SELECT count(*) FROM pg_stat_activity WHERE usename = 'streamfeed' AND pid <> pg_backend_pid()"
        return int(pg.psql(count).strip())

    gc.collect()
    time.sleep(0.2)
    before = open_connections()
    dataset = sf.read_sql(pg.url, table="pooled", key="id", fragment_rows=20)
    assert _ids(dataset.shuffle(seed=1)).__len__() == 300
    assert open_connections() > before
    del dataset
    gc.collect()
    deadline = time.monotonic() + 10
    while open_connections() > before and time.monotonic() < deadline:
        time.sleep(0.1)
    assert open_connections() == before


# ---------------------------------------------------------------- credentials
def test_password_never_appears(pg: PostgresServer, tmp_path: Path):
    pg.load("secret", "id bigint PRIMARY KEY, x double precision", [(i, i / 2) for i in range(120)])
    dataset = sf.read_sql(pg.url, table="secret", key="id", fragment_rows=50, on_error="skip").batch(30)
    with dataset.iter_epoch(0) as iterator:
        next(iterator)
        state = iterator.get_state()
    surfaces = {
        "repr(source)": repr(dataset.source),
        "repr(connection)": repr(dataset.source.connection),
        "fragments": repr([(f.key, f.path, f.location) for f in dataset.source.fragments]),
        "fingerprint": json.dumps(dataset.fingerprint()),
        "state": json.dumps(state),
        "report": json.dumps(dataset.report.to_dict()),
        "source settings": json.dumps(dataset.source.settings),
    }
    errors = []
    for attempt in (
        lambda: sf.read_sql(pg.url, table="no_such_table", key="id"),
        lambda: sf.read_sql(pg.url, table="secret", key="no_such_column"),
        lambda: sf.read_sql(pg.url.replace(PASSWORD, PASSWORD + "x"), table="secret", key="id"),
        lambda: sf.read_sql(f"mysql://u:{PASSWORD}@127.0.0.1/db", table="secret", key="id"),
        lambda: sf.read_sql(pg.url.replace(str(pg.port), "1"), table="secret", key="id"),
    ):
        with pytest.raises(sf.StreamfeedError) as caught:
            attempt()
        errors.append(caught.value)
    assert isinstance(errors[0], StorageError) and "no_such_table" in str(errors[0])
    assert isinstance(errors[2], NetworkError) and isinstance(errors[4], NetworkError)
    for number, error in enumerate(errors):
        surfaces[f"error {number}"] = f"{error!s} {error!r} {error.__cause__!r} {error.__context__!r}"
    quoted = PASSWORD.replace("-", "%2D")
    leaked = [name for name, text in surfaces.items() if PASSWORD in text or quoted in text]
    assert leaked == [], f"the password appears in {leaked}"
    assert "postgresql://streamfeed@127.0.0.1" in surfaces["fingerprint"]


def test_connection_strings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    path = _sqlite(tmp_path, 10)
    monkeypatch.chdir(tmp_path)
    relative = sf.read_sql("sqlite:///events.db", table="events", key="id")  # SQLAlchemy's spelling
    absolute = sf.read_sql(f"sqlite:///{path}", table="events", key="id")  # sqlite:////abs/path
    assert relative.fingerprint() == absolute.fingerprint() == sf.read_sql(path, table="events", key="id").fingerprint()
    with pytest.raises(sf.NotFoundError, match="missing.db"):
        sf.read_sql("missing.db", table="events", key="id")
    with pytest.raises(sf.ArgumentError, match="Unknown kind of SQL connection"):
        sf.read_sql("events.csv", table="events", key="id")


@pytest.mark.parametrize(
    ("ddl", "key_of"),
    [
        ("k text PRIMARY KEY", lambda i: f"key-{i:04d}"),
        ("k timestamp PRIMARY KEY", lambda i: f"2024-03-01 00:00:{i % 60:02d}.{i:06d}"),
        ("k date PRIMARY KEY", lambda i: (datetime.date(2020, 1, 1) + datetime.timedelta(days=i)).isoformat()),
    ],
    ids=["text", "timestamp", "date"],
)
def test_postgres_keys_of_other_types(pg: PostgresServer, ddl: str, key_of):
    """Key boundaries come back as Python values (str, datetime, date) and are bound as the ranges' parameters."""
    pg.load("keyed", f"{ddl}, id int", [(key_of(i), i) for i in reversed(range(120))])
    dataset = sf.read_sql(pg.url, table="keyed", key="k", fragment_rows=25)
    assert [f.num_rows for f in dataset.source.fragments] == [25, 25, 25, 25, 20]
    assert sorted(_ids(dataset.shuffle(seed=2))) == list(range(120))


def test_nulls_follow_the_policy_naming_the_table(pg: PostgresServer):
    pg.load("holes", "id int PRIMARY KEY, x double precision", [(i, "" if i == 33 else i / 2) for i in range(60)])
    with pytest.raises(sf.DataError) as caught, sf.read_sql(pg.url, table="holes", key="id").iter_epoch(0) as it:
        list(it)
    assert "holes" in str(caught.value) and "'x'" in str(caught.value)
    dropped = sf.read_sql(pg.url, table="holes", key="id", fragment_rows=20, nulls="drop")
    assert not dropped.source.exact_counts and len(dropped) == 59
    assert _ids(dropped) == [i for i in range(60) if i != 33]
    filled = sf.read_sql(pg.url, table="holes", key="id", nulls="fill", fill=-1.0)
    with filled.batch(60).iter_epoch(0) as iterator:
        assert next(iterator)["x"][33] == -1.0


def test_a_restarted_server_drops_every_pooled_connection_not_just_the_first(pg: PostgresServer):
    """All of the pool's idle connections die with the server; the retry must not take a second dead one.

    The suite once failed here: two read threads had left two idle
    connections, the first read after the restart took one (dead) and its
    one retry took the other (dead too), so the epoch raised.
    """
    pg.load("restarted", "id bigint PRIMARY KEY, x double precision", [(i, i / 2) for i in range(100)])
    dataset = sf.read_sql(pg.url, table="restarted", key="id", fragment_rows=50).batch(50)
    pool = dataset.source.pool
    with pool.borrowed(), pool.borrowed(), pool.borrowed():  # three open connections, given back idle
        pass
    assert pool.idle == 3
    pg.stop()
    pg.start()
    assert _ids(dataset) == list(range(100))
