"""A Ray Data dataset as a source: one fragment per materialized Ray block.

Ray does the distributed part (reading, decoding, ``map_batches`` on any
number of machines); streamfeed then gives what Ray Data does not: exact
epochs with known step counts, a seeded shuffle that is reproducible and
resumable from a small state, equal shards of one global order, and the
Keras adapter.

When the source opens, the dataset is materialized (``Dataset.materialize``)
with Ray's ``preserve_order`` switched on for that one execution (on the
dataset's own ``DataContext`` copy, restored after), so the same pipeline
gives its blocks in the same order in every run: that order is what the
seeded plan permutes, and a resumed job must see it again. Each block's row
count comes from Ray's block metadata, so counts are exact before any read.
A fragment fetches its block with ``ray.get`` in the read pool and converts
it with the Arrow helpers every Arrow-backed source uses (null policy,
dates and times as float64 seconds); Ray's fixed-shape tensor columns
(images) become ``(rows, *shape)`` arrays.

``ray`` is imported when a source opens, never by ``import streamfeed``.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, field
from typing import Any, Sequence

import pyarrow as pa
import pyarrow.compute as pc

from ..core import AlikeRows, Chunk, SourceInfo, fragmenting_digest, records_settings
from ..errors import ArgumentError, DataError, SchemaError, StorageError, describe, require
from ..files.arrow import ROW_SHAPE_METADATA, ColumnPolicy, Where, table_to_chunk


@dataclass(frozen=True)
class RayFragment:
    """One Ray block (or the slice of one that Ray's bundle names), read with ``ray.get``."""

    key: str
    num_rows: int
    path: str
    index: int
    start: int
    whole: bool  # the whole block, not a slice of it that Ray's bundle named
    _ref: Any = field(repr=False, compare=False)  # ray.ObjectRef of the block
    _source: "RaySource" = field(repr=False, compare=False)

    @property
    def location(self) -> str:
        return f"block {self.index} (rows {self.start}-{self.start + self.num_rows - 1} of the block)"

    def read(self) -> Chunk:
        source = self._source
        try:
            block = source.ray.get(self._ref, timeout=source.timeout)
        except (source.ray.exceptions.RayError, TimeoutError) as exc:
            # RayError covers lost, freed and unreconstructable objects and a dead owner; a Ray
            # GetTimeoutError is also a TimeoutError. Never a data fault: on_error="skip" must not drop it.
            raise StorageError(
                describe(
                    "A Ray block could not be fetched",
                    where=f"{self.path}, {self.location}, object {self._ref.hex()}",
                    found=f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}",
                    fix=(
                        "keep the Ray cluster (and the driver that materialized the dataset) running while "
                        "streaming, or call read_ray again to re-run the Ray pipeline"
                    ),
                )
            ) from exc
        table = source.to_arrow(block)
        needed = self.start + self.num_rows
        if (table.num_rows != needed) if self.whole else (table.num_rows < needed):
            raise DataError(
                describe(
                    "A Ray block does not have the rows its metadata says",
                    where=f"{self.path}, {self.location}",
                    expected=f"{needed} rows" if self.whole else f"at least {needed} rows",
                    found=f"{table.num_rows}",
                    fix="call read_ray again; Ray's block metadata no longer matches the block",
                )
            )
        if not self.whole:
            table = table.slice(self.start, self.num_rows)
        where = Where(f"{self.path} block {self.index}", first_row=self.start)
        return table_to_chunk(_tensors_as_lists(table, where.path), source.policy, where)


def _tensors_as_lists(table: pa.Table, where: str) -> pa.Table:
    """Ray's fixed-shape tensor columns as fixed-size lists carrying their row shape.

    ``table_to_chunk`` then yields them as ``(rows, *shape)`` arrays (the
    same metadata ``streamfeed convert`` writes for images); other columns
    are left alone.
    """
    for index, column_field in enumerate(table.schema):
        kind = column_field.type
        if not isinstance(kind, pa.ExtensionType):
            continue
        shape = getattr(kind, "shape", None)
        if not isinstance(shape, tuple) or not all(isinstance(size, int) for size in shape):
            raise SchemaError(
                describe(
                    f"Column {column_field.name!r} of a Ray block has an extension type streamfeed cannot convert",
                    where=where,
                    expected="a fixed-shape tensor (every row the same shape) or a plain Arrow type",
                    found=str(kind),
                    fix="resize or pad the column to one shape in the Ray pipeline (e.g. in map_batches)",
                )
            )
        column = table.column(index)
        if column.null_count:
            raise DataError(
                describe(
                    f"Tensor column {column_field.name!r} has null rows",
                    where=where,
                    expected="a tensor in every row",
                    found=f"{column.null_count} nulls",
                    fix="filter those rows out in the Ray pipeline",
                )
            )
        width = math.prod(shape)
        chunks = [pa.FixedSizeListArray.from_arrays(pc.list_flatten(piece.storage), width) for piece in column.chunks]
        as_list = pa.chunked_array(chunks, type=pa.list_(kind.storage_type.value_type, width))
        metadata = {**(column_field.metadata or {}), ROW_SHAPE_METADATA: json.dumps(list(shape)).encode()}
        table = table.set_column(index, pa.field(column_field.name, as_list.type, metadata=metadata), as_list)
    return table


class RaySource(AlikeRows):
    """The blocks of one materialized Ray dataset (see the module docstring).

    The source keeps the materialized dataset, so its blocks stay pinned in
    Ray's object store for as long as the source (and every ``Dataset``
    built on it) lives.

    What its fingerprint can see: the number of blocks and their row counts
    in order, the schema, Ray's plan text (its operators and their
    arguments as Ray prints them), the null policy and the user's ``name``
    and ``version``. What it cannot see: values. A ``map_batches`` that
    reads a changed file or table, a changed function body under the same
    name, or input files rewritten with the same block sizes keep the
    fingerprint, so a saved state is accepted across them. For that reason
    ``info.sees_values`` is False unless ``version=`` is given, and the
    conversion cache (``Dataset.cache``) refuses such a source: change
    ``version`` whenever the inputs or the code change.
    """

    settings: dict[str, Any]  # every constructor argument but core.NOT_ROW_SETTINGS (records_settings)

    @records_settings
    def __init__(
        self,
        dataset: Any,
        *,
        name: str | None = None,
        version: str | int | None = None,
        policy: ColumnPolicy | None = None,
        timeout: float | None = None,
    ) -> None:
        self.ray = require("ray", "ray")
        require("ray.data", "ray")
        if not isinstance(dataset, self.ray.data.Dataset):
            raise ArgumentError(
                describe(
                    "read_ray takes a Ray Data dataset",
                    expected="a ray.data.Dataset (e.g. ray.data.read_images(...).map_batches(...))",
                    found=type(dataset).__name__,
                    fix="build the dataset with ray.data first",
                )
            )
        if timeout is not None and not timeout > 0:
            raise ArgumentError(describe("timeout must be positive seconds or None", found=repr(timeout)))
        self.policy = policy or ColumnPolicy()
        # Ray's block metadata has every block's rows, so counts are exact unless nulls='drop' removes some
        self.exact_counts = self.policy.nulls != "drop"
        self.read_parallelism: int | None = None  # reads run in parallel (core.Source)
        self.read_scratch: float | None = None  # the library's figure for its decode (core.Source)
        self.timeout = timeout
        self.name = name
        self.version = version
        self.plan = repr(dataset)  # Ray's own description of the pipeline (its operators and schema)
        self.dataset = _materialize_in_order(dataset)
        self.path = f"ray://{name or self.dataset.get_dataset_id()}"
        self.files: list[str] = [self.path]
        self.fragments: list[RayFragment] = []
        schema: pa.Schema | None = None
        size_bytes = 0
        for bundle in self.dataset.iter_internal_ref_bundles():
            schema = schema or _arrow_schema(bundle.schema)
            for entry, block_slice in zip(bundle.blocks, bundle.slices):
                rows = entry.metadata.num_rows
                start = 0 if block_slice is None else block_slice.start_offset
                if block_slice is not None:
                    rows = block_slice.end_offset - block_slice.start_offset
                if rows is None:  # Ray leaves it unknown only for unmaterialized blocks
                    rows = self.to_arrow(self.ray.get(entry.ref)).num_rows
                if rows == 0:
                    continue
                index = len(self.fragments)
                self.fragments.append(
                    RayFragment(
                        f"{self.path}#block={index}",
                        int(rows),
                        self.path,
                        index,
                        start,
                        block_slice is None,
                        entry.ref,
                        self,
                    )
                )
                size_bytes += (entry.metadata.size_bytes or 0) * rows // max(1, entry.metadata.num_rows or rows)
        self.schema = schema
        total = sum(fragment.num_rows for fragment in self.fragments)
        # Ray's size_bytes is the Arrow block's buffer size: the decoded size of fixed-width and tensor columns
        self._row_bytes = float(max(8.0, size_bytes / total)) if total else 64.0
        self._fingerprint: dict | None = None

    def to_arrow(self, block: Any) -> pa.Table:
        """A block (Arrow table or pandas frame) as an Arrow table."""
        if isinstance(block, pa.Table):
            return block
        return self.ray.data.block.BlockAccessor.for_block(block).to_arrow()

    @property
    def column_names(self) -> list[str]:
        return list(self.schema.names) if self.schema is not None else []

    @property
    def row_bytes(self) -> float:
        return self._row_bytes

    @property
    def info(self) -> SourceInfo:
        """Format, schema (``core.SourceInfo``): what layers that see only the protocol read."""
        # Ray's plan text cannot see values (see the class docstring): only the user's version= can vouch for them.
        return SourceInfo("ray", schema=self.schema, sees_values=self.version is not None)

    def fingerprint(self) -> dict:
        """Blocks, their row counts in order, the schema, Ray's plan text and the user's ``name``/``version``.

        It cannot see the values: a changed input file or ``map_batches``
        function body that yields the same row counts and schema looks the
        same. Pass ``version=`` to tell those apart.
        """
        if self._fingerprint is None:
            counts = ",".join(str(fragment.num_rows) for fragment in self.fragments)
            digest = hashlib.sha256(f"{counts}|{self.schema}|{self.plan}".encode()).hexdigest()[:16]
            self._fingerprint = {
                "format": "ray",
                "name": self.name,
                "version": self.version,
                "blocks": len(self.fragments),
                "rows": sum(fragment.num_rows for fragment in self.fragments),
                "digest": digest,
                "columns": self.column_names,
                "policy": self.policy.identity(),
                "settings": self.settings,  # every constructor argument (core.records_settings)
                "fragmenting": fragmenting_digest(self.fragments),
            }
        return self._fingerprint


def _materialize_in_order(dataset: Any) -> Any:
    """``dataset.materialize()`` with Ray's ``preserve_order`` on for this execution only.

    Without it Ray emits blocks as tasks finish, so two runs of one pipeline
    could list the blocks in different orders, and a seed or a saved state
    would name other rows. A dataset already materialized keeps its order.
    """
    options = dataset.context.execution_options
    before = options.preserve_order
    options.preserve_order = True
    try:
        return dataset.materialize()
    finally:
        options.preserve_order = before


def _arrow_schema(schema: Any) -> pa.Schema | None:
    """A bundle's schema as Arrow (Ray gives a pyarrow schema or a pandas block schema)."""
    if schema is None or isinstance(schema, pa.Schema):
        return schema
    names: Sequence[str] = getattr(schema, "names", [])
    return pa.schema([(name, pa.null()) for name in names])  # pandas blocks: names only; types come per block
