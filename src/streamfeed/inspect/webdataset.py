"""Inspecting tar shards in the WebDataset layout: exact sample counts from the header index, the served columns.

The source's own index (``sources/webdataset``: every shard's 512-byte tar
headers, data skipped) gives the count before any sample is read, so the
count is exact; the columns (one per extension of the first sample, with
the decoder, shape and dtype it sets) and a few sample values come from the
first fragment, read with small fragments so that only a handful of
samples are decoded. A damaged shard, a sample with a refused member name
(``../``, absolute) or a missing member raises as ``read_webdataset``
does, naming shard, member and byte offset: what would stop training
stops the inspection.
"""

from __future__ import annotations

import collections

import numpy as np

from ..errors import ErrorPolicy
from ..files.storage import open_storage
from ..sources.webdataset.source import WebDatasetSource
from .report import Column, InspectReport, add_files, sample_values


def inspect_webdataset(path: str, *, full: bool, sample_rows: int, memory_limit: int, report: InspectReport) -> None:
    """Fills ``report`` for a ``.tar`` shard, a directory of shards or a glob (``full`` reads every sample)."""
    filesystem, located = open_storage(path, None, None)
    source = WebDatasetSource(
        located,
        fragment_samples=max(1, sample_rows),
        filesystem=filesystem,
        report=ErrorPolicy().new_report(),
    )
    sizes = [int(source.filesystem.get_file_info(shard).size or 0) for shard in source.files]
    add_files(report, list(source.files), sizes)
    per_shard: collections.Counter[str] = collections.Counter()
    for fragment in source.fragments:
        per_shard[fragment.path] += fragment.num_rows
    report.rows, report.rows_exact = sum(per_shard.values()), True
    report.details["samples_per_shard"] = {shard: per_shard.get(shard, 0) for shard in list(source.files)[:50]}
    report.details["extensions"] = {
        column.extension: {"column": column.name, "decoder": column.kind, "shape": list(column.shape)}
        for column in source.columns
    }
    sample = source.fragments[0].read() if source.fragments else {}
    if full:  # every sample decoded: a member that does not decode raises, naming it
        for fragment in source.fragments[1:]:
            fragment.read()
    if source.key_column is not None:
        keys = sample.get(source.key_column)
        report.columns.append(
            Column(source.key_column, "key", samples=[] if keys is None else sample_values(keys, sample_rows))
        )
    for column in source.columns:
        values = sample.get(column.name)
        kind = column.kind if column.dtype == "object" else f"{column.kind} {np.dtype(column.dtype).name}"
        report.columns.append(
            Column(
                column.name,
                kind,
                shape=list(column.shape) or None,
                samples=[] if values is None else sample_values(values, sample_rows),
            )
        )
