"""Which served column a user's name means: the served name, or the column's path in the file.

An HDF5 column is discovered under its dataset's path without the leading
slash (``labels``, ``meta/weight``): what the reader serves, and what
``inspect`` lists (:func:`default_name`). Users also write it as h5py and
``h5ls`` show it, ``/labels``; and a column named by the user
(``columns={"y": "/labels"}``) is still its dataset's. :func:`served_name`
takes each of these to the served name, in this one place, for every way a
column is named (``label=``, ``columns=``, ``features=``, ``--label``,
``--columns``, ``--features``): the source's ``column_name``.
"""

from __future__ import annotations

from typing import Sequence

from .catalog import Column, default_name

__all__ = ["column_path", "default_name", "served_name"]


def column_path(column: Column) -> str:
    """Where a column lives in the file, as ``read_catalog`` keys it (``/dataset``, ``/table/field``)."""
    if column.field is None:
        return column.dataset
    return f"{column.dataset}/{column.name if column.index is not None else column.field}"


def served_name(name: str, columns: Sequence[Column]) -> str:
    """The served column ``name`` means: itself if served, else the one column at that path (slash or not).

    Anything else comes back as it is, for the caller's own "no such
    column" error to name as the user wrote it.
    """
    if any(column.name == name for column in columns):
        return name
    key = "/" + name.strip("/")
    matches = [column.name for column in columns if column_path(column) == key]
    return matches[0] if len(matches) == 1 else name
