"""Exceptions, the bad-input policy and the report of what was skipped.

Every error streamfeed raises has one shape: what was expected, what was
found, where (file, row group, row, column) and how to fix it. The classes
also subclass the matching builtin so that ``except ValueError`` and
``except OSError`` keep working for callers who do not know streamfeed.
"""

from __future__ import annotations

import json
import threading
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Literal

OnError = Literal["raise", "skip"]


def describe(
    problem: str,
    *,
    where: str | None = None,
    expected: str | None = None,
    found: str | None = None,
    fix: str | None = None,
) -> str:
    """Formats an error message in the project's one shape."""
    parts = [problem.rstrip(".") + "."]
    if where:
        parts.append(f"Where: {where}.")
    if expected:
        parts.append(f"Expected: {expected}.")
    if found:
        parts.append(f"Found: {found}.")
    if fix:
        parts.append(f"Fix: {fix}.")
    return " ".join(parts)


class StreamfeedError(Exception):
    """Base class of every error streamfeed raises on purpose."""


class SchemaError(StreamfeedError, ValueError):
    """Columns or types that cannot be reconciled (drift, unsupported types)."""


class DataError(StreamfeedError, ValueError):
    """A value the user's policy does not allow (nulls, NaN, ragged lists)."""


class CorruptFileError(StreamfeedError, OSError):
    """A file that cannot be read: truncated, wrong format, unreadable."""


class ErrorBudgetExceeded(StreamfeedError, RuntimeError):
    """More input was skipped than the user's error budget allows."""


class StateError(StreamfeedError, ValueError):
    """An iterator state that does not belong to this pipeline."""


class MissingDependencyError(StreamfeedError, ImportError):
    """An optional dependency is not installed."""


def require(module: str, extra: str):
    """Imports an optional dependency, naming the pip extra when it is missing."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise MissingDependencyError(
            describe(
                f"streamfeed needs the optional package '{module}' for this",
                fix=f"pip install 'streamfeed[{extra}]'",
            )
        ) from exc


@dataclass(frozen=True)
class SkippedUnit:
    """One unit of input left out under ``on_error="skip"``."""

    path: str
    location: str  # "file", "row group 3", "rows 10-12", ...
    reason: str
    rows: int | None  # rows lost, when known


@dataclass
class ErrorBudget:
    """How much input may be skipped before the run stops.

    ``max_fraction`` is the share of rows lost; ``max_count`` the number of
    skipped units. ``None`` means unlimited.
    """

    max_fraction: float | None = None
    max_count: int | None = None


@dataclass
class BadInputReport:
    """A machine-readable, exact record of everything skipped.

    Thread-safe: readers in several threads add to it. When ``path`` is set
    every entry is also appended to that file as one JSON line, so nothing
    is lost if the process dies.
    """

    total_rows: int | None = None
    total_files: int | None = None
    budget: ErrorBudget = field(default_factory=ErrorBudget)
    path: str | Path | None = None
    entries: list[SkippedUnit] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _seen: set = field(default_factory=set, repr=False)

    @classmethod
    def for_options(cls, max_bad_fraction: float | None, max_bad_count: int | None, report_path: str | Path | None) -> "BadInputReport":
        """The report every ``read_*`` function builds from its error-budget options."""
        return cls(budget=ErrorBudget(max_bad_fraction, max_bad_count), path=report_path)

    def reject(
        self,
        error: StreamfeedError,
        *,
        on_error: OnError,
        path: str,
        location: str = "file",
        rows: int | None = None,
        cause: BaseException | None = None,
    ) -> None:
        """Raises ``error`` under ``on_error="raise"``; otherwise records the unit as skipped.

        Without ``cause`` the error is re-raised as it is, keeping its own chain.
        """
        if on_error == "raise":
            if cause is None:
                raise error
            raise error from cause
        self.add(SkippedUnit(path, location, str(error), rows))

    @property
    def skipped_units(self) -> int:
        return len(self.entries)

    @property
    def skipped_rows(self) -> int:
        return sum(entry.rows or 0 for entry in self.entries)

    @property
    def skipped_fraction(self) -> float:
        """Share of input lost: of rows, or of files for files whose rows are unknown.

        A file that cannot be opened has no row count; it still counts, as
        its share of the files, so that a directory of corrupt files cannot
        slip under ``max_fraction``.
        """
        rows = self.skipped_rows / self.total_rows if self.total_rows else 0.0
        unknown = sum(1 for entry in self.entries if entry.rows is None)
        files = unknown / self.total_files if self.total_files else 0.0
        return max(rows, files)

    def add(self, entry: SkippedUnit) -> None:
        """Records a skipped unit once (re-reads in later epochs do not double count)."""
        key = (entry.path, entry.location)
        with self._lock:
            if key in self._seen:
                return
            self._seen.add(key)
            self.entries.append(entry)
            if self.path is not None:
                with open(self.path, "a", encoding="utf-8") as out:
                    out.write(json.dumps(asdict(entry)) + "\n")
        self.check_budget()

    def check_budget(self) -> None:
        """Raises :class:`ErrorBudgetExceeded` if more was skipped than allowed."""
        budget = self.budget
        if budget.max_count is not None and self.skipped_units > budget.max_count:
            raise ErrorBudgetExceeded(
                describe(
                    "Too many bad inputs were skipped",
                    expected=f"at most {budget.max_count} skipped units",
                    found=f"{self.skipped_units}: {self.entries[-1]}",
                    fix="inspect the files named in the report, or raise max_count",
                )
            )
        if budget.max_fraction is not None and self.entries:
            fraction = self.skipped_fraction
            if fraction > budget.max_fraction:
                raise ErrorBudgetExceeded(
                    describe(
                        "Too much input was skipped",
                        expected=f"at most {budget.max_fraction:.2%} of {self.total_rows} rows in {self.total_files} files",
                        found=f"{fraction:.2%} ({self.skipped_rows} rows, {self.skipped_units} units); last: {self.entries[-1]}",
                        fix="inspect the files named in the report, or raise max_fraction",
                    )
                )

    def to_dict(self) -> dict:
        return {
            "skipped_units": self.skipped_units,
            "skipped_rows": self.skipped_rows,
            "total_rows": self.total_rows,
            "entries": [asdict(entry) for entry in self.entries],
        }
