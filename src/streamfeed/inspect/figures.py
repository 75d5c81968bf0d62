"""What the HTML report draws that the inspect report does not hold: from a bounded sample, never the whole data.

Tabular data: up to ``SAMPLE_ROWS`` rows taken evenly from up to
``MAX_FRAGMENTS`` fragments spread over the whole source (first, last and
evenly between, within ``READ_BUDGET`` estimated decoded bytes, one
fragment in memory at a time), with their global row numbers; a CSV or
TFRecord file whose fragments do not all fit the budget is cut finer for
the sample, so that it covers the whole file. From them:
a histogram per numeric or date column, the most frequent values of the
other columns, nulls and NaN in the sample, and each numeric column's
median by row position (the picture of a sorted file); a column of
pictures (an HDF5 or NumPy array of height x width [x channels] per row)
gets thumbnails of a few rows and the histogram of its pixel values, as an
image folder's images are shown. The rows per fragment (row group) come
from the source's listing, not from reading.

Image folders: a few thumbnails per class, taken evenly from each class,
and, when the quality report is attached, the darkest, brightest and
blurriest images and the duplicate groups it found. Every thumbnail is
decoded through the sources' bounded decoder (the declared size is checked
against the limit before any pixel is decoded), at most ``THUMB_SIDE``
pixels a side, and inlined as a base64 JPEG: the page needs nothing but
itself. Only files the folder's listing holds are opened, whatever the
report's paths say.

Nothing here raises for the data's sake: what could not be sampled or
decoded is a note the page shows.
"""

from __future__ import annotations

import base64
import collections
import concurrent.futures
import io
import math
import operator
import os
from dataclasses import dataclass, field
from typing import Any, Sequence, cast

import numpy as np

from ..files.arrow import ColumnPolicy
from ..sources.detect import open_source
from ..sources.images.decode import DEFAULT_MAX_IMAGE_BYTES, DecodeSpec, decode, open_header, resolve_decoder
from ..sources.images.formats import pillow
from .image_files import IMAGE_FORMATS, ImageFiles, image_files
from .images import decode_failure
from .order import spearman_with_order
from .report import InspectReport

SAMPLE_ROWS = 20_000  # rows kept for the column figures
SAMPLE_CELLS = 2_000_000  # ... and at most this many values over all the columns drawn
MAX_FRAGMENTS = 128  # fragments read for the sample, spread over the source
READ_BUDGET = 256 << 20  # estimated decoded bytes read for the sample
MAX_COLUMNS = 60  # columns drawn (the rest are in the table)
TOP_K = 10  # values shown for a categorical column
DISCRETE_VALUES = 12  # integer columns with at most this many values get one bar per value
ORDER_BINS = 40  # row-position bins of the row-order plot
THUMB_SIDE = 96
THUMBS_PER_CLASS = 8
MAX_CLASSES = 24
EXTREMES = 5  # darkest, brightest, blurriest shown
MAX_DUPLICATE_GROUPS = 6
MAX_THUMB_FILE_BYTES = 64 << 20  # larger files are not read for a thumbnail
ARRAY_THUMBS = 6  # thumbnails of an image column (two rows of a column card)
PIXELS = 1_000_000  # pixel values of an image column's histogram, taken evenly from the sample
_THUMB_THREADS = 2

_CUT_FINER = ("csv", "tfrecord")  # formats whose source cuts fragments at any byte size (``fragment_bytes``)
_MIN_PIECE_BYTES = 64 << 10
_SOURCE_OPTIONS: dict[str, dict[str, Any]] = {  # nulls kept as masked values, counted apart from NaN
    "parquet": {"policy": ColumnPolicy(nulls="mask")},
    "csv": {"policy": ColumnPolicy(nulls="mask")},
}


@dataclass
class ColumnFigure:
    """One column's figures from the sample.

    ``kind``: ``numeric`` and ``datetime`` have ``edges``/``counts`` (a
    histogram; ``edge_labels`` as text) and ``order``; ``discrete`` (few
    integer values), ``categorical`` and ``bool`` have ``top`` (value,
    count) and ``other``; ``image`` (a picture per row: height x width,
    optionally 1, 3 or 4 channels) has ``thumbs`` and the histogram of its
    pixel values; ``other`` (other arrays per row) has none of these.
    """

    name: str
    kind: str
    dtype: str
    rows: int = 0
    nulls: int = 0
    nans: int = 0
    distinct: int | None = None
    edges: list[float] = field(default_factory=list)
    edge_labels: list[str] = field(default_factory=list)
    counts: list[int] = field(default_factory=list)
    outside: tuple[int, int] = (0, 0)  # values below and above the histogram's range (far outliers)
    top: list[tuple[str, int]] = field(default_factory=list)
    other: int = 0
    order: list[tuple[float, float, float]] = field(default_factory=list)  # (p10, median, p90) per position bin
    order_labels: tuple[str, str] = ("", "")  # how the order plot's lowest and highest values read
    rho: float | None = None  # Spearman rho with the row number, in the sample
    stats: dict[str, str] = field(default_factory=dict)  # min, median, max as text
    thumbs: list[Thumb] = field(default_factory=list)  # an image column's rows, as the image folder's are shown


@dataclass
class Thumb:
    """One image as the page shows it: ``uri`` is a data: URI, or None with ``error``."""

    path: str  # relative to the folder
    uri: str | None = None
    width: int = 0
    height: int = 0
    error: str | None = None
    caption: str = ""
    flagged: bool = False  # the quality report warns about it (near-black, near-white, blurry)


@dataclass
class Figures:
    """Everything the HTML page draws beyond the report; ``notes`` say what is missing and why."""

    sample_rows: int = 0
    total_rows: int | None = None
    fragments_read: int = 0
    fragment_count: int = 0  # of the sample's listing: the reader's fragments, or the pieces they were cut into
    cut_finer: bool = False  # the sample was read from the file cut finer than the reader's fragments
    columns: list[ColumnFigure] = field(default_factory=list)
    more_columns: int = 0
    fragment_rows: list[int] = field(default_factory=list)  # rows of every fragment, in source order
    row_bytes: float | None = None
    class_counts: dict[str, int] = field(default_factory=dict)
    classes: dict[str, list[Thumb]] = field(default_factory=dict)
    more_classes: int = 0
    extremes: dict[str, list[Thumb]] = field(default_factory=dict)  # darkest, brightest, blurriest
    duplicates: list[list[Thumb]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def compute_figures(report: InspectReport) -> Figures:
    """The figures of ``report``'s data (its ``path`` and ``format``), from a bounded sample."""
    figures = Figures(total_rows=report.rows)
    try:
        if report.format in IMAGE_FORMATS:
            _image_figures(report, figures)
        else:
            _tabular_figures(report, figures)
    except Exception as exc:  # noqa: BLE001 - a figure that cannot be drawn must not cost the whole page
        figures.notes.append(f"the figures could not be computed: {type(exc).__name__}: {exc}")
    return figures


# ----------------------------------------------------------------------------------------------- tabular
def _tabular_figures(report: InspectReport, figures: Figures) -> None:
    source = open_source(report.path, report.format, **_SOURCE_OPTIONS.get(report.format, {}))
    fragments = list(source.fragments)
    figures.fragment_rows = [int(fragment.num_rows) for fragment in fragments]
    figures.fragment_count = len(fragments)
    row_bytes = float(source.row_bytes or 0.0)
    figures.row_bytes = row_bytes or None
    names = list(source.column_names)
    drawn = names[:MAX_COLUMNS]
    figures.more_columns = len(names) - len(drawn)
    target = max(1000, min(SAMPLE_ROWS, SAMPLE_CELLS // max(1, len(drawn))))
    chosen = _spread_fragments(figures.fragment_rows, row_bytes)
    pieces = figures.fragment_rows
    if len(chosen) < len(fragments) and report.format in _CUT_FINER:
        fragments = list(_finer_source(report, row_bytes * sum(pieces)).fragments)
        pieces = [int(fragment.num_rows) for fragment in fragments]
        chosen, figures.cut_finer = _spread_fragments(pieces, row_bytes), True
        figures.fragment_count = len(fragments)
    starts = np.concatenate([[0], np.cumsum(pieces)]).astype(np.int64)
    chosen_rows = sum(pieces[i] for i in chosen)
    parts: dict[str, list[np.ndarray]] = collections.defaultdict(list)
    positions: list[np.ndarray] = []
    for index in chosen:
        try:
            chunk = fragments[index].read()
        except Exception as exc:  # noqa: BLE001 - a fragment that does not read is left out of the sample
            figures.notes.append(f"fragment {index} ({fragments[index].location}) was left out: {exc}"[:300])
            continue
        rows = len(next(iter(chunk.values()))) if chunk else 0
        if not rows:
            continue
        keep = max(1, math.ceil(target * pieces[index] / max(1, chosen_rows)))
        take = np.unique(np.linspace(0, rows - 1, min(rows, keep)).round().astype(np.int64))
        for name in drawn:
            if name in chunk:
                parts[name].append(chunk[name][take])
        positions.append(starts[index] + take)
        figures.fragments_read += 1
    if not positions:
        return
    rows_at = np.concatenate(positions)
    types = {column.name: column.type for column in report.columns}
    figures.sample_rows = len(rows_at)
    for name in drawn:
        if parts.get(name):
            figures.columns.append(_column_figure(name, _concat(parts.pop(name)), rows_at, types.get(name, "")))


def _finer_source(report: InspectReport, decoded_bytes: float) -> Any:
    """The source again, cut into pieces of about ``READ_BUDGET / MAX_FRAGMENTS`` decoded bytes each.

    Why: the budget reads only a few of the reader's fragments (5 of the 7
    of a 112 MiB CSV), and a column sorted by time then shows the fragments
    between as empty histogram bins. ``MAX_FRAGMENTS`` pieces spread evenly
    over the whole file read no more bytes and leave no gap wider than a
    bin. Costs a second scan of the file for the record boundaries (the
    count cache keeps it for the next run).
    """
    piece = READ_BUDGET / MAX_FRAGMENTS * report.total_bytes / max(1.0, decoded_bytes)
    options = {**_SOURCE_OPTIONS.get(report.format, {}), "fragment_bytes": max(_MIN_PIECE_BYTES, int(piece))}
    return open_source(report.path, report.format, **options)


def _spread_fragments(fragment_rows: Sequence[int], row_bytes: float) -> list[int]:
    """Indices of the fragments to read: all, or first, last and evenly between within the budgets."""
    count = len(fragment_rows)
    if not count:
        return []
    average = row_bytes * max(1.0, float(np.mean(fragment_rows)))
    limit = max(1, min(MAX_FRAGMENTS, int(READ_BUDGET // average) if average > 0 else MAX_FRAGMENTS))
    if count <= limit:
        return list(range(count))
    return sorted({int(i) for i in np.linspace(0, count - 1, limit).round()})


def _concat(parts: list[np.ndarray]) -> np.ndarray:
    if any(np.ma.isMaskedArray(part) for part in parts):
        return np.ma.concatenate(parts)
    return np.concatenate(parts)


def _column_figure(name: str, column: np.ndarray, rows_at: np.ndarray, arrow_type: str = "") -> ColumnFigure:
    """``arrow_type`` is the report's type of the column: a date or timestamp the source yields as float64
    seconds since the epoch is drawn as dates."""
    values = np.ma.getdata(column)
    masked = np.ma.getmaskarray(column) if np.ma.isMaskedArray(column) else np.zeros(len(values), dtype=bool)
    mask = np.asarray(masked.reshape(len(values), -1).any(axis=1), dtype=bool)  # a row with any null is null
    figure = ColumnFigure(name, "other", str(values.dtype), rows=len(values), nulls=int(mask.sum()))
    if values.ndim != 1:
        figure.dtype = f"{values.dtype} {list(values.shape[1:])}"
        if _image_like(values):
            _image_column(figure, values[~mask], rows_at[~mask])
        return figure
    present, at = values[~mask], rows_at[~mask]
    kind = values.dtype.kind
    if kind == "f":
        nan = np.isnan(present)
        figure.nans = int(nan.sum())
        present, at = present[~nan], at[~nan]
    if kind == "f" and arrow_type.startswith(("date", "timestamp")):
        figure.kind, figure.dtype = "datetime", arrow_type
        seconds = present[np.isfinite(present)]
        figure.distinct = len(np.unique(seconds))
        as_date = _date_text("s", seconds)
        _histogram(figure, seconds, as_date)
        _order(figure, seconds, at[np.isfinite(present)], as_date)
    elif kind in "iuf":
        distinct = np.unique(present)
        figure.distinct = len(distinct)
        if kind in "iu" and 0 < len(distinct) <= DISCRETE_VALUES:
            figure.kind = "discrete"
            counts = [(str(value), int(count)) for value, count in zip(*np.unique(present, return_counts=True))]
            figure.top = counts
        else:
            figure.kind = "numeric"
            _histogram(figure, present[np.isfinite(present)].astype(np.float64), _number)
        _order(figure, present.astype(np.float64), at, _number)
    elif kind == "M":
        figure.kind = "datetime"
        unit = np.datetime_data(values.dtype)[0]
        valid = present[~np.isnat(present)]
        at = at[~np.isnat(present)]
        figure.distinct = len(np.unique(valid))
        integers = valid.astype(np.int64).astype(np.float64)
        as_date = _date_text(unit, integers)
        _histogram(figure, integers, as_date)
        _order(figure, integers, at, as_date)
    else:
        figure.kind = "bool" if kind == "b" else "categorical"
        texts = [_label(value) for value in present.tolist()]
        counter = collections.Counter(texts)
        figure.distinct = len(counter)
        figure.top = counter.most_common(TOP_K)
        figure.other = len(texts) - sum(count for _, count in figure.top)
        if kind == "b":
            _order(figure, present.astype(np.float64), at, _number)
    return figure


def _histogram(figure: ColumnFigure, finite: np.ndarray, text: Any) -> None:
    """Bins over the range, or over the 1st-99th percentile when far outliers would squash the rest."""
    if not len(finite):
        return
    low, high = float(finite.min()), float(finite.max())
    p01, p50, p99 = (float(v) for v in np.percentile(finite, [1, 50, 99]))
    figure.stats = {"min": text(low), "median": text(p50), "max": text(high)}
    if p99 > p01 and high - low > 20 * (p99 - p01):
        low, high = p01, p99
        figure.outside = (int((finite < low).sum()), int((finite > high).sum()))
    if high == low:
        low, high = low - 0.5, high + 0.5
    bins = int(min(30, max(6, math.sqrt(len(finite)))))
    counts, edges = np.histogram(finite, bins=bins, range=(low, high))
    figure.counts = counts.tolist()
    figure.edges = edges.tolist()
    figure.edge_labels = [text(edge) for edge in edges]


def _order(figure: ColumnFigure, values: np.ndarray, at: np.ndarray, text: Any) -> None:
    """(p10, median, p90) of the column in ``ORDER_BINS`` row-position bins, and Spearman's rho with the row."""
    finite = np.isfinite(values)
    values, at = values[finite], at[finite]
    if len(values) < 3:
        return
    order = np.argsort(at, kind="stable")
    values = values[order]
    figure.rho = spearman_with_order(values)
    bins = [part for part in np.array_split(values, min(ORDER_BINS, len(values))) if len(part)]
    if figure.kind in ("discrete", "bool"):  # a few values: their mean per bin (a class's share for 0/1)
        figure.order = [(mean, mean, mean) for mean in (float(part.mean()) for part in bins)]
    else:
        figure.order = [_percentiles(part) for part in bins]
    figure.order_labels = (text(float(values.min())), text(float(values.max())))


def _image_like(values: np.ndarray) -> bool:
    """Rows that are pictures: numbers, height x width (at least 8 a side), and 1, 3 or 4 channels or none."""
    shape = values.shape[1:]
    channels_ok = len(shape) == 2 or (len(shape) == 3 and shape[2] in (1, 3, 4))
    return values.dtype.kind in "uif" and channels_ok and min(shape[:2]) >= 8


def _image_column(figure: ColumnFigure, images: np.ndarray, rows_at: np.ndarray) -> None:
    """Thumbnails of rows taken evenly from the sample, and the histogram of their pixel values.

    As an image folder's report shows its images (the same JPEG thumbnails,
    the same histogram), from at most ``PIXELS`` values of the sample.
    """
    figure.kind = "image"
    if not len(images):
        return
    picks = np.unique(np.linspace(0, len(images) - 1, min(ARRAY_THUMBS, len(images))).round().astype(np.int64))
    shown = images[picks]
    low, high = float(np.nanmin(shown)), float(np.nanmax(shown))
    if images.dtype == np.uint8 or (images.dtype.kind == "f" and low >= 0 and high <= 1):
        low, high = 0.0, 255.0 if images.dtype == np.uint8 else 1.0  # the dtype's own range: 0 stays black
    for index, row in zip(picks, shown):
        scaled = (np.nan_to_num(row.astype(np.float64), nan=low) - low) * (255.0 / ((high - low) or 1.0))
        pixels = np.clip(scaled, 0, 255).round().astype(np.uint8)
        if pixels.ndim == 3:  # grey (one channel) or RGB (alpha dropped, as decoding to 3 channels does)
            pixels = pixels[..., 0] if pixels.shape[2] == 1 else pixels[..., :3]
        figure.thumbs.append(_array_thumb(f"row {int(rows_at[index]):,}", pixels))
    flat = images.reshape(-1)
    values = flat[np.linspace(0, len(flat) - 1, min(len(flat), PIXELS)).round().astype(np.int64)]
    values = values.astype(np.float64)
    _histogram(figure, values[np.isfinite(values)], _number)


def _percentiles(values: np.ndarray) -> tuple[float, float, float]:
    p10, p50, p90 = np.percentile(values, [10, 50, 90])
    return float(p10), float(p50), float(p90)


def _date_text(unit: str, integers: np.ndarray) -> Any:
    """How a date column's values read: days, or minutes when the sample spans less than three days."""
    shown = unit if unit in ("Y", "M", "W", "D") else "D"
    if shown == "D" and unit not in ("D", "W") and len(integers):
        span = np.array(int(integers.max() - integers.min()), dtype=f"timedelta64[{unit}]")
        if span < np.timedelta64(3, "D"):
            shown = "m"

    def text(value: float) -> str:
        stamp = np.array([int(math.floor(value))], dtype=f"datetime64[{unit}]")
        return str(np.datetime_as_string(stamp, unit=cast(Any, shown))[0])

    return text


def _number(value: float) -> str:
    if value == 0 or not math.isfinite(value):
        return f"{value:g}"
    magnitude = abs(value)
    if magnitude >= 1e6 or magnitude < 1e-3:
        return f"{value:.3g}".replace("e+0", "e").replace("e-0", "e-").replace("e+", "e")
    if magnitude >= 100:
        return f"{value:,.0f}"
    return f"{value:.3g}"


def _label(value: Any, width: int = 60) -> str:
    if isinstance(value, (bytes, bytearray)):
        text = repr(bytes(value[:width]))
    else:
        text = str(value)
    return text if len(text) <= width else text[: width - 1] + "…"


# ------------------------------------------------------------------------------------------------ images
def _image_figures(report: InspectReport, figures: Figures) -> None:
    listing = image_files(report.path, report.format)
    root = listing.root
    listed = set(listing.files)
    by_class: dict[str, list[str]] = collections.defaultdict(list)
    for file, label in zip(listing.files, listing.classes):
        by_class["(no class)" if label is None else label].append(file)
    for folder in listing.folders:
        by_class.setdefault(folder, [])
    figures.class_counts = {name: len(files) for name, files in sorted(by_class.items())}
    shown = sorted(by_class)[:MAX_CLASSES]
    figures.more_classes = len(by_class) - len(shown)
    wanted: dict[str, list[str]] = {}
    for name in shown:
        files = by_class[name]
        picks = sorted({int(i) for i in np.linspace(0, len(files) - 1, min(THUMBS_PER_CLASS, len(files))).round()})
        wanted[name] = [files[i] for i in picks] if files else []
    quality = (report.quality or {}).get("images") or {}
    per_image = [m for m in quality.get("per_image", []) if m.get("path") in listed]
    extremes: dict[str, list[tuple[str, str]]] = {}
    if per_image:
        for key, metric, reverse, caption in (
            ("darkest", "brightness", False, "brightness {:.0f}"),
            ("brightest", "brightness", True, "brightness {:.0f}"),
            ("blurriest", "blur", False, "blur {:.0f}"),
        ):
            ranked = sorted(per_image, key=operator.itemgetter(metric), reverse=reverse)[:EXTREMES]
            extremes[key] = [(m["path"], caption.format(m[metric])) for m in ranked]
        if len(per_image) < (report.quality or {}).get("rows", 0):
            figures.notes.append(
                f"darkest, brightest and blurriest are ranked among the first {len(per_image):,} images"
            )
    elif report.quality is None:
        figures.notes.append("run with --quality to see the darkest, brightest, blurriest and duplicate images")
    groups = ((report.quality or {}).get("duplicates") or {}).get("groups") or []
    duplicate_paths = [[p for p in group if p in listed][:4] for group in groups[:MAX_DUPLICATE_GROUPS]]
    everything = {path for paths in wanted.values() for path in paths}
    everything |= {path for pairs in extremes.values() for path, _ in pairs}
    everything |= {path for group in duplicate_paths for path in group}
    with concurrent.futures.ThreadPoolExecutor(_THUMB_THREADS, thread_name_prefix="streamfeed-thumbs") as pool:
        thumbs = dict(
            zip(sorted(everything), pool.map(lambda path: thumbnail(path, root, files=listing), sorted(everything)))
        )
    figures.classes = {name: [thumbs[path] for path in paths] for name, paths in wanted.items()}
    flagged = set(quality.get("near_black", [])) | set(quality.get("near_white", []))
    flagged |= {entry.get("path") for entry in (quality.get("blur") or {}).get("blurry", [])}
    figures.extremes = {
        key: [_captioned(thumbs[path], caption, path in flagged) for path, caption in pairs]
        for key, pairs in extremes.items()
    }
    figures.duplicates = [[thumbs[path] for path in group] for group in duplicate_paths if len(group) > 1]


def _captioned(thumb: Thumb, caption: str, flagged: bool) -> Thumb:
    return Thumb(thumb.path, thumb.uri, thumb.width, thumb.height, thumb.error, caption, flagged)


def thumbnail(
    path: str,
    root: str,
    side: int = THUMB_SIDE,
    max_image_bytes: int = DEFAULT_MAX_IMAGE_BYTES,
    files: ImageFiles | None = None,
) -> Thumb:
    """``path`` at most ``side`` pixels a side (aspect kept) as a JPEG data URI, through the bounded decoder.

    ``files``: where ``path`` is listed (a zip archive's member is opened
    and named through it); None: a file on disk below ``root``.
    """
    thumb = Thumb(files.relative(path) if files is not None else os.path.relpath(path, root))
    data = None
    try:
        with files.open(path) if files is not None else open(path, "rb") as handle:
            data = handle.read(MAX_THUMB_FILE_BYTES + 1)
        if len(data) > MAX_THUMB_FILE_BYTES:
            thumb.error = f"larger than {MAX_THUMB_FILE_BYTES >> 20} MiB: not previewed"
            return thumb
        with open_header(data) as header:
            width, height = header.size
            orientation = _orientation(header)
        if orientation in (5, 6, 7, 8):
            width, height = height, width
        scale = min(1.0, side / max(width, height, 1))
        spec = DecodeSpec(
            height=max(1, round(height * scale)),
            width=max(1, round(width * scale)),
            channels=3,
            max_image_bytes=max_image_bytes,
        )
        array = decode(data, spec, resolve_decoder("auto"))
    except Exception as exc:  # noqa: BLE001 - an image that does not decode is shown as such
        thumb.error = decode_failure(exc, None if data is None else len(data))[:200]
        return thumb
    return _jpeg(thumb, array)


def _array_thumb(name: str, pixels: np.ndarray, side: int = THUMB_SIDE) -> Thumb:
    """A row's picture (``uint8``, grey or RGB) as a thumbnail at most ``side`` pixels a side, aspect kept."""
    image = pillow().fromarray(pixels)
    scale = min(1.0, side / max(image.size))
    if scale < 1:
        image = image.resize((max(1, round(image.width * scale)), max(1, round(image.height * scale))))
    return _jpeg(Thumb(name), np.asarray(image))


def _jpeg(thumb: Thumb, array: np.ndarray) -> Thumb:
    """``thumb`` with ``array`` (``uint8``, grey or RGB) inlined as a JPEG data URI."""
    out = io.BytesIO()
    pillow().fromarray(array).save(out, format="JPEG", quality=85)
    thumb.uri = "data:image/jpeg;base64," + base64.b64encode(out.getvalue()).decode("ascii")
    thumb.height, thumb.width = int(array.shape[0]), int(array.shape[1])
    return thumb


def _orientation(image: Any) -> int:
    try:
        value = int(image.getexif().get(0x0112, 1))
    except Exception:  # noqa: BLE001 - malformed EXIF: the decoder shows the image as stored
        return 1
    return value if 1 <= value <= 8 else 1
