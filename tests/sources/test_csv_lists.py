"""CSV columns declared as delimited lists (``list_columns``) read as ragged rows.

Files are written by Python's ``csv`` module; the truth is a pure-Python
split of the same fields. Empty fields are empty lists, null tokens follow
``nulls=``, a token that is not a number is named (file, line, column) or
skipped under ``on_error="skip"``.
"""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest

import streamfeed as sf
from streamfeed.core_ragged import Ragged
from streamfeed.errors import ArgumentError, DataError

LISTS = {"tok": (" ", "int32"), "w": (";", "float64")}


def _fields(rng: np.random.Generator, index: int) -> list:
    tok = "" if index % 11 == 0 else " ".join(str(v) for v in rng.integers(-1000, 1000, size=int(rng.integers(1, 30))))
    w = ";".join(repr(float(v)) for v in rng.normal(size=index % 4))
    return [index, tok, w, f"text {index}, with a comma"]


def _write(path: Path, rows: list[list]) -> Path:
    with open(path, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["id", "tok", "w", "note"])
        writer.writerows(rows)
    return path


def _python_split(path: Path) -> dict[int, dict[str, list]]:
    with open(path, newline="") as handle:
        return {
            int(row["id"]): {
                "tok": [int(v) for v in row["tok"].split(" ")] if row["tok"] else [],
                "w": [float(v) for v in row["w"].split(";")] if row["w"] else [],
            }
            for row in csv.DictReader(handle)
        }


def _served(dataset) -> dict[int, dict[str, list]]:
    rows = {}
    for chunk in dataset.iter_epoch():
        assert isinstance(chunk["tok"], Ragged) and chunk["tok"].dtype == np.int32
        assert isinstance(chunk["w"], Ragged) and chunk["w"].dtype == np.float64
        for index, y in enumerate(chunk["id"].tolist()):
            assert y not in rows
            rows[y] = {"tok": chunk["tok"].row(index).tolist(), "w": chunk["w"].row(index).tolist()}
    return rows


@pytest.fixture()
def path(tmp_path) -> Path:
    rng = np.random.default_rng(4)
    return _write(tmp_path / "lists.csv", [_fields(rng, index) for index in range(3000)])


def test_list_columns_equal_a_python_split(path):
    dataset = sf.read_csv(path, list_columns=LISTS, fragment_bytes=20_000, count_cache=False)
    assert len(dataset.source.fragments) > 4
    assert _served(dataset) == _python_split(path)


def test_shuffled_padded_batches_hold_every_row_once(path):
    truth = _python_split(path)
    dataset = sf.read_csv(path, list_columns=LISTS, fragment_bytes=20_000, count_cache=False).shuffle(seed=2)
    seen = []
    for batch in dataset.batch(64, pad=sf.Pad(columns=["tok", "w"], mark="length")).iter_epoch():
        for y, row, length in zip(batch["id"].tolist(), batch["tok"], batch["tok_length"].tolist()):
            assert row[:length].tolist() == truth[y]["tok"] and not row[length:].any()
            seen.append(y)
    assert sorted(seen) == sorted(truth)


def _small(tmp_path: Path) -> Path:
    rows = [[0, "1 2", "0.5", ""], [1, "", "", ""], [2, "NA", "1", ""], [3, "4 5 6", "null", ""], [4, "9", "2; 3 ", ""]]
    return _write(tmp_path / "small.csv", rows)


def test_null_tokens_follow_the_null_policy(tmp_path):
    path = _small(tmp_path)
    with pytest.raises(DataError, match=r"Column 'tok' has a null.*small.csv, line 4"):
        list(sf.read_csv(path, list_columns=LISTS, count_cache=False).iter_epoch())
    (chunk,) = sf.read_csv(path, list_columns=LISTS, nulls="drop", count_cache=False).iter_epoch()
    assert chunk["id"].tolist() == [0, 1, 4] and chunk["tok"].to_list() == [[1, 2], [], [9]]
    assert chunk["w"].to_list() == [[0.5], [], [2.0, 3.0]]
    fill = {"tok": [-1], "w": [], "note": ""}
    (chunk,) = sf.read_csv(path, list_columns=LISTS, nulls="fill", fill=fill, count_cache=False).iter_epoch()
    assert chunk["tok"].to_list() == [[1, 2], [], [-1], [4, 5, 6], [9]]
    assert chunk["w"].to_list() == [[0.5], [], [1.0], [], [2.0, 3.0]]


def test_a_token_that_is_not_a_number_is_named_or_skipped(tmp_path):
    rows = [[0, "1 2", "", ""], [1, "3 x 4", "", ""], [2, "5", "", ""], [3, "6  7", "", ""], [4, "8", "1;b", ""]]
    path = _write(tmp_path / "bad.csv", rows)
    with pytest.raises(DataError, match=r"bad.csv, line 3, column 'tok'.*Found: 'x'"):
        list(sf.read_csv(path, list_columns=LISTS, count_cache=False).iter_epoch())
    dataset = sf.read_csv(path, list_columns=LISTS, on_error="skip", count_cache=False)
    (chunk,) = dataset.iter_epoch()
    assert chunk["id"].tolist() == [0, 2] and chunk["tok"].to_list() == [[1, 2], [5]]
    assert [(e.location, e.rows) for e in dataset.report.entries] == [("line 3", 1), ("line 5", 1), ("line 6", 1)]
    assert "'b' is not double" in dataset.report.entries[2].reason


def test_the_setting_is_in_the_fingerprint_and_checked(path):
    plain = sf.read_csv(path, count_cache=False)
    lists = sf.read_csv(path, list_columns=LISTS, count_cache=False)
    assert plain.fingerprint() != lists.fingerprint()
    assert lists.source.schema.field("tok").type.value_type.bit_width == 32
    with pytest.raises(ArgumentError, match="lists of string"):
        sf.read_csv(path, list_columns={"tok": (" ", "string")})
    with pytest.raises(ArgumentError, match="both column_types and list_columns"):
        sf.read_csv(path, list_columns=LISTS, column_types={"tok": "string"})
    with pytest.raises(ArgumentError, match="strings_can_be_null"):
        sf.read_csv(path, list_columns=LISTS, strings_can_be_null=True)
