"""CSV columns the user declares as delimited lists of numbers, read as ragged rows.

``read_csv(..., list_columns={"tokens": (" ", "int32")})`` parses the
column as text, splits each field on the delimiter and converts the tokens
to the element type, all in pyarrow compute (``split_pattern``, one
``cast`` of every token of the fragment): no Python loop over rows. The
result is a ``large_list`` column, which ``files/arrow.py`` serves as a
:class:`~streamfeed.core_ragged.Ragged` after the null policy.

What a field means (each field and token trimmed of surrounding whitespace):

* an empty field is an empty list;
* a field that is one of ``null_values`` (other than ``""``, which is the
  empty list) is a null, for the reader's ``nulls=`` policy: raised naming
  file, line and column, dropped, or filled (``fill={"tokens": []}``);
* a token that is not a number of the element type (``"1,,2"`` has an empty
  one) makes the row bad: raised naming file, line, column and token, or
  skipped and reported under ``on_error="skip"``. Finding it is the error
  path only: a bisection of casts over the fragment's tokens per bad row.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ...errors import ArgumentError, BadInputReport, DataError, SkippedUnit, describe
from ...files.arrow import one_array
from .messages import casts, preview
from .options import TypeSpec, _arrow_type


@dataclass(frozen=True)
class ListColumn:
    """One declared list column: its name, the delimiter between its values, the values' type."""

    name: str
    delimiter: str
    kind: pa.DataType


def list_columns_of(spec: Mapping[str, tuple[str, TypeSpec]] | None) -> tuple[ListColumn, ...]:
    """``read_csv``'s ``list_columns`` checked: a non-empty delimiter and a numeric element type each."""
    out = []
    for name, entry in (spec or {}).items():
        if not (isinstance(entry, tuple) and len(entry) == 2 and isinstance(entry[0], str) and entry[0]):
            raise ArgumentError(
                describe(
                    f"list_columns[{name!r}] is not a (delimiter, type) pair",
                    expected="a tuple such as (' ', 'int32'): a non-empty delimiter and a number type",
                    found=repr(entry)[:80],
                )
            )
        kind = _arrow_type(entry[1], name)
        if not (pa.types.is_integer(kind) or pa.types.is_floating(kind)):
            raise ArgumentError(
                describe(
                    f"list_columns[{name!r}] asks for lists of {kind}",
                    expected="lists of numbers: an integer or floating type ('int32', 'float32', ...)",
                    found=repr(entry[1]),
                    fix="read text lists as a string column and split them in a transform",
                )
            )
        out.append(ListColumn(name, entry[0], kind))
    return tuple(out)


def split_list_columns(
    table: pa.Table,
    lists: Sequence[ListColumn],
    null_values: Sequence[str],
    path: str,
    line_of: Callable[[int], int | str],
    skip: bool,
    report: BadInputReport,
) -> tuple[pa.Table, list[int]]:
    """``table`` with its list columns converted; the table rows left out (``skip``), in order.

    ``line_of`` names a table row's physical line (for messages only).
    Without ``skip`` the first bad token (in file order) raises.
    """
    tokens_null = pa.array(sorted({token.strip() for token in null_values} - {""}), type=pa.string())
    converted: dict[str, pa.Array] = {}
    bad: dict[int, tuple[str, str]] = {}  # table row -> (column, token)
    for spec in lists:
        if spec.name not in table.column_names:
            continue
        array, rows = _convert(table[spec.name], spec, tokens_null, stop_at_first=not skip)
        if array is not None:
            converted[spec.name] = array
        for row, token in rows.items():
            bad.setdefault(row, (spec.name, token))
    if bad and not skip:
        row = min(bad)
        name, token = bad[row]
        raise _bad_token(path, line_of(row), name, token, _spec(lists, name))
    for name, array in converted.items():
        table = table.set_column(table.column_names.index(name), name, array)
    if not bad:
        return table, []
    dropped = sorted(bad)
    for row in dropped:
        name, token = bad[row]
        reason = f"column {name!r}: {preview(token)} is not {_spec(lists, name).kind}"
        report.add(SkippedUnit(path, f"line {line_of(row)}", reason, 1))
    keep = np.ones(table.num_rows, dtype=bool)
    keep[dropped] = False
    return table.filter(pa.array(keep)), dropped


def _spec(lists: Sequence[ListColumn], name: str) -> ListColumn:
    return next(spec for spec in lists if spec.name == name)


def _convert(
    column: pa.ChunkedArray, spec: ListColumn, tokens_null: pa.Array, stop_at_first: bool
) -> tuple[pa.Array | None, dict[int, str]]:
    """The column as ``large_list<kind>`` (a bad row as an empty list) and its bad rows' first bad tokens.

    ``stop_at_first``: only the first bad row is looked for, and no column (None) is returned with it.
    """
    text = pc.utf8_trim_whitespace(one_array(column))
    null = _nulls(text, tokens_null)
    empty = pc.or_(pa.array(null), pc.equal(text, "")).fill_null(True)
    parts = pc.split_pattern(pc.if_else(empty, pa.scalar(None, pa.string()), text), pattern=spec.delimiter)
    lengths = pc.list_value_length(parts).fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)
    tokens = pc.list_flatten(parts)
    # Tokens are trimmed only when a cast fails: trimming 16 M tokens costs 0.67 s, a third of the conversion.
    values = _cast(tokens, spec.kind)
    bad: dict[int, str] = {}
    if values is None:
        tokens = pc.utf8_trim_whitespace(tokens)
        values = _cast(tokens, spec.kind)
        if values is None:
            bad = _bad_rows(tokens, lengths, spec.kind, stop_at_first)
    if bad and stop_at_first:
        return None, bad  # raised by the caller: later bad tokens were not looked for
    if bad:
        in_bad = np.zeros(len(lengths), dtype=bool)
        in_bad[list(bad)] = True
        values = pc.cast(tokens.filter(pa.array(np.repeat(~in_bad, lengths))), spec.kind)
        lengths = np.where(in_bad, 0, lengths)
    offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    mask = null
    array = pa.LargeListArray.from_arrays(pa.array(offsets), values, mask=pa.array(mask) if mask.any() else None)
    return array, bad


def _cast(tokens: pa.Array, kind: pa.DataType) -> pa.Array | None:
    try:
        return pc.cast(tokens, kind)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None


def _nulls(text: pa.Array, tokens_null: pa.Array) -> np.ndarray:
    """True where a (trimmed) field is a null token; looked up among fields no longer than the longest token.

    ``is_in`` over every field cost 0.42 s per million (measured), most of
    a list's fields being longer than any null token.
    """
    null = text.is_null().to_numpy(zero_copy_only=False).astype(bool)
    if not len(tokens_null):
        return null
    longest = max(len(token.encode()) for token in tokens_null.to_pylist())
    short = np.flatnonzero(
        pc.less_equal(pc.binary_length(text), longest).fill_null(False).to_numpy(zero_copy_only=False)
    )
    if short.size:
        hits = pc.is_in(text.take(pa.array(short)), value_set=tokens_null).to_numpy(zero_copy_only=False)
        null[short[hits.astype(bool)]] = True
    return null


def _bad_rows(tokens: pa.Array, lengths: np.ndarray, kind: pa.DataType, stop_at_first: bool) -> dict[int, str]:
    """Rows holding a token that does not cast, with that token: bisecting casts from each bad row on."""
    ends = np.cumsum(lengths)
    found: dict[int, str] = {}
    start = 0
    while start < len(tokens) and not casts(tokens[start:], kind):
        low, high = start, len(tokens)  # tokens[start:low] cast, tokens[start:high] do not
        while high - low > 1:
            middle = (low + high) // 2
            low, high = (middle, high) if casts(tokens[start:middle], kind) else (low, middle)
        row = int(np.searchsorted(ends, low, side="right"))
        found[row] = str(tokens[low].as_py())
        if stop_at_first:
            break
        start = int(ends[row])
    return found


def _bad_token(path: str, line: int | str, name: str, token: str, spec: ListColumn) -> DataError:
    return DataError(
        describe(
            f"A list in column {name!r} holds a value that is not {spec.kind}",
            where=f"{path}, line {line}, column {name!r}",
            expected=f"{spec.kind} values separated by {spec.delimiter!r} (list_columns), or an empty field",
            found=preview(token),
            fix="repair the value, or pass on_error='skip' to skip such rows and report them",
        )
    )
