"""Where a CSV file's bytes come from: codecs, streams, the head, the row-count index.

Owns what the source, the options and the fragments all need about a file
as bytes on a filesystem: which compression its suffix names and whether it
can be entered mid-stream (``_whole``), opening its (decompressed) stream,
reading its head, keeping the row-count scan's result in a small JSON cache,
what opening a file found (``_FileInfo``), and the two messages for a file
that cannot be read (``_corrupt``) or has an unbalanced quote
(``_quote_error``). It imports nothing from the other CSV modules, so every
one of them can import it.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

import pyarrow as pa
import pyarrow.fs as pafs

from ...errors import CorruptFileError, DataError, describe
from ...files import inflate as _inflate
from ...files.atomic import write_atomic
from .scan import Split, UnbalancedQuote

HEAD_BYTES = 1 << 20  # read from every file for its header, delimiter and column types
COMPRESSION = {".gz": "gzip", ".gzip": "gzip", ".bz2": "bz2", ".zst": "zstd", ".zstd": "zstd"}
_PLAIN = (".csv", ".tsv", ".psv", ".txt", ".dat")
SUFFIXES = _PLAIN + tuple(plain + packed for plain in _PLAIN for packed in COMPRESSION)
_BOM = b"\xef\xbb\xbf"
_CACHE_VERSION = 2  # 2: the scan also lists the records too long for pyarrow


def file_codec(path: str) -> str | None:
    lower = path.lower()
    return next((codec for suffix, codec in COMPRESSION.items() if lower.endswith(suffix)), None)


def _whole(codec: str | None) -> bool:
    """Compressed so that it cannot be entered mid-stream: one fragment (bz2, zstd)."""
    return codec is not None and codec != "gzip"


def _open_stream(filesystem: pafs.FileSystem, path: str, codec: str | None):
    return filesystem.open_input_stream(path, compression=codec)


def head_bytes(filesystem: pafs.FileSystem, path: str, codec: str | None) -> bytes:
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
        write_atomic(path, json.dumps({"key": key, "scan": result}))
    except OSError:
        pass  # a read-only home directory only costs a rescan next time
    return result


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
    long: list[tuple[int, ...]] = field(default_factory=list)  # records too long for pyarrow (scan.too_long)

    def long_in(self, split: Split) -> tuple[tuple[int, ...], ...]:
        """The too-long records of ``split``, numbered among its records (1-based), for its fragment."""
        return tuple(
            (number - split.first_row, *rest) for number, *rest in self.long if split.start <= rest[0] < split.end
        )


# The fixes of a CSV's errors as a shell user applies them (StreamfeedError.cli_fix): the command line has no
# flags for the CSV dialect, and a file that is not a CSV at all (an HDF5 file read with --format csv) fails so too.
CLI_FIX_NOT_CSV = "check --format (leave it out to detect the format from the file's suffix): the file may not be a CSV"
CLI_FIX_QUOTES = f"{CLI_FIX_NOT_CSV}; if it is, quote whole fields only (and double the quotes inside them)"
CLI_FIX_TYPES = (
    "repair the value: the command line takes each column's type from the first MiB of the files and has no flag "
    "to set it (from Python, read_csv's column_types does)"
)
CLI_FIX_ENCODING = (
    f"{CLI_FIX_NOT_CSV}; if it is, convert it to UTF-8 first, e.g. iconv -f latin1 -t utf-8 FILE > FILE.utf8.csv"
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
            fix=(
                "quote the whole field (and double quotes inside it), "
                "or pass quote_char=None if the file does not quote fields"
            ),
        ),
        cli_fix=CLI_FIX_QUOTES,
    )
