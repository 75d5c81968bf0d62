"""One parallel pass over a dataset's fragments that produces :class:`Stats`.

Fragments are read by the dataset's one fragment pass
(``Dataset.fragment_pass``: the per-fragment ops, the error policy and the
decode bound, in a bounded thread pool) and each is summarised in its thread;
the summaries are merged in fragment order on the calling thread. At most
``2 * threads`` fragments are in flight, so memory does not grow with the
dataset. Because merges happen in a fixed order, every statistic is
bit-identical whatever ``threads`` is, quantiles included: they come from
a sample selected by hashing value positions (fragment index, index in
the fragment), whose content does not depend on timing (see
``sketches.py``). Only the opt-in ``quantiles="kll"`` is randomised by
DataSketches (within its bound).

Cost per value: moments, min/max and NaN counts ~1.5 ns (vectorised, in
the read threads); the quantile sample one shared hash per row plus a
gather of the kept values; HLL distinct counts ~10 ns a value (integers of
a small range: a counting pass and one hash per distinct value), hence only
on integer columns by default (``distinct=``); a string column's counts
~80 ns (pyarrow's conversion and hash count; 25 ns for a column handed as
an Arrow array). On a CSV of 2.5 M rows x 6 columns with a 1 000-value
string the pass costs 1.08-1.26x an iteration epoch's CPU (4.11x before issue 28;
``benchmarks/stats_csv.py``), nearly all of the rest in the CSV parse the
epoch pays too.

Shuffle, batch and shard settings of the dataset are ignored: statistics
describe every row of the source after its per-fragment ``map``/``filter``.

Dates and times are described in the units the pipeline yields them in,
float64 seconds since the epoch (UTC), so that a normalisation built from
the statistics fits what the model sees; ``ColumnStats.datetime`` names the
original type (from the source's schema, or a ``datetime64`` column's
dtype) and the JSON shows their range as ISO 8601 text.
"""

from __future__ import annotations

import concurrent.futures
import logging
from typing import Any, Callable, Sequence, cast

import numpy as np

from ..core import Chunk, Source, chunk_len
from ..errors import ArgumentError, SchemaError, UnknownNameError, describe
from ..files.arrow import temporal_columns
from ..memory import default_read_threads
from ..pipeline import Dataset
from ..sources.names import served_name
from .accumulate import (
    DISTINCT_MODES,
    QUANTILE_METHODS,
    VOCABULARY_CAP,
    ColumnAccumulator,
    column_kind,
    dtype_name,
    is_identifier,
    vocabulary_warning,
)
from .io import source_record
from .result import ColumnStats, Stats
from .sequences import SequenceAccumulator, is_list_column, list_dtype
from .sketches import NO_THRESHOLD, QUANTILE_SAMPLE, PositionSampler
from .vocabulary import count_present, is_arrow_text, value_type

logger = logging.getLogger("streamfeed")

Progress = Callable[[int, int], None]  # (fragments done, fragments total)


class _FragmentSummary:
    def __init__(self) -> None:
        self.rows = 0
        self.columns: dict[str, ColumnAccumulator | SequenceAccumulator] = {}
        self.labels: dict[Any, int] = {}


def _summarise(
    chunk: Chunk | None, names: Sequence[str] | None, options: dict, sampler: PositionSampler
) -> _FragmentSummary:
    summary = _FragmentSummary()
    if chunk is None:
        return summary
    summary.rows = chunk_len(chunk)
    for name in names if names is not None else chunk:
        if name not in chunk:
            raise UnknownNameError(
                describe(
                    f"No column {name!r} in the data",
                    expected=f"one of {sorted(chunk)}",
                    fix="check columns= and label=",
                )
            )
        values = chunk[name]
        accumulator = _new_accumulator(name, values, options)
        accumulator.add(values, sampler)
        summary.columns[name] = accumulator
    label = options["label"]
    if label is not None:
        if label not in chunk:
            raise UnknownNameError(
                describe(
                    f"No label column {label!r} in the data", expected=f"one of {sorted(chunk)}", fix="check label="
                ),
                cli_fix="check --label",
            )
        values = chunk[label]
        if _is_float(values):
            values = values[~np.isnan(values)]
        uniques, counts, _ = count_present(values)
        summary.labels = dict(zip(uniques, counts))
    return summary


def _new_accumulator(name: str, values: Any, options: dict) -> "ColumnAccumulator | SequenceAccumulator":
    """The accumulator of one column: a list column's describes its lengths and, as a column, its elements."""
    if is_list_column(values):
        tokens = {name} if values.values.dtype.kind in "iub" else set()  # integer elements: ids, a vocabulary
        element_options = {**options, "temporal": {}, "categorical": options["categorical"] | tokens}
        element = _new_accumulator(name, values.values, element_options)
        return SequenceAccumulator(name, list_dtype(values), cast(ColumnAccumulator, element))
    return ColumnAccumulator(
        name,
        column_kind(name, values, options["categorical"]),
        dtype_name(values),
        max_vocabulary=options["max_vocabulary"],
        quantile_k=options["quantile_k"],
        quantiles=options["quantiles"],
        quantile_sample=options["quantile_sample"],
        distinct=options["distinct"],
        datetime=options["temporal"].get(name) if _is_float(values) else None,
        vocabulary_cap=options["vocabulary_cap"],
        named=name in options["categorical"],
        identifier=is_identifier(name, values, options["categorical"]),
    )


def _is_float(values: Any) -> bool:
    return not is_arrow_text(values) and values.dtype.kind == "f"


def _merge(total: _FragmentSummary, part: _FragmentSummary) -> int:
    """Adds ``part`` into ``total``; returns a key threshold every column's final sample is under."""
    total.rows += part.rows
    cache: dict = {}  # one sample partition shared by the columns with the same keys
    for name, accumulator in part.columns.items():
        existing = total.columns.get(name)
        if existing is None:
            total.columns[name] = accumulator
        elif isinstance(existing, SequenceAccumulator) and isinstance(accumulator, SequenceAccumulator):
            existing.merge(accumulator, cache)
        elif isinstance(existing, ColumnAccumulator) and isinstance(accumulator, ColumnAccumulator):
            existing.merge(accumulator, cache)
        else:
            raise SchemaError(
                describe(
                    f"Column {name!r} holds lists in some fragments and single values in others",
                    expected="one type per column in every file",
                    fix="read the files separately, or map the column to one type",
                )
            )
    for value, count in part.labels.items():
        total.labels[value] = total.labels.get(value, 0) + count
    samples = [a.sample for a in total.columns.values() if a.sample is not None]
    return int(max(s.threshold for s in samples)) if samples else NO_THRESHOLD


def compute_stats(
    dataset: Dataset,
    *,
    columns: Sequence[str] | None = None,
    categorical: Sequence[str] | None = None,
    label: str | None = None,
    max_vocabulary: int = 100_000,
    quantile_k: int = 200,
    threads: int | None = None,
    progress: Progress | None = None,
    quantiles: str = "sample",
    quantile_sample: int = QUANTILE_SAMPLE,
    distinct: str = "categorical",
    vocabulary_cap: int = VOCABULARY_CAP,
) -> Stats:
    """Statistics of every column of ``dataset`` in one streaming pass.

    Args:
        dataset: a streamfeed ``Dataset`` (from any ``read_*``); its
            per-fragment ``map``/``filter`` and ``on_error`` apply.
        columns: the columns to describe (default: all).
        categorical: columns counted as categories (strings, bytes and
            bools always are); e.g. integer ids.
        label: the label column, whose exact value counts become
            ``label_counts`` (it is also described as a column).
        max_vocabulary: distinct values counted exactly per categorical
            column; beyond it a frequent-items sketch estimates the top values.
        vocabulary_cap: values a stored vocabulary keeps, the most frequent
            (default 10,000); the rest are counted in ``oov_count``. A
            column whose values are mostly distinct (more than 1,000, and
            more than half of its values: an identifier, free text or a date
            kept as text) keeps 100, unless it is named in ``categorical``;
            a text column named ``path``, ``file`` or ``filename`` (where a
            row came from: ``read_images``' ``path``) gets no vocabulary
            (``None``; its values are counted) unless it is named there.
            A truncated vocabulary says so (``vocabulary_truncated``, with
            ``vocabulary_cap``) and adds a warning to ``Stats.warnings``
            (also logged), with a hint when the values look like dates.
        quantile_k: the KLL sketch size with ``quantiles="kll"`` (200: 1.33 %
            rank error for one quantile).
        threads: read and summarise threads (default: min(4, CPUs)).
        progress: called with (fragments done, total) after each fragment.
        quantiles: ``"sample"`` (default): exact quantiles of a deterministic
            position-hashed sample of ``quantile_sample`` values per column —
            exact for smaller columns, else within the DKW bound (0.64 % in
            rank for all quantiles at once, 99 % confidence, at 65 536) plus
            0.05 % for the stored grid; identical whatever ``threads``.
            ``"kll"``: a DataSketches KLL sketch of every value (~35 ns a
            value; randomised by DataSketches, so not bit-reproducible).
            ``"none"``: no quantiles. The bound is ``quantile_rank_error``.
        quantile_sample: values kept per column for ``quantiles="sample"``.
        distinct: which numeric columns get a HyperLogLog distinct count
            (~1.6 % standard error, ~35 ns a value): ``"categorical"``
            (default: integer columns; categorical columns always count
            their vocabulary), ``"all"`` (floats too) or ``"none"``.
    """
    if quantiles not in QUANTILE_METHODS:
        raise ArgumentError(describe(f"quantiles must be one of {QUANTILE_METHODS}", found=repr(quantiles)))
    if distinct not in DISTINCT_MODES:
        raise ArgumentError(describe(f"distinct must be one of {DISTINCT_MODES}", found=repr(distinct)))
    if vocabulary_cap < 1:
        raise ArgumentError(
            describe("vocabulary_cap counts the values a vocabulary keeps", expected=">= 1", found=str(vocabulary_cap))
        )
    if quantile_sample < 1:
        raise ArgumentError(
            describe("quantile_sample counts the values kept per column", expected=">= 1", found=str(quantile_sample))
        )
    fragments = list(dataset.source.fragments)
    threads = max(1, threads or default_read_threads())
    known = list(dataset.column_names)
    label = None if label is None else served_name(dataset.source, label, known)
    columns = None if columns is None else [served_name(dataset.source, name, known) for name in columns]
    names = None if columns is None else list(dict.fromkeys([*columns, *([label] if label else [])]))
    options: dict[str, Any] = {
        "categorical": set(categorical or ()),
        "max_vocabulary": int(max_vocabulary),
        "quantile_k": int(quantile_k),
        "label": label,
        "quantiles": quantiles,
        "quantile_sample": int(quantile_sample),
        "distinct": distinct,
        "vocabulary_cap": int(vocabulary_cap),
        "temporal": _temporal_columns(dataset.source),
    }
    # the best-known key threshold of the merged samples, read by the workers to
    # pre-filter positions; any value at or above the final one gives the same result
    state = {"threshold": NO_THRESHOLD}

    def summarise(index: int, chunk: Chunk) -> _FragmentSummary:
        return _summarise(chunk, names, options, PositionSampler(index, options["quantile_sample"], state["threshold"]))

    total = _FragmentSummary()
    parts = dataset.fragment_pass(summarise, threads=threads, name="stats", text_as_arrow=True)
    for done, part in enumerate(parts, 1):
        if part is not None:  # None: a fragment skipped as bad input (in the report)
            state["threshold"] = _merge(total, part)
        if progress is not None:
            progress(done, len(fragments))
    with concurrent.futures.ThreadPoolExecutor(threads, thread_name_prefix="streamfeed-stats") as pool:
        logger.info("stats: %d rows in %d fragments", total.rows, len(fragments))
        ordered = [name for name in (names if names is not None else list(total.columns)) if name in total.columns]
        cache: dict = {}
        for name in ordered:
            sample = total.columns[name].sample
            if sample is not None:
                sample.compact(cache)
        del cache
        # the records sort each column's sample: in the pool (NumPy sorts without the GIL)
        records = list(pool.map(lambda name: total.columns[name].to_record(), ordered))
    result_columns = {name: ColumnStats.from_dict(record) for name, record in zip(ordered, records)}
    general_cap = min(int(vocabulary_cap), int(max_vocabulary))
    warnings = [
        vocabulary_warning(record, identifier=record["vocabulary_cap"] < general_cap)
        for record in records
        if record["vocabulary_truncated"]
    ]
    for warning in warnings:
        logger.warning("stats: %s", warning)
    labels = None
    label_type = None
    if label is not None:
        label_type = value_type(list(total.labels))
        labels = dict(sorted(total.labels.items(), key=lambda item: item[0]))
    return Stats(
        rows=total.rows,
        columns=result_columns,
        label=label,
        label_counts=labels,
        source=source_record(dataset),
        label_type=label_type,
        warnings=warnings,
    )


def _temporal_columns(source: Source) -> dict[str, str]:
    """The columns an Arrow-backed source yields as seconds, with their Arrow types (none for other sources)."""
    return temporal_columns(source.info.schema)
