"""Parquet files, directories, globs and hive-partitioned trees.

Every file's footer is read when the source opens (in parallel): that gives
exact row counts before the first batch, finds truncated or non-Parquet
files before training starts, and lets the schemas of all files be unified
(``_schema.py``) instead of trusting the first one. Row groups are the
fragments; a large row group is read as one fragment (pyarrow cannot start
decoding mid-group without decoding its prefix), so write files with row
groups that fit the memory limit — ``streamfeed inspect`` warns otherwise.
A local row group read out of file order (shuffled) is read without the
kernel's read-ahead, its column chunks asked for at once (``files/advice.py``):
read-ahead past it is evicted before its turn on data larger than memory
(1.90x the file bytes read, now 1.03x); reads in file order keep it.

Files written by ``streamfeed convert`` carry what the data means in their
schema metadata (key :data:`STREAMFEED_METADATA`, JSON; see
:func:`converted_metadata`): for an image folder its label map and class
names. The source gives them back as ``label_map``, ``class_names`` and
``save_label_map`` — the names an image source has — and ``converted_from``.
Files of one dataset must agree on the label map: files with different maps
(or some with a map and some without) are refused, naming two of them.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import json
import os
import re
import urllib.parse
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import pyarrow as pa
import pyarrow.dataset as pads
import pyarrow.fs as pafs

from ..core import Chunk, Fragment, SourceInfo, fragmenting_digest, records_settings
from ..errors import BadInputReport, CorruptFileError, SchemaError, describe
from ..files.advice import ByteRange, coalesce
from ..files.arrow import DEFAULT_POLICY, ColumnPolicy, Where, table_to_chunk
from ..files.paths import PathLike, file_digest, file_stats, resolve_files
from ..files.schema import unify
from ..files.stamps import Stamps, stamps_field, take_stamps, unchanged
from ..files.storage import is_remote
from .labels import LABEL_EXPECTED, class_names, is_label, write_label_map
from .parquet_jumps import JumpedReads

_INDEX_COLUMN = re.compile(r"^__index_level_\d+__$")
_HIVE_NULL = "__HIVE_DEFAULT_PARTITION__"
STREAMFEED_METADATA = b"streamfeed"  # the schema metadata key of what ``streamfeed convert`` records
METADATA_VERSION = 1
# pre_buffer=False: pyarrow's pre-buffering made RSS grow with the file (measured)
_SCAN_OPTIONS = pads.ParquetFragmentScanOptions(pre_buffer=False)
_FORMAT = pads.ParquetFileFormat()
# remote files: pre-buffering coalesces a row group's column chunks into one ranged request (pyarrow's S3
# client made one request per column chunk without it, ~7 per row group measured); it holds one row group
_REMOTE_SCAN_OPTIONS = pads.ParquetFragmentScanOptions(pre_buffer=True)


@dataclass(frozen=True)
class ParquetFragment:
    """One row group of one file (with partition values and the unified schema)."""

    key: str
    num_rows: int
    path: str
    row_group: int
    first_row: int
    _fragment: Any  # pyarrow ParquetFileFragment restricted to this row group
    _schema: pa.Schema
    _columns: tuple[str, ...]
    _filter: Any
    _policy: ColumnPolicy
    _missing: frozenset[str]
    _remote: bool = False
    _ranges: tuple[ByteRange, ...] = ()  # local files: the column chunks read, requested at once (files/advice.py)
    _jumps: JumpedReads | None = None  # local files: which reads jump, and what they read (the source's, shared)
    _stamps: Stamps = stamps_field()

    def __post_init__(self) -> None:
        object.__setattr__(
            self, "_stamps", () if self._remote else take_stamps((self.path,))
        )  # taken at open, checked by read()

    @property
    def location(self) -> str:
        return f"row group {self.row_group}"

    def read(self) -> Chunk:
        """:meth:`_read`, refused if the file changed since the source opened it (``files/stamps.py``)."""
        with unchanged((self.path,), self._stamps):
            return self._read()

    def _read(self) -> Chunk:
        locate = self._row_before_filter if self._filter is not None else None
        where = Where(self.path, self.row_group, self.first_row, self._missing, locate)
        try:
            fragment = self._fragment
            if self._jumps is not None:  # local: a read out of file order has its own fragment (parquet_jumps.py)
                fragment = self._jumps.fragment(self.path, self.row_group, fragment, self._ranges)
            table = fragment.to_table(
                schema=self._schema,
                columns=list(self._columns),
                filter=self._filter,
                use_threads=False,  # fragments are read in parallel already
                fragment_scan_options=_REMOTE_SCAN_OPTIONS if self._remote else _SCAN_OPTIONS,
            )
        except (pa.ArrowException, OSError) as exc:
            raise CorruptFileError(
                describe(
                    "Could not read a Parquet row group",
                    where=f"{self.path}, row group {self.row_group}",
                    found=f"{type(exc).__name__}: {exc}",
                    fix="check the file (streamfeed inspect), or pass on_error='skip' to leave it out and report it",
                )
            ) from exc
        if table.num_rows != self.num_rows:
            raise CorruptFileError(
                describe(
                    "A Parquet row group holds a different number of rows than its footer promises",
                    where=f"{self.path}, row group {self.row_group}",
                    expected=f"{self.num_rows} rows (footer{', after the filter' if self._filter is not None else ''})",
                    found=f"{table.num_rows}",
                    fix="rewrite the file; pass on_error='skip' to leave the row group out and report it",
                )
            )
        return table_to_chunk(table, self._policy, where)

    def _row_before_filter(self, index: int) -> int:
        """The row of this row group that is row ``index`` of its filtered table.

        Only error messages need it, so the row group is re-read then,
        rather than every read numbering its rows.
        """
        table = self._fragment.to_table(schema=self._schema, use_threads=False)
        numbered = table.append_column("__streamfeed_row__", pa.array(range(table.num_rows), pa.int64()))
        return numbered.filter(self._filter)["__streamfeed_row__"][index].as_py()

    def count(self) -> int:
        """Rows that pass the filter (reads only the columns the filter uses).

        Counts scanned batches, with no column projected, rather than asking
        pyarrow for a count: ``Fragment.count_rows`` takes no schema (which
        the filter needs to name partition columns and columns this file
        lacks), and ``Scanner.count_rows`` answers for the whole file, not
        this row group, when the partition alone decides the filter.
        """
        scanner = pads.Scanner.from_fragment(
            self._fragment, schema=self._schema, columns=[], filter=self._filter, use_threads=False
        )
        return sum(batch.num_rows for batch in scanner.to_batches())


def partition_values(path: str, root: str) -> dict[str, str | None]:
    """``key=value`` directory names below ``root``, values URI-decoded.

    Writers (pyarrow, Spark) URI-encode values, so ``new york`` is stored as
    ``city=new%20york`` and ``a/b`` as ``a%2Fb``; pyarrow's hive partitioning
    decodes them the same way.
    """
    relative = path[len(root) :].strip("/").split("/")[:-1]
    values: dict[str, str | None] = {}
    for segment in relative:
        if "=" in segment:
            key, value = segment.split("=", 1)
            values[key] = None if value == _HIVE_NULL else urllib.parse.unquote(value)
    return values


def _partition_type(values: Sequence[str | None]) -> pa.DataType:
    present = [value for value in values if value is not None]
    for kind, parse in ((pa.int64(), int), (pa.float64(), float)):
        try:
            for value in present:
                parse(value)
            return kind if present else pa.string()
        except ValueError:
            continue
    return pa.string()


_TEXT_OBJECT_BYTES = 57.0  # a decoded str/bytes value: 8-byte pointer + 49-byte object header


def _is_fixed_width(kind: pa.DataType) -> bool:
    """Whether a column decodes to NumPy at its Arrow width: numbers, booleans, dates and times."""
    return (
        pa.types.is_integer(kind)
        or pa.types.is_floating(kind)
        or pa.types.is_boolean(kind)
        or pa.types.is_temporal(kind)
    )


def _fixed_bytes(kind: pa.DataType) -> int:
    """NumPy bytes of one value: a bool takes a byte, a date or time a datetime64 (8 bytes)."""
    return 8 if pa.types.is_temporal(kind) else max(1, kind.bit_width // 8)


def _is_text(kind: pa.DataType) -> bool:
    if pa.types.is_dictionary(kind):
        kind = kind.value_type
    return (
        pa.types.is_string(kind)
        or pa.types.is_large_string(kind)
        or pa.types.is_binary(kind)
        or pa.types.is_large_binary(kind)
    )


def converted_metadata(schema: pa.Schema, where: str) -> dict:
    """What ``streamfeed convert`` recorded in a file's schema metadata, checked; ``{}`` for other files.

    The value of :data:`STREAMFEED_METADATA` is JSON::

        {"version": 1, "source": {"format": "images", "root": "<the folder's name>"},
         "label_column": "label", "label_map": {"class name": label, ...}, "class_names": [...]}

    Every key but ``version`` is optional. A label map must be one
    ``read_images`` accepts (``{str: int}``, ``0 <= label < 2**31``, no two
    labels alike); anything else is a :class:`SchemaError` naming the file,
    rather than labels whose meaning is guessed.
    """
    raw = (schema.metadata or {}).get(STREAMFEED_METADATA)
    if raw is None:
        return {}

    def refuse(found: str) -> SchemaError:
        return SchemaError(
            describe(
                "A file's streamfeed metadata (its label map) is not what streamfeed convert writes",
                where=where,
                expected=(
                    f'JSON {{"version": {METADATA_VERSION}, "label_map": {{"class name": label, ...}}, ...}} '
                    f"with labels {LABEL_EXPECTED}, no two alike"
                ),
                found=found,
                fix=(
                    "convert the data again (or with a newer streamfeed if it wrote a newer version), "
                    f"or remove the {STREAMFEED_METADATA.decode()!r} schema metadata to read it without a label map"
                ),
            )
        )

    try:
        meta = json.loads(raw)
    except ValueError as exc:  # not JSON, or not UTF-8
        raise refuse(f"{type(exc).__name__}: {exc}") from exc
    if not isinstance(meta, dict):
        raise refuse(f"a JSON {type(meta).__name__}")
    if meta.get("version") != METADATA_VERSION:
        raise refuse(f"version {meta.get('version')!r}")
    label_map = meta.get("label_map", {})
    if not isinstance(label_map, dict):
        raise refuse(f"a label map that is a JSON {type(label_map).__name__}")
    for name, label in label_map.items():
        if not is_label(label):
            raise refuse(f"class {name!r} has label {label!r}")
    if len(set(label_map.values())) != len(label_map):
        raise refuse(f"two classes share a label in {label_map}")
    if not isinstance(meta.get("source", {}), dict):
        raise refuse(f"a source that is a JSON {type(meta['source']).__name__}")
    return meta


def _shown(label_map: Mapping[str, int]) -> str:
    if not label_map:
        return "no label map"
    text = json.dumps(label_map, ensure_ascii=False)
    return text if len(text) <= 200 else text[:199] + "…"


def agreed_meaning(file_schemas: Sequence[tuple[str, pa.Schema]]) -> tuple[dict[str, int], dict | None]:
    """The label map all files carry, and the source they were converted from (None unless all agree).

    Files with different label maps, or some with a map and some without,
    are a :class:`SchemaError` naming two of them: a label would mean one
    class in one file and another class (or nothing known) in the other.
    """
    first_path, first_map = "", {}
    origins = []
    for path, schema in file_schemas:
        meta = converted_metadata(schema, path)
        label_map = {str(name): int(label) for name, label in meta.get("label_map", {}).items()}
        if not first_path:
            first_path, first_map = path, label_map
        elif label_map != first_map:
            raise SchemaError(
                describe(
                    "Files of one dataset carry different label maps",
                    where=f"{first_path} and {path}",
                    expected="one label map in every file (a label means the same class in every file)",
                    found=f"{_shown(first_map)} and {_shown(label_map)}",
                    fix=(
                        "read them as separate datasets, or convert them with one label map "
                        "(read_images(label_map=...) before convert_to_parquet)"
                    ),
                )
            )
        origins.append(meta.get("source"))
    origin = origins[0] if origins and all(item == origins[0] for item in origins) else None
    return first_map, origin


class ParquetSource:
    """Opens Parquet input: footers, unified schema, row-group fragments."""

    settings: dict[str, Any]  # every constructor argument but core.NOT_ROW_SETTINGS (records_settings)

    @records_settings
    def __init__(
        self,
        paths: PathLike,
        *,
        columns: Sequence[str] | None = None,
        filter: Any = None,  # noqa: A002 - pyarrow's own name for it
        filesystem: pafs.FileSystem | None = None,
        policy: ColumnPolicy = DEFAULT_POLICY,
        report: BadInputReport | None = None,
        threads: int = 8,
    ) -> None:
        self.report = report or BadInputReport()
        resolved = resolve_files(paths, suffixes=(".parquet", ".pq", ".parq"), filesystem=filesystem)
        self.filesystem, self.root = resolved.filesystem, resolved.root
        file_format = pads.ParquetFileFormat()
        # a local row group read out of file order is read without the kernel's read-ahead (files/advice.py)
        self._jumps = None if is_remote(self.filesystem) else JumpedReads()
        partitions = {path: partition_values(path, self.root) for path in resolved.files}
        keys = list(dict.fromkeys(k for values in partitions.values() for k in values))
        partition_schema = pa.schema(
            [(key, _partition_type([partitions[p].get(key) for p in resolved.files])) for key in keys]
        )

        def open_file(path: str) -> tuple[str, Any]:
            expression = None
            for key, value in partitions[path].items():
                term = (
                    pads.field(key).is_null()
                    if value is None
                    else pads.field(key) == pa.scalar(value).cast(partition_schema.field(key).type)
                )
                expression = term if expression is None else expression & term
            try:
                fragment = file_format.make_fragment(path, self.filesystem, partition_expression=expression)
                fragment.ensure_complete_metadata()
                return path, fragment
            except (pa.ArrowException, OSError) as exc:
                return path, exc

        with concurrent.futures.ThreadPoolExecutor(threads) as pool:
            opened = list(pool.map(open_file, resolved.files))
        good = []
        for path, result in opened:
            if isinstance(result, Exception):
                error = CorruptFileError(
                    describe(
                        "A file is not readable Parquet (corrupt, truncated, or another format)",
                        where=path,
                        expected="a Parquet footer ending in the magic bytes 'PAR1'",
                        found=f"{type(result).__name__}: {result}",
                        fix="remove or rewrite the file, or pass on_error='skip' to leave it out and report it",
                    )
                )
                self.report.reject(error, path=path, cause=result)
            else:
                good.append((path, result))
        self.files = tuple(path for path, _ in good)

        file_schemas = [(path, fragment.physical_schema) for path, fragment in good]
        self.label_map, self.converted_from = agreed_meaning(file_schemas)
        data_schema, missing = unify(file_schemas)
        full_schema = pa.schema(list(data_schema) + [f for f in partition_schema if f.name not in data_schema.names])
        index_columns = self._index_columns(file_schemas)
        if columns is None:
            columns = [name for name in full_schema.names if name not in index_columns]
        known = set(full_schema.names)  # ``Schema.names`` builds a new list per access: quadratic in a loop
        unknown = [name for name in columns if name not in known]
        if unknown:
            raise SchemaError(
                describe(
                    f"Columns {unknown} are not in the data",
                    where=self.root,
                    expected=f"names among {full_schema.names}",
                    fix="check the spelling in columns=[...]",
                )
            )
        self.schema = full_schema
        self._columns = tuple(columns)
        self._filter = filter
        self.fragments = self._split(good, full_schema, missing, policy)
        if filter is not None:
            with concurrent.futures.ThreadPoolExecutor(threads) as pool:
                counts = list(pool.map(ParquetFragment.count, self.fragments))
            self.fragments = [
                dataclasses.replace(fragment, num_rows=count)
                for fragment, count in zip(self.fragments, counts)
                if count
            ]
        self.report.total_rows = sum(fragment.num_rows for fragment in self.fragments)
        self.report.total_files = len(resolved.files)
        self.report.check_budget()  # files skipped while opening, now that totals are known
        self.row_bytes = self._row_bytes(good)
        self._policy = policy
        self._fingerprint: dict | None = None
        self.exact_counts = policy.nulls != "drop"  # dropped null rows are known only by reading
        self.read_parallelism: int | None = None  # reads run in parallel (core.Source)
        self.read_scratch: float | None = None  # the library's figure for its decode (core.Source)

    @staticmethod
    def _index_columns(file_schemas: Sequence[tuple[str, pa.Schema]]) -> set[str]:
        """Columns pandas wrote for its index: bookkeeping, never a feature by default."""
        names: set[str] = set()
        for _, schema in file_schemas:
            names.update(name for name in schema.names if _INDEX_COLUMN.match(name))
            pandas = schema.pandas_metadata or {}
            names.update(column for column in pandas.get("index_columns", []) if isinstance(column, str))
        return names

    def _split(
        self,
        good: Sequence[tuple[str, Any]],
        schema: pa.Schema,
        missing: Mapping[str, frozenset[str]],
        policy: ColumnPolicy,
    ) -> list[ParquetFragment]:
        fragments = []
        remote = is_remote(self.filesystem)
        for path, fragment in good:
            metadata = fragment.metadata
            first = 0
            pieces = (
                fragment.split_by_row_group(self._filter, schema=schema)
                if self._filter is not None
                else fragment.split_by_row_group()
            )
            kept = {piece.row_groups[0].id: piece for piece in pieces}
            for group in range(metadata.num_row_groups):
                rows = metadata.row_group(group).num_rows
                if group in kept and rows:
                    fragments.append(
                        ParquetFragment(
                            key=f"{path}#rg={group}",
                            num_rows=rows,
                            path=path,
                            row_group=group,
                            first_row=first,
                            _fragment=kept[group],
                            _schema=schema,
                            _columns=self._columns,
                            _filter=self._filter,
                            _policy=policy,
                            _missing=missing.get(path, frozenset()),
                            _remote=remote,
                            _ranges=() if remote else self._chunk_ranges(metadata, group),
                            _jumps=self._jumps,
                        )
                    )
                first += rows
        return fragments

    def _chunk_ranges(self, metadata: Any, group: int) -> tuple[ByteRange, ...]:
        """The byte ranges of a row group's column chunks that a read fetches, coalesced.

        The projected columns' chunks only (a column left out is a gap left
        unread). With a filter the columns it reads are not known here
        (pyarrow's expressions do not list them), so none are asked for
        ahead: each chunk is then read when pyarrow reads it.
        """
        if self._filter is not None:
            return ()
        wanted = set(self._columns)
        rg = metadata.row_group(group)
        ranges = []
        for i in range(rg.num_columns):
            column = rg.column(i)
            if column.path_in_schema.split(".")[0] in wanted:
                start = column.dictionary_page_offset if column.has_dictionary_page else column.data_page_offset
                ranges.append((start, column.total_compressed_size))
        return coalesce(ranges)

    def _row_bytes(self, good: Sequence[tuple[str, Any]]) -> float:
        """Decoded bytes per row of the projected columns: the largest of any row group's footer.

        The widest row group's estimate bounds any row (``row_bytes``); each
        fragment is sized by its own row group's (:meth:`fragment_row_bytes`),
        so a narrow file of many rows next to a wide one is not taken for
        many wide rows. A string or binary value also costs a
        Python object once decoded to NumPy (measured ~57 bytes: an 8-byte
        pointer and a 49-byte ``str`` header), which the footer's byte counts
        do not include. A fixed-width column (numbers, booleans, times)
        decodes to exactly its width, which the footer overstates: its
        uncompressed size counts the pages' encoding (a float32 column
        written with pyarrow's default dictionary attempt: 6 bytes a value).
        """
        groups = [
            (fragment.metadata, group) for _, fragment in good for group in range(fragment.metadata.num_row_groups)
        ]
        return max((self._group_row_bytes(metadata, group) for metadata, group in groups), default=8.0)

    def _group_row_bytes(self, metadata: Any, group: int) -> float:
        """One row group's decoded bytes per row of the projected columns (see :meth:`_row_bytes`)."""
        kinds = {name: self.schema.field(name).type for name in self._columns}
        fixed = sum(_fixed_bytes(kind) for kind in kinds.values() if _is_fixed_width(kind))
        wanted = {name for name, kind in kinds.items() if not _is_fixed_width(kind)}
        strings = sum(1 for kind in kinds.values() if _is_text(kind))
        widest = 0.0
        if wanted:
            present = set(metadata.schema.names)
            absent = sum(1 for name in wanted if name not in present)  # filled with nulls
            rg = metadata.row_group(group)
            total = sum(
                rg.column(i).total_uncompressed_size
                for i in range(rg.num_columns)
                if rg.column(i).path_in_schema.split(".")[0] in wanted
            )
            widest = total / max(rg.num_rows, 1) + 8.0 * absent
        return max(8.0, fixed + widest + _TEXT_OBJECT_BYTES * strings)

    def fragment_row_bytes(self, fragment: Fragment) -> float:
        """Its own row group's decoded bytes per row (``row_bytes`` is the widest row group's)."""
        if not isinstance(fragment, ParquetFragment):
            return float(self.row_bytes)
        return self._group_row_bytes(fragment._fragment.metadata, fragment.row_group)

    @property
    def column_names(self) -> list[str]:
        return list(self._columns)

    @property
    def class_names(self) -> list[str]:
        """Class names in label order, from the files' label map (``[]`` without one)."""
        return class_names(self.label_map)

    def save_label_map(self, path: str | os.PathLike) -> None:
        """Writes ``{"class name": label, ...}`` as JSON, as an image source does (reuse it with ``label_map=path``)."""
        write_label_map(self.label_map, path)

    @property
    def info(self) -> SourceInfo:
        """Format, schema, classes (``core.SourceInfo``): what layers that see only the protocol read."""
        return SourceInfo(
            "parquet",
            schema=self.schema,
            label_map=self.label_map,
            converted_from=self.converted_from,
            filesystem=self.filesystem,
        )

    def fingerprint(self) -> dict:
        """Files (paths, sizes, times), columns, filter and null policy; taken once, at open."""
        if self._fingerprint is None:
            self._fingerprint = self._compute_fingerprint()
        return self._fingerprint

    def _compute_fingerprint(self) -> dict:
        return {
            "format": "parquet",
            "files": len(self.files),
            "digest": file_digest(file_stats(self.files, self.filesystem)),
            "policy": self._policy.identity(),
            "columns": list(self._columns),
            "filter": None if self._filter is None else str(self._filter),
            "settings": self.settings,  # every constructor argument (core.records_settings)
            "fragmenting": fragmenting_digest(self.fragments),
        }
