"""The column a user's name means, for a source that knows more than one spelling of its columns.

Every way a column is named (``label=``, ``columns=``, ``features=``,
``--label``, ...) asks here; a source with other spellings of a column (an
HDF5 dataset's path, ``/labels``, for the served ``labels``:
``sources/hdf5/names.py``) answers with its ``column_name``. A name the data
already has is itself, so a column an op adds is never taken for another.
"""

from __future__ import annotations

from typing import Any, Sequence, overload


def served_name(source: Any, name: str, known: Sequence[str] = ()) -> str:
    """The served column ``name`` means in ``source``'s data; ``known``: the columns the data has (ops' included)."""
    resolve = getattr(source, "column_name", None)
    if name in known or not callable(resolve):
        return name
    return str(resolve(name))


@overload
def served_names(source: Any, names: None, known: Sequence[str] = ()) -> None: ...
@overload
def served_names(source: Any, names: str, known: Sequence[str] = ()) -> str: ...
@overload
def served_names(source: Any, names: Sequence[str], known: Sequence[str] = ()) -> list[str]: ...
def served_names(source: Any, names: str | Sequence[str] | None, known: Sequence[str] = ()) -> Any:
    """:func:`served_name` of one name, of each of a list, or None: a keyword's value as the user gave it."""
    if names is None or isinstance(names, str):
        return names if names is None else served_name(source, names, known)
    return [served_name(source, name, known) for name in names]
