"""read_sql's keywords, enumerated as tests/test_fingerprint_keywords.py does the other readers': each changes
the fingerprint and the cache key, or is excluded on purpose in core.NOT_ROW_SETTINGS."""

from __future__ import annotations

import inspect
import sqlite3
import typing
from pathlib import Path

import pytest

from streamfeed import readers_sql
from streamfeed.cache.key import cache_key
from streamfeed.core import NOT_ROW_SETTINGS
from streamfeed.errors import ArgumentError, ErrorOptions


def _database(path: Path) -> Path:
    with sqlite3.connect(path) as handle:
        handle.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, k TEXT, x REAL)")
        handle.executemany("INSERT INTO t VALUES (?, ?, ?)", [(i, f"k{i:03d}", i / 2) for i in range(90)])
    handle.close()
    return path


def test_every_keyword_is_in_the_fingerprint_and_the_cache_key(tmp_path: Path):
    base = {"connection": str(_database(tmp_path / "a.db")), "table": "t", "key": "id", "fragment_rows": 20}
    changed_values = {
        "connection": str(_database(tmp_path / "b.db")),  # another file with the same rows: another identity
        "table": None,
        "query": "SELECT * FROM t WHERE id < 80",
        "key": "k",
        "columns": ["id", "x"],
        "fragment_rows": 30,
        "nulls": "fill",
        "fill": 0.0,
    }
    fingerprint = readers_sql.read_sql(**base).source.fingerprint()
    key = cache_key(readers_sql.read_sql(**base).source)
    assert readers_sql.read_sql(**base).source.fingerprint() == fingerprint
    unchanged = []
    for name, parameter in inspect.signature(readers_sql.read_sql).parameters.items():
        names = list(typing.get_type_hints(ErrorOptions)) if parameter.kind is parameter.VAR_KEYWORD else [name]
        for keyword in names:
            if keyword in NOT_ROW_SETTINGS:
                continue
            assert keyword in changed_values, f"read_sql({keyword}=) is neither changed here nor excluded"
            arguments = {**base, keyword: changed_values[keyword]}
            if keyword == "table":
                arguments["query"] = "SELECT * FROM t"
            if keyword == "query":
                arguments.pop("table")
            if keyword == "fill":
                arguments["nulls"] = "fill"
                base_fill = readers_sql.read_sql(**{**base, "nulls": "fill", "fill": 1.0}).source.fingerprint()
                if readers_sql.read_sql(**arguments).source.fingerprint() == base_fill:
                    unchanged.append(keyword)
                continue
            changed = readers_sql.read_sql(**arguments).source
            if changed.fingerprint() == fingerprint or cache_key(changed) == key:
                unchanged.append(keyword)
    assert not unchanged, f"read_sql: changing {unchanged} keeps the fingerprint or the cache key"


def test_exactly_one_of_table_and_query(tmp_path: Path):
    database = str(_database(tmp_path / "a.db"))
    for arguments in ({}, {"table": "t", "query": "SELECT * FROM t"}):
        with pytest.raises(ArgumentError, match="exactly one of table= or query="):
            readers_sql.read_sql(database, key="id", **arguments)
