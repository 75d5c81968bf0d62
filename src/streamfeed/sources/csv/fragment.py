"""One CSV fragment: a byte range of whole records, parsed by pyarrow into a chunk.

Owns reading a fragment: its bytes (a plain file's range, a gzip range
resumed from its checkpoint, or a whole bz2/zstd stream), the pyarrow parse
with the options fixed when the source opened, ragged rows (reported and
skipped, or raised), and, only when a message needs them, physical line
numbers and the first value that does not convert to its column's type.
Fragments are read in parallel threads, independently of the source that
made them, so this module needs nothing from ``csv.py``. A fragment is
first parsed without the null tokens when that cannot change the table
(``_parse_without_null_tokens``): matching every value against them is
about 15 % of the parse.

pyarrow refuses a whole fragment when one record straddles its parse
blocks (``PARSE_BLOCK_BYTES``); the fragment is then parsed again around
its records longer than a block, each of those alone. One shorter than two
blocks parses alone and is kept; a longer one is left out like a ragged
row (reported under ``on_error="skip"``, raised naming its line under
``"raise"``), and the rest of the fragment is kept.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from ...core import Chunk
from ...errors import CorruptFileError, DataError, SkippedUnit, describe
from ...files import inflate as _inflate
from ...files.arrow import Where, table_to_chunk
from ...files.stamps import Stamps, stamps_field, take_stamps, unchanged
from .files import _open_stream
from .nulltokens import has_nan, tokens_fail_or_are_nan
from .options import PARSE_BLOCK_BYTES, _Options, first_bad_encoding
from .scan import LongRecord, long_records, record_lines


def _no_line(index: int) -> int | str:
    return "unknown"


@dataclass(frozen=True)
class _CsvWhere(Where):
    """Where a table came from, for ``_arrow``'s null messages: file and physical line."""

    line_of: Callable[[int], int | str] = _no_line  # table row -> physical line

    def row(self, index: int) -> str:
        within = self.locate(index) if self.locate is not None else index
        return f"{self.path}, line {self.line_of(within)} (data row {self.first_row + within} of the file)"


@dataclass
class ParseHints:
    """What the fragments of one source learn while parsing, shared between them (speed only, never results)."""

    skip_null_tokens: bool = True  # False once a fragment needed its null tokens (see _parse_without_null_tokens)


@dataclass(frozen=True)
class CsvFragment:
    """Whole records ``[start, end)`` of one file.

    Offsets are decompressed bytes for gzip; ``end=None``: to the end of a bz2/zstd stream.
    """

    key: str
    num_rows: int
    path: str
    start: int
    end: int | None
    first_line: int
    first_row: int
    _names: tuple[str, ...]
    _codec: str | None
    _quoted_newlines: bool
    _options: _Options = field(repr=False)
    _checkpoints: _inflate.Checkpoints | None = field(default=None, repr=False, compare=False)
    _hints: ParseHints = field(default_factory=lambda: ParseHints(), repr=False, compare=False)
    _stamps: Stamps = stamps_field()

    def __post_init__(self) -> None:
        object.__setattr__(
            self, "_stamps", take_stamps((self.path,), self._options.filesystem)
        )  # taken at open, checked by read()

    @property
    def location(self) -> str:
        return f"lines from {self.first_line}, {self.num_rows} rows"

    # ---------------------------------------------------------------- reading
    def _bytes(self) -> bytes:
        """This fragment's raw bytes (decompressed; a whole bz2/zstd file's: error paths only)."""
        if self.end is not None:
            return self._range()
        with _open_stream(self._options.filesystem, self.path, self._codec) as stream:
            stream.read(self.start)
            return stream.read()

    def _range(self) -> bytes:
        """Bytes ``[start, end)`` of a plain file, or of a gzip file resumed from its checkpoint."""
        assert self.end is not None
        filesystem = self._options.filesystem
        if self._codec == "gzip":
            points = self._checkpoints or _inflate.Checkpoints()
            return _inflate.read_range(lambda: filesystem.open_input_file(self.path), points, self.start, self.end)
        with filesystem.open_input_file(self.path) as handle:
            data = handle.read_at(self.end - self.start, self.start)
        return data if isinstance(data, bytes) else data.to_pybytes()

    def _stream(self) -> Any:
        """A bz2/zstd file's decompressed stream, from this fragment's start."""
        stream = _open_stream(self._options.filesystem, self.path, self._codec)
        stream.read(self.start)  # the header (and a BOM): a few bytes
        return stream

    def _parse(
        self,
        source: Any,
        invalid: list,
        *,
        skip: bool,
        types: Mapping[str, pa.DataType] | None = None,
        strings_can_be_null: bool | None = None,
        first_record: int = 0,
        null_tokens: bool = True,
    ) -> pa.Table:
        """One pyarrow parse of ``source``; ragged rows go to ``invalid``, numbered after ``first_record``.

        ``null_tokens=False`` parses without the null tokens (see :meth:`_parse_without_null_tokens`).
        """

        def handler(row: Any) -> str:
            number = None if row.number is None else row.number + first_record
            invalid.append((number, row.expected_columns, row.actual_columns, row.text))
            return "skip" if skip else "error"

        options = self._options
        convert = options.convert_options(types, strings_can_be_null=strings_can_be_null)
        if not null_tokens:
            convert.null_values = []
        try:
            return pacsv.read_csv(
                source,
                read_options=options.read_options(self._names),
                parse_options=options.parse_options(handler, self._quoted_newlines),
                convert_options=convert,
            )
        finally:
            if hasattr(source, "close"):
                source.close()

    def _parse_fragment(
        self,
        invalid: list,
        too_long: list[LongRecord],
        *,
        skip: bool,
        types: Mapping[str, pa.DataType] | None = None,
        strings_can_be_null: bool | None = None,
    ) -> pa.Table:
        """The fragment's table, in one parse, or, if a record straddles pyarrow's blocks, around the long records.

        ``invalid`` gets the ragged rows, ``too_long`` the records pyarrow
        refuses (see :meth:`_parse_around`).
        """
        data = self._range() if self.end is not None else None
        try:
            if data is not None and types is None and strings_can_be_null is None:
                table = self._parse_without_null_tokens(data, invalid, skip=skip)
                if table is not None:
                    return table
            source = pa.BufferReader(data) if data is not None else self._stream()
            return self._parse(source, invalid, skip=skip, types=types, strings_can_be_null=strings_can_be_null)
        except pa.ArrowInvalid as exc:
            if not _straddles(exc):
                raise
        # Past the except clause, the failed parse no longer holds a reference to the bytes.
        invalid.clear()
        data = self._bytes() if data is None else data
        return self._parse_around(
            data, invalid, too_long, skip=skip, types=types, strings_can_be_null=strings_can_be_null
        )

    def _parse_without_null_tokens(self, data: bytes, invalid: list, *, skip: bool) -> pa.Table | None:
        """The fragment's table parsed without null tokens, or ``None`` when it may hold one.

        Matching every value against the null tokens costs about 15 % of
        pyarrow's parse of a numeric CSV (measured: 157 -> 132 ms per 16 MiB
        fragment of 33 float columns), yet most files hold none. The tokens
        are checked once per column type (:func:`tokens_fail_or_are_nan`):
        when each either fails to convert or converts to NaN, a parse without
        them that succeeds and yields no NaN met no token, and is the same
        table as the parse with them. Otherwise (a conversion error, a NaN,
        or tokens that would convert) the caller parses with the tokens, and
        so do the source's later fragments (one shared flag), so that a file
        full of nulls pays for one extra parse, not one per fragment. A
        straddling record is raised for the caller's parse around it.
        """
        options = self._options
        if not self._hints.skip_null_tokens or not options.null_values:
            return None
        kinds = tuple(options.types[name] for name in options.columns)
        if not tokens_fail_or_are_nan(
            kinds,
            options.null_values,
            options.strings_can_be_null,
            options.delimiter,
            options.quote_char,
            options.decimal,
            options.encoding,
        ):
            self._hints.skip_null_tokens = False
            return None
        attempt: list = []
        try:
            table = self._parse(pa.BufferReader(data), attempt, skip=skip, null_tokens=False)
        except (pa.ArrowInvalid, UnicodeError) as exc:
            if _straddles(exc):
                raise
            table = None
        if table is None or has_nan(table):
            self._hints.skip_null_tokens = False
            return None
        invalid.extend(attempt)
        return table

    def _parse_around(
        self,
        data: bytes,
        invalid: list,
        too_long: list[LongRecord],
        *,
        skip: bool,
        types: Mapping[str, pa.DataType] | None,
        strings_can_be_null: bool | None,
    ) -> pa.Table:
        """Parses ``data`` in pieces: the runs of records of at most one block, and each longer record alone.

        A record of at most one block never straddles, wherever it starts;
        alone, one shorter than two blocks parses, and a longer one, which
        pyarrow refuses, goes to ``too_long`` (without ``skip``, the parse
        stops there: the caller raises). The pieces are zero-copy slices of
        ``data``; ragged rows keep their record numbers in the fragment.
        """
        options = self._options
        buffer = pa.py_buffer(data)
        tables: list[pa.Table] = []

        def parse(start: int, end: int, records_before: int) -> None:
            if end > start:
                piece = pa.BufferReader(buffer.slice(start, end - start))
                table = self._parse(
                    piece,
                    invalid,
                    skip=skip,
                    types=types,
                    strings_can_be_null=strings_can_be_null,
                    first_record=records_before,
                )
                tables.append(table)

        position = records = 0  # where the next run starts; the records before it
        found = long_records(
            data,
            quote=options.quote_byte,
            delimiter=ord(options.delimiter),
            first_line=self.first_line,
            longer_than=PARSE_BLOCK_BYTES,
        )
        for record in found:
            parse(position, record.start, records)
            position, records = min(record.end + 1, len(data)), record.number
            try:
                parse(record.start, position, record.number - 1)
            except pa.ArrowInvalid as exc:
                if not _straddles(exc):
                    raise
                too_long.append(record)
                if not skip:
                    break
        else:
            parse(position, len(data), records)
        if tables:
            return pa.concat_tables(tables)
        kinds = options.types if types is None else types
        return pa.schema([(name, kinds[name]) for name in options.columns]).empty_table()

    def read(self) -> Chunk:
        """:meth:`_read`, refused if the file changed since the source opened it (``files/stamps.py``)."""
        with unchanged((self.path,), self._stamps):
            return self._read()

    def _read(self) -> Chunk:
        options = self._options
        skip = options.report.on_error == "skip"
        invalid: list[tuple] = []  # ragged rows, as pyarrow's handler saw them
        too_long: list[LongRecord] = []  # records pyarrow refuses to parse
        try:
            table = self._parse_fragment(invalid, too_long, skip=skip)
        except (pa.ArrowInvalid, UnicodeError) as exc:
            raise self._explain(exc, invalid) from exc
        except (OSError, _inflate.InflateError) as exc:
            raise CorruptFileError(
                describe(
                    "Could not read a CSV file",
                    where=f"{self.path}, {self.location}",
                    found=f"{type(exc).__name__}: {exc}",
                    fix=(
                        "check the file (a truncated compressed file fails here), "
                        "or pass on_error='skip' to leave it out"
                    ),
                )
            ) from exc
        if too_long and not skip:
            raise self._too_long_error(too_long[0])
        if table.num_rows + len(invalid) + len(too_long) != self.num_rows:
            raise CorruptFileError(
                describe(
                    "pyarrow parsed a different number of records than the row-count scan found",
                    where=f"{self.path}, {self.location}",
                    expected=f"{self.num_rows} records",
                    found=f"{table.num_rows} rows, {len(invalid)} ragged rows and {len(too_long)} too long",
                    fix="lone carriage returns as line ends, or a quote character in an unquoted field, cause this; "
                    "convert line ends to \\n, or pass quote_char=None if the file does not quote fields",
                )
            )
        lines = self._record_lines() if invalid else None
        left_out = [
            (number or 0, self._line(lines, number), f"expected {expected} fields, found {actual}: {text[:200]!r}")
            for number, expected, actual, text in invalid
        ] + [(record.number, record.line, _too_long_reason(record)) for record in too_long]
        for _, line, reason in sorted(left_out, key=lambda item: item[0]):  # in file order
            options.report.add(SkippedUnit(self.path, f"line {line}", reason, 1))
        bad_records = _left_out_records(invalid, too_long)
        return table_to_chunk(
            table,
            options.policy,
            _CsvWhere(self.path, first_row=self.first_row, line_of=self._line_of_table_row(bad_records)),
        )

    # ------------------------------------------------------------ explaining
    def _record_lines(self) -> np.ndarray:
        options = self._options
        return record_lines(
            self._bytes(), quote=options.quote_byte, delimiter=ord(options.delimiter), first_line=self.first_line
        )

    @staticmethod
    def _line(lines: np.ndarray | None, number: int | None) -> int | str:
        if lines is None or number is None or not 0 < number <= len(lines):
            return "unknown"
        return int(lines[number - 1])

    def _line_of_table_row(self, bad_records: Sequence[int]) -> Callable[[int], int | str]:
        """Table row -> physical line, computed only when a message asks."""

        def line_of(index: int) -> int | str:
            record = index
            for bad in bad_records:  # the table lacks the skipped ragged records
                if bad <= record:
                    record += 1
            return self._line(self._record_lines(), record + 1)

        return line_of

    def _explain(self, exc: Exception, invalid: list) -> Exception:
        options = self._options
        if invalid:  # the handler said "error": a ragged row
            number, expected, actual, text = invalid[0]
            return DataError(
                describe(
                    "A CSV row has the wrong number of fields",
                    where=f"{self.path}, line {self._line(self._record_lines(), number)}",
                    expected=f"{expected} fields, as in the header",
                    found=f"{actual} fields: {text[:200]!r}",
                    fix="repair the row (an unquoted delimiter in a value?), or pass on_error='skip' to skip such rows "
                    "and report them",
                )
            )
        if isinstance(exc, UnicodeError) or "UTF8" in str(exc) or "utf-8" in str(exc).lower():
            data = self._bytes()
            bad = first_bad_encoding(iter([data]), options.encoding)
            line = "unknown" if bad is None else bad[0] + self.first_line - 1
            found = f"bytes {bad[2]!r} that are not {options.encoding}" if bad else str(exc)
            return DataError(
                describe(
                    f"A CSV file is not valid {options.encoding}",
                    where=f"{self.path}, line {line}",
                    found=found,
                    fix="pass the file's encoding, e.g. encoding='latin-1' or 'cp1252'",
                )
            )
        if "conversion error" in str(exc).lower():
            return self._explain_conversion(exc)
        return CorruptFileError(
            describe(
                "Could not parse a CSV file",
                where=f"{self.path}, {self.location}",
                found=f"{type(exc).__name__}: {exc}",
                fix="check the file, or pass on_error='skip' to leave it out and report it",
            )
        )

    def _explain_conversion(self, exc: Exception) -> Exception:
        """Finds the first value that does not convert: re-read as text, bisect the casts."""
        options = self._options
        invalid: list = []
        too_long: list[LongRecord] = []
        text = self._parse_fragment(
            invalid,
            too_long,
            skip=True,
            types={name: pa.string() for name in self._names},
            strings_can_be_null=True,
        )
        found = None
        for name, kind in options.types.items():
            if name not in text.column_names or pa.types.is_string(kind):
                continue
            column = text[name].combine_chunks()
            if _casts(column, kind):
                continue
            low, high = 0, len(column)  # column[:low] casts, column[:high] does not
            while high - low > 1:
                middle = (low + high) // 2
                low, high = (middle, high) if _casts(column[:middle], kind) else (low, middle)
            if found is None or low < found[0]:
                found = (low, name, kind, column[low].as_py())
        if found is None:
            return CorruptFileError(
                describe("Could not convert a CSV value", where=f"{self.path}, {self.location}", found=str(exc))
            )
        index, name, kind, value = found
        bad = _left_out_records(invalid, too_long)
        return DataError(
            describe(
                f"Column {name!r} has a value that is not {kind}",
                where=f"{self.path}, line {self._line_of_table_row(bad)(index)}",
                expected=f"{kind} values (inferred from the first MiB of the files, or set in column_types)",
                found=_preview(value),
                fix=f"pass column_types={{{name!r}: 'float64'}} (or 'string'), or repair the value",
            )
        )

    def _too_long_error(self, record: LongRecord) -> CorruptFileError:
        return CorruptFileError(
            describe(
                "A CSV line is too long for pyarrow's CSV parser",
                where=f"{self.path}, line {record.line}",
                expected=_LIMIT,
                found=f"a record of {record.size:,} bytes ({record.size / 2**20:.1f} MiB) starting {record.head!r}",
                fix="remove or shorten the line (a missing line break or closing quote, or a blob pasted into a "
                "field?), or pass on_error='skip' to skip such lines and report them",
            )
        )


_LIMIT = (
    f"records shorter than {2 * PARSE_BLOCK_BYTES >> 20} MiB "
    f"(two of the {PARSE_BLOCK_BYTES >> 20} MiB blocks pyarrow parses in)"
)


def _straddles(exc: Exception) -> bool:
    """pyarrow's refusal of a record that reaches past the block after its own."""
    return "straddling object" in str(exc)


def _preview(value: Any) -> str:
    """A value for a message: its first 200 characters, and its length when it is longer."""
    if isinstance(value, str) and len(value) > 200:
        return f"{value[:200]!r}... ({len(value):,} characters)"
    return repr(value)


def _too_long_reason(record: LongRecord) -> str:
    return f"a record of {record.size:,} bytes, too long for pyarrow ({_LIMIT}): {record.head!r}"


def _left_out_records(invalid: Sequence[tuple], too_long: Sequence[LongRecord]) -> list[int]:
    """0-based records of the fragment missing from its table: ragged (with a known number) and too long."""
    return sorted([number - 1 for number, *_ in invalid if number is not None] + [r.number - 1 for r in too_long])


def _casts(column: pa.Array, kind: pa.DataType) -> bool:
    try:
        pc.cast(column, kind)
        return True
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return False
