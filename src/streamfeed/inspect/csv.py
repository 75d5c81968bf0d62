"""Inspecting CSV: the dialect, exact row counts (the source's cached newline scan) and a sample."""

from __future__ import annotations

import codecs
import csv as pycsv
import io
from typing import Any

import numpy as np
import pyarrow.csv as pacsv

from ..sources.csv.files import file_codec, head_bytes
from ..sources.csv.source import DEFAULT_NULL_VALUES, CsvSource
from .progress import progress
from .report import Column, InspectReport, add_files, index_like, sample_column, sample_values, warn_index

_SAMPLE_BYTES = 1 << 20
CSV_NULLS: dict[str, Any] = {"null_values": DEFAULT_NULL_VALUES, "strings_can_be_null": True}
"""How nulls are counted in CSV, by the schema table and the quality pass alike: the default null
tokens (``""``, ``NA``, ``null``, ...) in every column, text columns included. ``read_csv`` keeps
them as text in text columns unless ``strings_can_be_null=True``; counting them is what shows that
a column has missing values."""


def inspect_csv(path: str, *, full: bool, sample_rows: int, memory_limit: int, report: InspectReport) -> None:
    source = CsvSource(path)  # opening scans the files: exact counts, cached
    files = list(source.files)
    sizes = [info.size or 0 for info in source.filesystem.get_file_info(files)]
    add_files(report, files, sizes)
    report.rows, report.rows_exact = sum(fragment.num_rows for fragment in source.fragments), True
    first = files[0]
    head = head_bytes(source.filesystem, first, file_codec(first))
    encoding, bom = _encoding(head)
    text = head.decode(encoding, errors="replace")
    try:
        has_header = pycsv.Sniffer().has_header(text[:65536])
    except pycsv.Error:
        has_header = None
    report.details["dialect"] = {
        "delimiter": source.delimiter,
        "header": has_header,
        "quoting": '"' in text,
        "quoted_newlines": _quoted_newline(text, source.delimiter),
        "encoding": encoding + (" (with BOM)" if bom else ""),
        "compression": file_codec(first),
        "line_ending": "\\r\\n" if "\r\n" in text[:65536] else "\\n",
    }
    options = pacsv.ParseOptions(delimiter=source.delimiter)
    convert = pacsv.ConvertOptions(
        column_types=dict(zip(source.schema.names, source.schema.types)),
        null_values=list(CSV_NULLS["null_values"]),
        strings_can_be_null=CSV_NULLS["strings_can_be_null"],
    )
    nulls: dict[str, int] = {}
    sample: dict[str, np.ndarray] = {}
    total = sum(sizes) if full else 0
    scanned = files if full else [first]
    with progress(total, "scanning bytes", unit="bytes", enabled=None if full else False) as advance:
        for file in scanned:
            with source.filesystem.open_input_stream(file, compression=file_codec(file)) as stream:
                reader = pacsv.open_csv(
                    stream,
                    parse_options=options,
                    convert_options=convert,
                    read_options=pacsv.ReadOptions(block_size=_SAMPLE_BYTES),
                )
                for batch in reader:
                    if not sample:
                        sample = {name: sample_column(batch.column(name), name, file) for name in batch.schema.names}
                    for name in batch.schema.names:
                        nulls[name] = nulls.get(name, 0) + batch.column(name).null_count
                    advance(batch.nbytes)
                    if not full:
                        break
    for field in source.schema:
        values = sample.get(field.name)
        report.columns.append(
            Column(
                field.name,
                str(field.type),
                nulls=nulls.get(field.name),
                nulls_exact=full,
                samples=[] if values is None else sample_values(values, sample_rows),
            )
        )
        if index_like(field.name, values):
            warn_index(report, field.name, first)


def _encoding(head: bytes) -> tuple[str, bool]:
    for bom, name in (
        (codecs.BOM_UTF8, "utf-8"),
        (codecs.BOM_UTF16_LE, "utf-16-le"),
        (codecs.BOM_UTF16_BE, "utf-16-be"),
    ):
        if head.startswith(bom):
            return name, True
    try:
        head.decode("utf-8")
        return ("ascii" if head.isascii() else "utf-8"), False
    except UnicodeDecodeError as exc:
        if exc.start > len(head) - 4:  # a character cut at the end of the sample
            return "utf-8", False
        return "latin-1 (not UTF-8: pass encoding=)", False


def _quoted_newline(text: str, delimiter: str) -> bool:
    """Whether a quoted field in the sample spans lines (parsing must then be quote-aware)."""
    try:
        for record in pycsv.reader(io.StringIO(text[:65536]), delimiter=delimiter):
            if any("\n" in value for value in record):
                return True
    except pycsv.Error:
        return False
    return False
