"""A misspelt keyword of a ``read_*`` function is named with the keyword meant, not a TypeError of an internal class."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pytest

import streamfeed as sf


def test_a_misspelt_reader_keyword_is_named_with_the_near_one(tmp_path):
    pacsv.write_csv(pa.table({"x": np.arange(3)}), tmp_path / "d.csv")
    with pytest.raises(sf.ArgumentError) as excinfo:
        sf.read_csv(tmp_path / "d.csv", delimeter=",")  # type: ignore[call-arg]
    message = str(excinfo.value)
    assert "delimeter" in message and "delimiter" in message and "read_csv" in message
    assert "ErrorPolicy" not in message


def test_a_misspelt_error_keyword_is_named_with_the_near_one(tmp_path):
    pacsv.write_csv(pa.table({"x": np.arange(3)}), tmp_path / "d.csv")
    with pytest.raises(sf.ArgumentError) as excinfo:
        sf.read_csv(tmp_path / "d.csv", on_eror="skip")  # type: ignore[call-arg]
    assert "on_eror" in str(excinfo.value) and "on_error" in str(excinfo.value)
