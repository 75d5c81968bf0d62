"""Windows over a stream, as a source: every window of ``length`` rows of a series, addressed by its start row.

``keras.utils.timeseries_dataset_from_array`` needs the whole array in
memory, and tf.data's ``window`` is sequential with no index (no global
shuffle, no resume; tensorflow#49169). Here the windows are a *source*
wrapping another: :class:`WindowSource` has one fragment per fragment of
the source it wraps, holding the windows whose **start** row lies in it,
so that the pipeline's seeded shuffle, exact counts, equal shards, resume
and Keras feeds apply to windows as they do to rows.

What a window is (Keras' definition, ``timeseries_dataset_from_array``):

- rows are taken in the source's order, across its file and fragment
  boundaries; with ``by``, a *series* is a run of consecutive rows with the
  same ``by`` value, and no window crosses from one series to the next (a
  key that comes back after another starts a new series);
- the window starting at row ``s`` of a series holds rows
  ``s, s + sampling_rate, ..., s + (length - 1) * sampling_rate``; starts are
  the series' first row and every ``stride``-th row after it (Keras'
  ``sequence_stride``);
- a target ``name -> column`` is ``column``'s value at row ``s + shift``
  (default ``shift = length * sampling_rate``: the sample after the window),
  Keras' ``targets[s]`` for ``targets = data[shift:]``; a window is served
  only if its rows and its target row lie in its series (Keras:
  ``min(num_seqs, len(targets))``).

A windowed column is served as an array of shape ``(windows, length,
...)``; a target as ``(windows, ...)``; ``by`` (if given) as the series key
of each window, ``(windows,)``.

Costs. Reading a fragment reads the fragments after it that its last
window reaches into (the head of the next one, usually), so a fragment's
rows are read about twice an epoch, and memory holds those fragments and
the fragment's windows (``length`` times its rows for a stride of 1: the
sizes the memory plan uses, :meth:`WindowSource.fragment_row_bytes`).
Counting needs the rows of each fragment: from the source's metadata, with
no read, when its counts are exact and there is no ``by``; otherwise one
pass at open reads every fragment once, one at a time, and keeps only its
row count and the rows where ``by`` changes (memory: one fragment, plus
one integer per series).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Mapping, Sequence, cast

import numpy as np

from ..core import Chunk, Fragment, Source, SourceInfo, concat_chunks, row_settings
from ..errors import ArgumentError, FileChangedError, UnknownNameError, describe


@dataclass(frozen=True)
class WindowSpec:
    """Every setting of the windows: all of its fields are in the fingerprint, by construction."""

    length: int
    stride: int = 1
    sampling_rate: int = 1
    shift: int | None = None  # the target row's offset from the window's start (None: no targets)
    targets: tuple[tuple[str, str], ...] = ()  # (served name, source column), in the order given
    by: str | None = None
    columns: tuple[str, ...] = ()  # the windowed columns

    @property
    def reach(self) -> int:
        """How many rows after its start a window needs (its last row, or its target row)."""
        last = (self.length - 1) * self.sampling_rate
        return max(last, self.shift) if self.targets and self.shift is not None else last

    @property
    def served(self) -> list[str]:
        """The columns of every chunk: windowed columns, targets, then the series key."""
        return [*self.columns, *(name for name, _ in self.targets), *([self.by] if self.by else [])]


def window_spec(
    column_names: Sequence[str],
    length: int,
    *,
    stride: int = 1,
    sampling_rate: int = 1,
    shift: int | None = None,
    targets: Mapping[str, str] | None = None,
    by: str | None = None,
    columns: Sequence[str] | None = None,
) -> WindowSpec:
    """The checked settings of :meth:`Dataset.windows <streamfeed.Dataset.windows>` over columns ``column_names``."""
    for name, value, least in (("length", length, 1), ("stride", stride, 1), ("sampling_rate", sampling_rate, 1)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < least:
            raise ArgumentError(
                describe(f"windows({name}=...) is not valid", expected=f"an integer >= {least}", found=repr(value))
            )
    if targets is not None and not isinstance(targets, Mapping):
        raise ArgumentError(
            describe(
                "windows(targets=...) is not a mapping",
                expected="{served name: column}, e.g. targets={'y': 'price'}",
                found=repr(targets)[:80],
            )
        )
    target_map = {str(name): str(column) for name, column in (targets or {}).items()}
    if shift is not None and not target_map:
        raise ArgumentError(
            describe(
                "windows(shift=...) without targets",
                expected="shift= with targets=: it is the target row's offset from the window's start",
                fix="pass targets={'y': 'column'}, or leave shift out",
            )
        )
    if shift is not None and (isinstance(shift, bool) or not isinstance(shift, (int, np.integer)) or shift < 0):
        raise ArgumentError(describe("windows(shift=...) is not valid", expected="an integer >= 0", found=repr(shift)))
    known = list(column_names)
    windowed = [name for name in known if name != by] if columns is None else list(columns)
    if isinstance(columns, str):
        windowed = [columns]
    for name in [*windowed, *target_map.values(), *([by] if by is not None else [])]:
        if name not in known:
            raise UnknownNameError(
                describe(
                    f"windows() names the column {name!r}, which the data does not have",
                    expected=f"one of {known}",
                    fix="name a column of the source (columns=, targets= values, by=)",
                )
            )
    served = [*windowed, *target_map, *([by] if by is not None else [])]
    clashes = sorted({name for name in served if served.count(name) > 1})
    if clashes or (by is not None and by in windowed):
        raise ArgumentError(
            describe(
                "windows() would serve two columns under one name",
                expected="windowed columns, target names and by all different (by is served once per window)",
                found=f"{clashes or [by]}",
                fix="give the targets other names: targets={'y': 'price'}",
            )
        )
    if not served:
        raise ArgumentError(describe("windows() serves no column", fix="name columns= or targets="))
    if target_map and shift is None:
        shift = length * sampling_rate  # the sample after the window, at the window's rate
    return WindowSpec(
        int(length),
        int(stride),
        int(sampling_rate),
        None if shift is None else int(shift),
        tuple(target_map.items()),
        by,
        tuple(windowed),
    )


def window_starts(series: np.ndarray, low: int, high: int, spec: WindowSpec) -> np.ndarray:
    """The start rows (int64, ascending) in ``[low, high)`` of the windows of the series that ``series`` bounds.

    ``series``: every series' first row, then the total row count. Computed
    from the bounds alone, so a fragment's windows are never stored.
    """
    first_series = max(int(np.searchsorted(series, low, side="right")) - 1, 0)
    last_series = int(np.searchsorted(series, high, side="left"))
    begins, ends = series[first_series:last_series], series[first_series + 1 : last_series + 1]
    first = begins + -(-(np.maximum(begins, low) - begins) // spec.stride) * spec.stride
    last = np.minimum(ends - 1 - spec.reach, high - 1)
    counts = np.where(last >= first, (last - first) // spec.stride + 1, 0)
    total = int(counts.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    # each series' starts as one arange: the first start repeated, plus the stride times a running index
    within = np.arange(total, dtype=np.int64) - np.repeat(np.cumsum(counts) - counts, counts)
    return np.repeat(first, counts).astype(np.int64) + within * spec.stride


class WindowFragment:
    """The windows whose start row lies in one fragment of the wrapped source."""

    def __init__(self, source: "WindowSource", index: int, num_rows: int) -> None:
        self.source, self.index, self._num_rows = source, index, num_rows
        self.inner = source.inner.fragments[index]

    @property
    def key(self) -> str:
        return f"{self.inner.key}#windows"

    @property
    def num_rows(self) -> int:
        return self._num_rows

    @property
    def path(self) -> str:
        return self.inner.path

    @property
    def location(self) -> str:
        return f"windows starting in {self.inner.location}"

    def read(self) -> Chunk:
        """Reads the fragment and the heads of those its last window reaches into, and cuts the windows."""
        source, spec = self.source, self.source.spec
        offsets = source.offsets
        starts = window_starts(source.series, int(offsets[self.index]), int(offsets[self.index + 1]), spec)
        stop = int(starts[-1]) + spec.reach + 1 if len(starts) else int(offsets[self.index])
        needed = list(dict.fromkeys([*spec.columns, *(column for _, column in spec.targets), *filter(None, [spec.by])]))
        pieces: list[Chunk] = []
        number = self.index
        while number == self.index or offsets[number] < stop:  # never past the last fragment: stop <= the rows
            chunk = source.read_counted(number)
            low = max(int(offsets[number]), int(starts[0]) if len(starts) else 0) - int(offsets[number])
            high = min(stop, int(offsets[number + 1])) - int(offsets[number])
            pieces.append({name: chunk[name][low:high] for name in needed})
            number += 1
        rows = concat_chunks(pieces) if len(pieces) > 1 else pieces[0]
        return self._cut(rows, starts - (int(starts[0]) if len(starts) else 0))

    def _cut(self, rows: Chunk, base: np.ndarray) -> Chunk:
        spec = self.source.spec
        for name, values in rows.items():
            if not isinstance(values, np.ndarray):
                raise ArgumentError(
                    describe(
                        f"windows() over the list column {name!r}",
                        where=f"{self.inner.path}, {self.inner.location}",
                        expected="columns of one value (or one fixed-shape array) per row",
                        fix=f"leave {name!r} out of columns= (or pad it in a map before reading windows)",
                    )
                )
        if spec.by is not None and len(base):
            key = rows[spec.by]
            moved = np.flatnonzero(key[base] != key[base + spec.reach])
            if len(moved):  # the rows are not those counted at open: a window would cross two series
                raise FileChangedError(
                    describe(
                        f"The series of {spec.by!r} changed since the windows were counted",
                        where=f"{self.inner.path}, {self.inner.location}",
                        expected=f"{spec.by!r} constant over each window, as at open",
                        found=f"{len(moved)} windows crossing a change of {spec.by!r}",
                        fix="open the data again (the file was rewritten)",
                    )
                )
        steps = np.arange(spec.length, dtype=np.int64) * spec.sampling_rate
        out: Chunk = {name: rows[name][base[:, None] + steps] for name in spec.columns}
        for name, target in spec.targets:
            out[name] = rows[target][base + (spec.shift or 0)]
        if spec.by is not None:
            out[spec.by] = rows[spec.by][base]
        return out


class WindowSource:
    """The windows of ``inner``'s rows (see the module's docstring): one fragment per fragment of ``inner``.

    Fragments of ``inner`` in which no window starts have no fragment here.
    Counting reads ``inner`` once at open when its counts are not exact or
    ``by`` is given (the module's docstring says what it costs).
    """

    def __init__(self, inner: Source, spec: WindowSpec) -> None:
        self.inner, self.spec = inner, spec
        rows, changes = self._count()
        self.offsets = np.concatenate([[0], np.cumsum(rows, dtype=np.int64)]).astype(np.int64)
        self.series = np.unique(np.concatenate([[0], changes, [self.offsets[-1]]]).astype(np.int64))
        self._rows = rows
        fragments: list[WindowFragment] = []
        for index in range(len(rows)):
            count = len(window_starts(self.series, int(self.offsets[index]), int(self.offsets[index + 1]), spec))
            if count:
                fragments.append(WindowFragment(self, index, count))
        self.fragments: tuple[WindowFragment, ...] = tuple(fragments)

    def _count(self) -> tuple[list[int], np.ndarray]:
        """Each fragment's rows, and the rows where ``by`` changes: from metadata, or from one pass."""
        inner, by = self.inner, self.spec.by
        if by is None and inner.exact_counts:
            return [int(fragment.num_rows) for fragment in inner.fragments], np.zeros(0, dtype=np.int64)
        rows: list[int] = []
        changes: list[np.ndarray] = []
        offset, previous = 0, None
        for fragment in inner.fragments:  # one at a time: memory holds one fragment
            chunk = fragment.read()
            count = len(next(iter(chunk.values()))) if chunk else 0
            if by is not None and count:
                key = np.asarray(chunk[by])
                inside = np.flatnonzero(key[1:] != key[:-1]) + 1
                if previous is not None and key[0] != previous:
                    inside = np.concatenate([[0], inside])
                changes.append(inside.astype(np.int64) + offset)
                previous = key[-1]
            rows.append(count)
            offset += count
        return rows, np.concatenate(changes) if changes else np.zeros(0, dtype=np.int64)

    def read_counted(self, index: int) -> Chunk:
        """Fragment ``index`` of ``inner``, refused if it no longer yields the rows counted at open."""
        fragment = self.inner.fragments[index]
        chunk = fragment.read()
        count = len(next(iter(chunk.values()))) if chunk else 0
        if count != self._rows[index]:
            raise FileChangedError(
                describe(
                    "A fragment yields other rows than when its windows were counted",
                    where=f"{fragment.path}, {fragment.location}",
                    expected=f"{self._rows[index]} rows",
                    found=f"{count} rows",
                    fix="open the data again (the file was rewritten)",
                )
            )
        return chunk

    @property
    def column_names(self) -> list[str]:
        return self.spec.served

    @property
    def files(self) -> list[str]:
        return list(self.inner.files)

    @property
    def _width(self) -> int:
        """A window's size in the wrapped source's rows: its windowed rows, its targets and its key."""
        return self.spec.length + len(self.spec.targets) + 1

    @property
    def row_bytes(self) -> float:
        """Bytes of one window, with the source rows read for it (an upper bound: every column windowed)."""
        return float(self.inner.row_bytes) * (self._width + self.spec.stride + self.spec.reach)

    def fragment_row_bytes(self, fragment: Fragment) -> float:
        """Bytes of one window of ``fragment``: its windowed rows and its share of the source rows read."""
        fragment = cast(WindowFragment, fragment)  # this source's own
        index = fragment.index
        stop = min(int(self.offsets[index + 1]) + self.spec.reach, int(self.offsets[-1]))
        read_rows = int(self.offsets[int(np.searchsorted(self.offsets, stop, side="left"))]) - int(self.offsets[index])
        inner_bytes = float(self.inner.fragment_row_bytes(fragment.inner))
        return inner_bytes * (self._width + read_rows / max(fragment.num_rows, 1))

    @property
    def exact_counts(self) -> bool:
        return True  # counted from exact metadata or from the pass at open

    @property
    def read_parallelism(self) -> int | None:
        return self.inner.read_parallelism

    @property
    def read_scratch(self) -> float | None:
        return None  # a read builds its windows beside the inner rows: the library's figure

    @property
    def info(self) -> SourceInfo:
        # the source's columns have another shape here: no Arrow schema describes them
        return dataclasses.replace(self.inner.info, schema=None)

    def fingerprint(self) -> Mapping[str, Any]:
        return {
            "format": self.inner.info.format,
            "windows_of": self.inner.fingerprint(),
            "windows": row_settings(dataclasses.asdict(self.spec)),
        }
