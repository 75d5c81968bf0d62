"""The protocols every source and stage speaks.

A *source* knows its files, schema and row counts and splits itself into
*fragments*: the unit of parallel reading, of coarse shuffling, of sharding
across workers and of resume. Reading a fragment gives one *chunk*: a dict
of equally long NumPy arrays, one per column. Nothing else crosses a stage
boundary, so any object with these few attributes is a source; no
inheritance is needed.

A *position* says where the next row of an epoch comes from. It is the
whole iterator state besides the epoch number: positions, never data.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import inspect
import math
import os
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Literal, Mapping, Protocol, Sequence, TypeVar, cast, runtime_checkable

import numpy as np
import pyarrow as pa

Chunk = dict[str, np.ndarray]
"""Columns of equal length: the only thing that flows between stages."""

NullPolicy = Literal["raise", "drop", "fill"]


@runtime_checkable
class Fragment(Protocol):
    """A piece of a source that can be read on its own, in any thread."""

    @property
    def key(self) -> str:
        """Stable, human-readable identity, e.g. ``data/part-0.parquet#rg=3``."""

    @property
    def num_rows(self) -> int:
        """Rows this fragment yields (known before reading; from metadata)."""

    @property
    def path(self) -> str:
        """The file it comes from: a bad-input report groups its entries by file."""

    @property
    def location(self) -> str:
        """Where in that file, for people: ``"row group 3"``, ``"rows 0-4095"``."""

    def read(self) -> Chunk:
        """Reads the whole fragment. Raises a streamfeed error naming the file."""


@dataclass(frozen=True)
class SourceInfo:
    """What a source declares about its rows beyond the fragments, for the layers that see only the protocol.

    A wrapper (the conversion cache, a subset of fragments) passes its
    inner source's ``info`` on as it is, so a layer that needs the schema or
    the class names never has to know which concrete source it was given.
    """

    format: str  # "parquet", "csv", ...: what opened it
    schema: Any = None  # the served columns' Arrow schema, where the format has one (dates and times by type)
    label_map: Mapping[str, int] = field(default_factory=dict)  # class name -> label id, where the data has classes
    converted_from: Mapping[str, Any] | None = None  # the data `streamfeed convert` read, when this is its output
    filesystem: Any = None  # the pyarrow filesystem read from (object storage reports its requests)
    root: str | None = None  # the folder that the ``path`` column is relative to (an image folder)
    # Whether ``fingerprint()`` changes when the values do: files by size and modification time, yes; a Ray
    # pipeline's plan text, no (a map reading a changed input keeps it). The conversion cache refuses False.
    sees_values: bool = True
    # The reader keyword that sets how large a fragment is ("fragment_bytes" for CSV), named by a memory
    # refusal; None where the fragments are the files' own pieces (Parquet row groups, Ray blocks).
    fragment_setting: str | None = None

    @property
    def class_names(self) -> list[str]:
        """Class names in label-id order (empty without classes)."""
        return [name for name, _ in sorted(self.label_map.items(), key=lambda item: item[1])]


class AlikeRows:
    """For a source whose every fragment's rows are alike: each fragment is sized by ``row_bytes``.

    The one definition of :meth:`Source.fragment_row_bytes` for the
    sources without per-fragment widths (all but Parquet and the wrappers).
    """

    row_bytes: Any  # the source's own property

    def fragment_row_bytes(self, fragment: "Fragment") -> float:
        """Decoded bytes per row of one fragment: :attr:`row_bytes`, every fragment's rows being alike."""
        return float(self.row_bytes)


@runtime_checkable
class Source(Protocol):
    """Something that can be split into fragments with known row counts.

    This is everything the runtime asks of a source; there is no fallback
    for a missing attribute.
    """

    @property
    def fragments(self) -> Sequence[Fragment]:
        """All fragments, in a stable order (the plan permutes indices into it)."""

    @property
    def column_names(self) -> list[str]:
        """Names of the columns every chunk will have."""

    @property
    def files(self) -> Sequence[str]:
        """The files read (after any left out under ``on_error="skip"``)."""

    @property
    def row_bytes(self) -> float:
        """Decoded bytes per row of the chosen columns: sizes every buffer to the memory limit."""

    def fragment_row_bytes(self, fragment: Fragment) -> float:
        """Decoded bytes per row of one of its fragments: sizes that fragment (``row_bytes`` is the widest).

        The same as ``row_bytes`` where every fragment's rows are alike; a
        Parquet row group's own, as a narrow file's rows may sit next to a
        wide file's (the widest for every fragment refused the narrow file).
        """

    @property
    def exact_counts(self) -> bool:
        """Whether ``num_rows`` of every fragment is what reading yields.

        False when rows can disappear only by reading (dropped nulls,
        records skipped under ``on_error="skip"``): the dataset then counts
        them in one pass before it promises a step count.
        """

    @property
    def read_parallelism(self) -> int | None:
        """How many of its fragment reads can usefully run at once; None: no limit of its own.

        The layout's default read threads follow it when no per-fragment op
        shares the read threads (HDF5 through h5py: 1, one global lock).
        """

    @property
    def read_scratch(self) -> float | None:
        """Bytes one fragment read holds while it decodes, beyond its output, per byte of that output.

        It sizes the reading share of the memory limit for each read in
        flight (None: the library's figure for a columnar decode,
        ``memory.READ_TRANSIENT``, pyarrow's pages and buffers). An image
        folder's is one file and its full-size decode against the fragment's
        array, at most the library's figure (counted as four fragments a
        read, shuffled images were read one fragment at a time on two
        threads); a zip archive's adds the members a read holds at once.
        Bytes held only while reading belong here, not in :attr:`row_bytes`,
        which sizes every buffer and the default shuffle window.
        """

    @property
    def info(self) -> SourceInfo:
        """What it declares beyond fragments: format, schema, classes (see :class:`SourceInfo`)."""

    def fingerprint(self) -> Mapping[str, Any]:
        """A small JSON-able identity (files, sizes) used to validate saved state."""


NOT_ROW_SETTINGS: Mapping[str, str] = {
    # The one list of reader settings left out of a source's fingerprint (and so of the cache's key), each
    # with why it does not describe the rows; every other constructor argument is in it (`records_settings`),
    # and tests/test_fingerprint_keywords.py fails on a read_* keyword that is neither.
    **dict.fromkeys(
        ("report", "on_error", "max_bad_fraction", "max_bad_count", "report_path"),
        "the bad-input policy and its record: how bad input is reported, not what good input yields "
        "(what it left out is seen in the fragments' rows and the report)",
    ),
    **dict.fromkeys(
        ("filesystem", "storage_options"),
        "where the files are and the credentials to reach them: the files' digest names the files",
    ),
    **dict.fromkeys(
        ("paths", "root"),
        "the paths given: the files' digest covers the files found (an image folder's relative to its root, "
        "so that a moved folder keeps its identity)",
    ),
    **dict.fromkeys(
        ("threads", "processes", "timeout"),
        "a machine setting (threads or processes opening and reading, seconds to wait): never which rows",
    ),
    "count_cache": "where CSV row counts are remembered (the row-count index), not what the rows are",
}
"""Reader settings that are not part of a source's identity, each with its reason."""

_Init = TypeVar("_Init", bound=Callable[..., None])


def records_settings(init: _Init) -> _Init:
    """Decorates a source's ``__init__`` to record all its arguments (defaults applied) as ``self.settings``.

    Recorded before the constructor runs, from the signature, so a setting
    added later is in the fingerprint without anyone remembering it; only
    :data:`NOT_ROW_SETTINGS` are left out.
    """
    signature = inspect.signature(init)

    @functools.wraps(init)
    def recorded(self: Any, *args: Any, **kwargs: Any) -> None:
        bound = signature.bind(self, *args, **kwargs)
        bound.apply_defaults()
        arguments = dict(list(bound.arguments.items())[1:])  # without self
        self.settings = row_settings(arguments)
        init(self, *args, **kwargs)

    return cast(_Init, recorded)


def row_settings(arguments: Mapping[str, Any]) -> dict[str, Any]:
    """``arguments`` but :data:`NOT_ROW_SETTINGS`, as canonical JSON values (equal after a JSON round trip)."""
    return {name: _canonical(value) for name, value in sorted(arguments.items()) if name not in NOT_ROW_SETTINGS}


def _canonical(value: Any) -> Any:
    """A JSON value naming ``value``: the same for equal settings in every run, another for other settings."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else repr(value)  # NaN != NaN would refuse every state
    if isinstance(value, np.generic):
        return _canonical(value.item())
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, Mapping):
        return {str(key): _canonical(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_canonical(item) for item in value]
    if isinstance(value, (set, frozenset)):
        return sorted((_canonical(item) for item in value), key=repr)
    if isinstance(value, type):
        return f"{value.__module__}.{value.__qualname__}"
    identity = getattr(value, "identity", None)
    if callable(identity):  # a ColumnPolicy names itself
        return _canonical(identity())
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {"type": type(value).__qualname__, **_canonical(dataclasses.asdict(value))}
    # pyarrow types and expressions, NumPy dtypes, a Ray dataset (its plan): their text names them
    return f"{type(value).__module__}.{type(value).__qualname__}: {value}"


def fragmenting_digest(fragments: Iterable[Fragment], root: str | None = None) -> str:
    """A short hash of every fragment's key and row count, in order: how the source is cut.

    The keys encode the boundaries (byte, record, row or file ranges), so
    a changed ``fragment_bytes``, ``fragment_size`` or row-group layout is
    another identity, and the cache never serves one fragment's part as
    another's. ``root`` is cut from the keys (an image folder keeps its
    identity when moved, as its files' digest does).
    """
    digest = hashlib.sha1()
    for fragment in fragments:
        key = fragment.key
        if root is not None and key.startswith(root):
            key = key[len(root) :]
        digest.update(f"{key}\0{fragment.num_rows}\n".encode())
    return digest.hexdigest()[:16]


@dataclass(frozen=True, order=True)
class Position:
    """Row ``offset`` of read unit ``unit`` is the next row to emit.

    A read unit is one shuffle window (a group of fragments whose rows are
    permuted together), or one fragment when there is no shuffle.
    """

    unit: int = 0
    offset: int = 0

    def to_dict(self) -> dict[str, int]:
        return {"unit": self.unit, "offset": self.offset}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "Position":
        return cls(int(data["unit"]), int(data["offset"]))


def chunk_len(chunk: Chunk) -> int:
    """Rows in a chunk (0 for a chunk without columns)."""
    for column in chunk.values():
        return len(column)
    return 0


def slice_chunk(chunk: Chunk, start: int, stop: int) -> Chunk:
    """Zero-copy view of rows ``start:stop``."""
    return {name: column[start:stop] for name, column in chunk.items()}


def concat_chunks(chunks: Sequence[Chunk]) -> Chunk:
    """One chunk from several with the same columns (a copy unless there is one)."""
    if len(chunks) == 1:
        return chunks[0]
    names = chunks[0].keys()
    return {name: np.concatenate([chunk[name] for chunk in chunks]) for name in names}


def fragment_array(shape: tuple[int, ...], dtype: Any) -> np.ndarray:
    """An uninitialised array of numbers for one fragment's data, its memory from Arrow's pool.

    Read threads allocate these (a feature matrix, a fragment's images) and
    the consumer frees them. From glibc's ``malloc`` they stayed in the read
    threads' arenas once glibc had raised its mmap threshold past their
    size (it does so at the first free of a large block): ``to_keras``
    batches over 65 536-row fragments of 32 float32 peaked 228-277 MiB over
    the start against a 112 MiB layout, and 150-194 MiB from Arrow's pool
    (mimalloc, which returns freed pages), at 0.234-0.259 against
    0.261-0.308 CPU s/Mrow (measured, 10 epochs, three rounds). Objects and
    empty arrays come from NumPy.
    """
    kind = np.dtype(dtype)
    count = math.prod(shape)
    if kind.hasobject or count == 0:
        return np.empty(shape, dtype=kind)
    buffer = pa.allocate_buffer(count * kind.itemsize)
    return np.frombuffer(buffer, dtype=kind, count=count).reshape(shape)


_TILE_ROWS = 4096  # rows x columns of one tile stay in cache while written


def interleave(columns: Sequence[np.ndarray], out: np.ndarray) -> np.ndarray:
    """Writes 1-D columns side by side into ``out`` (rows x columns), row-major.

    Tile by tile with ``np.stack(..., out=)``: measured fastest of column-wise
    strided writes, a whole-array transpose copy and this (62 vs 99 vs 115 ms
    for 983 k rows x 33 float32 columns).
    """
    for top in range(0, out.shape[0], _TILE_ROWS):
        np.stack([column[top : top + _TILE_ROWS] for column in columns], axis=1, out=out[top : top + _TILE_ROWS])
    return out
