"""Inspecting TFRecord: exact record counts from the framing scan, the feature spec of the first record."""

from __future__ import annotations

import numpy as np

from ..errors import ErrorPolicy
from ..sources.tfrecord.source import TFRecordSource
from .report import Column, InspectReport, add_files, index_like, sample_values, warn_index


def inspect_tfrecord(path: str, *, full: bool, sample_rows: int, memory_limit: int, report: InspectReport) -> None:
    # small first fragment: the sample; damaged files are reported, not raised
    source = TFRecordSource(path, fragment_bytes=1 << 16, report=ErrorPolicy(on_error="skip").new_report())
    indexes = source.indexes
    add_files(report, [index.path for index in indexes], [index.size for index in indexes])
    report.rows, report.rows_exact = sum(index.records for index in indexes), True
    report.details["records_per_file"] = {index.path: index.records for index in indexes[:50]}
    report.details["compressed"] = sorted({"GZIP" if index.compressed else "none" for index in indexes})
    report.details["features"] = {spec.name: {"kind": spec.kind, "shape": list(spec.fixed)} for spec in source.specs}
    damaged = source.report.entries
    if damaged:
        report.warn(
            "unreadable_files",
            f"{len(damaged)} TFRecord file(s) are damaged",
            where=damaged[0].path,
            found=damaged[0].reason[:300],
            fix="rewrite or re-download them",
        )
    sample = source.fragments[0].read() if source.fragments else {}
    for spec in source.specs:
        values = sample.get(spec.name)
        report.columns.append(
            Column(
                spec.name,
                spec.kind,
                shape=list(spec.fixed),
                samples=[] if values is None else sample_values(values, sample_rows),
            )
        )
        if values is not None and np.ndim(values) == 1 and index_like(spec.name, values):
            warn_index(report, spec.name, indexes[0].path)
