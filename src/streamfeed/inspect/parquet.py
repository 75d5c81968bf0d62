"""Inspecting Parquet: footers only (rows, row groups, compression, null counts), plus a few sample rows.

Files written by ``streamfeed convert`` also show what they mean: the class
names, label map and origin (``converted_from``) in their schema metadata.
"""

from __future__ import annotations

import os

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from ..errors import SchemaError
from ..files.paths import resolve_files
from ..memory import plan_layout
from ..plan import default_window
from ..sources.parquet import agreed_meaning, partition_values
from .progress import progress
from .report import Column, InspectReport, add_files, index_like, sample_column, sample_values, warn_index

_INDEX_PROBE_ROWS = 1000


def inspect_parquet(path: str, *, full: bool, sample_rows: int, memory_limit: int, report: InspectReport) -> None:
    resolved = resolve_files(path, suffixes=(".parquet", ".pq", ".parq"))
    files = list(resolved.files)
    fs = resolved.filesystem
    sizes = [info.size or 0 for info in fs.get_file_info(files)]
    add_files(report, files, sizes)
    metas, schemas, recorded, first = [], [], [], None
    with progress(len(files), "reading footers", enabled=None if full else False) as advance:
        for file in files:
            handle = pq.ParquetFile(file, filesystem=fs)
            if first is None:  # kept for the sample rows: the footer is not read twice
                first = handle
            metas.append(handle.metadata)
            recorded.append((file, handle.schema_arrow))
            schemas.append(handle.schema_arrow.remove_metadata())
            advance()
    report.rows, report.rows_exact = sum(meta.num_rows for meta in metas), True

    groups = [
        (file, index, meta.row_group(index)) for file, meta in zip(files, metas) for index in range(meta.num_row_groups)
    ]
    group_rows = np.array([group.num_rows for _, _, group in groups], dtype=np.int64)
    group_bytes = np.array([group.total_byte_size for _, _, group in groups], dtype=np.int64)
    codecs = sorted({group.column(i).compression for _, _, group in groups for i in range(group.num_columns)})
    report.details["row_groups"] = {
        "count": len(groups),
        "rows": _spread(group_rows),
        "uncompressed_bytes": _spread(group_bytes),
    }
    report.details["compression"] = codecs

    partitions: dict[str, set] = {}
    for file in files:
        for key, value in partition_values(file, resolved.root).items():
            partitions.setdefault(key, set()).add(value)
    report.details["partition_columns"] = {key: sorted(map(str, values))[:20] for key, values in partitions.items()}
    _show_meaning(report, recorded)

    _check_drift(report, files, schemas)
    schema = _union(schemas)
    nulls = _null_counts(metas, schemas, schema.names)
    sample = _sample(first, files[0], max(sample_rows, _INDEX_PROBE_ROWS)) if first is not None else {}
    for field in schema:
        values = sample.get(field.name)
        report.columns.append(
            Column(
                name=field.name,
                type=str(field.type),
                nulls=nulls.get(field.name),
                nulls_exact=field.name in nulls,
                samples=[] if values is None else sample_values(values, sample_rows),
            )
        )
        if index_like(field.name, values):
            warn_index(report, field.name, files[0])
    for key, found in partitions.items():
        report.columns.append(Column(name=key, type="partition", samples=sorted(map(str, found))[:sample_rows]))
    if groups:
        _check_row_groups(report, groups, group_rows, group_bytes, memory_limit)


def _show_meaning(report: InspectReport, recorded: list[tuple[str, pa.Schema]]) -> None:
    """The class names, label map and origin ``streamfeed convert`` recorded; a warning if read_parquet refuses them."""
    try:
        label_map, origin = agreed_meaning(recorded)
    except SchemaError as exc:
        report.warn(
            "label_map_mismatch",
            "The files do not carry one valid label map (read_parquet refuses them)",
            found=str(exc),
            fix="read the files named there separately, or convert them again with one label map",
        )
        return
    if label_map:
        report.details["class_names"] = sorted(label_map, key=label_map.__getitem__)
        report.details["label_map"] = label_map
    if origin:
        report.details["converted_from"] = origin


def _spread(values: np.ndarray) -> dict:
    if not len(values):
        return {}
    return {"min": int(values.min()), "median": int(np.median(values)), "max": int(values.max())}


def _union(schemas: list[pa.Schema]) -> pa.Schema:
    fields: dict[str, pa.Field] = {}
    for schema in schemas:
        for field in schema:
            fields.setdefault(field.name, field)
    return pa.schema(list(fields.values()))


def _check_drift(report: InspectReport, files: list[str], schemas: list[pa.Schema]) -> None:
    """Files whose columns or types differ from the first file's."""
    if not schemas:
        return
    first = {field.name: str(field.type) for field in schemas[0]}
    differences = []
    for file, schema in zip(files[1:], schemas[1:]):
        mine = {field.name: str(field.type) for field in schema}
        changes = [f"+{name}" for name in mine if name not in first] + [
            f"-{name}" for name in first if name not in mine
        ]
        changes += [
            f"{name}: {first[name]} -> {kind}" for name, kind in mine.items() if name in first and first[name] != kind
        ]
        if changes:
            differences.append(f"{os.path.basename(file)} ({', '.join(changes)})")
    if differences:
        report.details["schema_drift"] = differences
        report.warn(
            "schema_drift",
            f"{len(differences)} of {len(files)} files have a different schema than the first",
            where=files[0],
            found="; ".join(differences[:5]),
            fix=(
                "rewrite the files with one schema (`streamfeed convert` unifies types losslessly where it can); "
                "missing columns are read as nulls"
            ),
        )


def _null_counts(metas: list, schemas: list[pa.Schema], names: list[str]) -> dict[str, int]:
    """Exact null counts from the row-group statistics, for columns whose every group has them.

    A file without a column adds all its rows: the sources read the column
    there as nulls (what the quality pass counts, and the drift warning says).
    """
    counts: dict[str, int] = {}
    unknown: set[str] = set()
    for meta, schema in zip(metas, schemas):
        present = set(schema.names)  # once per file: ``schema.names`` builds a new list on every access
        for name in names:
            if name not in present:
                counts[name] = counts.get(name, 0) + meta.num_rows
        for g in range(meta.num_row_groups):
            group = meta.row_group(g)
            for i in range(group.num_columns):
                chunk = group.column(i)
                name = chunk.path_in_schema
                stats = chunk.statistics
                if stats is None or not stats.has_null_count:
                    unknown.add(name)
                else:
                    counts[name] = counts.get(name, 0) + stats.null_count
    wanted = set(names)
    return {name: count for name, count in counts.items() if name not in unknown and name in wanted}


def _sample(handle: pq.ParquetFile, path: str, rows: int) -> dict[str, np.ndarray]:
    """The first ``rows`` rows of the first file, for sample values and the index check."""
    batch = next(handle.iter_batches(batch_size=rows), None)
    if batch is None:
        return {}
    return {name: sample_column(batch.column(name), name, path) for name in batch.schema.names}


def _check_row_groups(report: InspectReport, groups: list, rows: np.ndarray, size: np.ndarray, limit: int) -> None:
    """Row groups the pipeline cannot hold within the memory limit (they are never split)."""
    row_bytes = max(8.0, float(size.sum()) / max(int(rows.sum()), 1))
    largest = int(np.argmax(rows))
    try:
        layout = plan_layout(
            row_bytes=row_bytes,
            fragment_rows=float(rows[largest]),
            batch_rows=1024,
            shuffled=True,
            window=default_window(row_bytes, float(rows[largest]), len(groups), None),
            read_threads=None,
            prefetch=None,
            memory_limit=limit,
        )
        report.details["layout_at_memory_limit"] = {"memory_limit": limit, **layout.to_dict()}
    except MemoryError:
        file, index, _ = groups[largest]
        report.warn(
            "row_group_too_large",
            "Row groups are too large for the memory limit (streamfeed never splits a row group)",
            where=f"{file}, row group {index}",
            found=(
                f"{int(rows[largest]):,} rows x {row_bytes:,.0f} bytes = "
                f"{rows[largest] * row_bytes / 2**20:,.0f} MiB per row group; limit {limit / 2**20:,.0f} MiB"
            ),
            fix="rewrite with smaller row groups (`streamfeed convert` sizes them by row width), or raise memory_limit",
        )
