"""The data-quality report: one streaming pass that finds what silently hurts training.

Tabular data: null/NaN/inf rates and constant columns per column,
duplicate rows (approximate: a HyperLogLog sketch over vectorised row
hashes, never an in-memory set of rows), the label's distribution and
imbalance, and columns correlated with the row order (Spearman against the
row number on a thinned sample: a file sorted by label or time must be
shuffled). Images: undecodable files, mode and size outliers, near-black
and near-white images, a blur estimate (variance of the Laplacian) and
exact duplicate files (content hashes).
"""

from __future__ import annotations

import collections
import logging
import math
import os
from dataclasses import asdict, dataclass, field
from typing import Any, Iterator

import numpy as np

from .errors import require
from .inspect.image_quality import image_quality
from .inspect.report import _jsonable, arrow_to_numpy, progress

logger = logging.getLogger("streamfeed")

HLL_LG_K = 14  # 2**14 registers: relative standard error 1.04 / 2**7 = 0.81 %
ORDER_SAMPLE = 65_536  # rows kept (evenly thinned) for the row-order correlation
ORDER_THRESHOLD = 0.3  # |Spearman rho| with the row number above which a column is flagged
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


@dataclass
class QualityReport:
    """What one pass over the data found; ``to_dict()`` is JSON-able."""

    rows: int = 0
    columns: dict[str, dict] = field(default_factory=dict)
    duplicates: dict | None = None
    label: dict | None = None
    row_order: dict[str, float] = field(default_factory=dict)  # Spearman rho of column vs row number
    images: dict | None = None
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return _jsonable(asdict(self))


# ------------------------------------------------------------------ hashing
def _mix(h: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser, vectorised (uint64 arithmetic wraps)."""
    with np.errstate(over="ignore"):
        h = (h ^ (h >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        h = (h ^ (h >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return h ^ (h >> np.uint64(31))


def column_hash(values: np.ndarray) -> np.ndarray:
    """One uint64 per row from the row's bytes, vectorised over rows.

    Strings and bytes become fixed-width arrays first, so equal values hash
    equally; every 8-byte word is mixed and the words are combined with
    per-position multipliers, then mixed once more.
    """
    n = len(values)
    if values.dtype.kind == "O":
        try:
            values = values.astype("U") if any(isinstance(v, str) for v in values[:16]) else values.astype("S")
        except (TypeError, ValueError):
            values = np.array([repr(v) for v in values], dtype="U")
    if values.dtype.kind == "f":
        values = values + 0.0  # -0.0 -> 0.0
    raw = np.ascontiguousarray(values).reshape(n, -1).view(np.uint8).reshape(n, -1)
    width = raw.shape[1]
    if width % 8:
        raw = np.concatenate([raw, np.zeros((n, 8 - width % 8), dtype=np.uint8)], axis=1)
    words = raw.view(np.uint64)
    with np.errstate(over="ignore"):
        weights = _mix(np.arange(1, words.shape[1] + 1, dtype=np.uint64) * _GOLDEN) | np.uint64(1)
        h = (_mix(words ^ _GOLDEN) * weights).sum(axis=1, dtype=np.uint64)
        return _mix(h + np.uint64(width))


def row_hash(chunk: dict[str, np.ndarray]) -> np.ndarray:
    """One uint64 per row over all columns of a chunk."""
    h = None
    with np.errstate(over="ignore"):
        for name in sorted(chunk):
            column = column_hash(np.asarray(chunk[name]))
            h = column if h is None else _mix(h * _GOLDEN + column)
    return h if h is not None else np.zeros(0, dtype=np.uint64)


# ------------------------------------------------------------------ ranks
def average_ranks(values: np.ndarray) -> np.ndarray:
    """Ranks 0..n-1 with ties given their average rank (as Spearman's rho needs)."""
    _, inverse, counts = np.unique(values, return_inverse=True, return_counts=True)
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    return (starts + (counts - 1) / 2.0)[inverse.ravel()]


def spearman_with_order(values: np.ndarray) -> float:
    """Spearman's rho of ``values`` (in row order) against the row number."""
    finite = np.isfinite(values) if values.dtype.kind == "f" else np.ones(len(values), dtype=bool)
    values = values[finite]
    if len(values) < 3:
        return 0.0
    ranks = average_ranks(values)
    order = np.flatnonzero(finite).astype(np.float64)
    if ranks.std() == 0:
        return 0.0
    return float(np.corrcoef(ranks, order)[0, 1])


class _Thinned:
    """Every ``stride``-th row (by global row number), the stride doubling to stay within ``capacity``."""

    def __init__(self, capacity: int) -> None:
        self.capacity, self.stride, self.parts, self.kept = capacity, 1, collections.defaultdict(list), 0

    def add(self, start: int, chunk: dict[str, np.ndarray]) -> None:
        rows = np.arange(start, start + len(next(iter(chunk.values()))))
        take = rows % self.stride == 0
        for name, column in chunk.items():
            self.parts[name].append(column[take])
        self.parts["__row__"].append(rows[take])
        self.kept += int(take.sum())
        if self.kept > self.capacity:
            self.stride *= 2
            merged = {name: np.concatenate(parts) for name, parts in self.parts.items()}
            keep = merged["__row__"] % self.stride == 0
            self.parts = collections.defaultdict(list, {name: [column[keep]] for name, column in merged.items()})
            self.kept = int(keep.sum())

    def columns(self) -> dict[str, np.ndarray]:
        return {name: np.concatenate(parts) for name, parts in self.parts.items() if name != "__row__"}


# ------------------------------------------------------------------ tabular
def _chunks(data: Any, format_name: str | None) -> Iterator[tuple[dict[str, np.ndarray], dict[str, int]]]:
    """(chunk, nulls per column) in source order: a Dataset's fragments, or Arrow batches of a path."""
    from .pipeline import Dataset
    from .runtime.reader import read_fragment

    if isinstance(data, Dataset):
        for fragment in data.source.fragments:
            chunk = read_fragment(fragment, data.row_ops, data.on_error, data.report)
            if chunk is not None:
                yield chunk, {}
        return
    import pyarrow as pa
    import pyarrow.csv as pacsv
    import pyarrow.dataset as pads

    if format_name == "csv":
        from .sources.csv import read_csv

        source = read_csv(data, nulls="fill", fill=0).source
        csv_format = pads.CsvFileFormat(parse_options=pacsv.ParseOptions(delimiter=source.delimiter))
        arrow = pads.dataset(list(source.files), format=csv_format, schema=source.schema)
    else:
        arrow = pads.dataset(data, format="parquet", partitioning="hive", exclude_invalid_files=False)
    for batch in arrow.to_batches():
        nulls = {name: batch.column(name).null_count for name in batch.schema.names}
        chunk = {}
        for name in batch.schema.names:
            column = batch.column(name)
            if pa.types.is_integer(column.type) and column.null_count:
                column = column.cast(pa.float64())
            chunk[name] = arrow_to_numpy(column)
        yield chunk, nulls


MAX_LABEL_CLASSES = 10_000


class _LabelSummary:
    """The label's distribution in memory that does not grow with the rows.

    A floating-point label is a regression target: its moments and range,
    not value counts. A discrete label is counted per class until it has
    more than ``MAX_LABEL_CLASSES`` classes; past that it is reported as
    having too many classes to be a class label.
    """

    def __init__(self) -> None:
        self.counts: collections.Counter = collections.Counter()
        self.too_many = False
        self.continuous: dict[str, float] | None = None

    def add(self, values: np.ndarray) -> None:
        if values.dtype.kind == "f":
            finite = values[np.isfinite(values)].astype(np.float64)
            moments = self.continuous or {"count": 0, "sum": 0.0, "sum_sq": 0.0, "min": np.inf, "max": -np.inf}
            if finite.size:
                moments["count"] += int(finite.size)
                moments["sum"] += float(finite.sum())
                moments["sum_sq"] += float(np.square(finite).sum())
                moments["min"] = min(moments["min"], float(finite.min()))
                moments["max"] = max(moments["max"], float(finite.max()))
            self.continuous = moments
            return
        if self.too_many:
            return
        keys, counts = np.unique(values, return_counts=True)
        self.counts.update(dict(zip(keys.tolist(), counts.tolist())))
        if len(self.counts) > MAX_LABEL_CLASSES:
            self.too_many, self.counts = True, collections.Counter()

    def result(self, column: str | None) -> dict | None:
        if self.continuous is not None and self.continuous["count"]:
            m = self.continuous
            mean = m["sum"] / m["count"]
            return {"column": column, "kind": "continuous", "mean": mean,
                    "std": max(m["sum_sq"] / m["count"] - mean * mean, 0.0) ** 0.5, "min": m["min"], "max": m["max"]}
        if self.too_many:
            return {"column": column, "kind": "discrete", "classes": f"more than {MAX_LABEL_CLASSES:,}"}
        if not self.counts:
            return None
        counts = dict(sorted(self.counts.items(), key=lambda item: -item[1]))
        return {"column": column, "kind": "classes", "counts": counts, "imbalance_ratio": max(counts.values()) / min(counts.values())}


def quality_report(
    data: Any,
    *,
    format: str | None = None,  # noqa: A002
    label: str | None = None,
    max_rows: int | None = None,
    progress_bar: bool | None = None,
) -> QualityReport:
    """One streaming pass over ``data`` (a :class:`streamfeed.Dataset` or a path).

    For a Dataset the rows are those its source yields (its null policy
    applies, so ``nulls="raise"`` stops at the first null: pass a path, or
    a dataset with ``nulls="fill"``, to count them). Paths of Parquet and
    CSV are read through Arrow, which counts nulls before any policy.
    Image folders (or a dataset of ``read_images``) get the image report.

    Duplicates are estimated with a HyperLogLog sketch (``lg_k=14``, relative
    standard error 0.81 % of the distinct count; exact below a few hundred
    distinct rows): ``duplicates = rows - distinct``.
    """
    from .pipeline import Dataset
    from .sources.images import ImageSource

    if isinstance(data, Dataset) and isinstance(data.source, ImageSource):
        return image_quality(list(data.source.files), progress_bar=progress_bar)
    if not isinstance(data, Dataset):
        from .sources.detect import detect_format, reader_for

        format = format or detect_format(data)
        if format == "images":
            from .sources.images import _list_images

            root = os.path.abspath(os.fspath(data))
            has_classes = any(entry.is_dir() for entry in os.scandir(root))
            return image_quality(_list_images(root, "inferred" if has_classes else None).files, progress_bar=progress_bar)
        if format not in ("parquet", "csv"):
            data = reader_for(format)(data)
    datasketches = require("datasketches", "quality")
    sketch = datasketches.hll_sketch(HLL_LG_K)
    report = QualityReport()
    stats: dict[str, dict] = {}
    thinned = _Thinned(ORDER_SAMPLE)
    labels = _LabelSummary()
    firsts: dict[str, Any] = {}
    rows = 0
    with progress(None, "quality pass (rows)", enabled=progress_bar if progress_bar is not None else None) as advance:
        for chunk, nulls in _chunks(data, format):
            n = len(next(iter(chunk.values()), []))
            if max_rows is not None and rows + n > max_rows:
                chunk, n = {name: column[: max_rows - rows] for name, column in chunk.items()}, max_rows - rows
            if n == 0:
                break
            for name, column in chunk.items():
                entry = stats.setdefault(name, {"nulls": 0, "nan": 0, "inf": 0, "constant": True, "dtype": str(column.dtype)})
                entry["nulls"] += nulls.get(name, 0)
                if column.dtype.kind in "fc":
                    nan = np.isnan(column)
                    entry["nan"] += int(nan.sum()) - (nulls.get(name, 0) if column.ndim == 1 else 0)
                    entry["inf"] += int(np.isinf(column).sum())
                if entry["constant"]:
                    first = firsts.setdefault(name, column[0])
                    same = column == first
                    if column.dtype.kind == "f":
                        same |= np.isnan(column) & np.isnan(first)
                    entry["constant"] = bool(np.all(same))
            collections.deque(map(sketch.update, row_hash(chunk).view(np.int64).tolist()), maxlen=0)
            plain = {name: column for name, column in chunk.items() if column.ndim == 1 and column.dtype.kind in "iufb"}
            if plain:
                thinned.add(rows, plain)
            if label is not None and label in chunk:
                labels.add(chunk[label])
            rows += n
            advance(n)
            if max_rows is not None and rows >= max_rows:
                break
    report.rows = rows
    for name, entry in stats.items():
        report.columns[name] = {
            "dtype": entry["dtype"],
            "null_rate": entry["nulls"] / rows if rows else 0.0,
            "nan_rate": max(entry["nan"], 0) / rows if rows else 0.0,
            "inf_rate": entry["inf"] / rows if rows else 0.0,
            "constant": entry["constant"] and rows > 1,
        }
        if report.columns[name]["constant"]:
            report.warnings.append(f"column {name!r} is constant: it carries no information")
    distinct = sketch.get_estimate()
    report.duplicates = {
        "estimated": max(0, round(rows - distinct)),
        "range_95": [max(0, math.floor(rows - sketch.get_upper_bound(2))), max(0, math.ceil(rows - sketch.get_lower_bound(2)))],
        "distinct_estimate": round(distinct),
        "method": f"HyperLogLog lg_k={HLL_LG_K} over 64-bit row hashes (relative standard error 0.81 % of distinct rows)",
    }
    if report.duplicates["range_95"][0] > 0:
        report.warnings.append(f"about {report.duplicates['estimated']:,} duplicate rows ({report.duplicates['estimated'] / rows:.1%})")
    for name, column in thinned.columns().items():
        rho = spearman_with_order(column.astype(np.float64) if column.dtype.kind == "b" else column)
        report.row_order[name] = round(rho, 4)
        if abs(rho) >= ORDER_THRESHOLD:
            report.warnings.append(f"column {name!r} follows the row order (Spearman rho {rho:+.2f}): the data is sorted; shuffle it (.shuffle(seed=...)) or rewrite it shuffled")
    report.label = labels.result(label)
    ratio = (report.label or {}).get("imbalance_ratio")
    if ratio is not None and ratio >= 10:
        report.warnings.append(f"label {label!r} is imbalanced: the largest class has {ratio:.0f}x the rows of the smallest")
    for name, column in report.columns.items():
        for kind in ("null_rate", "nan_rate", "inf_rate"):
            if column[kind] > 0:
                report.warnings.append(f"column {name!r} has {kind.split('_')[0]} values in {column[kind]:.2%} of rows")
    return report

