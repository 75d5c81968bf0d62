"""The data structure ``inspect`` returns, and the checks shared by every format.

A report is plain data (``to_dict()`` is JSON-able) so that the CLI's table,
its ``--json`` output and Python callers all see the same facts. Warnings
name what will hurt training and the fix, in the project's one shape.
"""

from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass, field
from typing import Any, Sequence

import numpy as np
import pyarrow as pa

from ..core_ragged import Ragged
from ..errors import SchemaError, describe
from ..files.arrow import ColumnPolicy, Where, column_to_numpy

TINY_FILE_BYTES = 1 << 20  # files smaller than this cost more in opening than in reading
TINY_FILE_COUNT = 100  # ... and this many of them is worth a warning
RARE_CLASS_SAMPLES = 10
_INDEX_NAME = re.compile(r"^(__index_level_\d+__|Unnamed: ?0|index|level_0)$", re.IGNORECASE)


@dataclass
class InspectWarning:
    """One thing that will hurt training: a stable ``code`` and a message with the fix."""

    # one of: index_column, schema_drift, row_group_too_large, tiny_files, rare_class, unreadable_files,
    # mixed_image_modes
    code: str
    message: str


@dataclass
class Column:
    """One column (or dataset, or feature): its type, nulls and a few sample values."""

    name: str
    type: str
    nulls: int | None = None  # None: unknown; counted in the sample unless nulls_exact
    nulls_exact: bool = False
    samples: list = field(default_factory=list)
    shape: list[int] | None = None  # per-row shape for array columns


@dataclass
class InspectReport:
    """What ``streamfeed inspect`` found; ``details`` holds the format's own facts."""

    path: str
    format: str
    files: list[dict] = field(default_factory=list)  # {"path", "bytes"}; only the first 50 when there are many
    file_count: int = 0
    total_bytes: int = 0
    rows: int | None = None
    rows_exact: bool = False
    columns: list[Column] = field(default_factory=list)
    details: dict = field(default_factory=dict)
    size_histogram: list[dict] | None = None
    warnings: list[InspectWarning] = field(default_factory=list)
    quality: dict | None = None

    def warn(
        self, code: str, problem: str, *, where: str | None = None, found: str | None = None, fix: str | None = None
    ) -> None:
        self.warnings.append(InspectWarning(code, describe(problem, where=where, found=found, fix=fix)))

    @property
    def warning_codes(self) -> list[str]:
        return [warning.code for warning in self.warnings]

    def to_dict(self) -> dict:
        return _jsonable(asdict(self))


@dataclass
class QualityReport:
    """What one quality pass over the data found (:mod:`streamfeed.inspect.quality`); ``to_dict()`` is JSON-able."""

    rows: int = 0
    columns: dict[str, dict] = field(default_factory=dict)
    duplicates: dict | None = None
    label: dict | None = None
    row_order: dict[str, float] = field(default_factory=dict)  # Spearman rho of column vs row number
    images: dict | None = None
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return _jsonable(asdict(self))


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(key): _jsonable(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(item) for item in value]
    if isinstance(value, (bytes, bytearray)):
        text = bytes(value[:32])
        return (
            text.hex()
            if any(b < 32 or b > 126 for b in text)
            else text.decode("ascii") + ("…" if len(value) > 32 else "")
        )
    if isinstance(value, np.generic):
        return _jsonable(value.item())
    if isinstance(value, np.ndarray):
        return _jsonable(value.tolist())
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return str(value)


# ----------------------------------------------------------------------- shared
def add_files(report: InspectReport, paths: Sequence[str], sizes: Sequence[int]) -> None:
    """Files, total bytes, a size histogram when there are many, and the tiny-files warning."""
    report.file_count = len(paths)
    report.total_bytes = int(sum(sizes))
    report.files = [{"path": path, "bytes": int(size)} for path, size in list(zip(paths, sizes))[:50]]
    if len(sizes) > 10:
        report.size_histogram = size_histogram(sizes)
    tiny = sum(1 for size in sizes if size < TINY_FILE_BYTES)
    if tiny >= TINY_FILE_COUNT and tiny > len(sizes) / 2:
        report.warn(
            "tiny_files",
            f"{tiny} of {len(sizes)} files are smaller than {TINY_FILE_BYTES >> 20} MiB",
            where=report.path,
            found=f"median file size {int(np.median(sizes)):,} bytes",
            fix=(
                "opening a file costs more than reading it; "
                "merge them with `streamfeed convert` into shards of 100 MiB or more"
            ),
        )


def size_histogram(sizes: Sequence[int]) -> list[dict]:
    """File counts per power-of-two size bin (``[low, high)`` bytes)."""
    values = np.maximum(np.asarray(sizes, dtype=np.float64), 1)
    exponents = np.floor(np.log2(values)).astype(int)
    bins, counts = np.unique(exponents, return_counts=True)
    return [{"low": 1 << int(b) if b else 0, "high": 1 << (int(b) + 1), "files": int(c)} for b, c in zip(bins, counts)]


def index_like(name: str, values: np.ndarray | None, *, first_row: int = 0) -> bool:
    """A column named like a written-out index, or integers counting 0, 1, 2, ... from the first row."""
    if _INDEX_NAME.match(name):
        return True
    if values is None or len(values) < 3 or isinstance(values, Ragged):
        return False
    values = np.asarray(values)
    if values.ndim != 1 or values.dtype.kind not in "iu":
        return False
    return bool(values[0] == first_row and np.all(np.diff(values) == 1))


def warn_index(report: InspectReport, name: str, where: str) -> None:
    report.warn(
        "index_column",
        f"Column {name!r} looks like a row index (named like one, or counting 0, 1, 2, ...)",
        where=where,
        fix="leave it out of the features (columns=[...]); a model can learn the row order from it",
    )


def warn_rare_classes(report: InspectReport, counts: dict[str, int], where: str) -> None:
    rare = {name: count for name, count in counts.items() if count < RARE_CLASS_SAMPLES}
    if rare and len(counts) > 1:
        report.warn(
            "rare_class",
            f"{len(rare)} class(es) have fewer than {RARE_CLASS_SAMPLES} samples",
            where=where,
            found=", ".join(f"{name}: {count}" for name, count in sorted(rare.items(), key=lambda item: item[1])[:10]),
            fix="collect more samples, merge or drop those classes, or weight them in the loss",
        )


def sample_column(column: pa.Array | pa.ChunkedArray, name: str, where: str) -> np.ndarray:
    """Sample rows of an Arrow column as NumPy, converted as the sources convert them.

    Lists of varying length (which the pipeline needs padded) and types
    NumPy cannot hold natively are shown as an object array of their values.
    """
    chunked = column if isinstance(column, pa.ChunkedArray) else pa.chunked_array([column])
    try:
        values = column_to_numpy(chunked, name, ColumnPolicy(), Where(where))
        if isinstance(values, Ragged):  # a list column: its rows, each an array
            rows = np.empty(len(values), dtype=object)
            rows[:] = [values.row(index) for index in range(len(values))]
            return rows
        return values
    except (SchemaError, pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return np.array(chunked.to_pylist(), dtype=object)


def sample_values(values: np.ndarray, count: int) -> list:
    """Up to ``count`` values, JSON-able (arrays shown by shape, bytes shortened)."""
    out = []
    for value in values[:count]:
        if isinstance(value, np.ndarray) and value.size > 8:
            out.append(f"array{list(value.shape)}")
        else:
            out.append(_jsonable(value))
    return out


def human_size(value: float) -> str:
    """Bytes as people read them: ``1,234 B``, ``10.3 KiB``, ``2.0 GiB`` (the console and the HTML report agree)."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024 or unit == "TiB":
            return f"{value:,.0f} {unit}" if unit == "B" else f"{value:,.1f} {unit}"
        value /= 1024
    return str(value)
