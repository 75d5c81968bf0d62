"""CSV files (plain, gzip, bz2, zstd), read by pyarrow's CSV parser.

When the source opens, every file is scanned once for its exact row count
(``scan.py``: a vectorised, quote-aware newline count over 1 MiB
blocks, cached under ``~/.cache/streamfeed/csv-counts/`` by path, size and
mtime), so steps per epoch are known before the first batch. A plain file's
blocks are read and summarised in threads while this thread adds them up in
order (``scan.scan_ranges``; most blocks need only a bit-mask summary,
``summary.py``); a compressed stream is read one block ahead
(``scan.scan_stream``). The scan reports its progress (``progress.py``: INFO
log lines on a long count, and a ``count_progress`` callback). The same scan
cuts a large file into byte ranges of about ``fragment_bytes`` at record
boundaries; each range is a fragment that a read thread opens, seeks and
parses on its own, with the header's column names.

A gzip file is cut the same way, in decompressed bytes: the counting pass
keeps a decompressor checkpoint per range (``files/inflate.py``, about 40 KiB
each), and a fragment resumes from its checkpoint and decompresses only its
own bytes, so memory is bounded by the fragment, not the file. Checkpoints
cannot be stored in the JSON row-count index, so opening a gzip file always
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

This module opens the files (``CsvSource``) and is the public API
(``read_csv``); beside it, ``options.py`` holds the dialect, delimiter
sniffing and type inference, ``fragment.py`` reads one byte range, and
``files.py`` holds codecs, streams and the row-count index.
"""

from __future__ import annotations

import concurrent.futures
import csv as pycsv
import io
import logging
import os
from typing import Any, Mapping, Sequence

import pyarrow as pa
import pyarrow.fs as pafs

from ...core import AlikeRows, SourceInfo, fragmenting_digest, records_settings
from ...errors import ArgumentError, BadInputReport, CorruptFileError, DataError, SchemaError, describe
from ...files import inflate as _inflate
from ...files.arrow import DEFAULT_POLICY, ColumnPolicy
from ...files.paths import PathLike, file_digest, file_stats, resolve_files
from .files import (
    _BOM,
    _CACHE_VERSION,
    COMPRESSION,
    HEAD_BYTES,
    SUFFIXES,
    _cached_scan,
    _corrupt,
    _FileInfo,
    _open_stream,
    _quote_error,
    _whole,
    file_codec,
    head_bytes,
)
from .fragment import CsvFragment, ParseHints
from .lists import list_columns_of
from .options import (
    DEFAULT_NULL_VALUES,
    SNIFF_DELIMITERS,
    TOO_LONG_BYTES,
    TypeSpec,
    _arrow_type,
    _check_encoding,
    _check_one_column,
    _csv_dialect,
    _decode,
    _Options,
    _sample_types,
    _unify_types,
    _value_bytes,
    first_bad_encoding,
    sniff_decimal,
    sniff_delimiter,
)
from .progress import ScanProgress, current_callback
from .scan import Scanner, Split, UnbalancedQuote, scan_ranges, scan_stream, too_long

# the public names this module has always offered, now partly defined beside it
__all__ = [
    "COMPRESSION", "DEFAULT_FRAGMENT_BYTES", "DEFAULT_NULL_VALUES", "HEAD_BYTES", "SNIFF_DELIMITERS", "SUFFIXES",
    "CsvFragment", "CsvSource", "TypeSpec", "first_bad_encoding", "sniff_delimiter",
]  # fmt: skip

DEFAULT_FRAGMENT_BYTES = 16 << 20
logger = logging.getLogger("streamfeed")


def _check_lists(lists: Sequence[Any], user_types: Mapping[str, pa.DataType], strings_can_be_null: bool) -> None:
    """Refuses ``list_columns`` that collide with ``column_types``, or with ``strings_can_be_null``."""
    both = sorted(spec.name for spec in lists if spec.name in user_types)
    if both:
        raise ArgumentError(
            describe(
                f"Columns {both} are in both column_types and list_columns",
                expected="each column in one of them: list_columns sets the type of its values",
            )
        )
    if lists and strings_can_be_null:
        raise ArgumentError(
            describe(
                "list_columns cannot be combined with strings_can_be_null=True",
                expected="strings_can_be_null=False (the default)",
                found="strings_can_be_null=True, which makes an empty field null in every text column "
                "(pyarrow's option), where an empty list field must read as an empty list",
                fix="leave strings_can_be_null out; a list field equal to a null token is still a null",
            )
        )


# ------------------------------------------------------------------ source
class CsvSource(AlikeRows):
    """Opens CSV input: header, delimiter, exact counts and byte-range fragments."""

    settings: dict[str, Any]  # every constructor argument but core.NOT_ROW_SETTINGS (records_settings)

    @records_settings
    def __init__(
        self,
        paths: PathLike,
        *,
        delimiter: str | None = None,
        decimal: str | None = None,
        header: bool = True,
        column_names: Sequence[str] | None = None,
        column_types: Mapping[str, TypeSpec] | None = None,
        list_columns: Mapping[str, tuple[str, TypeSpec]] | None = None,
        null_values: Sequence[str] | None = None,
        strings_can_be_null: bool = False,
        quote_char: str | None = '"',
        encoding: str = "utf-8",
        columns: Sequence[str] | None = None,
        fragment_bytes: int = DEFAULT_FRAGMENT_BYTES,
        filesystem: pafs.FileSystem | None = None,
        policy: ColumnPolicy = DEFAULT_POLICY,
        count_cache: bool = True,
        report: BadInputReport | None = None,
        threads: int = 4,
    ) -> None:
        self.report = report or BadInputReport()
        _check_encoding(encoding)
        if delimiter is not None and len(delimiter) != 1:
            raise ArgumentError(describe("Invalid delimiter", expected="one character", found=f"{delimiter!r}"))
        if fragment_bytes < 1:
            raise ArgumentError(describe("Invalid fragment_bytes", expected=">= 1", found=f"{fragment_bytes}"))
        resolved = resolve_files(paths, suffixes=SUFFIXES, filesystem=filesystem)
        self.filesystem, self.root, self.files = resolved.filesystem, resolved.root, resolved.files
        self._header, self._column_names = header, list(column_names) if column_names is not None else None
        self._quote_char, self._encoding, self._fragment_bytes = quote_char, encoding, fragment_bytes
        self._count_cache = count_cache
        self._null_values = tuple(DEFAULT_NULL_VALUES if null_values is None else null_values)
        self._strings_can_be_null = strings_can_be_null
        user_types = {name: _arrow_type(spec, name) for name, spec in (column_types or {}).items()}
        lists = list_columns_of(list_columns)
        _check_lists(lists, user_types, strings_can_be_null)
        user_types.update({spec.name: pa.string() for spec in lists})  # parsed as text, split by the fragment
        if decimal is not None and decimal not in (".", ","):
            raise ArgumentError(describe("Invalid decimal", expected="'.' or ','", found=repr(decimal)))
        if delimiter is None or decimal is None:
            first = next((path for path in self.files if self._size(path)), None)
            try:
                head = head_bytes(self.filesystem, first, file_codec(first)) if first else b""
            except (OSError, pa.ArrowInvalid):
                head = b""  # opening the file below names what is wrong with it
            if delimiter is None:
                delimiter = sniff_delimiter(head, encoding, quote_char) if head else ","
            if decimal is None:
                decimal = sniff_decimal(head, encoding, delimiter, quote_char) if head else "."
        self.delimiter, self.decimal = delimiter, decimal

        openers = max(1, min(threads, len(self.files)))
        # Each file's count reads and indexes its blocks in threads (scan.scan_ranges): the threads left per file.
        self._scan_threads = max(1, min(threads // openers, os.cpu_count() or 1))
        self._count_progress = current_callback()  # taken here: the opening threads do not see this context
        with concurrent.futures.ThreadPoolExecutor(openers) as pool:
            opened = list(pool.map(self._open_file_or_error, self.files, [user_types] * len(self.files)))
        good: list[_FileInfo] = []
        for path, result in zip(self.files, opened):
            if isinstance(result, Exception):
                if not isinstance(result, (CorruptFileError, DataError)):
                    raise result
                self.report.reject(result, path=path, rows=getattr(result, "rows_lost", None))
            else:
                good.append(result)
        names = self._check_names(good)
        if columns is None:
            columns = names
        unknown = [name for name in columns if name not in names]
        if unknown:
            raise SchemaError(
                describe(
                    f"Columns {unknown} are not in the data",
                    where=self.root,
                    expected=f"names among {names}",
                    fix="check the spelling in columns=[...]",
                )
            )
        unknown = [name for name in user_types if name not in names]
        if unknown:
            keyword = "list_columns" if all(name in (list_columns or {}) for name in unknown) else "column_types"
            raise SchemaError(
                describe(
                    f"{keyword} names columns {unknown} that are not in the data",
                    where=self.root,
                    expected=f"names among {names}",
                )
            )
        self._columns = tuple(columns)
        types = _unify_types(good, self._columns, user_types)
        lists = tuple(spec for spec in lists if spec.name in self._columns)
        served = {spec.name: pa.large_list(spec.kind) for spec in lists}
        self.schema = pa.schema([(name, served.get(name, types[name])) for name in self._columns])
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
            report=self.report,
            decimal=decimal,
            lists=lists,
        )
        hints = ParseHints()
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
                _hints=hints,
                _long=() if _whole(info.codec) else info.long_in(split),
            )
            for info in good
            for split in info.fragments
            if split.rows
        ]
        self.report.total_rows = sum(fragment.num_rows for fragment in self.fragments)
        self.report.total_files = len(self.files)
        self.report.check_budget()
        self.row_bytes = float(sum(_value_bytes(kind) for kind in self.schema.types) or 8)
        self._policy = policy
        self._fingerprint: dict | None = None
        # Dropped null rows and skipped ragged lines are known only by parsing: count them once.
        self.exact_counts = self.report.on_error == "raise" and policy.nulls != "drop"
        self.read_parallelism: int | None = None  # reads run in parallel (core.Source)
        self.read_scratch: float | None = None  # the library's figure for its decode (core.Source)

    # ----------------------------------------------------------------- opening
    def _size(self, path: str) -> int:
        return self.filesystem.get_file_info(path).size or 0

    def _open_file_or_error(self, path: str, user_types: Mapping[str, pa.DataType]) -> _FileInfo | Exception:
        try:
            return self._open_file(path, user_types)
        except (CorruptFileError, DataError, SchemaError) as exc:
            return exc

    def _open_file(self, path: str, user_types: Mapping[str, pa.DataType]) -> _FileInfo:
        codec = file_codec(path)
        info = self.filesystem.get_file_info(path)
        quote = None if self._quote_char is None else ord(self._quote_char)
        delimiter = ord(self.delimiter)
        try:
            head = head_bytes(self.filesystem, path, codec)
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
            raise SchemaError(
                describe(
                    "The first record of a CSV file is longer than 1 MiB",
                    where=path,
                    fix="check the delimiter and quote_char",
                )
            )
        header_text = _decode(head[bom : probe.header_end], self._encoding, path, 1)
        first_record = next(
            pycsv.reader(io.StringIO(header_text), **_csv_dialect(self.delimiter, self._quote_char)), []
        )
        _check_one_column(first_record, header_text, path, self.delimiter)
        if self._header:
            names = [name.strip() if isinstance(name, str) else name for name in first_record]
            if self._column_names is not None:
                if len(self._column_names) != len(names):
                    raise SchemaError(
                        describe(
                            "column_names does not match the header",
                            where=f"{path}, line 1",
                            expected=f"{len(names)} names",
                            found=f"{len(self._column_names)}",
                        )
                    )
                names = list(self._column_names)
            data_start, first_line = probe.header_end, 1 + head[: probe.header_end].count(b"\n")
        else:
            names = (
                list(self._column_names)
                if self._column_names is not None
                else [f"f{i}" for i in range(len(first_record))]
            )
            data_start, first_line = 0, 1
        duplicates = sorted({name for name in names if names.count(name) > 1})
        if duplicates:
            raise SchemaError(
                describe(
                    f"A CSV header names columns {duplicates} twice",
                    where=f"{path}, line 1",
                    fix="rename them, or pass column_names=[...]",
                )
            )

        split_bytes = (
            None
            if _whole(codec) or (codec is None and (info.size or 0) <= self._fragment_bytes)
            else self._fragment_bytes
        )
        key = {
            "v": _CACHE_VERSION, "path": path, "size": info.size, "mtime_ns": info.mtime_ns, "codec": codec,
            "quote": quote, "delimiter": delimiter, "header": self._header, "split": split_bytes,
        }  # fmt: skip

        checkpoints: list[_inflate.Checkpoints] = []  # gzip: kept by a scan that runs

        def scan() -> dict:
            scanner = Scanner(
                quote=quote,
                delimiter=delimiter,
                header=self._header,
                split_bytes=split_bytes,
                data_start=bom,
                collect=True,  # only the records pyarrow refuses: a fragment reads around them
                longer_than=TOO_LONG_BYTES,
            )
            progress = ScanProgress(path, 0 if codec else info.size or 0, self._count_progress)
            try:
                if codec == "gzip":
                    checkpoints.append(self._scan_gzip(path, scanner))
                elif codec is None:
                    with self.filesystem.open_input_file(path) as handle:
                        size = handle.size()
                        read_at = lambda offset, length: handle.read_at(length, offset)  # noqa: E731
                        scan_ranges(read_at, size, scanner, threads=self._scan_threads, progress=progress)
                else:
                    with _open_stream(self.filesystem, path, codec) as stream:
                        scan_stream(stream.read, scanner, progress=progress)
            except UnbalancedQuote as exc:
                raise _quote_error(path, exc) from exc
            except (OSError, pa.ArrowInvalid, _inflate.InflateError) as exc:
                raise _corrupt(
                    path, f"after line {scanner.lines_before + 1} (byte {scanner.offset} of the data)", exc
                ) from exc
            progress.done(scanner.rows, scanner.offset)
            if split_bytes is None:
                splits = [Split(data_start, scanner.offset, scanner.rows, first_line, 0)]
            else:
                splits = scanner.splits
            return {
                "rows": scanner.rows,
                "quoted_newlines": scanner.quoted_newlines,
                "splits": [s.to_list() for s in splits],
                "long": too_long(scanner),
            }

        use_cache = (
            self._count_cache and isinstance(self.filesystem, pafs.LocalFileSystem) and info.mtime_ns is not None
        )
        result = _cached_scan(key, scan) if use_cache else scan()
        splits = [Split(*item) for item in result["splits"]]
        long_records = [tuple(item) for item in result["long"]]
        if codec == "gzip" and not checkpoints:  # counts came from the cache: one pass for the checkpoints
            checkpoints.append(self._gzip_checkpoints(path, [split.start for split in splits]))
        elif _whole(codec) and splits and splits[-1].end > self._fragment_bytes:
            logger.warning(
                "%s is %s-compressed: it is read as one fragment of %.1f MiB decompressed "
                "(fragment_bytes is %.1f MiB), held whole in memory while it is read; "
                "recompress it with gzip or split it into smaller files",
                path, codec, splits[-1].end / 2**20, self._fragment_bytes / 2**20,
            )  # fmt: skip
        sample = _sample_types(
            head,
            probe,
            whole,
            data_start,
            names,
            path,
            first_line,
            user_types,
            encoding=self._encoding,
            delimiter=self.delimiter,
            quote_char=self._quote_char,
            null_values=self._null_values,
            strings_can_be_null=self._strings_can_be_null,
            decimal=self.decimal,
        )
        return _FileInfo(
            path,
            codec,
            names,
            splits,
            result["rows"],
            result["quoted_newlines"],
            sample,
            info.size,
            checkpoints[0] if checkpoints else None,
            long_records,
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

    @property
    def info(self) -> SourceInfo:
        """Format, schema (``core.SourceInfo``): what layers that see only the protocol read."""
        return SourceInfo("csv", schema=self.schema, filesystem=self.filesystem, fragment_setting="fragment_bytes")

    def fingerprint(self) -> dict:
        """Files (paths, sizes, times), columns, delimiter and null policy; taken once, at open."""
        if self._fingerprint is None:
            self._fingerprint = {
                "format": "csv",
                "files": len(self.files),
                "digest": file_digest(file_stats(self.files, self.filesystem)),
                "policy": self._policy.identity(),
                "columns": list(self._columns),
                "delimiter": self.delimiter,
                "decimal": self.decimal,
                "settings": self.settings,  # every constructor argument (core.records_settings)
                "fragmenting": fragmenting_digest(self.fragments),
            }
        return self._fingerprint
