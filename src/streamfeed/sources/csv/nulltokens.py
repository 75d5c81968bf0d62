"""Whether a CSV fragment may be parsed without its null tokens: probes of each token, and the NaN check.

Matching every value against the null tokens is about 15 % of pyarrow's
parse (see ``CsvFragment._parse_without_null_tokens``); these two checks
decide, by parsing one-record probes with the installed pyarrow, when a
parse without them yields the same table. Kept apart from ``fragment.py``,
which reads fragments and only asks these questions.
"""

from __future__ import annotations

import functools
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv


def has_nan(table: pa.Table) -> bool:
    """Whether a floating-point column of ``table`` holds a NaN."""
    return any(
        pc.any(pc.is_nan(column)).as_py()
        for column, kind in zip(table.columns, table.schema.types)
        if pa.types.is_floating(kind)
    )


@functools.lru_cache(maxsize=64)
def tokens_fail_or_are_nan(
    kinds: tuple[pa.DataType, ...],
    tokens: tuple[str, ...],
    strings_can_be_null: bool,
    delimiter: str,
    quote_char: str | None,
    decimal: str,
    encoding: str,
) -> bool:
    """Whether each null token, alone in a field of each of ``kinds`` (bare or quoted), is one of:

    a conversion error when parsed without the tokens, a NaN in a floating
    column, or the same value with the tokens as without (text that
    ``strings_can_be_null=False`` keeps). Measured by parsing, so that it
    holds for the installed pyarrow and for user tokens (``"-999"`` in an
    integer column converts: ``False``).
    """
    quotes = [""] if quote_char is None else ["", quote_char]
    for kind in set(kinds):
        for token in tokens:
            for quote in quotes:
                line = f"{quote}{token}{quote}{delimiter}0\n"
                try:
                    data = line.encode(encoding)
                except UnicodeError:
                    return False
                without = _parse_probe(data, kind, [], strings_can_be_null, delimiter, quote_char, decimal, encoding)
                if without is _ODD:
                    return False
                if without is _FAILED:
                    continue
                if pa.types.is_floating(kind) and isinstance(without, float) and without != without:
                    continue  # NaN: has_nan sends the fragment to the parse with tokens
                with_tokens = _parse_probe(
                    data, kind, list(tokens), strings_can_be_null, delimiter, quote_char, decimal, encoding
                )
                if with_tokens is _FAILED or with_tokens is _ODD or with_tokens is None or with_tokens != without:
                    return False
    return True


_FAILED, _ODD = object(), object()  # the probe's value did not convert; the probe was not one record


def _parse_probe(
    data: bytes,
    kind: pa.DataType,
    tokens: list[str],
    strings_can_be_null: bool,
    delimiter: str,
    quote_char: str | None,
    decimal: str,
    encoding: str,
) -> Any:
    """The first field of a one-record CSV as ``kind`` (``None`` if null), ``_FAILED`` or ``_ODD``."""
    try:
        table = pacsv.read_csv(
            pa.BufferReader(data),
            read_options=pacsv.ReadOptions(column_names=["x", "z"], encoding=encoding, use_threads=False),
            parse_options=pacsv.ParseOptions(
                delimiter=delimiter, quote_char=quote_char if quote_char is not None else False
            ),
            convert_options=pacsv.ConvertOptions(
                column_types={"x": kind, "z": pa.string()},
                null_values=tokens,
                strings_can_be_null=strings_can_be_null,
                decimal_point=decimal,
            ),
        )
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError, UnicodeError):
        return _FAILED
    if table.num_rows != 1:
        return _ODD
    return table["x"][0].as_py()
