"""NumPy ``.npy`` and ``.npz`` files: arrays as columns, row ranges as fragments.

``read_numpy(x="x.npy", y="y.npy")`` pairs arrays row by row; ``arrays=``
names any number of them, and each may be a list of files (shards, paired
by position). A member of an ``.npz`` is ``"file.npz:member"``; a whole
``.npz`` given as ``x`` alone makes every member a column.

Only headers are read when the source opens: shapes give exact row counts,
and truncated files (the header promises more rows than the file holds),
zero-byte and non-NumPy files, object arrays and arrays of different lengths
are refused then, naming the files. Object arrays are never unpickled.

How rows are read (never a whole file):

* ``.npy`` and *uncompressed* ``.npz`` members (``np.savez``, stored in the
  zip as plain ``.npy`` bytes, located by the local zip header): a C-order
  array's rows ``[start, stop)`` are one contiguous byte range, read with
  ``readinto`` straight into the fragment's array (the same bytes
  ``np.load(mmap_mode="r")[start:stop]`` would copy, without keeping a
  mapping alive). A Fortran-order array's rows are strided, so the file is
  memory-mapped (``order="F"``) for the read and the rows copied with
  ``np.ascontiguousarray``; the mapping is dropped after each fragment.
* *compressed* ``.npz`` members (``np.savez_compressed``, deflate): rows are
  streamed. Deflate has no random access, so each member keeps
  *checkpoints*: a copy of the decompressor (about 40 KiB) and the
  compressed offset at each fragment boundary it has passed. Reading a
  fragment resumes from the nearest checkpoint at or before it and
  decompresses only up to its end, so an epoch in any order decompresses
  each byte about twice at most, instead of once per fragment before it.
  A Fortran-order compressed member is one strided stream; it is read as a
  single fragment and refused above :data:`MAX_WHOLE_MEMBER_BYTES`.
"""

from __future__ import annotations

import bisect
import os
import re
import struct
import threading
import zipfile
import zlib
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence, Union, cast

import numpy as np

from ..core import AlikeRows, Chunk, SourceInfo, fragmenting_digest, records_settings
from ..errors import (
    ArgumentError,
    BadInputReport,
    CorruptFileError,
    NotFoundError,
    SchemaError,
    SkippedUnit,
    describe,
)
from ..files.paths import file_digest, file_stats
from ..files.stamps import Stamps, stamps_field, take_stamps, unchanged
from .npy_header import NpyError, read_header

TARGET_FRAGMENT_BYTES = 8 * 2**20
MAX_WHOLE_MEMBER_BYTES = 256 * 2**20
_INPUT_BLOCK = 64 * 1024
_MEMBER = re.compile(r"^(?P<file>.+\.npz):(?P<member>[^/\\:]+)$", re.IGNORECASE)

Spec = Union[str, os.PathLike]
Specs = Union[Spec, Sequence[Spec]]


class _Inflater:
    """Random access to the uncompressed bytes of one deflated zip member.

    Checkpoints (uncompressed position → decompressor copy, compressed
    offset) are recorded at the positions in ``boundaries`` whenever a read
    passes them, so later reads resume close to where they start.
    """

    def __init__(self, path: str, data_start: int, compressed_size: int, boundaries: Sequence[int]) -> None:
        self.path = path
        self.data_start = data_start
        self.compressed_size = compressed_size
        self._boundaries = sorted(set(boundaries))
        self._boundary_set = frozenset(self._boundaries)
        self._positions = [0]
        self._states: dict[int, tuple[Any, int]] = {
            0: (zlib.decompressobj(-15), 0)
        }  # zlib's Decompress is not a public type
        self._lock = threading.Lock()

    def read_into(self, start: int, out: memoryview, label: str) -> None:
        """Fills ``out`` with the uncompressed bytes ``[start, start + len(out))``."""
        end = start + len(out)
        with self._lock:
            at = self._positions[bisect.bisect_right(self._positions, start) - 1]
            saved, offset = self._states[at]
            inflater = saved.copy()
        pos = at
        with open(self.path, "rb") as handle:
            handle.seek(self.data_start + offset)
            file_pos, pending = offset, b""
            try:
                while pos < end:
                    if not pending:
                        want = min(_INPUT_BLOCK, self.compressed_size - file_pos)
                        pending = handle.read(want) if want > 0 else b""
                        file_pos += len(pending)
                        if not pending:
                            raise zlib.error(
                                f"compressed data ends at uncompressed byte {pos}, {end - pos} bytes short"
                            )
                    following = (
                        self._boundaries[bisect.bisect_right(self._boundaries, pos)]
                        if pos < self._boundaries[-1]
                        else end
                    )
                    limit = min(end, following) - pos if following > pos else end - pos
                    piece = inflater.decompress(pending, limit)
                    pending = inflater.unconsumed_tail
                    if piece:
                        lo, hi = max(pos, start), pos + len(piece)
                        if hi > lo:
                            out[lo - start : hi - start] = piece[lo - pos :]
                        pos += len(piece)
                        if pos in self._boundary_set:
                            self._remember(pos, inflater, file_pos - len(pending))
                    elif inflater.eof:
                        raise zlib.error(f"the deflate stream ends at uncompressed byte {pos}, {end - pos} bytes short")
            except zlib.error as exc:
                raise CorruptFileError(
                    describe(
                        "A compressed .npz member cannot be decompressed (corrupt or truncated)",
                        where=f"{label}, uncompressed bytes {start}-{end - 1}",
                        found=f"{type(exc).__name__}: {exc}",
                        fix="rewrite the file, or pass on_error='skip' to leave these rows out and report them",
                    )
                ) from exc

    def _remember(self, pos: int, inflater: Any, offset: int) -> None:
        with self._lock:
            if pos not in self._states:
                self._states[pos] = (inflater.copy(), offset)
                bisect.insort(self._positions, pos)


@dataclass
class _Array:
    """One array: its file, where its bytes start, and its header."""

    label: str  # "x.npy" or "d.npz:member", for messages
    path: str
    dtype: np.dtype
    shape: tuple[int, ...]
    fortran: bool
    data_offset: int | None  # absolute offset of the array bytes, if stored uncompressed
    header_bytes: int = 0  # .npy header length inside a compressed member
    member_size: tuple[int, int] | None = None  # (compressed start, compressed size), if deflated
    inflater: _Inflater | None = field(default=None, repr=False)

    @property
    def rows(self) -> int:
        return self.shape[0]

    @property
    def row_bytes(self) -> int:
        return self.dtype.itemsize * int(np.prod(self.shape[1:], dtype=np.int64))

    def read(self, start: int, stop: int) -> np.ndarray:
        out = np.empty((stop - start, *self.shape[1:]), dtype=self.dtype)
        if stop == start or out.nbytes == 0:
            return out
        if self.inflater is not None:
            if self.fortran:  # a single fragment: the whole member
                flat = np.empty(int(np.prod(self.shape, dtype=np.int64)), dtype=self.dtype)
                self.inflater.read_into(self.header_bytes, flat.data.cast("B"), self.label)
                return np.ascontiguousarray(flat.reshape(self.shape, order="F")[start:stop])
            self.inflater.read_into(self.header_bytes + start * self.row_bytes, out.data.cast("B"), self.label)
            return out
        offset = cast(int, self.data_offset)  # not compressed: the bytes are stored at an offset
        if self.fortran:
            mapped = np.memmap(self.path, dtype=self.dtype, mode="r", offset=offset, shape=self.shape, order="F")
            try:
                return np.ascontiguousarray(mapped[start:stop])
            finally:
                del mapped
        with open(self.path, "rb") as handle:
            handle.seek(offset + start * self.row_bytes)
            got = handle.readinto(out.data.cast("B"))
        if got != out.nbytes:
            raise CorruptFileError(
                describe(
                    "A NumPy file is shorter than when it was opened",
                    where=f"{self.label}, rows {start}-{stop - 1}",
                    expected=f"{out.nbytes} bytes from offset {offset + start * self.row_bytes}",
                    found=f"{got}",
                    fix="do not change files while reading them",
                )
            )
        return out


def npy_header(handle, label: str) -> tuple[np.dtype, tuple[int, ...], bool]:
    """The ``.npy`` header at the handle's position (never unpickles, never parses Python source)."""
    try:
        dtype, shape, fortran = read_header(handle)
    except (NpyError, EOFError, OSError) as exc:
        raise CorruptFileError(
            describe(
                "Not a readable .npy array (empty, truncated header, or another format)",
                where=label,
                expected="the .npy magic '\\x93NUMPY' and a header",
                found=f"{type(exc).__name__}: {exc}",
                fix="rewrite the file with numpy.save, or pass on_error='skip' to leave it out and report it",
            )
        ) from exc
    if dtype.hasobject:
        raise SchemaError(
            describe(
                f"{label} holds an object array (dtype {dtype}), which streamfeed never unpickles",
                where=label,
                expected="a numeric, boolean or fixed-width string dtype",
                fix=(
                    "convert it to a fixed-size dtype (e.g. np.asarray(a, dtype=np.float32), "
                    "or pad strings to 'U<n>') and save again"
                ),
            )
        )
    if len(shape) == 0:
        raise SchemaError(
            describe(
                f"{label} is a 0-d array: it has no rows", where=label, expected="an array of at least 1 dimension"
            )
        )
    return dtype, tuple(int(n) for n in shape), bool(fortran)


def _open_npy(path: str) -> _Array:
    size = os.path.getsize(path)
    with open(path, "rb") as handle:
        dtype, shape, fortran = npy_header(handle, path)
        offset = handle.tell()
    array = _Array(path, path, dtype, shape, fortran, offset)
    _check_size(array, size - offset)
    return array


def _check_size(array: _Array, available: int) -> None:
    need = array.rows * array.row_bytes
    if available < need:
        whole = available // array.row_bytes if array.row_bytes else 0
        raise CorruptFileError(
            describe(
                "A NumPy array is truncated: its header promises more rows than the file holds",
                where=array.label,
                expected=f"{array.rows} rows of {array.row_bytes} bytes ({need} bytes of data) for shape {array.shape}",
                found=f"{available} bytes ({whole} whole rows)",
                fix="rewrite the file (it was probably cut off while copying or saving), or pass on_error='skip'",
            )
        )


def _npz_members(path: str) -> dict[str, zipfile.ZipInfo]:
    try:
        with zipfile.ZipFile(path) as archive:
            return {
                info.filename[:-4] if info.filename.endswith(".npy") else info.filename: info
                for info in archive.infolist()
            }
    except (zipfile.BadZipFile, OSError, EOFError) as exc:
        raise CorruptFileError(
            describe(
                "Not a readable .npz archive (empty, truncated, or another format)",
                where=path,
                expected="a zip archive written by numpy.savez or numpy.savez_compressed",
                found=f"{type(exc).__name__}: {exc}",
                fix="rewrite the file, or pass on_error='skip' to leave it out and report it",
            )
        ) from exc


def _open_member(path: str, member: str, info: zipfile.ZipInfo) -> _Array:
    label = f"{path}:{member}"
    if info.flag_bits & 0x1:
        raise SchemaError(describe("Encrypted .npz members are not supported", where=label))
    with open(path, "rb") as handle:
        handle.seek(info.header_offset)
        local = handle.read(30)
        if len(local) < 30 or local[:4] != b"PK\x03\x04":
            raise CorruptFileError(
                describe("The .npz member's zip header is damaged", where=label, fix="rewrite the file")
            )
        name_len, extra_len = struct.unpack("<HH", local[26:30])
        data_start = info.header_offset + 30 + name_len + extra_len
        if info.compress_type == zipfile.ZIP_STORED:
            handle.seek(data_start)
            dtype, shape, fortran = npy_header(handle, label)
            offset = handle.tell()
            array = _Array(label, path, dtype, shape, fortran, offset)
            _check_size(array, data_start + info.file_size - offset)
            _check_size(array, os.path.getsize(path) - offset)
            return array
    if info.compress_type != zipfile.ZIP_DEFLATED:
        raise SchemaError(
            describe(
                f"The .npz member uses zip compression method {info.compress_type}",
                where=label,
                expected="stored (numpy.savez) or deflated (numpy.savez_compressed)",
                fix="save it again with numpy.savez or numpy.savez_compressed",
            )
        )
    try:
        with zipfile.ZipFile(path) as archive, archive.open(info) as stream:
            dtype, shape, fortran = npy_header(stream, label)
            header = stream.tell()
    except (zipfile.BadZipFile, zlib.error, EOFError) as exc:
        raise CorruptFileError(
            describe("A compressed .npz member's header cannot be decompressed", where=label, found=str(exc))
        ) from exc
    array = _Array(label, path, dtype, shape, fortran, None, header, (data_start, info.compress_size))
    _check_size(array, info.file_size - header)
    if fortran and shape[0] * array.row_bytes > MAX_WHOLE_MEMBER_BYTES and len(shape) > 1:
        raise SchemaError(
            describe(
                "A compressed Fortran-order .npz member is too large to stream: "
                "its rows are not contiguous in the stream",
                where=label,
                expected=f"at most {MAX_WHOLE_MEMBER_BYTES} bytes for a member read whole",
                found=f"{shape[0] * array.row_bytes} bytes, shape {shape}",
                fix="save it C-ordered (np.ascontiguousarray) or with numpy.savez (uncompressed, memory-mapped)",
            )
        )
    return array


def _open_spec(spec: str, name: str) -> list[tuple[str, _Array]]:
    """One column spec of one group → (column name, array) pairs."""
    match = _MEMBER.match(spec)
    if match and not os.path.exists(spec):
        path, member = os.path.abspath(match["file"]), match["member"]
    else:
        path, member = os.path.abspath(spec), None
    if not os.path.exists(path):
        raise NotFoundError(describe("No such file", where=path, fix="check the path"))
    if path.lower().endswith(".npz"):
        members = _npz_members(path)
        if member is None:
            if name != "*":
                raise SchemaError(
                    describe(
                        f"Column {name!r} names a whole .npz",
                        where=path,
                        found=f"members {sorted(members)}",
                        fix=f"name one member: '{path}:<member>'",
                    )
                )
            return [(key, _open_member(path, key, info)) for key, info in members.items()]
        if member not in members:
            raise SchemaError(
                describe(
                    f"Column {name!r} names member {member!r}, which is not in the archive",
                    where=path,
                    found=f"members {sorted(members)}",
                    fix="use one of the members listed",
                )
            )
        return [(name, _open_member(path, member, members[member]))]
    return [(name, _open_npy(path))]


@dataclass(frozen=True)
class NumpyFragment:
    """Rows ``[start, stop)`` of one group of arrays (one file per column)."""

    key: str
    num_rows: int
    path: str
    start: int
    stop: int
    _arrays: tuple[tuple[str, _Array], ...]
    _stamps: Stamps = stamps_field()

    def __post_init__(self) -> None:
        object.__setattr__(self, "_stamps", take_stamps(a.path for _, a in self._arrays))  # at open; read() checks

    @property
    def location(self) -> str:
        return f"rows {self.start}-{self.stop - 1}"

    def read(self) -> Chunk:
        """:meth:`_read`, refused if a file changed since the source opened them (``files/stamps.py``)."""
        with unchanged(tuple(array.path for _, array in self._arrays), self._stamps):
            return self._read()

    def _read(self) -> Chunk:
        chunk = {}
        for name, array in self._arrays:
            try:
                chunk[name] = array.read(self.start, self.stop)
            except CorruptFileError:
                raise
            except (OSError, ValueError) as exc:
                raise CorruptFileError(
                    describe(
                        "Could not read rows of a NumPy file",
                        where=f"{array.label}, {self.location}",
                        found=f"{type(exc).__name__}: {exc}",
                        fix="check the file, or pass on_error='skip'",
                    )
                ) from exc
        return chunk


def _as_list(specs: Specs) -> list[str]:
    if isinstance(specs, (str, os.PathLike)):
        return [os.fspath(specs)]
    return [os.fspath(spec) for spec in specs]


class NumpySource(AlikeRows):
    """Opens groups of ``.npy``/``.npz`` arrays: headers, lengths, row-range fragments."""

    settings: dict[str, Any]  # every constructor argument but core.NOT_ROW_SETTINGS (records_settings)

    @records_settings
    def __init__(
        self,
        arrays: Mapping[str, Specs],
        *,
        rows_per_fragment: int | None = None,
        report: BadInputReport | None = None,
    ) -> None:
        if rows_per_fragment is not None and rows_per_fragment < 1:
            raise ArgumentError(describe("Invalid rows_per_fragment", expected=">= 1", found=f"{rows_per_fragment}"))
        self.report = report or BadInputReport()
        lists = {name: _as_list(specs) for name, specs in arrays.items()}
        if not lists:
            raise ArgumentError(describe("read_numpy needs at least one array", fix="pass x=..., or arrays={...}"))
        counts = {name: len(paths) for name, paths in lists.items()}
        if len(set(counts.values())) != 1:
            raise ArgumentError(
                describe(
                    "Columns were given different numbers of files",
                    found=str(counts),
                    fix="give every column one file per shard, in the same order",
                )
            )
        self.fragments: list[NumpyFragment] = []
        self.files: list[str] = []
        self._layout: dict[str, tuple[np.dtype, tuple[int, ...]]] | None = None
        groups = list(zip(*lists.values()))
        names = list(lists)
        for group in groups:
            try:
                opened = self._open_group(names, group)
            except (CorruptFileError, SchemaError) as error:
                if self.report.on_error == "raise":
                    raise
                self.report.add(
                    SkippedUnit(os.path.abspath(_MEMBER.sub(r"\g<file>", group[0])), "file", str(error), None)
                )
                continue
            self._split(opened, rows_per_fragment)
        self.report.total_rows = sum(fragment.num_rows for fragment in self.fragments)
        self.report.total_files = len(groups)
        self.report.check_budget()
        self._fingerprint: dict | None = None
        self.exact_counts = True  # a fragment that fails is skipped whole, with its row count
        self.read_parallelism: int | None = None  # reads run in parallel (core.Source)
        self.read_scratch: float | None = None  # the library's figure for its decode (core.Source)

    def _open_group(self, names: Sequence[str], group: Sequence[str]) -> list[tuple[str, _Array]]:
        opened: list[tuple[str, _Array]] = []
        for name, spec in zip(names, group):
            try:
                opened += _open_spec(spec, name)
            except CorruptFileError:
                raise
            except OSError as exc:  # unreadable, a directory, vanished: the file is a bad unit like a corrupt one
                raise CorruptFileError(
                    describe(
                        "Could not open a NumPy file",
                        where=str(spec),
                        found=f"{type(exc).__name__}: {exc}",
                        fix="check the path and its permissions, or pass on_error='skip' to leave it out and report it",
                    )
                ) from exc
        first_name, first = opened[0]
        for name, array in opened[1:]:
            if array.rows != first.rows:
                raise SchemaError(
                    describe(
                        "Arrays paired as rows have different lengths",
                        where=f"{first.label} and {array.label}",
                        expected="the same number of rows (shape[0]) in every array of a group",
                        found=(
                            f"{first_name!r} {first.label} has {first.rows} rows, "
                            f"{name!r} {array.label} has {array.rows} rows"
                        ),
                        fix="fix the files; streamfeed never truncates to the shorter array",
                    )
                )
        layout = {name: (array.dtype, array.shape[1:]) for name, array in opened}
        if self._layout is None:
            self._layout = layout
        elif layout != self._layout:
            raise SchemaError(
                describe(
                    "Arrays of this group differ from the first group's",
                    where=", ".join(array.label for _, array in opened),
                    expected=str({k: (str(d), s) for k, (d, s) in self._layout.items()}),
                    found=str({k: (str(d), s) for k, (d, s) in layout.items()}),
                    fix="save every shard with the same dtypes and row shapes",
                )
            )
        return opened

    def _split(self, opened: list[tuple[str, _Array]], rows_per_fragment: int | None) -> None:
        rows = opened[0][1].rows
        row_bytes = sum(array.row_bytes for _, array in opened) or 1
        size = rows_per_fragment or max(1, TARGET_FRAGMENT_BYTES // row_bytes)
        if any(array.member_size is not None and array.fortran and len(array.shape) > 1 for _, array in opened):
            size = max(rows, 1)
        starts = list(range(0, rows, size))
        for _, array in opened:
            if array.member_size is not None:
                array.inflater = _Inflater(
                    array.path,
                    *array.member_size,
                    [array.header_bytes + s * array.row_bytes for s in starts] + [array.header_bytes],
                )
        for _, array in opened:
            if array.path not in self.files:
                self.files.append(array.path)
        path = opened[0][1].path
        for start in starts:
            stop = min(rows, start + size)
            self.fragments.append(
                NumpyFragment(
                    f"{opened[0][1].label}#rows={start}:{stop}", stop - start, path, start, stop, tuple(opened)
                )
            )

    @property
    def column_names(self) -> list[str]:
        return list(self._layout or {})

    @property
    def row_bytes(self) -> float:
        if not self._layout:
            return 64.0
        return float(max(8, sum(d.itemsize * int(np.prod(s, dtype=np.int64)) for d, s in self._layout.values())))

    @property
    def info(self) -> SourceInfo:
        """Format (``core.SourceInfo``): what layers that see only the protocol read."""
        return SourceInfo("numpy", fragment_setting="rows_per_fragment")

    def fingerprint(self) -> dict:
        if self._fingerprint is None:
            digest = file_digest(file_stats(self.files), (fragment.key for fragment in self.fragments))
            self._fingerprint = {
                "format": "numpy",
                "files": len(self.files),
                "digest": digest,
                "columns": self.column_names,
                "settings": self.settings,  # every constructor argument (core.records_settings)
                "fragmenting": fragmenting_digest(self.fragments),
            }
        return self._fingerprint


def numpy_columns(x: Specs | None, y: Specs | None, arrays: Mapping[str, Specs] | None) -> dict[str, Specs]:
    """The column specs ``read_numpy`` was given, by column name.

    ``x`` alone as whole ``.npz`` files stands for all their members
    (``"*"``); otherwise ``x`` and ``y`` are the columns of those names.
    """
    columns: dict[str, Specs] = {}
    if x is not None:
        whole = all(os.fspath(s).lower().endswith(".npz") for s in _as_list(x))
        columns["*" if whole and y is None and not arrays else "x"] = x
    if y is not None:
        columns["y"] = y
    for name, spec in (arrays or {}).items():
        if name in columns:
            raise ArgumentError(
                describe(f"Column {name!r} is given twice", found="as an argument and in arrays=", fix="name it once")
            )
        columns[name] = spec
    return columns
