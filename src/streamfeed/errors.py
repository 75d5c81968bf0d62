"""Exceptions, the bad-input policy and the report of what was skipped.

Every error streamfeed raises has one shape: what was expected, what was
found, where (file, row group, row, column) and how to fix it. The classes
also subclass the matching builtin so that ``except ValueError`` and
``except OSError`` keep working for callers who do not know streamfeed.
"""

from __future__ import annotations

import json
import os
import re
import threading
from dataclasses import asdict, dataclass, field, replace
from typing import Literal, TypedDict

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
    """Base class of every error streamfeed raises on purpose.

    ``cli_fix``: the fix as a shell user applies it (the flag to pass, the
    command or variable to set), given where it differs from the message's
    ``Fix:``, which speaks to a Python caller (``pass quote_char=None``).
    The command line (``commands/failure.py``) says it instead of that one.
    Kept when the error is pickled (an attribute, restored with the args).
    """

    def __init__(self, *args: object, cli_fix: str | None = None) -> None:
        super().__init__(*args)
        self.cli_fix = cli_fix


class SchemaError(StreamfeedError, ValueError):
    """Columns or types that cannot be reconciled (drift, unsupported types)."""


class DataError(StreamfeedError, ValueError):
    """A value the user's policy does not allow (nulls, NaN, ragged lists)."""


class CorruptFileError(StreamfeedError, OSError):
    """A file that cannot be read: truncated, wrong format, unreadable."""


class ManifestMismatchError(CorruptFileError):
    """A published directory whose files are not what its manifest lists.

    A listed shard is missing or of another size or checksum, or a file the
    manifest does not list sits among the shards (a leftover of another
    write, or added later). Never skipped: reading part of a dataset as if
    it were all of it is what the manifest is there to prevent.
    """


class FileChangedError(StreamfeedError, OSError):
    """A file whose size or modification time changed after the source opened it (rewritten mid-epoch).

    Not bad input: its rows would mix two versions of the data, so it is
    never skipped under ``on_error="skip"`` (nor taken for a corrupt file).
    """


class PublishError(StreamfeedError, OSError):
    """Output that was written but could not be put in place (a rename or sync the system refused)."""


class ErrorBudgetExceeded(StreamfeedError, RuntimeError):
    """More input was skipped than the user's error budget allows."""


class StateError(StreamfeedError, ValueError):
    """An iterator state that does not belong to this pipeline."""


class MissingDependencyError(StreamfeedError, ImportError):
    """An optional dependency is not installed."""


class ArgumentError(StreamfeedError, ValueError):
    """An argument or option that cannot work, named with what it accepts."""


class NotFoundError(StreamfeedError, FileNotFoundError):
    """A path, file or directory that does not exist (or holds nothing to read)."""


class StorageError(StreamfeedError, OSError):
    """The storage holding the data cannot be listed or read: refused credentials, an unreachable endpoint."""


class NetworkError(StorageError, ConnectionError):
    """The network to the storage failed (refused, reset, timed out) for longer than the retry deadline.

    A :class:`StorageError` (the storage cannot be read) and a ``ConnectionError``.

    Not bad input: ``on_error="skip"`` never skips it, and a data fault
    caused by it is raised as this error instead (:meth:`BadInputReport.reject`).
    """


class ObjectChangedError(StorageError):
    """An object in storage was replaced while it was being read: its version is not the one taken at open.

    A data fault of its own kind, not bad input: ``on_error="skip"`` never
    skips it (:meth:`BadInputReport.reject` raises it), it is never reported
    as a corrupt file, and it is not retried (the old version is gone). The
    message names the object and both versions (ETags, or version ids).
    """


def changed_cause(error: BaseException | None) -> "ObjectChangedError | None":
    """The :class:`ObjectChangedError` that ``error`` is or was raised from (a reader wraps it), if any."""
    seen = 0
    while error is not None and seen < 8:
        if isinstance(error, ObjectChangedError):
            return error
        error = error.__cause__ or error.__context__
        seen += 1
    return None


# what pyarrow's own S3 client (the AWS SDK) says when the network failed, as opposed to the request
_AWS_NETWORK_MARKERS = ("AWS Error NETWORK_CONNECTION", "curlCode")


def _where(error: BaseException | None) -> str | None:
    """The ``Where:`` part of a message in :func:`describe`'s shape."""
    match = re.search(r"Where: (.*?)\. (?:Expected|Found|Fix):", str(error))
    return match.group(1) if match else None


def network_cause(error: BaseException | None) -> "NetworkError | None":
    """The :class:`NetworkError` that ``error`` is or was raised from, if any.

    An ``OSError`` in which pyarrow's S3 client reports a network failure
    (``AWS Error NETWORK_CONNECTION``, a curl code) gives a new
    :class:`NetworkError` raised from ``error``: it was retried by that
    client's own policy, not by streamfeed's deadline.
    """
    first, seen = error, 0
    while error is not None and seen < 8:
        if isinstance(error, NetworkError):
            return error
        if isinstance(error, OSError) and not isinstance(error, StreamfeedError):
            said = " ".join(str(error).split())
            if any(marker in said for marker in _AWS_NETWORK_MARKERS):
                made = NetworkError(
                    describe(
                        "The storage could not be reached",
                        where=_where(first),
                        found=said[:500],
                        fix=(
                            "check the network and the endpoint; open s3:// URIs with storage_options=... to retry "
                            "network errors up to a deadline"
                        ),
                    ),
                    cli_fix="check the network and the endpoint (AWS_ENDPOINT_URL)",
                )
                made.__cause__ = first
                return made
        error = error.__cause__ or error.__context__
        seen += 1
    return None


class OutputExistsError(StreamfeedError, FileExistsError):
    """An output path that is already there and would be overwritten."""


class UnknownNameError(StreamfeedError, KeyError):
    """A column, class or statistic asked for by a name that is not there."""

    def __str__(self) -> str:  # KeyError would print the message quoted, as a repr
        return str(self.args[0]) if self.args else ""


class MemoryLimitError(StreamfeedError, MemoryError):
    """The pipeline cannot work within its memory limit."""


class BackendError(StreamfeedError, RuntimeError):
    """The Keras backend in use cannot do what was asked (e.g. string tensors outside TensorFlow)."""


class UserFunctionError(StreamfeedError, RuntimeError):
    """A user's ``map`` or ``filter`` function raised, or broke its contract.

    A bug in code, not bad input: ``on_error="skip"`` never skips it. The
    message names the function and the fragment (or batch) it ran on; the
    function's own exception, if any, is the ``__cause__``.
    """


def require(module: str, extra: str):
    """Imports an optional dependency, naming the pip extra when it is missing."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise MissingDependencyError(
            describe(
                f"streamfeed needs the optional package '{module}' for this",
                fix=f"pip install 'streamfeed[{extra}]', or from a checkout of streamfeed pip install -e '.[{extra}]'",
            )
        ) from exc


# The advice in a raised error's fix to skip such input ("..., or pass on_error='skip' to leave it out and
# report it"; "; on_error='skip' leaves it out ..."): a parenthesis may hold a full stop, the clause ends at one.
_SKIP_ADVICE = re.compile(r"(?:[,;] (?:or )?|^)(?:pass )?on_error='skip'(?:[^.(]|\([^)]*\))*")


def without_skip_advice(reason: str) -> str:
    """``reason`` (an error's message) without its advice to pass ``on_error='skip'``: for input already skipped.

    The rest of the fix stays (how to repair the file); a fix that was only
    that advice goes, with its ``Fix:``.
    """
    head, separator, fix = reason.rpartition(" Fix: ")
    if not separator:
        return reason
    fix = _SKIP_ADVICE.sub("", fix).strip()
    return f"{head} Fix: {fix}" if fix.rstrip(".") else head


@dataclass(frozen=True)
class SkippedUnit:
    """One unit of input left out under ``on_error="skip"``."""

    path: str
    location: str  # "file", "row group 3", "rows 10-12", ...
    reason: str
    rows: int | None  # rows lost, when known


class ErrorOptions(TypedDict, total=False):
    """The bad-input keyword arguments every ``read_*`` function accepts (see :class:`ErrorPolicy`)."""

    on_error: OnError
    max_bad_fraction: float | None
    max_bad_count: int | None
    report_path: str | os.PathLike | None


@dataclass(frozen=True)
class ErrorPolicy:
    """What happens to bad input, and how much of it may be skipped.

    ``on_error="raise"`` (default) stops at the first bad unit with an
    error naming it; ``"skip"`` leaves it out and records it in the
    :class:`BadInputReport`, as long as the skipped share of rows stays
    within ``max_bad_fraction`` and the number of skipped units within
    ``max_bad_count`` (``None``: unlimited). With ``report_path`` every
    entry is also appended to that file as a JSON line when it happens.
    """

    on_error: OnError = "raise"
    max_bad_fraction: float | None = None
    max_bad_count: int | None = None
    report_path: str | os.PathLike | None = None

    def __post_init__(self) -> None:
        if self.on_error not in ("raise", "skip"):
            raise ArgumentError(describe("Unknown on_error", expected="'raise' or 'skip'", found=repr(self.on_error)))
        if self.max_bad_fraction is not None and not 0.0 <= self.max_bad_fraction <= 1.0:
            raise ArgumentError(
                describe(
                    "max_bad_fraction is a share of rows",
                    expected="a number in [0, 1]",
                    found=repr(self.max_bad_fraction),
                )
            )
        if self.max_bad_count is not None and self.max_bad_count < 0:
            raise ArgumentError(
                describe(
                    "max_bad_count counts skipped units", expected="an integer >= 0", found=repr(self.max_bad_count)
                )
            )

    def new_report(self) -> "BadInputReport":
        """An empty report that records skipped input under this policy."""
        return BadInputReport(policy=self)


def _append_line(path: str | os.PathLike, line: str) -> None:
    """Appends ``line`` to the report file, never through a link planted at its name (``O_NOFOLLOW``).

    The report is appended to as entries happen (so a crash loses none), so
    it cannot be written whole and renamed like the other files
    (``files/atomic.py``, which this module is below); it is opened without
    following a link instead: a link there is refused, not written through.
    """
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        descriptor = os.open(path, flags, 0o666)
    except OSError as exc:
        if not os.path.islink(path):
            raise
        raise ArgumentError(
            describe(
                "The bad-input report is not written through a symbolic link",
                where=os.fspath(path),
                expected="report_path naming a regular file, or nothing yet",
                found=f"a link to {os.readlink(os.fspath(path))!r}",
                fix="remove the link, or give report_path the file it points to",
            )
        ) from exc
    with os.fdopen(descriptor, "a", encoding="utf-8") as out:
        out.write(line + "\n")


@dataclass
class BadInputReport:
    """A machine-readable, exact record of everything skipped.

    It carries the :class:`ErrorPolicy` it enforces, so a source or reader
    that finds bad input needs only the report. Thread-safe: readers in
    several threads add to it. When the policy names a ``report_path``,
    every entry is also appended to that file as one JSON line, so nothing
    is lost if the process dies.
    """

    policy: ErrorPolicy = field(default_factory=ErrorPolicy)
    total_rows: int | None = None
    total_files: int | None = None
    entries: list[SkippedUnit] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _seen: set = field(default_factory=set, repr=False)

    @property
    def on_error(self) -> OnError:
        return self.policy.on_error

    def reject(
        self,
        error: StreamfeedError,
        *,
        path: str,
        location: str = "file",
        rows: int | None = None,
        cause: BaseException | None = None,
    ) -> None:
        """Raises ``error`` under ``on_error="raise"``; otherwise records the unit as skipped.

        Without ``cause`` the error is re-raised as it is, keeping its own chain.
        An error caused by the network (:func:`network_cause`) is raised as
        that :class:`NetworkError` under either policy, and one caused by an
        object replaced while read (:func:`changed_cause`) as that
        :class:`ObjectChangedError`: neither is bad input.
        """
        network = network_cause(error) or network_cause(cause) or changed_cause(error) or changed_cause(cause)
        if network is not None:
            raise network
        if self.policy.on_error == "raise":
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
        slip under ``max_bad_fraction``.
        """
        rows = self.skipped_rows / self.total_rows if self.total_rows else 0.0
        unknown = sum(1 for entry in self.entries if entry.rows is None)
        files = unknown / self.total_files if self.total_files else 0.0
        return max(rows, files)

    def add(self, entry: SkippedUnit) -> None:
        """Records a skipped unit once (re-reads in later epochs do not double count).

        Its reason is said without the advice to skip such input (:func:`without_skip_advice`):
        every source records what it skips here, and it was skipped.
        """
        entry = replace(entry, reason=without_skip_advice(entry.reason))
        key = (entry.path, entry.location)
        with self._lock:
            if key in self._seen:
                return
            self._seen.add(key)
            self.entries.append(entry)
            if self.policy.report_path is not None:
                _append_line(self.policy.report_path, json.dumps(asdict(entry)))
        self.check_budget()

    def check_budget(self) -> None:
        """Raises :class:`ErrorBudgetExceeded` if more was skipped than allowed."""
        policy = self.policy
        if policy.max_bad_count is not None and self.skipped_units > policy.max_bad_count:
            raise ErrorBudgetExceeded(
                describe(
                    "Too many bad inputs were skipped",
                    expected=f"at most {policy.max_bad_count} skipped units",
                    found=f"{self.skipped_units}: {self.entries[-1]}",
                    fix="inspect the files named in the report, or raise max_bad_count",
                )
            )
        if policy.max_bad_fraction is not None and self.entries:
            fraction = self.skipped_fraction
            if fraction > policy.max_bad_fraction:
                raise ErrorBudgetExceeded(
                    describe(
                        "Too much input was skipped",
                        expected=(
                            f"at most {policy.max_bad_fraction:.2%} of {self.total_rows} rows "
                            f"in {self.total_files} files"
                        ),
                        found=(
                            f"{fraction:.2%} ({self.skipped_rows} rows, {self.skipped_units} units); "
                            f"last: {self.entries[-1]}"
                        ),
                        fix="inspect the files named in the report, or raise max_bad_fraction",
                    )
                )

    def to_dict(self) -> dict:
        return {
            "skipped_units": self.skipped_units,
            "skipped_rows": self.skipped_rows,
            "total_rows": self.total_rows,
            "entries": [asdict(entry) for entry in self.entries],
        }
