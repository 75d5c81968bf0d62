"""HDF5 files (h5py datasets, and pandas/PyTables ``format="table"`` files).

Columns are datasets of one or more files, named by the user
(``columns={"x": "/images", "y": "/labels"}``) or discovered (every dataset,
named by its path; see ``catalog.py``, which also reads pandas/PyTables
tables and decodes text). Each file is opened once when the source opens: that
finds unreadable files, missing datasets, datasets of different lengths and
compression filters this h5py lacks before training starts, and gives exact
row counts from the dataset shapes.

Fragments are row ranges ``[start, stop)`` aligned to the HDF5 chunks along
axis 0 of the widest column (so no chunk is decompressed by two fragments),
grouped to about :data:`TARGET_FRAGMENT_BYTES`; contiguous (unchunked)
datasets get ranges of that size. A fragment's read is one contiguous slice
``ds[start:stop]`` per dataset, read straight into a fresh array
(``handles.py``: the file handles read threads keep, and ``processes=N``).

h5py serialises every call through one global lock, so read threads
overlap only Python-side work, not HDF5 decoding: the source reads with one
thread by default (``read_parallelism``; measured 20.8 against 15.6 M rows/s
with two, uncompressed). ``processes=N`` reads
fragments in N worker processes instead (each writes into shared memory
that the fragment copies out once); see ``benchmarks/hdf5.py`` for when that
pays.

A dataset that keeps its bytes in another file (external raw storage, a
virtual dataset over other files) is refused unless ``allow_external=True``:
see ``guard.py``. External links are never followed: columns are found by
walking the file's own objects, and a column path through a link is "not
in the file".
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from ...core import AlikeRows, Chunk, SourceInfo, fragmenting_digest, records_settings
from ...errors import ArgumentError, BadInputReport, CorruptFileError, SchemaError, describe
from ...files.paths import PathLike, file_digest, file_stats, resolve_files
from ...files.stamps import Stamps, stamps_field, take_stamps, unchanged
from .catalog import Column, check_encoding, check_filters, decode_text, load_h5py, mean_vlen_length, read_catalog
from .guard import CheckedFiles, refuse_outside_data
from .handles import ProcessReader, empty_out, read_range
from .names import served_name

TARGET_FRAGMENT_BYTES = 8 * 2**20
"""Default fragment size: a few MiB keeps per-fragment overhead negligible
and shuffle windows of many fragments within the default memory limit."""

_SUFFIXES = (".h5", ".hdf5", ".hdf", ".he5")


@dataclass(frozen=True)
class HDF5Fragment:
    """Rows ``[start, stop)`` of the chosen datasets of one file."""

    key: str
    num_rows: int
    path: str
    start: int
    stop: int
    _columns: tuple[Column, ...]
    _processes: ProcessReader | None = None
    _allow_external: bool = False
    _checked: CheckedFiles | None = dataclasses.field(default=None, compare=False)
    _stamps: Stamps = stamps_field()

    def __post_init__(self) -> None:
        object.__setattr__(self, "_stamps", take_stamps((self.path,)))  # taken at open, checked at every read

    @property
    def location(self) -> str:
        return f"rows {self.start}-{self.stop - 1}"

    def read(self) -> Chunk:
        """:meth:`_read`, refused if the file changed since the source opened it (``files/stamps.py``)."""
        with unchanged((self.path,), self._stamps):
            return self._read()

    def _read(self) -> Chunk:
        try:
            if self._processes is not None:
                out = self._processes.read(self.path, self._columns, self.start, self.stop, self._allow_external)
            else:
                out = empty_out(self._columns, self.num_rows)
                read_range(self.path, self._columns, self.start, self.stop, out, self._allow_external, self._checked)
                out = {c.name: out[c.name] for c in self._columns}  # ragged columns were added last
            return decode_text(out, self._columns, self.path, self.start)
        except (OSError, KeyError, ValueError, RuntimeError) as exc:
            if isinstance(exc, CorruptFileError):
                raise
            raise CorruptFileError(
                describe(
                    "Could not read rows of an HDF5 file",
                    where=f"{self.path}, datasets {[c.label for c in self._columns]}, {self.location}",
                    found=f"{type(exc).__name__}: {exc}",
                    fix=(
                        "check the file (h5dump, or h5py), "
                        "or pass on_error='skip' to leave these rows out and report them"
                    ),
                )
            ) from exc


def _fragment_rows(columns: Sequence[Column], chunks: Mapping[str, int | None], rows_per_fragment: int | None) -> int:
    """Rows per fragment: a multiple of the widest column's chunk rows."""
    widest = max(columns, key=lambda c: c.row_bytes)
    align = chunks.get(widest.dataset) or 1
    row_bytes = sum(c.row_bytes for c in columns) or 1
    target = rows_per_fragment or max(1, TARGET_FRAGMENT_BYTES // row_bytes)
    return max(align, target // align * align)


class HDF5Source(AlikeRows):
    """Opens HDF5 input: checks files, datasets and lengths; splits into row ranges.

    ``allow_external=True`` reads datasets stored in other files (external
    raw storage, virtual datasets over other files); by default a file with
    such a column is rejected like an unreadable one (see the module notes).
    """

    settings: dict[str, Any]  # every constructor argument but core.NOT_ROW_SETTINGS (records_settings)

    @records_settings
    def __init__(
        self,
        paths: PathLike,
        *,
        columns: Mapping[str, str] | None = None,
        rows_per_fragment: int | None = None,
        processes: int | None = None,
        allow_external: bool = False,
        report: BadInputReport | None = None,
    ) -> None:
        h5py = load_h5py()
        if rows_per_fragment is not None and rows_per_fragment < 1:
            raise ArgumentError(describe("Invalid rows_per_fragment", expected=">= 1", found=f"{rows_per_fragment}"))
        if processes is not None and processes < 1:
            raise ArgumentError(
                describe("Invalid processes", expected=">= 1 (or None for threads)", found=f"{processes}")
            )
        self.report = report or BadInputReport()
        resolved = resolve_files(paths, suffixes=_SUFFIXES)
        self._processes = ProcessReader(processes) if processes else None
        self._requested = dict(columns) if columns is not None else None
        self._columns: tuple[Column, ...] | None = None
        self._rows_per_fragment = rows_per_fragment
        self._allow_external = bool(allow_external)
        self._checked = CheckedFiles()
        self.files: list[str] = []
        self.fragments: list[HDF5Fragment] = []
        for path in resolved.files:
            try:
                with h5py.File(path, "r") as handle:
                    rows, chunks, found = self._open_file(handle, path)
            except (SchemaError, CorruptFileError) as error:
                self.report.reject(error, path=path)
                continue
            except OSError as exc:  # h5py: not HDF5, truncated, zero bytes, unreadable
                unreadable = CorruptFileError(
                    describe(
                        "A file is not readable HDF5 (corrupt, truncated, empty, or another format)",
                        where=path,
                        expected="an HDF5 file (signature \\x89HDF\\r\\n\\x1a\\n and a complete superblock)",
                        found=f"{os.path.getsize(path) if os.path.exists(path) else '?'} bytes; h5py says: {exc}",
                        fix="rewrite or remove the file, or pass on_error='skip' to leave it out and report it",
                    )
                )
                self.report.reject(unreadable, path=path, cause=exc)
                continue
            self.files.append(path)
            self._split(path, rows, chunks, found)
        self.report.total_rows = sum(f.num_rows for f in self.fragments)
        self.report.total_files = len(resolved.files)
        self.report.check_budget()
        self._fingerprint: dict | None = None
        self.exact_counts = True  # a fragment that fails is skipped whole, with its row count
        # h5py runs every call under one global lock: a second read thread only contends for it
        # (2 M rows uncompressed, alternated: 1 thread 20.8 M rows/s, 2 threads 15.6 M, h5py's loop 21.8 M).
        self.read_parallelism: int | None = None if processes else 1
        self.read_scratch: float | None = None  # the library's figure for its decode (core.Source)

    # ------------------------------------------------------------------ opening
    def _open_file(self, handle: Any, path: str) -> tuple[int, dict[str, int | None], tuple[Column, ...]]:
        """Resolves the columns in one open file; returns its rows and chunk rows per dataset."""
        catalog = read_catalog(handle)
        listing = (
            ", ".join(f"{key} {entry.dtype}{[entry.rows, *entry.shape]}" for key, entry in catalog.items()) or "none"
        )
        if self._requested is None:
            chosen = {entry.default_name: entry for entry in catalog.values() if entry.default}
            if len(chosen) < sum(entry.default for entry in catalog.values()):
                raise SchemaError(
                    describe(
                        "Datasets or fields of this file have the same name when discovered",
                        where=path,
                        found=f"datasets {listing}",
                        fix="name the columns: columns={'x': '/path/to/dataset', ...}",
                    )
                )
            if not chosen:
                raise SchemaError(
                    describe("The file holds no datasets with rows", where=path, found=f"datasets {listing}")
                )
        else:
            chosen = {}
            for name, where in self._requested.items():
                key = "/" + where.strip("/")
                if key not in catalog:
                    raise SchemaError(
                        describe(
                            f"Column {name!r} names dataset {where!r}, which is not in the file",
                            where=path,
                            expected="a dataset path (or /compound/field)",
                            found=f"available datasets: {listing}",
                            fix=f"use one of the paths listed for {name!r}",
                        )
                    )
                chosen[name] = catalog[key]
        columns = tuple(
            Column(name, e.dataset, e.field, e.index, e.dtype, e.shape, e.text, e.vlen) for name, e in chosen.items()
        )
        lengths = {column.label: chosen[column.name].rows for column in columns}
        first_label, first_rows = next(iter(lengths.items()))
        for label, rows in lengths.items():
            if rows != first_rows:
                raise SchemaError(
                    describe(
                        "Datasets of one file have different lengths",
                        where=path,
                        expected="the same number of rows in every dataset (rows are read together)",
                        found=f"{first_label} has {first_rows} rows, {label} has {rows} rows",
                        fix="fix the file; streamfeed never truncates to the shorter dataset",
                    )
                )
        for dataset in sorted({column.dataset for column in columns}):
            if not self._allow_external:
                refuse_outside_data(handle, dataset, path)
            check_filters(handle[dataset], path)
        columns = tuple(  # measured only once the guard passed: nothing outside the file is read
            dataclasses.replace(c, mean_length=mean_vlen_length(handle[c.dataset])) if c.vlen is not None else c
            for c in columns
        )
        for column in columns:
            if column.vlen is None and (column.dtype.hasobject or column.dtype.kind in "OV"):
                raise SchemaError(
                    describe(
                        f"Column {column.name!r} ({column.label}) has dtype {column.dtype}, "
                        "which is not a fixed-size NumPy type nor a 1-D variable-length dataset of numbers",
                        where=path,
                        fix=(
                            "store lists of numbers as a 1-D dataset of h5py.vlen_dtype(<number type>) "
                            "(read as ragged rows), or fixed-size arrays, or leave this column out"
                        ),
                    )
                )
            if column.text is not None:
                check_encoding(column, path)
        if self._columns is None:
            self._columns = columns
        else:
            by_name = {c.name: c for c in columns}
            if sorted(by_name) == sorted(c.name for c in self._columns):
                columns = tuple(by_name[c.name] for c in self._columns)  # same columns, maybe stored in another order
            if [c.name for c in columns] != [c.name for c in self._columns]:
                raise SchemaError(
                    describe(
                        "Files have different datasets",
                        where=path,
                        expected=(
                            f"columns {[c.name for c in self._columns]} "
                            f"as in {self.files[0] if self.files else 'the first file'}"
                        ),
                        found=f"{[c.name for c in columns]}",
                        fix="name the columns explicitly: columns={...}",
                    )
                )
            for mine, theirs in zip(self._columns, columns):
                if mine.kind != theirs.kind:
                    raise SchemaError(
                        describe(
                            f"Column {mine.name!r} differs between files",
                            where=f"{self.files[0] if self.files else '?'} and {path}",
                            expected=f"{mine.type_name}{list(mine.shape)} per row as in the first file",
                            found=f"{theirs.type_name}{list(theirs.shape)} ({theirs.label})",
                            fix="write every file with the same dtypes and shapes",
                        )
                    )
        chunks = {c.dataset: (handle[c.dataset].chunks or (None,))[0] for c in columns}
        return first_rows, chunks, columns

    def _split(self, path: str, rows: int, chunks: Mapping[str, int | None], columns: tuple[Column, ...]) -> None:
        size = _fragment_rows(columns, chunks, self._rows_per_fragment)
        for start in range(0, rows, size):
            stop = min(rows, start + size)
            self.fragments.append(
                HDF5Fragment(
                    f"{path}#rows={start}:{stop}",
                    stop - start,
                    path,
                    start,
                    stop,
                    columns,
                    self._processes,
                    self._allow_external,
                    self._checked,
                )
            )

    # ---------------------------------------------------------------- protocol
    @property
    def column_names(self) -> list[str]:
        if self._columns is None:
            return list(self._requested or {})
        return [column.name for column in self._columns]

    def column_name(self, name: str) -> str:
        """The served column ``name`` means: ``labels`` for ``/labels`` too (``names.py``); others as they are."""
        return served_name(name, self._columns or ())

    @property
    def row_bytes(self) -> float:
        """Bytes per served row: the widest file's (string widths may differ by file), str objects included."""
        if not self._columns:
            return 64.0
        layouts = {fragment._columns for fragment in self.fragments} or {self._columns}
        return float(max(8, *(sum(c.decoded_row_bytes for c in layout) for layout in layouts)))

    @property
    def info(self) -> SourceInfo:
        """Format (``core.SourceInfo``): what layers that see only the protocol read."""
        return SourceInfo("hdf5", fragment_setting="rows_per_fragment")

    def fingerprint(self) -> dict:
        """Files (paths, sizes, times), columns and fragment boundaries; taken once, at open."""
        if self._fingerprint is None:
            boundaries = (f"{fragment.start}:{fragment.stop}" for fragment in self.fragments)
            self._fingerprint = {
                "format": "hdf5",
                "files": len(self.files),
                "digest": file_digest(file_stats(self.files), boundaries),
                "columns": {c.name: c.label for c in self._columns or ()},
                "settings": self.settings,  # every constructor argument (core.records_settings)
                "fragmenting": fragmenting_digest(self.fragments),
            }
        return self._fingerprint

    def close(self) -> None:
        """Stops worker processes (``processes=N``); they also stop when the source is collected."""
        if self._processes is not None:
            self._processes.close()
