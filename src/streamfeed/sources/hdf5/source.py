"""HDF5 files (h5py datasets, and pandas/PyTables ``format="table"`` files).

Columns are datasets of one or more files, named by the user
(``columns={"x": "/images", "y": "/labels"}``) or discovered (every dataset,
named by its path). Each file is opened once when the source opens: that
finds unreadable files, missing datasets, datasets of different lengths and
compression filters this h5py lacks before training starts, and gives exact
row counts from the dataset shapes.

Fragments are row ranges ``[start, stop)`` aligned to the HDF5 chunks along
axis 0 of the widest column (so no chunk is decompressed by two fragments),
grouped to about :data:`TARGET_FRAGMENT_BYTES`; contiguous (unchunked)
datasets get ranges of that size. A fragment's read is one contiguous slice
``ds[start:stop]`` per dataset, read straight into a fresh array.

Each of streamfeed's read threads keeps the last file it read open, with
its datasets, for its next read (opening, closing and the first lookup of
each dataset in a fresh handle cost ~1.2 ms per 8 MiB fragment, as long
as reading half of it); the file closes when the thread ends, with its
epoch's reader, so no handle outlives the reading. Reads elsewhere (the
main thread) open and close the file each time. A file that was replaced
or rewritten since (``os.stat``) is opened afresh.
h5py serialises every call through one global lock, so read threads
overlap only Python-side work, not HDF5 decoding: the source reads with one
thread by default (``read_parallelism``; measured 20.8 against 15.6 M rows/s
with two, uncompressed). ``processes=N`` reads
fragments in N worker processes instead (each writes into shared memory
that the fragment copies out once); see ``benchmarks/hdf5.py`` for when that
pays.

pandas/PyTables ``table`` files are read too: the ``table`` dataset is a
compound dtype; each field is a column (the pandas ``index`` field is left
out by default), and a ``values_block_N`` field (several pandas columns
stored together) is split into its pandas column names, which PyTables keeps
as a pickled list: it is disassembled with :mod:`pickletools`, never
unpickled.

A dataset may keep its bytes in *another* file: external raw storage
(``h5py``'s ``external=``, any file such as ``/etc/passwd``) or a virtual
dataset mapping datasets of other files. Reading it would serve whatever
that file holds, and where HDF5 looks for a relative name depends on
``HDF5_EXTFILE_PREFIX``/``HDF5_VDS_PREFIX``, the working directory and the
file's folder, so "inside the data folder" cannot be decided from the name.
Such datasets are refused when the source opens (and again before a
read of a file that is not the version checked, see :class:`_CheckedFiles`),
naming the file, the dataset and what it points at, unless
``allow_external=True``; a virtual dataset whose sources are in the same
file (``"."``) is read like any other, once its sources pass the same
check. External links are never followed: columns are found by walking
the file's own objects, and a column path through a link is "not in the
file".
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import os
import pickletools
import posixpath
import threading
import time
import weakref
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence, cast

import numpy as np

from ...core import Chunk, SourceInfo
from ...errors import (
    ArgumentError,
    BadInputReport,
    CorruptFileError,
    MissingDependencyError,
    SchemaError,
    describe,
    require,
)
from ...files.paths import PathLike, file_digest, file_stats, resolve_files

TARGET_FRAGMENT_BYTES = 8 * 2**20
"""Default fragment size: a few MiB keeps per-fragment overhead negligible
and shuffle windows of many fragments within the default memory limit."""

_SUFFIXES = (".h5", ".hdf5", ".hdf", ".he5")
_TEXT_OBJECT_BYTES = 57  # a decoded str: 8-byte pointer + 49-byte object header (as the Parquet source counts it)


def _h5py():
    return require("h5py", "hdf5")


@dataclass(frozen=True)
class _Column:
    """Where one output column lives inside a file."""

    name: str
    dataset: str  # absolute dataset path
    field: str | None = None  # compound-dtype field
    index: int | None = None  # position inside a PyTables values_block field
    dtype: np.dtype = np.dtype("f8")
    shape: tuple[int, ...] = ()  # per-row shape
    text: str | None = None  # fixed-width bytes decoded to str with this encoding (see _text_encoding)

    @property
    def row_bytes(self) -> int:
        """Stored bytes per row: what a read and a worker's shared memory hold."""
        return self.dtype.itemsize * int(np.prod(self.shape, dtype=np.int64))

    @property
    def decoded_row_bytes(self) -> int:
        """Bytes per row once served: a decoded string also costs a Python ``str`` object per value."""
        values = int(np.prod(self.shape, dtype=np.int64))
        return self.row_bytes + (_TEXT_OBJECT_BYTES * values if self.text else 0)

    @property
    def type_name(self) -> str:
        return "str" if self.text else str(self.dtype)

    @property
    def kind(self) -> tuple:
        """What a row of this column is, across files: strings of any stored width are one kind."""
        return ("str", self.shape) if self.text else (self.dtype, self.shape)

    @property
    def label(self) -> str:
        """How the column's source is named in messages."""
        if self.field is None:
            return self.dataset
        return f"{self.dataset} field {self.field!r}" + ("" if self.index is None else f"[{self.index}]")


@dataclass(frozen=True)
class _Entry:
    """One readable thing in a file: a dataset, or a field of a compound dataset."""

    dataset: str
    field: str | None
    index: int | None
    dtype: np.dtype
    shape: tuple[int, ...]
    rows: int
    default: bool  # included when columns are discovered
    default_name: str
    text: str | None = None  # the encoding, when the stored bytes are strings to decode


def _pickled_names(raw: Any) -> list[str] | None:
    """Column names in a PyTables ``*_kind`` attribute, without unpickling.

    The attribute is a pickled list of strings; its opcodes are walked with
    :func:`pickletools.genops` and only string arguments are collected. Any
    other opcode (a global, a reduce) means it is not a plain list: None.
    """
    if not isinstance(raw, (bytes, np.bytes_)):
        return None
    allowed = {
        "PROTO",
        "FRAME",
        "MARK",
        "LIST",
        "EMPTY_LIST",
        "PUT",
        "BINPUT",
        "LONG_BINPUT",
        "MEMOIZE",
        "APPEND",
        "APPENDS",
        "STOP",
        "UNICODE",
        "BINUNICODE",
        "SHORT_BINUNICODE",
        "STRING",
        "BINSTRING",
        "SHORT_BINSTRING",
    }
    names: list[str] = []
    try:
        for opcode, arg, _ in pickletools.genops(bytes(raw)):
            if opcode.name not in allowed:
                return None
            if isinstance(arg, str) and ("STRING" in opcode.name or "UNICODE" in opcode.name):
                names.append(str(arg))
    except Exception:  # noqa: BLE001 - not a pickle we understand
        return None
    return names


def _catalog(handle: Any) -> dict[str, _Entry]:
    """Everything a column may name in an open file, by path.

    Plain datasets are ``/group/name``; fields of compound datasets
    ``/group/table/field``. PyTables index groups (``_i_*``) are left out:
    they are bookkeeping of other lengths, not data.
    """
    h5py = _h5py()
    entries: dict[str, _Entry] = {}

    def visit(name: str, obj: Any) -> None:
        if any(part.startswith("_i_") for part in name.split("/")) or not isinstance(obj, h5py.Dataset):
            return
        path = "/" + name
        if obj.shape == ():
            return  # a scalar holds no rows
        rows, dtype = int(obj.shape[0]), obj.dtype
        if dtype.names is None:
            text = _text_encoding(dtype, None)
            entries[path] = _Entry(path, None, None, dtype, tuple(obj.shape[1:]), rows, True, name, text)
            return
        pytables = bytes(obj.attrs.get("CLASS", b"")) == b"TABLE"
        encoding = _text(obj.parent.attrs.get("encoding", b"UTF-8")) if pytables else None  # pandas writes it
        for field in dtype.names:
            sub = dtype.fields[field][0]
            base, shape = (sub.base, sub.shape) if sub.subdtype else (sub, ())
            names = _pickled_names(obj.attrs.get(f"{field}_kind")) if pytables else None
            if pytables and field.startswith("values_block_") and names and shape == (len(names),):
                text = _text_encoding(base, encoding)
                for index, column in enumerate(names):
                    entries[f"{path}/{column}"] = _Entry(path, field, index, base, (), rows, True, column, text)
                continue
            default = not (pytables and field == "index")
            text = _text_encoding(base, encoding)
            entries[f"{path}/{field}"] = _Entry(path, field, None, base, tuple(shape), rows, default, field, text)

    handle.visititems(visit)
    return entries


def _text_encoding(dtype: np.dtype, table_encoding: str | None) -> str | None:
    """The encoding to decode a fixed-width bytes column with into ``str``; None keeps ``bytes``.

    Decided from the file's metadata, never the values, so a column has one
    type in every fragment. In a pandas/PyTables table (``table_encoding``)
    every fixed-width bytes field is a string column, which pandas decodes
    with the table's ``encoding`` (UTF-8 unless pandas recorded another).
    Elsewhere h5py's record decides: a string type declared UTF-8 is text;
    HDF5's default ASCII character set, which every NumPy ``bytes`` array
    gets (binary blobs such as encoded images too), stays ``bytes``, as
    h5py itself returns it.
    """
    if dtype.kind != "S":
        return None
    if table_encoding is not None:
        return table_encoding
    info = _h5py().check_string_dtype(dtype)
    return "utf-8" if info is not None and info.encoding == "utf-8" else None


def _decode_text(chunk: Chunk, columns: Sequence[_Column], path: str, start: int) -> Chunk:
    """Decodes the text columns of a chunk read at row ``start`` into object arrays of ``str``.

    The same representation as the Arrow-backed sources (CSV, Parquet) and
    pandas. NumPy drops the NUL padding of fixed-width bytes, as pandas does.
    Bytes that are not valid in the encoding are a data fault, named by file,
    dataset, column and row (``on_error="skip"`` leaves the fragment out).
    """
    for column in columns:
        if column.text is None:
            continue
        values = chunk[column.name]
        try:
            chunk[column.name] = np.char.decode(values, column.text).astype(object)
        except UnicodeDecodeError:
            chunk[column.name] = _decode_rows(values, column, path, start)
    return chunk


def _decode_rows(values: np.ndarray, column: _Column, path: str, start: int) -> np.ndarray:
    """Decodes value by value to find the first invalid one (only after the vectorised decode failed)."""
    encoding = cast(str, column.text)
    out = np.empty(values.shape, dtype=object)
    rows = out.reshape(len(values), -1)  # a view: filling it fills out
    for row, items in enumerate(values.reshape(len(values), -1)):
        for position, item in enumerate(items.tolist()):
            try:
                rows[row, position] = item.decode(encoding)
            except UnicodeDecodeError as exc:
                raise CorruptFileError(
                    describe(
                        f"Column {column.name!r} holds bytes that are not valid {encoding.upper()} text",
                        where=f"{path}, dataset {column.label}, row {start + row}",
                        expected=f"{encoding.upper()} strings (the encoding the file declares for this column)",
                        found=f"{item[:40]!r} ({exc.reason} at byte {exc.start})",
                        fix=(
                            "rewrite the value in the file, or pass on_error='skip' to leave these rows out "
                            "and report them"
                        ),
                    )
                ) from exc
    return out


def _check_encoding(column: _Column, path: str) -> None:
    """Refuses, at open, a text column whose recorded encoding Python cannot decode text with."""
    try:
        b"".decode(cast(str, column.text))  # unknown names and bytes-to-bytes codecs raise LookupError
    except LookupError as exc:
        raise SchemaError(
            describe(
                f"Column {column.name!r} ({column.label}) is text in an encoding Python does not know",
                where=path,
                expected="a text encoding such as UTF-8",
                found=repr(column.text),
                fix="rewrite the table with encoding='UTF-8', or leave this column out",
            )
        ) from exc


def _check_filters(dataset: Any, path: str) -> None:
    """Refuses, at open, a dataset compressed with a filter this h5py cannot decode."""
    h5py = _h5py()
    plist = dataset.id.get_create_plist()
    for number in range(plist.get_nfilters()):
        code, _flags, _values, name = plist.get_filter(number)
        if not h5py.h5z.filter_avail(code):
            label = name.decode(errors="replace") if isinstance(name, bytes) else str(name)
            raise MissingDependencyError(
                describe(
                    f"Dataset {dataset.name} is compressed with HDF5 filter {code} ({label}), "
                    "which this h5py cannot decode",
                    where=path,
                    fix=(
                        "pip install hdf5plugin and 'import hdf5plugin' before reading "
                        "(it registers blosc, lz4, zstd, bitshuffle, ...)"
                    ),
                )
            )


@dataclass(frozen=True)
class OutsideData:
    """One place outside its own file that reading a dataset would take bytes from."""

    dataset: str  # the dataset that points outside (the one asked for, or a virtual source in the same file)
    kind: str  # "external" (raw storage in a file) or "virtual" (a mapped dataset of a file)
    file: str  # the file name as HDF5 stores it

    def __str__(self) -> str:
        if self.kind == "external":
            return f"{self.dataset} stores its raw bytes in external file {self.file!r}"
        if self.file == ".":
            return f"{self.dataset} maps {self.file!r} (this file), which is not a dataset reachable without links"
        return f"{self.dataset} is a virtual dataset mapping file {self.file!r}"


_MAX_LINK_DEPTH = 8  # soft links and same-file virtual sources followed while checking; deeper is refused


def _local_dataset(handle: Any, name: str, depth: int) -> Any | None:
    """The dataset at ``name`` in this file, reached through hard and soft links only; None otherwise."""
    h5py = _h5py()
    current = handle["/"]
    for part in (p for p in name.split("/") if p):
        if not isinstance(current, h5py.Group):
            return None
        link = current.get(part, getlink=True)
        if isinstance(link, h5py.HardLink):
            current = current[part]
        elif isinstance(link, h5py.SoftLink) and depth < _MAX_LINK_DEPTH:
            target = link.path if link.path.startswith("/") else posixpath.join(current.name, link.path)
            current = _local_dataset(handle, posixpath.normpath(target), depth + 1)
        else:
            return None  # an external link, a user-defined link, missing, or too deep
    return current if isinstance(current, h5py.Dataset) else None


def outside_data(handle: Any, name: str, depth: int = 0) -> list[OutsideData]:
    """Every file other than this one whose bytes reading dataset ``name`` would return.

    Reads the dataset's creation properties only, never its data. A virtual
    dataset's sources in this same file (``"."``) are checked in turn (they
    may be external or virtual themselves).
    """
    dataset = handle[name]
    found = [OutsideData(name, "external", _text(file)) for file, _offset, _size in dataset.external or ()]
    if not dataset.is_virtual:
        return found
    for mapping in dataset.virtual_sources():
        file, source = _text(mapping.file_name), _text(mapping.dset_name)
        if file != ".":
            found.append(OutsideData(name, "virtual", file))
            continue
        local = _local_dataset(handle, source, depth)
        if local is None or depth >= _MAX_LINK_DEPTH:
            found.append(OutsideData(source, "virtual", "."))
        else:
            found.extend(outside_data(handle, local.name, depth + 1))
    return list(dict.fromkeys(found))


def _text(value: Any) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


def _refuse_outside_data(handle: Any, name: str, path: str) -> None:
    """Raises :class:`CorruptFileError` if dataset ``name`` of the file at ``path`` reads another file."""
    outside = outside_data(handle, name)
    if outside:
        raise CorruptFileError(
            describe(
                f"Dataset {name} keeps its data in another file, which streamfeed does not read by default",
                where=f"{path}, dataset {name}",
                expected="datasets whose bytes are stored in the file itself",
                found="; ".join(str(item) for item in outside),
                fix=(
                    "pass allow_external=True if you trust the files it names (HDF5 resolves relative names "
                    "against HDF5_EXTFILE_PREFIX/HDF5_VDS_PREFIX, the working directory or the file's folder), "
                    "copy the data into the file, or pass on_error='skip' to leave this file out and report it"
                ),
            )
        )


_SETTLED_SECONDS = 1.0
"""A file changed this recently is checked again at every read: its change
time may not yet tell a later rewrite apart (file times tick by the
kernel's clock, milliseconds)."""


class _CheckedFiles:
    """The files whose datasets passed the outside-data check, with the identity of the file checked.

    The check reads each dataset's creation properties (~0.1 ms per
    dataset, measured). A read repeats it only when the file it opened is
    not the one checked: another device or inode (replaced), or another
    size, modification or change time (rewritten in place; the change time
    cannot be set back). Shared by a source's fragments and read threads
    (a dict's get and set are atomic).
    """

    def __init__(self) -> None:
        self._checked: dict[tuple[str, str], tuple[int, ...]] = {}

    def refuse_outside_data(self, handle: Any, name: str, path: str, identity: tuple[int, ...] | None) -> None:
        """:func:`_refuse_outside_data`, unless this very file (``identity``) passed it for dataset ``name``."""
        if identity is not None and self._checked.get((path, name)) == identity:
            return
        _refuse_outside_data(handle, name, path)
        if identity is not None and time.time_ns() - identity[-1] > _SETTLED_SECONDS * 1e9:
            self._checked[(path, name)] = identity


def _identity(stat: os.stat_result) -> tuple[int, ...]:
    """Device, inode, size, modification and change time (ns): which file, and which version of it."""
    return (stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns)


def _open_identity(handle: Any) -> tuple[int, ...] | None:
    """The identity of the file h5py has open; None for a driver without a file descriptor."""
    try:
        return _identity(os.fstat(handle.id.get_vfd_handle()))
    except (TypeError, ValueError, OSError, RuntimeError):
        return None


class _KeptFile:
    """A read thread's open file and the datasets opened in it."""

    def __init__(self, path: str, identity: tuple[int, ...], handle: Any) -> None:
        self.path, self.identity, self.handle = path, identity, handle
        self.datasets: dict[str, Any] = {}

    def dataset(self, name: str) -> Any:
        found = self.datasets.get(name)
        if found is None:
            found = self.datasets[name] = self.handle[name]
        return found


_KEPT = threading.local()  # .file: this thread's _KeptFile; released (and the file closed) when the thread ends
_KEEPING_THREADS = "streamfeed-"  # the read pools' threads, which end with their epoch (or pass)


def _kept_file(path: str) -> _KeptFile | None:
    """This read thread's open file at ``path``, opened if it is not open yet, or is no longer the file there.

    An open, a close and the first lookup of each dataset in a fresh
    handle cost ~1.2 ms per fragment (measured: 2 M rows x 33 float32 in
    31 fragments, 36 ms of them against 79 ms of reading data), so a read
    thread keeps its last file open. Only streamfeed's own pool threads keep one: they
    end with their epoch (the reader's pool) or pass, and the file closes
    with them, so no handle outlives the reading. ``os.stat`` before each
    use (~3 us) finds a replaced or rewritten file, which is opened afresh.
    None elsewhere (the caller opens the file for this read only).
    """
    thread = threading.current_thread()
    if thread is threading.main_thread() or not thread.name.startswith(_KEEPING_THREADS):
        return None
    kept: _KeptFile | None = getattr(_KEPT, "file", None)
    try:
        identity = _identity(os.stat(path))
    except OSError:
        identity = None
    if kept is not None and kept.path == path and kept.identity == identity:
        return kept
    _drop_kept()
    if identity is None:
        return None  # the plain open raises the error, naming the file
    handle = _h5py().File(path, "r")
    if _open_identity(handle) != identity:  # changed while opening (or no descriptor): this read only
        handle.close()
        return None
    _KEPT.file = kept = _KeptFile(path, identity, handle)
    return kept


def _drop_kept() -> None:
    kept: _KeptFile | None = getattr(_KEPT, "file", None)
    _KEPT.file = None
    if kept is not None:
        kept.datasets.clear()
        kept.handle.close()


def _read_range(
    path: str,
    columns: Sequence[_Column],
    start: int,
    stop: int,
    out: Mapping[str, np.ndarray],
    allow_external: bool = False,
    checked: _CheckedFiles | None = None,
) -> None:
    """Reads rows ``[start, stop)`` of every column into ``out`` (arrays of stop-start rows).

    One contiguous slice per dataset; a compound dataset shared by several
    columns is read once. Unless ``allow_external``, each dataset's storage
    is checked again first (the file may have been replaced since it was
    opened), unless ``checked`` says this same file passed already. In
    streamfeed's read threads the file stays open for the thread's next
    read (:func:`_kept_file`).
    """
    kept = _kept_file(path)
    if kept is None:
        with _h5py().File(path, "r") as handle:
            identity = _open_identity(handle) if checked is not None else None
            _read_datasets(
                handle, handle.__getitem__, identity, path, columns, start, stop, out, allow_external, checked
            )
        return
    try:
        _read_datasets(
            kept.handle, kept.dataset, kept.identity, path, columns, start, stop, out, allow_external, checked
        )
    except BaseException:
        _drop_kept()  # whatever failed is not kept for the next read
        raise


def _read_datasets(
    handle: Any,
    dataset_at: Callable[[str], Any],
    identity: tuple[int, ...] | None,
    path: str,
    columns: Sequence[_Column],
    start: int,
    stop: int,
    out: Mapping[str, np.ndarray],
    allow_external: bool,
    checked: _CheckedFiles | None,
) -> None:
    """:func:`_read_range` in an open ``handle`` (``identity``: its file's), datasets found by ``dataset_at``."""
    by_dataset: dict[str, list[_Column]] = {}
    for column in columns:
        by_dataset.setdefault(column.dataset, []).append(column)
    for name, wanted in by_dataset.items():
        if not allow_external:
            if checked is not None:
                checked.refuse_outside_data(handle, name, path, identity)
            else:
                _refuse_outside_data(handle, name, path)
        dataset = dataset_at(name)
        if len(wanted) == 1 and wanted[0].field is None:
            if stop > start:
                dataset.read_direct(out[wanted[0].name], np.s_[start:stop])
            continue
        records = dataset[start:stop]
        for column in wanted:
            values = records[column.field]
            out[column.name][...] = values if column.index is None else values[:, column.index]


def _empty_out(columns: Sequence[_Column], rows: int, buffer: Any = None) -> dict[str, np.ndarray]:
    """Arrays for ``rows`` rows of every column, fresh or laid out in ``buffer``."""
    out, offset = {}, 0
    for column in columns:
        shape = (rows, *column.shape)
        if buffer is None:
            out[column.name] = np.empty(shape, dtype=column.dtype)
        else:
            count = int(np.prod(shape))
            out[column.name] = np.frombuffer(buffer, dtype=column.dtype, count=count, offset=offset).reshape(shape)
            offset += count * column.dtype.itemsize
    return out


def _process_read(
    path: str, columns: Sequence[_Column], start: int, stop: int, shm_name: str, allow_external: bool
) -> None:
    """Worker-process side of ``processes=N``: reads rows into the named shared memory."""
    from multiprocessing import shared_memory

    # The parent owns and unlinks the block. Spawned workers share the
    # parent's resource tracker, so attaching here registers nothing new.
    block = shared_memory.SharedMemory(name=shm_name)
    try:
        out = _empty_out(columns, stop - start, block.buf)
        _read_range(path, columns, start, stop, out, allow_external)
        del out
    finally:
        block.close()


class _ProcessReader:
    """A lazily started pool of worker processes shared by a source's fragments."""

    def __init__(self, processes: int) -> None:
        self.processes = processes
        self._pool: concurrent.futures.ProcessPoolExecutor | None = None
        self._lock = threading.Lock()

    def _get(self) -> concurrent.futures.ProcessPoolExecutor:
        with self._lock:
            if self._pool is None:
                import multiprocessing

                # spawn, not fork: the pipeline's threads are running when the pool starts.
                self._pool = concurrent.futures.ProcessPoolExecutor(
                    self.processes, mp_context=multiprocessing.get_context("spawn")
                )
                weakref.finalize(self, self._pool.shutdown, wait=False, cancel_futures=True)
            return self._pool

    def read(self, path: str, columns: Sequence[_Column], start: int, stop: int, allow_external: bool) -> Chunk:
        from multiprocessing import shared_memory

        rows = stop - start
        size = rows * sum(c.row_bytes for c in columns)
        if size == 0:
            return _empty_out(columns, rows)
        block = shared_memory.SharedMemory(create=True, size=size)
        try:
            self._get().submit(_process_read, path, list(columns), start, stop, block.name, allow_external).result()
            views = _empty_out(columns, rows, block.buf)
            chunk = {name: view.copy() for name, view in views.items()}
            del views
            return chunk
        finally:
            block.close()
            block.unlink()

    def close(self) -> None:
        with self._lock:
            if self._pool is not None:
                self._pool.shutdown(wait=True, cancel_futures=True)
                self._pool = None


@dataclass(frozen=True)
class HDF5Fragment:
    """Rows ``[start, stop)`` of the chosen datasets of one file."""

    key: str
    num_rows: int
    path: str
    start: int
    stop: int
    _columns: tuple[_Column, ...]
    _processes: _ProcessReader | None = None
    _allow_external: bool = False
    _checked: _CheckedFiles | None = dataclasses.field(default=None, compare=False)

    @property
    def location(self) -> str:
        return f"rows {self.start}-{self.stop - 1}"

    def read(self) -> Chunk:
        try:
            if self._processes is not None:
                out = self._processes.read(self.path, self._columns, self.start, self.stop, self._allow_external)
            else:
                out = _empty_out(self._columns, self.num_rows)
                _read_range(self.path, self._columns, self.start, self.stop, out, self._allow_external, self._checked)
            return _decode_text(out, self._columns, self.path, self.start)
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


def _fragment_rows(columns: Sequence[_Column], chunks: Mapping[str, int | None], rows_per_fragment: int | None) -> int:
    """Rows per fragment: a multiple of the widest column's chunk rows."""
    widest = max(columns, key=lambda c: c.row_bytes)
    align = chunks.get(widest.dataset) or 1
    row_bytes = sum(c.row_bytes for c in columns) or 1
    target = rows_per_fragment or max(1, TARGET_FRAGMENT_BYTES // row_bytes)
    return max(align, target // align * align)


class HDF5Source:
    """Opens HDF5 input: checks files, datasets and lengths; splits into row ranges.

    ``allow_external=True`` reads datasets stored in other files (external
    raw storage, virtual datasets over other files); by default a file with
    such a column is rejected like an unreadable one (see the module notes).
    """

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
        h5py = _h5py()
        if rows_per_fragment is not None and rows_per_fragment < 1:
            raise ArgumentError(describe("Invalid rows_per_fragment", expected=">= 1", found=f"{rows_per_fragment}"))
        if processes is not None and processes < 1:
            raise ArgumentError(
                describe("Invalid processes", expected=">= 1 (or None for threads)", found=f"{processes}")
            )
        self.report = report or BadInputReport()
        resolved = resolve_files(paths, suffixes=_SUFFIXES)
        self._processes = _ProcessReader(processes) if processes else None
        self._requested = dict(columns) if columns is not None else None
        self._columns: tuple[_Column, ...] | None = None
        self._rows_per_fragment = rows_per_fragment
        self._allow_external = bool(allow_external)
        self._checked = _CheckedFiles()
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

    # ------------------------------------------------------------------ opening
    def _open_file(self, handle: Any, path: str) -> tuple[int, dict[str, int | None], tuple[_Column, ...]]:
        """Resolves the columns in one open file; returns its rows and chunk rows per dataset."""
        catalog = _catalog(handle)
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
            _Column(name, e.dataset, e.field, e.index, e.dtype, e.shape, e.text) for name, e in chosen.items()
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
                _refuse_outside_data(handle, dataset, path)
            _check_filters(handle[dataset], path)
        for column in columns:
            if column.dtype.hasobject or column.dtype.kind in "OV":
                raise SchemaError(
                    describe(
                        f"Column {column.name!r} ({column.label}) has dtype {column.dtype}, "
                        "which is not a fixed-size NumPy type",
                        where=path,
                        fix="store variable-length data as fixed-size arrays (pad), or leave this column out",
                    )
                )
            if column.text is not None:
                _check_encoding(column, path)
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

    def _split(self, path: str, rows: int, chunks: Mapping[str, int | None], columns: tuple[_Column, ...]) -> None:
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
        return SourceInfo("hdf5")

    def fingerprint(self) -> dict:
        """Files (paths, sizes, times), columns and fragment boundaries; taken once, at open."""
        if self._fingerprint is None:
            boundaries = (f"{fragment.start}:{fragment.stop}" for fragment in self.fragments)
            self._fingerprint = {
                "format": "hdf5",
                "files": len(self.files),
                "digest": file_digest(file_stats(self.files), boundaries),
                "columns": {c.name: c.label for c in self._columns or ()},
            }
        return self._fingerprint

    def close(self) -> None:
        """Stops worker processes (``processes=N``); they also stop when the source is collected."""
        if self._processes is not None:
            self._processes.close()
