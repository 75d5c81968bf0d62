"""One parallel pass over a dataset's fragments that produces :class:`Stats`.

Fragments are read in a thread pool (``read_fragment`` with the dataset's
per-fragment ops and error policy) and each is summarised in its thread;
the summaries are merged in fragment order on the calling thread. At most
``2 * threads`` fragments are in flight, so memory does not grow with the
dataset. Because merges happen in a fixed order, every statistic is
bit-identical whatever ``threads`` is — except KLL quantiles, which
DataSketches randomises (see ``sketches.py``); they stay within the bound.

Shuffle, batch and shard settings of the dataset are ignored: statistics
describe every row of the source after its per-fragment ``map``/``filter``.
"""

from __future__ import annotations

import collections
import concurrent.futures
import logging
import os
from typing import Any, Callable, Iterable, Sequence

import numpy as np

from ..core import chunk_len
from ..errors import describe
from ..runtime.reader import read_fragment
from .accumulate import ColumnAccumulator, column_kind, dtype_name
from .io import source_record
from .result import ColumnStats, Stats
from .vocabulary import count_values, value_type

logger = logging.getLogger("streamfeed")

Progress = Callable[[int, int], None]  # (fragments done, fragments total)


class _FragmentSummary:
    def __init__(self) -> None:
        self.rows = 0
        self.columns: dict[str, ColumnAccumulator] = {}
        self.labels: dict[Any, int] = {}


def _summarise(chunk: dict[str, np.ndarray] | None, names: Sequence[str] | None, options: dict) -> _FragmentSummary:
    summary = _FragmentSummary()
    if chunk is None:
        return summary
    summary.rows = chunk_len(chunk)
    for name in names if names is not None else chunk:
        if name not in chunk:
            raise KeyError(describe(f"No column {name!r} in the data", expected=f"one of {sorted(chunk)}", fix="check columns= and label="))
        values = chunk[name]
        kind = column_kind(name, values, options["categorical"])
        accumulator = ColumnAccumulator(name, kind, dtype_name(values), max_vocabulary=options["max_vocabulary"], quantile_k=options["quantile_k"])
        accumulator.add(values)
        summary.columns[name] = accumulator
    label = options["label"]
    if label is not None:
        if label not in chunk:
            raise KeyError(describe(f"No label column {label!r} in the data", expected=f"one of {sorted(chunk)}", fix="check label="))
        values = chunk[label]
        if values.dtype.kind == "f":
            values = values[~np.isnan(values)]
        uniques, counts = count_values(values[np.not_equal(values, None)] if values.dtype.kind == "O" else values)
        summary.labels = dict(zip(uniques, counts))
    return summary


def _merge(total: _FragmentSummary, part: _FragmentSummary) -> None:
    total.rows += part.rows
    for name, accumulator in part.columns.items():
        if name in total.columns:
            total.columns[name].merge(accumulator)
        else:
            total.columns[name] = accumulator
    for value, count in part.labels.items():
        total.labels[value] = total.labels.get(value, 0) + count


def _ordered(pool: concurrent.futures.Executor, work: Callable, items: Sequence, ahead: int) -> Iterable:
    """``work(item)`` for each item, results in order, at most ``ahead`` in flight."""
    pending: collections.deque = collections.deque()
    upcoming = iter(items)
    for item in upcoming:
        pending.append(pool.submit(work, item))
        if len(pending) >= ahead:
            break
    while pending:
        result = pending.popleft().result()
        item = next(upcoming, None)
        if item is not None:
            pending.append(pool.submit(work, item))
        yield result


def compute_stats(
    dataset: Any,
    *,
    columns: Sequence[str] | None = None,
    categorical: Sequence[str] | None = None,
    label: str | None = None,
    max_vocabulary: int = 100_000,
    quantile_k: int = 200,
    threads: int | None = None,
    progress: Progress | None = None,
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
        max_vocabulary: distinct values kept exactly per categorical column;
            beyond it a frequent-items sketch estimates the top values.
        quantile_k: the KLL sketch size (200: 1.33 % rank error).
        threads: read and summarise threads (default: min(4, CPUs)).
        progress: called with (fragments done, total) after each fragment.
    """
    fragments = list(dataset.source.fragments)
    threads = max(1, threads or min(4, os.cpu_count() or 1))
    names = None if columns is None else list(dict.fromkeys([*columns, *([label] if label else [])]))
    options = {"categorical": set(categorical or ()), "max_vocabulary": int(max_vocabulary), "quantile_k": int(quantile_k), "label": label}

    def work(fragment: Any) -> _FragmentSummary:
        chunk = read_fragment(fragment, dataset.row_ops, dataset.on_error, dataset.report)
        return _summarise(chunk, names, options)

    total = _FragmentSummary()
    with concurrent.futures.ThreadPoolExecutor(threads, thread_name_prefix="streamfeed-stats") as pool:
        for done, part in enumerate(_ordered(pool, work, fragments, 2 * threads), 1):
            _merge(total, part)
            if progress is not None:
                progress(done, len(fragments))
    logger.info("stats: %d rows in %d fragments", total.rows, len(fragments))
    ordered = names if names is not None else list(total.columns)
    result_columns = {name: ColumnStats.from_dict(total.columns[name].to_record()) for name in ordered if name in total.columns}
    labels = None
    label_type = None
    if label is not None:
        label_type = value_type(list(total.labels))
        labels = dict(sorted(total.labels.items(), key=lambda item: item[0]))
    return Stats(rows=total.rows, columns=result_columns, label=label, label_counts=labels, source=source_record(dataset), label_type=label_type)
