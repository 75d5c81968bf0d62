"""Reconciling the schemas of many files without losing information.

Types widen only where every value survives (int32 → int64, float32 →
float64, int16 → float32, int32 → float64); a column missing from some
files becomes nullable (and then meets the null policy). Anything else —
int64 with float, string with int — raises naming the column and two
files. Never the first file's schema taken silently, never a downcast.
"""

from __future__ import annotations

from typing import Sequence

import pyarrow as pa

from ..errors import SchemaError, describe

_SIGNED = [pa.int8(), pa.int16(), pa.int32(), pa.int64()]
_UNSIGNED = [pa.uint8(), pa.uint16(), pa.uint32(), pa.uint64()]
_FLOATS = [pa.float16(), pa.float32(), pa.float64()]
_FLOAT_EXACT_INT_BITS = {pa.float16(): 11, pa.float32(): 24, pa.float64(): 53}


def _bits(kind: pa.DataType) -> int:
    return kind.bit_width


def value_type(kind: pa.DataType) -> pa.DataType:
    """Dictionary columns are read as their values."""
    return kind.value_type if pa.types.is_dictionary(kind) else kind


def widen(a: pa.DataType, b: pa.DataType) -> pa.DataType | None:
    """The narrowest type holding every value of both, or None if there is none."""
    a, b = value_type(a), value_type(b)
    if a == b:
        return a
    if pa.types.is_null(a):
        return b
    if pa.types.is_null(b):
        return a
    ints = (pa.types.is_integer(a), pa.types.is_integer(b))
    if all(ints):
        if pa.types.is_signed_integer(a) == pa.types.is_signed_integer(b):
            return a if _bits(a) >= _bits(b) else b
        signed, unsigned = (a, b) if pa.types.is_signed_integer(a) else (b, a)
        need = max(_bits(signed), 2 * _bits(unsigned))
        return next((t for t in _SIGNED if _bits(t) >= need), None)
    if pa.types.is_floating(a) and pa.types.is_floating(b):
        return a if _bits(a) >= _bits(b) else b
    if any(ints) and (pa.types.is_floating(a) or pa.types.is_floating(b)):
        integer, floating = (a, b) if ints[0] else (b, a)
        int_bits = _bits(integer) - (1 if pa.types.is_signed_integer(integer) else 0)
        for candidate in _FLOATS:
            if _bits(candidate) >= _bits(floating) and _FLOAT_EXACT_INT_BITS[candidate] >= int_bits:
                return candidate
        return None
    pairs = {
        frozenset({pa.string(), pa.large_string()}): pa.large_string(),
        frozenset({pa.binary(), pa.large_binary()}): pa.large_binary(),
    }
    return pairs.get(frozenset({a, b}))


def unify(schemas: Sequence[tuple[str, pa.Schema]]) -> tuple[pa.Schema, dict[str, frozenset[str]]]:
    """One schema for all files, and for each file the columns it lacks.

    Column order follows first appearance. Raises :class:`SchemaError`
    naming the column and the two files whose types cannot be reconciled.
    """
    fields: dict[str, pa.DataType] = {}
    metadata: dict[str, dict | None] = {}
    origin: dict[str, tuple[str, pa.DataType]] = {}
    for path, schema in schemas:
        for field in schema:
            if field.name not in fields:
                fields[field.name] = value_type(field.type)
                metadata[field.name] = field.metadata  # e.g. the row shape of converted n-D columns
                origin[field.name] = (path, field.type)
                continue
            merged = widen(fields[field.name], field.type)
            if merged is None:
                first_path, first_type = origin[field.name]
                raise SchemaError(
                    describe(
                        f"Column {field.name!r} has types that cannot be unified without loss",
                        where=f"{first_path} ({first_type}) and {path} ({field.type})",
                        expected="the same type, or types where one widens into the other without loss",
                        found=f"{first_type} and {field.type}",
                        fix="rewrite the odd file with the common type, or leave the column out with columns=[...]",
                    )
                )
            fields[field.name] = merged
    all_names = set(fields)
    missing = {path: frozenset(all_names - set(schema.names)) for path, schema in schemas}
    return pa.schema([pa.field(name, kind, metadata=metadata[name]) for name, kind in fields.items()]), missing
