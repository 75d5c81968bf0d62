"""CSV files (plain, gzip, bz2, zstd), read by pyarrow's CSV parser.

When the source opens, every file is scanned once for its exact row count
(``_csv_scan.py``: a vectorised, quote-aware newline count over large byte
blocks, cached under ``~/.cache/streamfeed/csv-counts/`` by path, size and
mtime), so steps per epoch are known before the first batch. The same scan
cuts a large file into byte ranges of about ``fragment_bytes`` at record
boundaries; each range is a fragment that a read thread opens, seeks and
parses on its own, with the header's column names.

A gzip file is cut the same way, in decompressed bytes: the counting pass
keeps a decompressor checkpoint per range (``_inflate.py``, about 40 KiB
each), and a fragment resumes from its checkpoint and decompresses only its
own bytes, so memory is bounded by the fragment, not the file. Checkpoints
cannot be stored in the JSON count cache, so opening a gzip file always
takes one decompression pass (when the counts are cached, a pass without
the scan, stopping at the last range's start).

**Limit: bz2 and zstd files are one fragment each**, read whole into one
chunk: a fragment of such a file holds the whole decompressed file (as
parsed columns). ``bz2.BZ2Decompressor`` cannot be copied, pyarrow's
decompressing streams expose no state, and ``zstandard`` is not a
dependency (a single-frame zstd stream has no resumable points either).
Opening such a file larger than ``fragment_bytes`` logs a warning with its
size; recompress large files with gzip, or write several smaller files.

Column types are inferred once, from the first MiB of every file, and then
fixed for every fragment, so that a column has one dtype in every chunk; a
later value that does not fit names its file, line and column. Line numbers
in messages are physical lines (a quoted value may span several).
"""

from __future__ import annotations

import codecs
import concurrent.futures
import csv as pycsv
import hashlib
import io
import json
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.compute as pc
import pyarrow.fs as pafs

from ..core import Chunk, NullPolicy
from ..errors import BadInputReport, CorruptFileError, DataError, OnError, SchemaError, SkippedUnit, describe
from . import _inflate
from ._arrow import ColumnPolicy, table_to_chunk
from ._csv_scan import Scanner, Split, UnbalancedQuote, record_lines, scan_stream
from ._paths import PathLike, resolve_files

DEFAULT_FRAGMENT_BYTES = 16 << 20
HEAD_BYTES = 1 << 20  # read from every file for its header, delimiter and column types
DEFAULT_NULL_VALUES: tuple[str, ...] = (
    "", "#N/A", "#N/A N/A", "#NA", "-1.#IND", "-1.#QNAN", "-NaN", "-nan", "1.#IND",
    "1.#QNAN", "N/A", "NA", "NULL", "NaN", "n/a", "nan", "null",
)  # fmt: skip
"""pyarrow's (and pandas') tokens; they make *numeric* values null. String
columns keep them as text unless ``strings_can_be_null=True``."""
SNIFF_DELIMITERS = (",", ";", "\t", "|")
COMPRESSION = {".gz": "gzip", ".gzip": "gzip", ".bz2": "bz2", ".zst": "zstd", ".zstd": "zstd"}
_PLAIN = (".csv", ".tsv", ".psv", ".txt", ".dat")
SUFFIXES = _PLAIN + tuple(plain + packed for plain in _PLAIN for packed in COMPRESSION)
_BOM = b"\xef\xbb\xbf"
_CACHE_VERSION = 1
logger = logging.getLogger("streamfeed")

TypeSpec = Any  # a pyarrow DataType, a NumPy dtype or type, or a name such as "float32"


# ---------------------------------------------------------------- options
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
    on_error: OnError
    report: BadInputReport

    @property
    def quote_byte(self) -> int | None:
        return None if self.quote_char is None else ord(self.quote_char)

    def parse_options(self, handler: Callable[[Any], str] | None, newlines_in_values: bool = True) -> pacsv.ParseOptions:
        return pacsv.ParseOptions(
            delimiter=self.delimiter,
            quote_char=self.quote_char if self.quote_char is not None else False,
            newlines_in_values=newlines_in_values,
            invalid_row_handler=handler,
        )

    def read_options(self, names: Sequence[str]) -> pacsv.ReadOptions:
        return pacsv.ReadOptions(column_names=list(names), use_threads=False, encoding=self.encoding, block_size=4 << 20)

    def convert_options(self, types: Mapping[str, pa.DataType] | None = None, *, strings_can_be_null: bool | None = None) -> pacsv.ConvertOptions:
        return pacsv.ConvertOptions(
            column_types=dict(self.types if types is None else types),
            null_values=list(self.null_values),
            strings_can_be_null=self.strings_can_be_null if strings_can_be_null is None else strings_can_be_null,
            include_columns=list(self.columns),
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
        raise ValueError(
            describe(
                f"column_types[{column!r}] is not a type streamfeed can read CSV values as",
                expected="a pyarrow type, a NumPy dtype, or a name such as 'int64', 'float32', 'string', 'bool'",
                found=repr(spec),
            )
        ) from exc


# ------------------------------------------------------------------ files
def _codec(path: str) -> str | None:
    lower = path.lower()
    return next((codec for suffix, codec in COMPRESSION.items() if lower.endswith(suffix)), None)


def _whole(codec: str | None) -> bool:
    """Compressed so that it cannot be entered mid-stream: one fragment (bz2, zstd)."""
    return codec is not None and codec != "gzip"


def _open_stream(filesystem: pafs.FileSystem, path: str, codec: str | None):
    return filesystem.open_input_stream(path, compression=codec)


def _read_head(filesystem: pafs.FileSystem, path: str, codec: str | None) -> bytes:
    with _open_stream(filesystem, path, codec) as stream:
        return stream.read(HEAD_BYTES)


def _cache_file(key: Mapping[str, Any]) -> Path:
    root = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "streamfeed" / "csv-counts"
    digest = hashlib.sha1(json.dumps(key, sort_keys=True).encode()).hexdigest()
    return root / f"{digest}.json"


def _cached_scan(key: Mapping[str, Any], scan: Callable[[], dict]) -> dict:
    """``scan()``'s result, kept in a small JSON file keyed by path, size and mtime."""
    path = _cache_file(key)
    try:
        cached = json.loads(path.read_text())
        if cached.get("key") == key:
            return cached["scan"]
    except (OSError, ValueError, KeyError):
        pass
    result = scan()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_suffix(f".{os.getpid()}.{id(result)}.tmp")
        temporary.write_text(json.dumps({"key": key, "scan": result}))
        os.replace(temporary, path)
    except OSError:
        pass  # a read-only home directory only costs a rescan next time
    return result


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


@dataclass
class _FileInfo:
    path: str
    codec: str | None
    names: list[str]  # as the file's header has them (or column_names)
    fragments: list[Split]  # byte ranges (in decompressed bytes for a compressed file)
    rows: int
    quoted_newlines: bool
    sample: pa.Schema | None  # types inferred from the first MiB
    size: int
    checkpoints: _inflate.Checkpoints | None = None  # gzip: where each range resumes


# ---------------------------------------------------------------- fragment
@dataclass(frozen=True)
class _CsvWhere:
    """Where a table came from, for ``_arrow``'s null messages: file and physical line."""

    path: str
    line_of: Callable[[int], int]
    row_group: None = None
    first_row: int = 0
    missing_columns: frozenset = frozenset()
    locate: Callable[[int], int] | None = None

    def row(self, index: int) -> str:
        within = self.locate(index) if self.locate is not None else index
        return f"{self.path}, line {self.line_of(within)} (data row {self.first_row + within} of the file)"


@dataclass(frozen=True)
class CsvFragment:
    """Whole records ``[start, end)`` of one file (decompressed bytes for gzip; ``end=None``: to the end of a bz2/zstd stream)."""

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

    @property
    def location(self) -> str:
        return f"lines from {self.first_line}, {self.num_rows} rows"

    # ---------------------------------------------------------------- reading
    def _bytes(self) -> bytes:
        """This fragment's raw bytes (decompressed; a whole bz2/zstd file's: error paths only)."""
        filesystem = self._options.filesystem
        if self._codec == "gzip":
            return self._gzip_range()
        if self.end is not None:
            with filesystem.open_input_file(self.path) as handle:
                data = handle.read_at(self.end - self.start, self.start)
                return data if isinstance(data, bytes) else data.to_pybytes()
        with _open_stream(filesystem, self.path, self._codec) as stream:
            stream.read(self.start)
            return stream.read()

    def _gzip_range(self) -> bytes:
        assert self.end is not None
        points = self._checkpoints or _inflate.Checkpoints()
        return _inflate.read_range(lambda: self._options.filesystem.open_input_file(self.path), points, self.start, self.end)

    def _source(self) -> Any:
        filesystem = self._options.filesystem
        if self._codec == "gzip":
            return pa.BufferReader(self._gzip_range())
        if self.end is not None:
            with filesystem.open_input_file(self.path) as handle:
                return pa.BufferReader(handle.read_at(self.end - self.start, self.start))
        stream = _open_stream(filesystem, self.path, self._codec)
        stream.read(self.start)  # the header (and a BOM): a few bytes
        return stream

    def _parse(self, source: Any, invalid: list, *, skip: bool, types: Mapping[str, pa.DataType] | None = None, strings_can_be_null: bool | None = None) -> pa.Table:
        def handler(row: Any) -> str:
            invalid.append((row.number, row.expected_columns, row.actual_columns, row.text))
            return "skip" if skip else "error"

        options = self._options
        try:
            return pacsv.read_csv(
                source,
                read_options=options.read_options(self._names),
                parse_options=options.parse_options(handler, self._quoted_newlines),
                convert_options=options.convert_options(types, strings_can_be_null=strings_can_be_null),
            )
        finally:
            if hasattr(source, "close"):
                source.close()

    def read(self) -> Chunk:
        options = self._options
        invalid: list[tuple] = []
        try:
            table = self._parse(self._source(), invalid, skip=options.on_error == "skip")
        except (pa.ArrowInvalid, UnicodeError) as exc:
            raise self._explain(exc, invalid) from exc
        except (OSError, _inflate.InflateError) as exc:
            raise CorruptFileError(
                describe(
                    "Could not read a CSV file",
                    where=f"{self.path}, {self.location}",
                    found=f"{type(exc).__name__}: {exc}",
                    fix="check the file (a truncated compressed file fails here), or pass on_error='skip' to leave it out",
                )
            ) from exc
        if table.num_rows + len(invalid) != self.num_rows:
            raise CorruptFileError(
                describe(
                    "pyarrow parsed a different number of records than the row-count scan found",
                    where=f"{self.path}, {self.location}",
                    expected=f"{self.num_rows} records",
                    found=f"{table.num_rows} rows and {len(invalid)} ragged rows",
                    fix="lone carriage returns as line ends, or a quote character in an unquoted field, cause this; "
                    "convert line ends to \\n, or pass quote_char=None if the file does not quote fields",
                )
            )
        lines = self._record_lines() if invalid else None
        for number, expected, actual, text in invalid:
            line = self._line(lines, number)
            options.report.add(
                SkippedUnit(self.path, f"line {line}", f"expected {expected} fields, found {actual}: {text[:200]!r}", 1)
            )
        bad_records = sorted(number - 1 for number, *_ in invalid if number is not None)
        return table_to_chunk(table, options.policy, _CsvWhere(self.path, self._line_of_table_row(bad_records), first_row=self.first_row))

    # ------------------------------------------------------------ explaining
    def _record_lines(self) -> np.ndarray:
        options = self._options
        return record_lines(self._bytes(), quote=options.quote_byte, delimiter=ord(options.delimiter), first_line=self.first_line)

    @staticmethod
    def _line(lines: np.ndarray, number: int | None) -> int | str:
        if number is None or not 0 < number <= len(lines):
            return "unknown"
        return int(lines[number - 1])

    def _line_of_table_row(self, bad_records: Sequence[int]) -> Callable[[int], int]:
        """Table row -> physical line, computed only when a message asks."""

        def line_of(index: int) -> int:
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
        text = self._parse(pa.BufferReader(self._bytes()), invalid, skip=True, types={name: pa.string() for name in self._names}, strings_can_be_null=True)
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
            return CorruptFileError(describe("Could not convert a CSV value", where=f"{self.path}, {self.location}", found=str(exc)))
        index, name, kind, value = found
        bad = sorted(number - 1 for number, *_ in invalid if number is not None)
        return DataError(
            describe(
                f"Column {name!r} has a value that is not {kind}",
                where=f"{self.path}, line {self._line_of_table_row(bad)(index)}",
                expected=f"{kind} values (inferred from the first MiB of the files, or set in column_types)",
                found=repr(value),
                fix=f"pass column_types={{{name!r}: 'float64'}} (or 'string'), or repair the value",
            )
        )


def _casts(column: pa.Array, kind: pa.DataType) -> bool:
    try:
        pc.cast(column, kind)
        return True
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return False


# ------------------------------------------------------------------ source
class CsvSource:
    """Opens CSV input: header, delimiter, exact counts and byte-range fragments."""

    def __init__(
        self,
        paths: PathLike,
        *,
        delimiter: str | None = None,
        header: bool = True,
        column_names: Sequence[str] | None = None,
        column_types: Mapping[str, TypeSpec] | None = None,
        null_values: Sequence[str] | None = None,
        strings_can_be_null: bool = False,
        quote_char: str | None = '"',
        encoding: str = "utf-8",
        columns: Sequence[str] | None = None,
        fragment_bytes: int = DEFAULT_FRAGMENT_BYTES,
        filesystem: pafs.FileSystem | None = None,
        policy: ColumnPolicy = ColumnPolicy(),
        count_cache: bool = True,
        on_error: OnError = "raise",
        report: BadInputReport | None = None,
        threads: int = 4,
    ) -> None:
        self.report = report or BadInputReport()
        _check_encoding(encoding)
        if delimiter is not None and len(delimiter) != 1:
            raise ValueError(f"delimiter must be one character, got {delimiter!r}")
        if fragment_bytes < 1:
            raise ValueError(f"fragment_bytes must be >= 1, got {fragment_bytes}")
        resolved = resolve_files(paths, suffixes=SUFFIXES, filesystem=filesystem)
        self.filesystem, self.root, self.files = resolved.filesystem, resolved.root, resolved.files
        self._header, self._column_names = header, list(column_names) if column_names is not None else None
        self._quote_char, self._encoding, self._fragment_bytes = quote_char, encoding, fragment_bytes
        self._count_cache = count_cache
        self._null_values = tuple(DEFAULT_NULL_VALUES if null_values is None else null_values)
        self._strings_can_be_null = strings_can_be_null
        user_types = {name: _arrow_type(spec, name) for name, spec in (column_types or {}).items()}
        if delimiter is None:
            first = next((path for path in self.files if self._size(path)), None)
            try:
                head = _read_head(self.filesystem, first, _codec(first)) if first else b""
            except (OSError, pa.ArrowInvalid):
                head = b""  # opening the file below names what is wrong with it
            delimiter = sniff_delimiter(head, encoding, quote_char) if head else ","
        self.delimiter = delimiter

        with concurrent.futures.ThreadPoolExecutor(max(1, min(threads, len(self.files)))) as pool:
            opened = list(pool.map(self._open_file_or_error, self.files, [user_types] * len(self.files)))
        good: list[_FileInfo] = []
        for path, result in zip(self.files, opened):
            if isinstance(result, Exception):
                if on_error == "raise" or not isinstance(result, (CorruptFileError, DataError)):
                    raise result
                self.report.add(SkippedUnit(path, "file", str(result), 0 if getattr(result, "rows_lost", None) == 0 else None))
            else:
                good.append(result)
        names = self._check_names(good)
        if columns is None:
            columns = names
        unknown = [name for name in columns if name not in names]
        if unknown:
            raise SchemaError(
                describe(f"Columns {unknown} are not in the data", where=self.root, expected=f"names among {names}", fix="check the spelling in columns=[...]")
            )
        unknown = [name for name in user_types if name not in names]
        if unknown:
            raise SchemaError(describe(f"column_types names columns {unknown} that are not in the data", where=self.root, expected=f"names among {names}"))
        self._columns = tuple(columns)
        types = _unify_types(good, self._columns, user_types)
        self.schema = pa.schema([(name, types[name]) for name in self._columns])
        options = _Options(
            filesystem=self.filesystem,
            delimiter=delimiter,
            quote_char=quote_char,
            encoding=encoding,
            null_values=self._null_values,
            strings_can_be_null=strings_can_be_null,
            columns=self._columns,
            types=types,
            policy=policy,
            on_error=on_error,
            report=self.report,
        )
        self.fragments = [
            CsvFragment(
                key=f"{info.path}#bytes={split.start}-{'' if _whole(info.codec) else split.end}",
                num_rows=split.rows,
                path=info.path,
                start=split.start,
                end=None if _whole(info.codec) else split.end,
                first_line=split.first_line,
                first_row=split.first_row,
                _names=tuple(info.names),
                _codec=info.codec,
                _quoted_newlines=info.quoted_newlines,
                _options=options,
                _checkpoints=info.checkpoints,
            )
            for info in good
            for split in info.fragments
            if split.rows
        ]
        self.report.total_rows = sum(fragment.num_rows for fragment in self.fragments)
        self.report.total_files = len(self.files)
        self.report.check_budget()
        self.row_bytes = float(sum(_value_bytes(kind) for kind in self.schema.types) or 8)
        self._fingerprint: dict | None = None

    # ----------------------------------------------------------------- opening
    def _size(self, path: str) -> int:
        return self.filesystem.get_file_info(path).size or 0

    def _open_file_or_error(self, path: str, user_types: Mapping[str, pa.DataType]) -> _FileInfo | Exception:
        try:
            return self._open_file(path, user_types)
        except (CorruptFileError, DataError, SchemaError) as exc:
            return exc

    def _open_file(self, path: str, user_types: Mapping[str, pa.DataType]) -> _FileInfo:
        codec = _codec(path)
        info = self.filesystem.get_file_info(path)
        quote = None if self._quote_char is None else ord(self._quote_char)
        delimiter = ord(self.delimiter)
        try:
            head = _read_head(self.filesystem, path, codec)
        except (OSError, pa.ArrowInvalid) as exc:
            raise _corrupt(path, "the start of the file", exc) from exc
        bom = len(_BOM) if head.startswith(_BOM) else 0
        if not head[bom:].strip():
            if self._header:
                error = CorruptFileError(
                    describe(
                        "A CSV file is empty: it has not even a header line",
                        where=path,
                        expected="a header line naming the columns (header=True)",
                        found=f"{info.size} bytes" + (f" ({len(head)} after decompression)" if codec else ""),
                        fix="delete the file (a failed write?), or pass on_error='skip' to leave it out and report it",
                    )
                )
                error.rows_lost = 0  # type: ignore[attr-defined]
                raise error
            return _FileInfo(path, codec, list(self._column_names or []), [], 0, False, None, info.size)
        if b"\r" in head and b"\n" not in head and head.count(b"\r") > 1:
            raise SchemaError(
                describe(
                    "A CSV file ends its lines with lone carriage returns (old Mac style)",
                    where=path,
                    expected="lines ending in \\n or \\r\\n",
                    fix="convert the line ends, e.g. tr '\\r' '\\n' < old.csv > new.csv",
                )
            )
        probe = Scanner(quote=quote, delimiter=delimiter, header=True, data_start=bom)
        whole = len(head) < HEAD_BYTES
        try:
            probe.feed(head)
            if whole:
                probe.finish()
        except UnbalancedQuote as exc:
            raise _quote_error(path, exc) from exc
        if probe.header_end is None:
            raise SchemaError(describe("The first record of a CSV file is longer than 1 MiB", where=path, fix="check the delimiter and quote_char"))
        header_text = self._decode(head[bom : probe.header_end], path, 1)
        first_record = next(pycsv.reader(io.StringIO(header_text), **_csv_dialect(self.delimiter, self._quote_char)), [])
        self._check_one_column(first_record, header_text, path)
        if self._header:
            names = [name.strip() if isinstance(name, str) else name for name in first_record]
            if self._column_names is not None:
                if len(self._column_names) != len(names):
                    raise SchemaError(
                        describe("column_names does not match the header", where=f"{path}, line 1", expected=f"{len(names)} names", found=f"{len(self._column_names)}")
                    )
                names = list(self._column_names)
            data_start, first_line = probe.header_end, 1 + head[: probe.header_end].count(b"\n")
        else:
            names = list(self._column_names) if self._column_names is not None else [f"f{i}" for i in range(len(first_record))]
            data_start, first_line = 0, 1
        duplicates = sorted({name for name in names if names.count(name) > 1})
        if duplicates:
            raise SchemaError(describe(f"A CSV header names columns {duplicates} twice", where=f"{path}, line 1", fix="rename them, or pass column_names=[...]"))

        split_bytes = None if _whole(codec) or (codec is None and (info.size or 0) <= self._fragment_bytes) else self._fragment_bytes
        key = {
            "v": _CACHE_VERSION, "path": path, "size": info.size, "mtime_ns": info.mtime_ns, "codec": codec,
            "quote": quote, "delimiter": delimiter, "header": self._header, "split": split_bytes,
        }  # fmt: skip

        checkpoints: list[_inflate.Checkpoints] = []  # gzip: kept by a scan that runs

        def scan() -> dict:
            scanner = Scanner(quote=quote, delimiter=delimiter, header=self._header, split_bytes=split_bytes, data_start=bom)
            try:
                if codec == "gzip":
                    checkpoints.append(self._scan_gzip(path, scanner))
                else:
                    with _open_stream(self.filesystem, path, codec) as stream:
                        scan_stream(stream.read, scanner)
            except UnbalancedQuote as exc:
                raise _quote_error(path, exc) from exc
            except (OSError, pa.ArrowInvalid, _inflate.InflateError) as exc:
                raise _corrupt(path, f"after line {scanner.lines_before + 1} (byte {scanner.offset} of the data)", exc) from exc
            if split_bytes is None:
                splits = [Split(data_start, scanner.offset, scanner.rows, first_line, 0)]
            else:
                splits = scanner.splits
            return {"rows": scanner.rows, "quoted_newlines": scanner.quoted_newlines, "splits": [s.to_list() for s in splits]}

        use_cache = self._count_cache and isinstance(self.filesystem, pafs.LocalFileSystem) and info.mtime_ns is not None
        result = _cached_scan(key, scan) if use_cache else scan()
        splits = [Split(*item) for item in result["splits"]]
        if codec == "gzip" and not checkpoints:  # counts came from the cache: one pass for the checkpoints
            checkpoints.append(self._gzip_checkpoints(path, [split.start for split in splits]))
        elif _whole(codec) and splits and splits[-1].end > self._fragment_bytes:
            logger.warning(
                "%s is %s-compressed: it is read as one fragment of %.1f MiB decompressed (fragment_bytes is %.1f MiB), "
                "held whole in memory while it is read; recompress it with gzip or split it into smaller files",
                path, codec, splits[-1].end / 2**20, self._fragment_bytes / 2**20,
            )  # fmt: skip
        sample = self._sample_types(head, probe, whole, data_start, names, path, first_line, user_types)
        return _FileInfo(
            path, codec, names, splits, result["rows"], result["quoted_newlines"], sample, info.size, checkpoints[0] if checkpoints else None
        )

    def _scan_gzip(self, path: str, scanner: Scanner) -> _inflate.Checkpoints:
        """Counts a gzip file's records in one decompression pass, keeping a checkpoint per range.

        A range starts right after a record end found in the block just
        fed, so the checkpoint at that block's start lies at or before it.
        """
        points = _inflate.Checkpoints()
        with self.filesystem.open_input_stream(path, compression=None) as stream:
            for before, block in _inflate.blocks(stream.read, _inflate.block_bytes(self._fragment_bytes)):
                count = len(scanner.splits)
                scanner.feed(block)
                if len(scanner.splits) > count:
                    points.keep(before)
        scanner.finish()
        return points

    def _gzip_checkpoints(self, path: str, starts: Sequence[int]) -> _inflate.Checkpoints:
        """Checkpoints for ranges whose counts were cached: a decompression pass up to the last start."""
        try:
            with self.filesystem.open_input_stream(path, compression=None) as stream:
                return _inflate.checkpoints_at(stream.read, starts[1:], _inflate.block_bytes(self._fragment_bytes))
        except (OSError, _inflate.InflateError) as exc:
            raise _corrupt(path, "while indexing its compressed data", exc) from exc

    def _decode(self, data: bytes, path: str, first_line: int) -> str:
        try:
            text = data.decode(self._encoding)
        except UnicodeDecodeError as exc:
            bad = first_bad_encoding(iter([data]), self._encoding)
            line = first_line + (bad[0] - 1 if bad else 0)
            raise DataError(
                describe(
                    f"A CSV file is not valid {self._encoding}",
                    where=f"{path}, line {line}",
                    found=f"bytes {data[exc.start:exc.end]!r}",
                    fix="pass the file's encoding, e.g. encoding='latin-1' or 'cp1252'",
                )
            ) from exc
        return text.lstrip("\ufeff")

    def _check_one_column(self, record: list[str], text: str, path: str) -> None:
        """A one-field first line holding another delimiter is a wrong delimiter, not one column."""
        if len(record) != 1:
            return
        others = [d for d in SNIFF_DELIMITERS if d != self.delimiter and d in record[0]]
        if others:
            shown = {"\t": "\\t"}.get(others[0], others[0])
            raise SchemaError(
                describe(
                    f"The first line of a CSV file parses into one column with delimiter {self.delimiter!r}, but it contains {others[0]!r}",
                    where=f"{path}, line 1",
                    found=repr(text.rstrip("\r\n")[:200]),
                    fix=f"pass delimiter='{shown}' (pandas would read this file as one column of garbage)",
                )
            )

    def _sample_types(self, head: bytes, probe: Scanner, whole: bool, data_start: int, names: list[str], path: str, first_line: int, user_types: Mapping[str, pa.DataType]) -> pa.Schema | None:
        """Column types that pyarrow infers from the records in the file's first MiB."""
        end = len(head) if whole else probe.last_term + 1
        sample = head[data_start:end]
        if not sample.strip():
            return None
        given = {name: kind for name, kind in user_types.items() if name in names}
        try:
            table = pacsv.read_csv(
                pa.BufferReader(sample),
                read_options=pacsv.ReadOptions(column_names=names, use_threads=False, encoding=self._encoding),
                parse_options=pacsv.ParseOptions(
                    delimiter=self.delimiter,
                    quote_char=self._quote_char if self._quote_char is not None else False,
                    newlines_in_values=True,
                    invalid_row_handler=lambda row: "skip",
                ),
                convert_options=pacsv.ConvertOptions(null_values=list(self._null_values), strings_can_be_null=self._strings_can_be_null),
            )
        except UnicodeError:
            self._decode(sample, path, first_line)
            raise
        except pa.ArrowInvalid as exc:
            if "UTF8" in str(exc):
                self._decode(sample, path, first_line)
            raise _corrupt(path, f"the first MiB (lines from {first_line})", exc) from exc
        binary = [f.name for f in table.schema if pa.types.is_binary(f.type) and f.name not in given]
        if binary and self._encoding.replace("-", "").lower() in ("utf8", "utf8sig"):
            self._decode(sample, path, first_line)
        return table.schema

    def _check_names(self, good: Sequence[_FileInfo]) -> list[str]:
        with_names = [info for info in good if info.names]
        if not with_names:
            return list(self._column_names or [])
        first = with_names[0]
        for info in with_names[1:]:
            if sorted(info.names) != sorted(first.names):
                raise SchemaError(
                    describe(
                        "CSV files have different columns",
                        where=f"{first.path} and {info.path}",
                        expected=f"{first.names}",
                        found=f"{info.names}",
                        fix="read the files separately, or pass columns=[...] present in both",
                    )
                )
        return list(first.names)

    # ------------------------------------------------------------------ protocol
    @property
    def column_names(self) -> list[str]:
        return list(self._columns)

    def fingerprint(self) -> dict:
        """Files (paths and sizes, as opened), columns and delimiter; computed once."""
        if self._fingerprint is None:
            digest = hashlib.sha1()
            for info in self.filesystem.get_file_info(list(self.files)):
                digest.update(f"{info.path}\0{info.size}\n".encode())
            self._fingerprint = {
                "format": "csv",
                "files": len(self.files),
                "digest": digest.hexdigest()[:16],
                "columns": list(self._columns),
                "delimiter": self.delimiter,
            }
        return self._fingerprint


def _unify_types(good: Sequence[_FileInfo], columns: Sequence[str], user: Mapping[str, pa.DataType]) -> dict[str, pa.DataType]:
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


def _check_encoding(encoding: str) -> None:
    try:
        codecs.lookup(encoding)
    except LookupError as exc:
        raise ValueError(f"Unknown encoding {encoding!r}") from exc
    if '\n\r",;|\t'.encode(encoding, errors="replace").removeprefix(_BOM) != b'\n\r",;|\t':
        raise ValueError(
            describe(
                f"encoding {encoding!r} does not write ASCII punctuation as single ASCII bytes",
                expected="an ASCII-compatible encoding (utf-8, latin-1, cp1252, ...), which the row-count scan needs",
                fix="transcode the file first, e.g. iconv -f utf-16 -t utf-8",
            )
        )


def _corrupt(path: str, where: str, exc: Exception) -> CorruptFileError:
    return CorruptFileError(
        describe(
            "Could not read a CSV file (truncated or corrupt compressed data, or unreadable)",
            where=f"{path}, {where}",
            found=f"{type(exc).__name__}: {exc}",
            fix="re-create the file, or pass on_error='skip' to leave it out and report it",
        )
    )


def _quote_error(path: str, exc: UnbalancedQuote) -> DataError:
    return DataError(
        describe(
            f"A CSV file has {exc}",
            where=f"{path}, line {exc.line}",
            expected="quotes only around whole fields, closed before the end of the file",
            fix="quote the whole field (and double quotes inside it), or pass quote_char=None if the file does not quote fields",
        )
    )


def read_csv(
    paths: PathLike,
    *,
    delimiter: str | None = None,
    header: bool = True,
    column_names: Sequence[str] | None = None,
    column_types: Mapping[str, TypeSpec] | None = None,
    null_values: Sequence[str] | None = None,
    strings_can_be_null: bool = False,
    quote_char: str | None = '"',
    encoding: str = "utf-8",
    nulls: NullPolicy = "raise",
    fill: Any = None,
    columns: Sequence[str] | None = None,
    fragment_bytes: int = DEFAULT_FRAGMENT_BYTES,
    filesystem: pafs.FileSystem | None = None,
    count_cache: bool = True,
    on_error: OnError = "raise",
    max_bad_fraction: float | None = None,
    max_bad_count: int | None = None,
    report_path: str | os.PathLike | None = None,
):
    """Streams CSV data: a file, a directory, a glob or a list; plain or .gz/.bz2/.zst.

    Args:
        delimiter: one character; ``None`` (default) sniffs ``, ; tab |`` from
            the first file. A first line that parses into one column but
            contains another of these raises instead of yielding one column
            of garbage.
        header: the first record names the columns (default). Without it,
            columns are ``column_names`` or ``f0, f1, ...``.
        column_names: names to use instead of the header's (same count).
        column_types: ``{column: type}`` (``"float32"``, ``np.int64``,
            ``pa.string()``, ...); other columns' types are inferred from the
            first MiB of every file and then fixed for the whole dataset.
        null_values: tokens that make a value null; default
            :data:`DEFAULT_NULL_VALUES` (``""``, ``NA``, ``NaN``, ``null``, ...).
            They apply to numeric columns; string columns keep them as text
            unless ``strings_can_be_null=True``. Pass ``null_values=[""]`` to
            treat only empty fields as null.
        quote_char: the quote character, or ``None`` if fields are never quoted.
        encoding: the files' text encoding (ASCII-compatible: utf-8,
            latin-1, cp1252, ...). A byte that does not decode raises naming
            the file and line.
        nulls: ``"raise"`` (default) names the column, file and line of the
            first null or NaN; ``"drop"`` drops such rows; ``"fill"`` uses
            ``fill`` (one value, or a dict by column).
        columns: the columns to read (projection).
        fragment_bytes: an uncompressed file larger than this is read as
            byte ranges of about this size, in parallel threads.
        count_cache: keep exact row counts in ``~/.cache/streamfeed/csv-counts/``
            (``$XDG_CACHE_HOME``), keyed by path, size and mtime.
        on_error: ``"raise"`` (default) on the first ragged row, undecodable
            or corrupt file; ``"skip"`` skips ragged rows (each reported
            with its line) and unreadable files or ranges, recorded in
            ``dataset.report`` (and as JSON lines in ``report_path``) with
            exact counts, within the error budget. The epoch length is then
            counted once, so that yielded + reported == total.

    Returns:
        A :class:`streamfeed.Dataset`.
    """
    from ..pipeline import Dataset

    report = BadInputReport.for_options(max_bad_fraction, max_bad_count, report_path)
    source = CsvSource(
        paths,
        delimiter=delimiter,
        header=header,
        column_names=column_names,
        column_types=column_types,
        null_values=null_values,
        strings_can_be_null=strings_can_be_null,
        quote_char=quote_char,
        encoding=encoding,
        columns=columns,
        fragment_bytes=fragment_bytes,
        filesystem=filesystem,
        policy=ColumnPolicy(nulls=nulls, fill=fill),
        count_cache=count_cache,
        on_error=on_error,
        report=report,
    )
    return Dataset(source=source, on_error=on_error, report=report, row_count_known=on_error == "raise" and nulls != "drop")
