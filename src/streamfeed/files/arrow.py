"""Arrow tables to chunks of NumPy arrays, under the user's null policy.

Shared by every Arrow-backed source (Parquet, CSV). Column-at-a-time and
zero-copy where Arrow allows it; never a loop over rows. Nulls and NaN
never turn silently into numbers: they raise (naming column, file and
row), are dropped, or are filled with the user's value.

**Dates and times become float64 seconds.** A ``date32``/``date64`` or
``timestamp`` column is yielded as float64 seconds since 1970-01-01 00:00
UTC, before the null policy applies: a timestamp with a time zone is
converted to UTC (Arrow stores it so); a naive timestamp is taken as UTC
(its wall-clock reading, no local time zone is assumed); a date is its
midnight, UTC. ``time32``/``time64`` become seconds since midnight and
``duration`` seconds. Float64 keeps about 0.24 microseconds at today's dates
(2**-22 s), so nanoseconds are rounded. Why: a model takes numbers, Keras
and every backend take float64, and ``datetime64`` arrays cannot be packed,
normalised or saved as JSON statistics. A fill value for such a column
(``nulls="fill"``) is in seconds too, or a ``datetime``/``date``/
``numpy.datetime64``, converted the same way. :func:`temporal_columns`
names the converted columns of a schema (the statistics record them as
dates) and :func:`seconds_to_arrow` converts seconds back to the Arrow type.
"""

from __future__ import annotations

import contextvars
import dataclasses
import datetime as dt
import functools
import json
from dataclasses import dataclass, field
from typing import Any, Callable, Collection, Literal, Mapping, Union, cast

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..core import Chunk, NullPolicy
from ..core_ragged import Ragged
from ..errors import ArgumentError, DataError, SchemaError, describe

ColumnNulls = Union[NullPolicy, Literal["mask"]]
"""A user's null policy, or ``"mask"``: nulls become masked entries (for inspection, never for training)."""


@dataclass(frozen=True)
class ColumnPolicy:
    """How to treat nulls, NaN and variable-length lists when converting.

    ``fill`` is one value for every column or a dict by column name.
    ``list_lengths`` pads variable-length list columns to a fixed length
    (a longer list raises: nothing is truncated silently). ``nulls="mask"``
    (not offered by the ``read_*`` functions) leaves nulls visible as the
    masked entries of ``numpy.ma`` arrays, NaN staying a value: the quality
    report counts both before any policy applies.
    """

    nulls: ColumnNulls = "raise"
    fill: Any = None
    list_lengths: Mapping[str, int] = field(default_factory=dict)
    pad_value: Any = 0

    def identity(self) -> dict:
        """The policy as JSON-able values, for a fingerprint: another policy yields other rows."""
        fill = sorted((str(k), repr(v)) for k, v in self.fill.items()) if isinstance(self.fill, Mapping) else self.fill
        return {
            "nulls": self.nulls,
            "fill": repr(fill),
            "list_lengths": {str(k): int(v) for k, v in self.list_lengths.items()},
        }

    def fill_for(self, column: str, where: str) -> Any:
        """The value for ``column``'s nulls; ``where`` (file, row) is named if there is none.

        A ValueError, not a DataError: it is a setting to fix, which
        ``on_error="skip"`` must not turn into silently skipped rows.
        """
        value = self.fill.get(column) if isinstance(self.fill, Mapping) else self.fill
        if value is None:
            raise ArgumentError(
                describe(
                    f"Column {column!r} has a null or NaN value but no fill value",
                    where=where,
                    expected="a fill value for every column with nulls (nulls='fill')",
                    fix=f"add {column!r} to fill={{...}}, or pass one fill value for every column",
                )
            )
        return value


DEFAULT_POLICY = ColumnPolicy()
"""The default policy (nulls raise), shared: a ColumnPolicy is immutable."""


@dataclass(frozen=True)
class Where:
    """Where a table came from, for error messages: file, row group, first row."""

    path: str
    row_group: int | None = None
    first_row: int = 0
    missing_columns: frozenset[str] = frozenset()
    locate: Callable[[int], int] | None = None  # table row -> row of the group, when a filter removed rows

    def row(self, index: int) -> str:
        group = f", row group {self.row_group}" if self.row_group is not None else ""
        within = self.locate(index) if self.locate is not None else index
        return f"{self.path}{group}, row {self.first_row + within} of the file"


# ------------------------------------------------------------- dates and times
_PER_SECOND = {"s": 1, "ms": 1_000, "us": 1_000_000, "ns": 1_000_000_000}
_DAY = 86_400
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)


def is_temporal(kind: pa.DataType) -> bool:
    """A date, timestamp, time of day or duration type (dictionary-encoded or not)."""
    if pa.types.is_dictionary(kind):
        kind = kind.value_type
    return any(test(kind) for test in (pa.types.is_timestamp, pa.types.is_date, pa.types.is_time, pa.types.is_duration))


def temporal_columns(schema: Any) -> dict[str, str]:
    """``{column: Arrow type}`` of the columns of ``schema`` the sources yield as float64 seconds.

    Anything but a ``pa.Schema`` (a source without one: None) has none.
    """
    if not isinstance(schema, pa.Schema):
        return {}
    return {field.name: str(field.type) for field in schema if is_temporal(field.type)}


def temporal_to_seconds(column: pa.ChunkedArray) -> pa.ChunkedArray:
    """A date, timestamp, time or duration column as float64 seconds (module doc); nulls stay nulls.

    Whole seconds and the remainder are converted apart, so nanosecond
    timestamps lose only float64's own rounding.
    """
    kind = column.type
    if pa.types.is_dictionary(kind):
        column = column.cast(kind.value_type)
        kind = column.type
    if pa.types.is_date32(kind):
        return pc.multiply(column.cast(pa.int32()).cast(pa.float64()), float(_DAY))
    per = 1_000 if pa.types.is_date64(kind) else _PER_SECOND[kind.unit]
    ints = column.cast(pa.int32() if pa.types.is_time32(kind) else pa.int64()).cast(pa.int64())
    if per == 1:
        return ints.cast(pa.float64())
    whole = pc.divide(ints, per)  # truncated towards zero; the remainder has the sign of the value
    part = pc.subtract(ints, pc.multiply(whole, per))
    return pc.add(whole.cast(pa.float64()), pc.divide(part.cast(pa.float64()), float(per)))


def temporals_to_seconds(table: pa.Table) -> pa.Table:
    """``table`` with every date, timestamp, time and duration column as float64 seconds."""
    for index in _temporal_indices(table.schema):
        table = table.set_column(index, table.schema.field(index).name, temporal_to_seconds(table.column(index)))
    return table


@functools.lru_cache(maxsize=256)
def _temporal_indices(schema: pa.Schema) -> tuple[int, ...]:
    """The indices of ``schema``'s temporal columns, once per schema: testing each field's type for every
    fragment cost 0.3 ms a 33-column row group, 5 % of reading it (measured)."""
    return tuple(index for index, column_field in enumerate(schema) if is_temporal(column_field.type))


def seconds_to_arrow(values: np.ndarray, kind: pa.DataType) -> pa.Array:
    """The inverse of :func:`temporal_to_seconds`: float64 seconds (NaN: null) as an array of ``kind``.

    Rounded to ``kind``'s unit (a date: the day the second falls in).
    """
    values = np.asarray(values, dtype=np.float64)
    missing = np.isnan(values)
    finite = np.where(missing, 0.0, values)
    if pa.types.is_date32(kind):
        storage = pa.array(np.floor(finite / _DAY).astype(np.int32), mask=missing)
    else:
        per = 1_000 if pa.types.is_date64(kind) else _PER_SECOND[kind.unit]
        ints = np.round(finite * per).astype(np.int64)
        if pa.types.is_date64(kind):
            ints = np.floor_divide(ints, _DAY * 1_000) * (_DAY * 1_000)
        storage = pa.array(ints.astype(np.int32) if pa.types.is_time32(kind) else ints, mask=missing)
    return storage.view(kind)


def datetime64_seconds(values: np.ndarray) -> np.ndarray:
    """NumPy ``datetime64`` as float64 seconds since the epoch (``timedelta64``: seconds); NaT becomes NaN."""
    if values.dtype.kind == "M":
        if np.datetime_data(values.dtype)[0] in ("Y", "M"):  # calendar units have no fixed length in seconds
            values = values.astype("datetime64[D]")
        values = values - np.datetime64(0, "s")
    return values / np.timedelta64(1, "s")


def value_seconds(value: Any) -> Any:
    """A date or time value (Python or NumPy) as float seconds, the way the columns are converted; else ``value``."""
    if isinstance(value, dt.datetime):
        aware = value if value.tzinfo is not None else value.replace(tzinfo=dt.timezone.utc)
        return (aware - _EPOCH).total_seconds()
    if isinstance(value, dt.date):
        return float((value - dt.date(1970, 1, 1)).days * _DAY)
    if isinstance(value, dt.time):
        return value.hour * 3600 + value.minute * 60 + value.second + value.microsecond / 1e6
    if isinstance(value, dt.timedelta):
        return value.total_seconds()
    if isinstance(value, (np.datetime64, np.timedelta64)):
        return float(datetime64_seconds(np.asarray([value]))[0])
    return value


def apply_null_policy(
    table: pa.Table, policy: ColumnPolicy, where: Where, clean: Collection[str] = frozenset()
) -> pa.Table:
    """Raises on or fills nulls and floating NaN, per the policy (``clean``: columns known to have none).

    ``nulls="drop"`` is :func:`table_to_chunk`'s, which also keeps the
    dropped rows' numbers for later error messages.
    """
    for index, name in enumerate(table.column_names):
        if name in clean:
            continue
        column = table[name]
        bad = _bad_mask(column)
        if bad is None:
            continue
        if policy.nulls == "raise":
            first = pc.index(bad, True).as_py()
            missing = " (this file has no such column)" if name in where.missing_columns else ""
            raise DataError(
                describe(
                    f"Column {name!r} has a null or NaN value{missing}",
                    where=where.row(first),
                    expected="no nulls in the columns read (nulls='raise', the default)",
                    found=f"{column.null_count} nulls and NaN among {len(column)} rows of this row group",
                    fix="pass nulls='drop' to drop such rows or nulls='fill' with fill=VALUE, "
                    "or leave the column out with columns=[...]",
                )
            )
        value = policy.fill_for(name, where.row(pc.index(bad, True).as_py()))
        if pa.types.is_floating(column.type):
            value = value_seconds(value)  # dates were converted to seconds: so is a date as fill value
        filled = column.fill_null(_fill_scalar(value, column.type, name)) if column.null_count else column
        if pa.types.is_floating(filled.type):
            filled = pc.if_else(pc.is_nan(filled), pa.scalar(value, type=filled.type), filled)
        table = table.set_column(index, name, filled)
    return table


def _fill_scalar(value: Any, kind: pa.DataType, name: str) -> pa.Scalar:
    """``value`` as a scalar of the column's type; one that is not (0 for a list column: ``[]`` is) is refused."""
    try:
        return pa.scalar(value, type=kind)
    except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
        raise ArgumentError(
            describe(
                f"The fill value for column {name!r} is not a value of its type",
                expected=f"a value of type {kind}"
                + (
                    " (a list such as [] for a list column)"
                    if pa.types.is_list(kind) or pa.types.is_large_list(kind)
                    else ""
                ),
                found=repr(value)[:80],
                fix=f"pass fill={{{name!r}: VALUE}} of that type",
            )
        ) from exc


def _clean_rows(table: pa.Table, clean: Collection[str] = frozenset()) -> pa.ChunkedArray | None:
    """True where no column is null or NaN; None when every row is clean (``clean``: columns known to be)."""
    keep = None
    for name in table.column_names:
        if name in clean:
            continue
        bad = _bad_mask(table[name])
        if bad is not None:
            keep = pc.invert(bad) if keep is None else pc.and_(keep, pc.invert(bad))
    return keep


def _after_drop(where: Where, keep: pa.ChunkedArray) -> Where:
    """``where`` for the kept rows, so that later errors still name rows of the file.

    The kept rows' old numbers are looked up only when an error asks.
    """
    before = where.locate or (lambda index: index)
    return dataclasses.replace(where, locate=lambda index: before(pc.indices_nonzero(keep)[index].as_py()))


def _bad_mask(column: pa.ChunkedArray) -> pa.ChunkedArray | None:
    """True where a value is null or NaN; None when there are none (cheap check first)."""
    has_null = column.null_count > 0
    is_float = pa.types.is_floating(column.type)
    has_nan = is_float and _may_have_nan(column) and bool(pc.any(pc.is_nan(column)).as_py())
    if not (has_null or has_nan):
        return None
    return pc.is_null(column, nan_is_null=is_float)


def _may_have_nan(column: pa.ChunkedArray) -> bool:
    """False only if no value is NaN: NumPy's maximum propagates NaN, and reduces 3x faster than a sum
    (9.6 against 29 µs for 65 536 float32, measured) and 8x faster than ``pc.is_nan``."""
    for chunk in column.chunks:
        if chunk.null_count or (len(chunk) and np.isnan(np.maximum.reduce(chunk.to_numpy(zero_copy_only=False)))):
            return True
    return False


TEXT_AS_ARROW: contextvars.ContextVar[bool] = contextvars.ContextVar("streamfeed_text_as_arrow", default=False)
"""While True (in the thread reading), :func:`table_to_chunk` leaves text and binary columns as
``pyarrow`` arrays, for a pass that counts their values (``compute_stats``) without a Python object
per value: 0.08 CPU s per million strings, a quarter of a CSV epoch (issue 28)."""


def is_text(kind: pa.DataType) -> bool:
    """A string or binary type (of any offset width), or a dictionary of one."""
    kind = kind.value_type if pa.types.is_dictionary(kind) else kind
    return bool(
        pa.types.is_string(kind)
        or pa.types.is_large_string(kind)
        or pa.types.is_binary(kind)
        or pa.types.is_large_binary(kind)
    )


def column_to_numpy(column: pa.ChunkedArray, name: str, policy: ColumnPolicy, where: Where) -> np.ndarray:
    """One column as a NumPy array; lists as 2-D, dictionaries decoded to values.

    Text stays an Arrow array while :data:`TEXT_AS_ARROW` is set (a statistics pass).
    """
    kind = column.type
    if TEXT_AS_ARROW.get() and is_text(kind):
        return one_array(column)
    if is_text(kind):
        return text_objects(column)
    if pa.types.is_dictionary(kind):
        column = column.cast(kind.value_type)
        kind = column.type
    if pa.types.is_fixed_size_list(kind):
        width = kind.list_size
        flat = column_to_numpy(pc.list_flatten(column), name, policy, where)
        return flat.reshape(len(column), width, *flat.shape[1:])
    if pa.types.is_list(kind) or pa.types.is_large_list(kind):
        return _pad_lists(column, name, policy, where)
    combined = one_array(column)
    return combined.to_numpy(zero_copy_only=False)


# A text column with at most this share of distinct values in its first rows is read through its dictionary.
SHARED_TEXT_SHARE = 0.25
_TEXT_SAMPLE_ROWS = 4096


def text_objects(column: pa.ChunkedArray) -> np.ndarray:
    """A string or binary column as an object array, each distinct value one Python object where few repeat.

    A column of few distinct values (a category) is decoded through its
    dictionary: one object per distinct value, the rows pointing at them.
    Measured on 350 000 strings of 1 000 values: 9.1 against 25.6 ms to
    read, and a shuffled gather of 2.45 M such rows 164 against 336 ms,
    since ``np.take`` touches each object's reference count and 1 000
    objects stay in cache where 2.45 M do not. Values are the same either
    way; a column whose first rows are mostly distinct (ids, URLs) is read
    as before (encoding 350 000 distinct strings cost 78 ms against 25),
    and so is one with nulls (they stay ``None``).
    """
    kind = column.type
    if pa.types.is_dictionary(kind) and column.num_chunks == 1 and column.null_count == 0:
        return _through_dictionary(column.chunk(0))
    if pa.types.is_dictionary(kind):
        column = column.cast(kind.value_type)
    combined = one_array(column)
    if combined.null_count == 0 and len(combined) > _TEXT_SAMPLE_ROWS:
        sample = pc.dictionary_encode(combined.slice(0, _TEXT_SAMPLE_ROWS))
        if len(sample.dictionary) <= SHARED_TEXT_SHARE * _TEXT_SAMPLE_ROWS:
            return _through_dictionary(pc.dictionary_encode(combined))
    return combined.to_numpy(zero_copy_only=False)


def _through_dictionary(array: pa.DictionaryArray) -> np.ndarray:
    """A dictionary array without nulls as objects: one per dictionary value, the rows pointing at them."""
    return array.dictionary.to_numpy(zero_copy_only=False)[array.indices.to_numpy(zero_copy_only=False)]


def one_array(column: pa.ChunkedArray) -> pa.Array:
    """The column as one Arrow array (its only chunk as it is; several joined)."""
    return column.combine_chunks() if column.num_chunks != 1 else column.chunk(0)


def _pad_lists(column: pa.ChunkedArray, name: str, policy: ColumnPolicy, where: Where) -> np.ndarray:
    length = policy.list_lengths.get(name)
    if length is None:
        return cast(np.ndarray, _ragged(column, name, where))  # a Ragged stands in for a column (core_ragged.py)
    lengths = pc.list_value_length(column).to_numpy(zero_copy_only=False)
    if lengths.size and lengths.max() > length:
        first = int(np.argmax(lengths > length))
        raise DataError(
            describe(
                f"A list in column {name!r} is longer than its padding length",
                where=where.row(first),
                expected=f"at most {length} values",
                found=f"{int(lengths[first])}",
                fix=f"raise list_lengths[{name!r}]; streamfeed never truncates silently",
            )
        )
    values = pc.list_flatten(column).to_numpy(zero_copy_only=False)
    out = np.full((len(lengths), length), policy.pad_value, dtype=values.dtype)
    rows = np.repeat(np.arange(len(lengths)), lengths)
    starts = np.cumsum(lengths) - lengths
    cols = np.arange(len(values)) - np.repeat(starts, lengths)
    out[rows, cols] = values
    return out


def _ragged(column: pa.ChunkedArray, name: str, where: Where) -> Ragged:
    """A ``list``/``large_list`` column of numbers as a :class:`~streamfeed.core_ragged.Ragged` (no row loop).

    Lists of anything but numbers (nested lists, strings, structs) are
    refused: their in-memory form is not settled. A null list was already
    dealt with by the null policy; a null value inside a list raises here,
    naming its row.
    """
    inner = column.type.value_type
    if not (pa.types.is_integer(inner) or pa.types.is_floating(inner) or pa.types.is_boolean(inner)):
        raise SchemaError(
            describe(
                f"Column {name!r} holds variable-length lists of {inner}",
                where=where.path,
                expected="variable-length lists of numbers (read as ragged rows), or fixed-size lists",
                found=f"type {column.type}",
                fix=f"leave the column out with columns=[...], or pass list_lengths={{{name!r}: K}} "
                "where its values are numbers",
            )
        )
    array = one_array(column)
    if array.null_count:  # a null list left by nulls="mask": no ragged form for it
        array = array.fill_null(pa.scalar([], type=array.type))
    array = array.cast(pa.large_list(inner))
    values = array.flatten()
    if values.null_count:
        lengths = pc.list_value_length(array).to_numpy(zero_copy_only=False)
        row = int(np.searchsorted(np.cumsum(lengths), pc.index(pc.is_null(values), True).as_py(), side="right"))
        raise DataError(
            describe(
                f"A list in column {name!r} holds a null value",
                where=where.row(row),
                expected="lists of numbers without nulls inside them",
                found=f"{values.null_count} null values inside lists of this row group",
                fix="clean the lists, or leave the column out with columns=[...]",
            )
        )
    offsets = array.offsets.to_numpy(zero_copy_only=False)  # a sliced array's: into the whole child array
    return Ragged(values.to_numpy(zero_copy_only=False), offsets - offsets[0])


def table_to_chunk(table: pa.Table, policy: ColumnPolicy, where: Where) -> Chunk:
    """Converts a table to a chunk: dates and times to float64 seconds, then the null policy."""
    table = temporals_to_seconds(table)
    # Columns with nothing for the policy to do go straight to NumPy, each converted once (not once to look
    # for NaN and again to serve): 0.024 -> 0.017 CPU s per million rows of 33 float32 (measured).
    plain = {} if policy.nulls == "mask" else _plain_columns(table)
    if len(plain) < table.num_columns:
        if policy.nulls == "drop":
            keep = _clean_rows(table, plain)
            if keep is not None:
                table, where, plain = table.filter(keep), _after_drop(where, keep), {}
        elif policy.nulls != "mask":
            table = apply_null_policy(table, policy, where, plain)
    chunk = {
        name: plain[name]
        if name in plain
        else _with_row_shape(column_to_numpy(table[name], name, policy, where), table.schema.field(name))
        for name in table.column_names
    }
    if policy.nulls == "mask":
        chunk = {name: _mask_nulls(values, table[name]) for name, values in chunk.items()}
    return chunk


def _plain_columns(table: pa.Table) -> dict[str, np.ndarray]:
    """The columns of one chunk of plain numbers with no null and no NaN, as NumPy (zero-copy)."""
    plain: dict[str, np.ndarray] = {}
    for column_field, column in zip(table.schema, table.columns):
        kind = column_field.type
        if column.num_chunks != 1 or column.null_count or column_field.metadata:
            continue
        if not (pa.types.is_integer(kind) or pa.types.is_floating(kind)):
            continue
        values = column.chunk(0).to_numpy(zero_copy_only=False)
        if pa.types.is_floating(kind) and len(values) and np.isnan(np.maximum.reduce(values)):
            continue  # see _may_have_nan
        plain[column_field.name] = values
    return plain


def _mask_nulls(values: np.ndarray, column: pa.ChunkedArray) -> np.ndarray:
    """``values`` with ``column``'s null rows masked (NaN stays a value); unchanged without nulls."""
    if not column.null_count or isinstance(values, (pa.Array, Ragged)):  # Arrow keeps its nulls; ragged: filled
        return values
    rows = column.is_null().to_numpy(zero_copy_only=False)
    mask = np.broadcast_to(rows.reshape(-1, *[1] * (values.ndim - 1)), values.shape).copy()
    return np.ma.MaskedArray(values, mask=mask)


ROW_SHAPE_METADATA = b"streamfeed.shape"
"""Field metadata ``streamfeed convert`` writes for columns of n-D rows (images)."""


def _with_row_shape(values: np.ndarray, field: pa.Field) -> np.ndarray:
    """Restores the row shape of a flattened n-D column, when the field records one."""
    shape = (field.metadata or {}).get(ROW_SHAPE_METADATA)
    if shape is None:
        return values
    return values.reshape(len(values), *json.loads(shape))


# ------------------------------------------------------------------ Chunk -> Arrow
def column_to_arrow(values: np.ndarray) -> tuple[pa.Array, dict[bytes, bytes]]:
    """A NumPy column as an Arrow array, and field metadata for n-D rows; ragged rows as a ``large_list``."""
    if isinstance(values, Ragged):
        return pa.LargeListArray.from_arrays(values.offsets - values.offsets[0], values.flat()), {}
    if values.ndim == 1:
        if values.dtype.kind == "O":
            return pa.array(values.tolist()), {}
        return pa.array(values), {}
    row_shape = values.shape[1:]
    flat = pa.array(np.ascontiguousarray(values).reshape(-1))
    width = int(np.prod(row_shape))
    return pa.FixedSizeListArray.from_arrays(flat, width), {ROW_SHAPE_METADATA: json.dumps(list(row_shape)).encode()}


def chunk_to_table(chunk: Chunk, temporal: Mapping[str, pa.DataType] | None = None) -> pa.Table:
    """``chunk`` as an Arrow table; the ``temporal`` columns (float64 seconds, as sources yield dates) as their type."""
    arrays, fields = [], []
    temporal = temporal or {}
    for name, values in chunk.items():
        if name in temporal and values.dtype.kind == "f":
            array, metadata = seconds_to_arrow(values, temporal[name]), None
        else:
            array, metadata = column_to_arrow(values)
        arrays.append(array)
        fields.append(pa.field(name, array.type, metadata=metadata or None))
    return pa.Table.from_arrays(arrays, schema=pa.schema(fields))
