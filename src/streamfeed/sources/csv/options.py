"""How CSV text is parsed: the dialect, delimiter sniffing, encoding checks and column types.

Owns the decisions made once, when the source opens, that every fragment
then parses with: the shared parse options (``_Options``), the null tokens,
the user's ``column_types`` as pyarrow types, the sniffed delimiter and the
check that a header parsed as one column is a wrong delimiter, the
ASCII-compatibility and strict decoding of the encoding, and type
inference (sampled from each file's first MiB, then unified to one type per
column). Kept apart from ``csv.py`` so that the source reads as the steps
of opening files, and from ``fragment.py``, which only applies them.
"""

from __future__ import annotations

import codecs
import csv as pycsv
import io
import re
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Mapping, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.fs as pafs

from ...errors import ArgumentError, BadInputReport, DataError, SchemaError, describe
from ...files.arrow import ColumnPolicy
from .files import _BOM, CLI_FIX_ENCODING, HEAD_BYTES, _corrupt, _FileInfo
from .scan import Scanner

DEFAULT_NULL_VALUES: tuple[str, ...] = (
    "", "#N/A", "#N/A N/A", "#NA", "-1.#IND", "-1.#QNAN", "-NaN", "-nan", "1.#IND",
    "1.#QNAN", "N/A", "NA", "NULL", "NaN", "n/a", "nan", "null",
)  # fmt: skip
"""pyarrow's (and pandas') tokens; they make *numeric* values null. String
columns keep them as text unless ``strings_can_be_null=True``."""
SNIFF_DELIMITERS = (",", ";", "\t", "|")
PARSE_BLOCK_BYTES = 4 << 20
"""pyarrow parses a fragment in blocks of this size. It refuses a record that
reaches past the block after the one it starts in ("straddling object"): a
record of more bytes may fail, one of twice as many always does."""
TOO_LONG_BYTES = 2 * PARSE_BLOCK_BYTES
"""Records of more bytes (without the line end) are refused at any offset; the scan at open notes where they lie."""

TypeSpec = Any  # a pyarrow DataType, a NumPy dtype or type, or a name such as "float32"


@dataclass(frozen=True)
class _Options:
    """Everything a fragment needs to parse its bytes (shared by all fragments)."""

    filesystem: pafs.FileSystem
    delimiter: str
    quote_char: str | None
    encoding: str
    null_values: tuple[str, ...]
    strings_can_be_null: bool
    columns: tuple[str, ...]
    types: Mapping[str, pa.DataType]
    policy: ColumnPolicy
    report: BadInputReport
    decimal: str = "."
    lists: tuple[Any, ...] = ()  # lists.ListColumn: columns parsed as text, split into ragged rows

    @property
    def quote_byte(self) -> int | None:
        return None if self.quote_char is None else ord(self.quote_char)

    def parse_options(
        self, handler: Callable[[Any], str] | None, newlines_in_values: bool = True
    ) -> pacsv.ParseOptions:
        return pacsv.ParseOptions(
            delimiter=self.delimiter,
            quote_char=self.quote_char if self.quote_char is not None else False,
            newlines_in_values=newlines_in_values,
            invalid_row_handler=handler,
        )

    def read_options(self, names: Sequence[str]) -> pacsv.ReadOptions:
        return pacsv.ReadOptions(
            column_names=list(names), use_threads=False, encoding=self.encoding, block_size=PARSE_BLOCK_BYTES
        )

    def convert_options(
        self, types: Mapping[str, pa.DataType] | None = None, *, strings_can_be_null: bool | None = None
    ) -> pacsv.ConvertOptions:
        return pacsv.ConvertOptions(
            column_types=dict(self.types if types is None else types),
            null_values=list(self.null_values),
            strings_can_be_null=self.strings_can_be_null if strings_can_be_null is None else strings_can_be_null,
            include_columns=list(self.columns),
            decimal_point=self.decimal,
        )


def _arrow_type(spec: TypeSpec, column: str) -> pa.DataType:
    if isinstance(spec, pa.DataType):
        return spec
    if spec in (str, "str", "string", "object", object):
        return pa.string()
    try:
        if isinstance(spec, str):
            try:
                return pa.type_for_alias(spec)
            except ValueError:
                pass
        return pa.from_numpy_dtype(np.dtype(spec))
    except (TypeError, ValueError, pa.ArrowNotImplementedError) as exc:
        raise ArgumentError(
            describe(
                f"column_types[{column!r}] is not a type streamfeed can read CSV values as",
                expected="a pyarrow type, a NumPy dtype, or a name such as 'int64', 'float32', 'string', 'bool'",
                found=repr(spec),
            )
        ) from exc


def _check_encoding(encoding: str) -> None:
    try:
        codecs.lookup(encoding)
    except LookupError as exc:
        raise ArgumentError(
            describe(
                "Unknown encoding", expected="a Python codec name such as 'utf-8' or 'latin-1'", found=repr(encoding)
            )
        ) from exc
    if '\n\r",;|\t'.encode(encoding, errors="replace").removeprefix(_BOM) != b'\n\r",;|\t':
        raise ArgumentError(
            describe(
                f"encoding {encoding!r} does not write ASCII punctuation as single ASCII bytes",
                expected="an ASCII-compatible encoding (utf-8, latin-1, cp1252, ...), which the row-count scan needs",
                fix="transcode the file first, e.g. iconv -f utf-16 -t utf-8",
            )
        )


def sniff_delimiter(head: bytes, encoding: str, quote_char: str | None) -> str:
    """The candidate (``, ; tab |``) that splits the first lines into the most, equally many, fields."""
    text = _decode_prefix(head, encoding)
    lines = text.splitlines(keepends=True)[:50]
    if len(lines) > 1 and len(head) >= HEAD_BYTES:
        lines = lines[:-1]  # the last line may be cut
    sample = "".join(lines)
    best, best_fields = ",", 1
    for candidate in SNIFF_DELIMITERS:
        reader = pycsv.reader(io.StringIO(sample), **_csv_dialect(candidate, quote_char))
        try:
            counts = {len(record) for record in reader if record}
        except pycsv.Error:
            continue
        if len(counts) == 1 and (fields := counts.pop()) > best_fields:
            best, best_fields = candidate, fields
    return best


_COMMA_DECIMAL = re.compile(r"^\s*[+-]?\d+,\d+\s*$")
_POINT_DECIMAL = re.compile(r"^\s*[+-]?\d*\.\d+(?:[eE][+-]?\d+)?\s*$")


def sniff_decimal(head: bytes, encoding: str, delimiter: str, quote_char: str | None) -> str:
    """``","`` when the first lines write numbers with a decimal comma (``25,04``) and never a point; else ``"."``.

    Only for a delimiter other than the comma: in a comma-separated file a
    decimal comma would have to be quoted, and ``"1,5"`` is as likely text.
    """
    if delimiter == ",":
        return "."
    lines = _decode_prefix(head, encoding).splitlines(keepends=True)[1:50]  # the header holds no numbers
    if len(lines) > 1 and len(head) >= HEAD_BYTES:
        lines = lines[:-1]  # the last line may be cut
    comma = point = 0
    try:
        for record in pycsv.reader(io.StringIO("".join(lines)), **_csv_dialect(delimiter, quote_char)):
            comma += sum(1 for field in record if _COMMA_DECIMAL.match(field))
            point += sum(1 for field in record if _POINT_DECIMAL.match(field))
    except pycsv.Error:
        return "."
    return "," if comma and not point else "."


def _csv_dialect(delimiter: str, quote_char: str | None) -> dict:
    if quote_char is None:
        return {"delimiter": delimiter, "quoting": pycsv.QUOTE_NONE}
    return {"delimiter": delimiter, "quotechar": quote_char, "doublequote": True}


def _decode_prefix(head: bytes, encoding: str) -> str:
    """Decodes a head that may end in the middle of a character."""
    decoder = codecs.getincrementaldecoder(encoding)(errors="replace")
    text = decoder.decode(head)
    return text[1:] if text.startswith("\ufeff") else text


def first_bad_encoding(chunks: Iterator[bytes], encoding: str) -> tuple[int, int, bytes] | None:
    """``(line, byte offset, bad bytes)`` of the first byte that ``encoding`` cannot decode."""
    offset, line, rest = 0, 1, b""
    for block in [*chunks, None]:
        data = rest + (block or b"")
        cut = len(data) if block is None else data.rfind(b"\n") + 1
        piece, rest = data[:cut], data[cut:]
        try:
            piece.decode(encoding)
        except UnicodeDecodeError as exc:
            return line + piece.count(b"\n", 0, exc.start), offset + exc.start, piece[exc.start : exc.end]
        offset += len(piece)
        line += piece.count(b"\n")
    return None


def _decode(data: bytes, encoding: str, path: str, first_line: int) -> str:
    """``data`` decoded strictly, without a BOM; a byte that does not decode raises naming the line."""
    try:
        text = data.decode(encoding)
    except UnicodeDecodeError as exc:
        bad = first_bad_encoding(iter([data]), encoding)
        line = first_line + (bad[0] - 1 if bad else 0)
        raise DataError(
            describe(
                f"A CSV file is not valid {encoding}",
                where=f"{path}, line {line}",
                found=f"bytes {data[exc.start : exc.end]!r}",
                fix="pass the file's encoding, e.g. encoding='latin-1' or 'cp1252'",
            ),
            cli_fix=CLI_FIX_ENCODING,
        ) from exc
    return text.lstrip("\ufeff")


def _check_one_column(record: list[str], text: str, path: str, delimiter: str) -> None:
    """A one-field first line holding another delimiter is a wrong delimiter, not one column."""
    if len(record) != 1:
        return
    others = [d for d in SNIFF_DELIMITERS if d != delimiter and d in record[0]]
    if others:
        shown = {"\t": "\\t"}.get(others[0], others[0])
        raise SchemaError(
            describe(
                f"The first line of a CSV file parses into one column with delimiter {delimiter!r}, "
                f"but it contains {others[0]!r}",
                where=f"{path}, line 1",
                found=repr(text.rstrip("\r\n")[:200]),
                fix=f"pass delimiter='{shown}' (pandas would read this file as one column of garbage)",
            )
        )


def _sample_types(
    head: bytes,
    probe: Scanner,
    whole: bool,
    data_start: int,
    names: list[str],
    path: str,
    first_line: int,
    user_types: Mapping[str, pa.DataType],
    *,
    encoding: str,
    delimiter: str,
    quote_char: str | None,
    null_values: tuple[str, ...],
    strings_can_be_null: bool,
    decimal: str = ".",
) -> pa.Schema | None:
    """Column types that pyarrow infers from the records in the file's first MiB."""
    end = len(head) if whole else probe.last_term + 1
    sample = head[data_start:end]
    if not sample.strip():
        return None
    given = {name: kind for name, kind in user_types.items() if name in names}
    try:
        table = pacsv.read_csv(
            pa.BufferReader(sample),
            read_options=pacsv.ReadOptions(column_names=names, use_threads=False, encoding=encoding),
            parse_options=pacsv.ParseOptions(
                delimiter=delimiter,
                quote_char=quote_char if quote_char is not None else False,
                newlines_in_values=True,
                invalid_row_handler=lambda row: "skip",
            ),
            convert_options=pacsv.ConvertOptions(
                null_values=list(null_values), strings_can_be_null=strings_can_be_null, decimal_point=decimal
            ),
        )
    except UnicodeError:
        _decode(sample, encoding, path, first_line)
        raise
    except pa.ArrowInvalid as exc:
        if "UTF8" in str(exc):
            _decode(sample, encoding, path, first_line)
        raise _corrupt(path, f"the first MiB (lines from {first_line})", exc) from exc
    binary = [f.name for f in table.schema if pa.types.is_binary(f.type) and f.name not in given]
    if binary and encoding.replace("-", "").lower() in ("utf8", "utf8sig"):
        _decode(sample, encoding, path, first_line)
    return table.schema


def _unify_types(
    good: Sequence[_FileInfo], columns: Sequence[str], user: Mapping[str, pa.DataType]
) -> dict[str, pa.DataType]:
    """One type per column: the user's, else the widest sampled (int + float -> float64; else text)."""
    types: dict[str, pa.DataType] = {}
    for name in columns:
        if name in user:
            types[name] = user[name]
            continue
        seen = {info.sample.field(name).type for info in good if info.sample is not None and name in info.sample.names}
        seen.discard(pa.null())
        if not seen:
            types[name] = pa.string()  # empty everywhere in the samples: text keeps any value
        elif len(seen) == 1:
            types[name] = seen.pop()
        elif all(pa.types.is_integer(t) or pa.types.is_floating(t) for t in seen):
            types[name] = pa.float64()
        else:
            types[name] = pa.string()
    return types


def _value_bytes(kind: pa.DataType) -> int:
    """Bytes a value takes in a chunk: fixed-width types their width, text an object pointer and a string."""
    try:
        return max(1, kind.bit_width // 8)
    except ValueError:
        return 56
