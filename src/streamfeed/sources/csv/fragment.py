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
``"raise"``), and the rest of the fragment is kept. Such a record is never
read whole in a plain or gzip file: the scan at open notes where each lies
(``_long``), and the fragment reads only the byte ranges around them and
their first 40 bytes, so a 50 MB line costs no more memory than a short
one (``tests/sources/test_csv_long_line_memory.py``). A bz2/zstd fragment,
which holds its whole stream anyway, is still parsed around them in memory.
"""

from __future__ import annotations

import dataclasses
import itertools
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Mapping, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv

from ...core import Chunk
from ...errors import CorruptFileError, DataError, SkippedUnit, describe
from ...files import inflate as _inflate
from ...files.arrow import Where, table_to_chunk
from ...files.stamps import Stamps, stamps_field, take_stamps, unchanged
from .files import CLI_FIX_ENCODING, CLI_FIX_QUOTES, CLI_FIX_TYPES, _open_stream
from .lists import split_list_columns
from .messages import casts, left_out_records, preview, record_of_table_row, too_long_error, too_long_reason
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
    # Records too long for pyarrow, found by the scan at open: (number in the fragment, start, end, line, end line).
    _long: tuple[tuple[int, ...], ...] = field(default=(), repr=False, compare=False)
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

    def _range(self, start: int | None = None, end: int | None = None) -> bytes:
        """Bytes ``[start, end)`` (default: the fragment's) of a plain file, or of a gzip file from a checkpoint."""
        assert self.end is not None
        start, end = self.start if start is None else start, self.end if end is None else end
        filesystem = self._options.filesystem
        if self._codec == "gzip":
            points = self._checkpoints or _inflate.Checkpoints()
            return _inflate.read_range(lambda: filesystem.open_input_file(self.path), points, start, end)
        with filesystem.open_input_file(self.path) as handle:
            data = handle.read_at(end - start, start)
        return data if isinstance(data, bytes) else data.to_pybytes()

    def _pieces(self) -> list[tuple[int, int, int, int]]:
        """``(start, end, records before, first line)`` of the runs of records between the too-long ones."""
        assert self.end is not None
        pieces, position, records, line = [], self.start, 0, self.first_line
        for number, start, end, _, end_line in self._long:
            pieces.append((position, start, records, line))
            position, records, line = min(end + 1, self.end), number, end_line + 1
        pieces.append((position, self.end, records, line))
        return pieces

    def _long_record(self, entry: tuple[int, ...]) -> LongRecord:
        """A too-long record noted at open; only its first 40 bytes are read, for messages."""
        number, start, end, line, _ = entry
        return LongRecord(number, start, end, line, self._range(start, min(start + 40, end)))

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
        refuses (see :meth:`_parse_around`). A fragment of a plain or gzip
        file with records the scan at open found too long is read around
        them (:meth:`_parse_pieces`).
        """
        if self._long and self.end is not None:
            return self._parse_pieces(
                invalid, too_long, skip=skip, types=types, strings_can_be_null=strings_can_be_null
            )
        data = self._range() if self.end is not None else None
        return self._parse_piece(
            data, invalid, too_long, skip=skip, types=types, strings_can_be_null=strings_can_be_null
        )

    def _parse_piece(
        self,
        data: bytes | None,
        invalid: list,
        too_long: list[LongRecord],
        *,
        skip: bool,
        types: Mapping[str, pa.DataType] | None,
        strings_can_be_null: bool | None,
        first_record: int = 0,
        first_line: int | None = None,
    ) -> pa.Table:
        """``data`` (``None``: the bz2/zstd stream) parsed at once, or around its long records if one straddles."""
        mark = len(invalid)
        try:
            if data is not None and types is None and strings_can_be_null is None:
                table = self._parse_without_null_tokens(data, invalid, skip=skip, first_record=first_record)
                if table is not None:
                    return table
            source = pa.BufferReader(data) if data is not None else self._stream()
            return self._parse(
                source,
                invalid,
                skip=skip,
                types=types,
                strings_can_be_null=strings_can_be_null,
                first_record=first_record,
            )
        except pa.ArrowInvalid as exc:
            if not _straddles(exc):
                raise
        # Past the except clause, the failed parse no longer holds a reference to the bytes.
        del invalid[mark:]
        data = self._bytes() if data is None else data
        return self._parse_around(
            data,
            invalid,
            too_long,
            skip=skip,
            types=types,
            strings_can_be_null=strings_can_be_null,
            first_record=first_record,
            first_line=self.first_line if first_line is None else first_line,
        )

    def _parse_pieces(
        self,
        invalid: list,
        too_long: list[LongRecord],
        *,
        skip: bool,
        types: Mapping[str, pa.DataType] | None,
        strings_can_be_null: bool | None,
    ) -> pa.Table:
        """The table of the runs of records between the too-long ones, which are never read but for their heads.

        Each run is read and parsed alone (:meth:`_parse_piece`), so the
        fragment holds at most its other records: a 50 MB line costs 40
        bytes, not twice its size. Without ``skip`` the reading stops at the
        first too-long record (the caller raises), after the run before it,
        so that a bad row before it is the one named.
        """
        tables: list[pa.Table] = []
        for (start, end, records, line), entry in itertools.zip_longest(self._pieces(), self._long):
            if end > start:
                data = self._range(start, end)
                tables.append(
                    self._parse_piece(
                        data,
                        invalid,
                        too_long,
                        skip=skip,
                        types=types,
                        strings_can_be_null=strings_can_be_null,
                        first_record=records,
                        first_line=line,
                    )
                )
                del data
            if too_long and not skip:
                break
            if entry is not None:
                too_long.append(self._long_record(entry))
                if not skip:
                    break
        return pa.concat_tables(tables) if tables else self._empty_table(types)

    def _empty_table(self, types: Mapping[str, pa.DataType] | None) -> pa.Table:
        kinds = self._options.types if types is None else types
        return pa.schema([(name, kinds[name]) for name in self._options.columns]).empty_table()

    def _parse_without_null_tokens(
        self, data: bytes, invalid: list, *, skip: bool, first_record: int = 0
    ) -> pa.Table | None:
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
            table = self._parse(pa.BufferReader(data), attempt, skip=skip, null_tokens=False, first_record=first_record)
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
        first_record: int = 0,
        first_line: int | None = None,
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

        position, records = 0, first_record  # where the next run starts; the records before it
        found = long_records(
            data,
            quote=options.quote_byte,
            delimiter=ord(options.delimiter),
            first_line=self.first_line if first_line is None else first_line,
            longer_than=PARSE_BLOCK_BYTES,
        )
        for record in found:
            number = record.number + first_record
            parse(position, record.start, records)
            position, records = min(record.end + 1, len(data)), number
            try:
                parse(record.start, position, number - 1)
            except pa.ArrowInvalid as exc:
                if not _straddles(exc):
                    raise
                too_long.append(dataclasses.replace(record, number=number))
                if not skip:
                    break
        else:
            parse(position, len(data), records)
        return pa.concat_tables(tables) if tables else self._empty_table(types)

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
            raise too_long_error(self.path, too_long[0])
        if table.num_rows + len(invalid) + len(too_long) != self.num_rows:
            raise CorruptFileError(
                describe(
                    "pyarrow parsed a different number of records than the row-count scan found",
                    where=f"{self.path}, {self.location}",
                    expected=f"{self.num_rows} records",
                    found=f"{table.num_rows} rows, {len(invalid)} ragged rows and {len(too_long)} too long",
                    fix="lone carriage returns as line ends, or a quote character in an unquoted field, cause this; "
                    "convert line ends to \\n, or pass quote_char=None if the file does not quote fields",
                ),
                cli_fix=CLI_FIX_QUOTES,
            )
        lines = self._record_lines() if invalid else None
        left_out = [
            (number or 0, self._line(lines, number), f"expected {expected} fields, found {actual}: {text[:200]!r}")
            for number, expected, actual, text in invalid
        ] + [(record.number, record.line, too_long_reason(record)) for record in too_long]
        for _, line, reason in sorted(left_out, key=lambda item: item[0]):  # in file order
            options.report.add(SkippedUnit(self.path, f"line {line}", reason, 1))
        bad_records = left_out_records(invalid, too_long)
        if options.lists:  # declared list columns: split and converted; rows with a bad token left out (skip)
            line_of = self._line_of_table_row(bad_records)
            table, dropped = split_list_columns(
                table, options.lists, options.null_values, self.path, line_of, skip, options.report
            )
            bad_records = sorted(bad_records + [record_of_table_row(bad_records, row) for row in dropped])
        return table_to_chunk(
            table,
            options.policy,
            _CsvWhere(self.path, first_row=self.first_row, line_of=self._line_of_table_row(bad_records)),
        )

    # ------------------------------------------------------------ explaining
    def _record_lines(self) -> np.ndarray:
        """The physical line of each record of the fragment; read around the too-long records, one run at a time."""
        options = self._options
        quote, delimiter = options.quote_byte, ord(options.delimiter)
        if not (self._long and self.end is not None):
            return record_lines(self._bytes(), quote=quote, delimiter=delimiter, first_line=self.first_line)
        parts = []
        for (start, end, _, line), entry in itertools.zip_longest(self._pieces(), self._long):
            parts.append(record_lines(self._range(start, end), quote=quote, delimiter=delimiter, first_line=line))
            if entry is not None:
                parts.append(np.array([entry[3]], dtype=np.int64))
        return np.concatenate(parts)

    def _texts(self) -> Iterator[tuple[bytes, int]]:
        """The fragment's bytes with their first line: whole, or the runs between the too-long records."""
        if not (self._long and self.end is not None):
            yield self._bytes(), self.first_line
            return
        for start, end, _, line in self._pieces():
            yield self._range(start, end), line

    @staticmethod
    def _line(lines: np.ndarray | None, number: int | None) -> int | str:
        if lines is None or number is None or not 0 < number <= len(lines):
            return "unknown"
        return int(lines[number - 1])

    def _line_of_table_row(self, bad_records: Sequence[int]) -> Callable[[int], int | str]:
        """Table row -> physical line, computed only when a message asks."""

        def line_of(index: int) -> int | str:  # the table lacks the skipped records
            return self._line(self._record_lines(), record_of_table_row(bad_records, index) + 1)

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
            bad: tuple[int, int, bytes] | None = None
            line: int | str = "unknown"
            for data, first_line in self._texts():
                bad = first_bad_encoding(iter([data]), options.encoding)
                if bad is not None:
                    line = bad[0] + first_line - 1
                    break
            found = f"bytes {bad[2]!r} that are not {options.encoding}" if bad else str(exc)
            return DataError(
                describe(
                    f"A CSV file is not valid {options.encoding}",
                    where=f"{self.path}, line {line}",
                    found=found,
                    fix="pass the file's encoding, e.g. encoding='latin-1' or 'cp1252'",
                ),
                cli_fix=CLI_FIX_ENCODING,
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
            if casts(column, kind):
                continue
            low, high = 0, len(column)  # column[:low] casts, column[:high] does not
            while high - low > 1:
                middle = (low + high) // 2
                low, high = (middle, high) if casts(column[:middle], kind) else (low, middle)
            if found is None or low < found[0]:
                found = (low, name, kind, column[low].as_py())
        if found is None:
            return CorruptFileError(
                describe("Could not convert a CSV value", where=f"{self.path}, {self.location}", found=str(exc))
            )
        index, name, kind, value = found
        bad = left_out_records(invalid, too_long)
        return DataError(
            describe(
                f"Column {name!r} has a value that is not {kind}",
                where=f"{self.path}, line {self._line_of_table_row(bad)(index)}",
                expected=f"{kind} values (inferred from the first MiB of the files, or set in column_types)",
                found=preview(value),
                fix=f"pass column_types={{{name!r}: 'float64'}} (or 'string'), or repair the value",
            ),
            cli_fix=CLI_FIX_TYPES,
        )


def _straddles(exc: Exception) -> bool:
    """pyarrow's refusal of a record that reaches past the block after its own."""
    return "straddling object" in str(exc)
