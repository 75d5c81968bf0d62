"""What an HDF5 file offers as columns, and how its text is decoded.

:func:`read_catalog` walks a file's own objects (never an external link) and
lists every dataset with rows, and every field of a compound dataset, by
path; :class:`Column` is where one output column lives. Kept apart from the
source so that opening, reading in threads and reading in worker processes
all share one description of a column.

pandas/PyTables ``table`` files are read too: the ``table`` dataset is a
compound dtype; each field is a column (the pandas ``index`` field is left
out by default), and a ``values_block_N`` field (several pandas columns
stored together) is split into its pandas column names, which PyTables keeps
as a pickled list: it is disassembled with :mod:`pickletools`, never
unpickled (:func:`pickled_names`).

A 1-D dataset of an HDF5 variable-length type of numbers
(``h5py.vlen_dtype(np.int32)``) is a ragged column: its rows are served as one
:class:`~streamfeed.core_ragged.Ragged` per read (:func:`ragged_rows`).
Variable-length strings, and variable-length fields of compound datasets,
are still refused when the source opens.

Fixed-width bytes columns that the file declares as text are decoded to
``str`` (:func:`decode_text`); the checks run when the source opens
(unknown encodings, compression filters this h5py lacks) live here too.
"""

from __future__ import annotations

import pickletools
from dataclasses import dataclass
from typing import Any, Sequence, cast

import numpy as np

from ...core import Chunk
from ...core_ragged import Ragged
from ...errors import CorruptFileError, MissingDependencyError, SchemaError, describe, require

_TEXT_OBJECT_BYTES = 57  # a decoded str: 8-byte pointer + 49-byte object header (as the Parquet source counts it)


def load_h5py():
    """h5py, imported on first use (it is the ``hdf5`` extra)."""
    return require("h5py", "hdf5")


@dataclass(frozen=True)
class Column:
    """Where one output column lives inside a file."""

    name: str
    dataset: str  # absolute dataset path
    field: str | None = None  # compound-dtype field
    index: int | None = None  # position inside a PyTables values_block field
    dtype: np.dtype = np.dtype("f8")
    shape: tuple[int, ...] = ()  # per-row shape
    text: str | None = None  # fixed-width bytes decoded to str with this encoding (see _text_encoding)
    vlen: np.dtype | None = None  # a variable-length dataset of these numbers: served as a Ragged
    mean_length: float = 0.0  # vlen: mean values per row of the file's first chunk (sizes fragments)

    @property
    def row_bytes(self) -> int:
        """Stored bytes per row: what a read holds (a ragged row: its first chunk's mean, plus its offset)."""
        if self.vlen is not None:
            return int(np.ceil(self.vlen.itemsize * self.mean_length)) + 8
        return self.dtype.itemsize * int(np.prod(self.shape, dtype=np.int64))

    @property
    def fixed_row_bytes(self) -> int:
        """Bytes per row in a worker's shared memory: 0 for a ragged column (it returns by pickle)."""
        return 0 if self.vlen is not None else self.row_bytes

    @property
    def decoded_row_bytes(self) -> int:
        """Bytes per row once served: a decoded string also costs a Python ``str`` object per value."""
        values = int(np.prod(self.shape, dtype=np.int64))
        return self.row_bytes + (_TEXT_OBJECT_BYTES * values if self.text else 0)

    @property
    def type_name(self) -> str:
        if self.vlen is not None:
            return f"list of {self.vlen}"
        return "str" if self.text else str(self.dtype)

    @property
    def kind(self) -> tuple:
        """What a row of this column is, across files: strings of any stored width are one kind."""
        if self.vlen is not None:
            return ("ragged", self.vlen)
        return ("str", self.shape) if self.text else (self.dtype, self.shape)

    @property
    def label(self) -> str:
        """How the column's source is named in messages."""
        if self.field is None:
            return self.dataset
        return f"{self.dataset} field {self.field!r}" + ("" if self.index is None else f"[{self.index}]")


@dataclass(frozen=True)
class Entry:
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
    vlen: np.dtype | None = None  # the element type of a 1-D variable-length dataset of numbers


def pickled_names(raw: Any) -> list[str] | None:
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


def default_name(path: str) -> str:
    """The name a discovered dataset is served under: its path in the file, without the leading slash."""
    return path.lstrip("/")


def read_catalog(handle: Any) -> dict[str, Entry]:
    """Everything a column may name in an open file, by path.

    Plain datasets are ``/group/name``; fields of compound datasets
    ``/group/table/field``. PyTables index groups (``_i_*``) are left out:
    they are bookkeeping of other lengths, not data.
    """
    h5py = load_h5py()
    entries: dict[str, Entry] = {}

    def visit(name: str, obj: Any) -> None:
        if any(part.startswith("_i_") for part in name.split("/")) or not isinstance(obj, h5py.Dataset):
            return
        path = "/" + name
        if obj.shape == ():
            return  # a scalar holds no rows
        rows, dtype = int(obj.shape[0]), obj.dtype
        if dtype.names is None:
            text = _text_encoding(dtype, None)
            # PyTables keeps pickled objects and strings as vlen bytes (PSEUDOATOM): never numbers to serve
            pseudo = "PSEUDOATOM" in obj.attrs
            vlen = vlen_numbers(dtype) if obj.ndim == 1 and not pseudo else None
            shape = tuple(obj.shape[1:])
            entries[path] = Entry(path, None, None, dtype, shape, rows, True, default_name(name), text, vlen)
            return
        pytables = bytes(obj.attrs.get("CLASS", b"")) == b"TABLE"
        encoding = as_text(obj.parent.attrs.get("encoding", b"UTF-8")) if pytables else None  # pandas writes it
        for field in dtype.names:
            sub = dtype.fields[field][0]
            base, shape = (sub.base, sub.shape) if sub.subdtype else (sub, ())
            names = pickled_names(obj.attrs.get(f"{field}_kind")) if pytables else None
            if pytables and field.startswith("values_block_") and names and shape == (len(names),):
                text = _text_encoding(base, encoding)
                for index, column in enumerate(names):
                    entries[f"{path}/{column}"] = Entry(path, field, index, base, (), rows, True, column, text)
                continue
            default = not (pytables and field == "index")
            text = _text_encoding(base, encoding)
            entries[f"{path}/{field}"] = Entry(path, field, None, base, tuple(shape), rows, default, field, text)

    handle.visititems(visit)
    return entries


def vlen_numbers(dtype: np.dtype) -> np.dtype | None:
    """The element type of an HDF5 variable-length type of numbers; None for any other (vlen strings too)."""
    base = load_h5py().check_vlen_dtype(dtype)  # a NumPy scalar type, str or bytes, or None
    if base is None or base in (str, bytes):
        return None
    element = np.dtype(base)
    return element if element.kind in "iuf" else None


def ragged_rows(rows: np.ndarray, dtype: np.dtype) -> Ragged:
    """h5py's read of a variable-length dataset (an object array of 1-D arrays) as a :class:`Ragged`.

    h5py hands each row over as its own array, so one pass over the rows
    (their lengths) is unavoidable; the values are then joined by one
    ``np.concatenate``: 0.25-0.5 s per million rows of mean length 16 on
    top of h5py's own read, 2.1 s (``benchmarks/hdf5_vlen.py``; that read
    makes a NumPy array per row, which is where the time goes).
    """
    count = len(rows)
    offsets = np.zeros(count + 1, dtype=np.int64)
    if not count:
        return Ragged(np.empty(0, dtype=dtype), offsets)
    np.cumsum(np.fromiter(map(len, rows), dtype=np.int64, count=count), out=offsets[1:])
    return Ragged(np.concatenate(list(rows)).astype(dtype, copy=False), offsets)


def mean_vlen_length(dataset: Any) -> float:
    """Mean values per row of a variable-length dataset's first chunk (first 1024 rows if unchunked).

    What sizes its fragments and the memory estimates: read once, at open,
    from the data itself, so it is the same on every machine.
    """
    rows = min(int(dataset.shape[0]), (dataset.chunks or (1024,))[0])
    if rows == 0:
        return 0.0
    return float(sum(map(len, dataset[:rows]))) / rows


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
    info = load_h5py().check_string_dtype(dtype)
    return "utf-8" if info is not None and info.encoding == "utf-8" else None


def decode_text(chunk: Chunk, columns: Sequence[Column], path: str, start: int) -> Chunk:
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


def _decode_rows(values: np.ndarray, column: Column, path: str, start: int) -> np.ndarray:
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


def check_encoding(column: Column, path: str) -> None:
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


def check_filters(dataset: Any, path: str) -> None:
    """Refuses, at open, a dataset compressed with a filter this h5py cannot decode."""
    h5py = load_h5py()
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


def as_text(value: Any) -> str:
    """An HDF5 name or attribute as ``str`` (h5py returns ``bytes`` for some)."""
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)
