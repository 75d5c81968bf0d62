"""How a failed command ends: a short message in the command's own flags, and an exit code.

2 when the command line is wrong (a flag, a path, a column name), 1 when
the data or the machine is (a null, a corrupt file, the memory limit, a
permission). The message is the error's own (``errors.describe``: what,
where, expected, found) on one line and its fix on a second, with the
library's keywords (``nulls='drop'``) said as the command's flags
(``--nulls drop``). An error whose fix differs for a shell user carries
that fix itself (``StreamfeedError.cli_fix``: the flag, the command or
the variable to set), said here instead of the one for Python.
"""

from __future__ import annotations

import argparse
import re
import sys
from typing import Collection

from ..errors import ArgumentError, NotFoundError, OutputExistsError, StreamfeedError, UnknownNameError, describe

USAGE, DATA = 2, 1
_USAGE_ERRORS = (
    ArgumentError,
    NotFoundError,
    UnknownNameError,
    OutputExistsError,
    FileNotFoundError,
    FileExistsError,
    IsADirectoryError,
    NotADirectoryError,
)

_EMBEDDED = re.compile(r"^streamfeed\.errors\.(\w+): (.+)$", re.MULTILINE)

# The library's keywords in messages, as the command's flags: (pattern, replacement, the flag it needs).
_CLI_WORDS = [
    (r"read_\w+\(on_error='skip'\)", "--on-error skip", "--on-error"),
    (r"on_error='(raise|skip)'", r"--on-error \1", "--on-error"),
    (r"nulls='fill' with fill=VALUE", "--nulls fill --fill VALUE", "--nulls"),
    (r"nulls='(raise|drop|fill)'", r"--nulls \1", "--nulls"),
    (r"fill=\{\.\.\.\}", "--fill COLUMN=VALUE,...", "--fill"),
    (r"columns=\[\.\.\.\]", "--columns", "--columns"),
    (r"project fewer columns", "read fewer columns (--columns)", "--columns"),
    (r"\bmemory_limit\b", "--memory-limit", "--memory-limit"),
    (r"overwrite=True \(--overwrite on the command line\)", "--overwrite", "--overwrite"),
    (r"fragment_bytes= \(--fragment-bytes on the command line\)", "--fragment-bytes SIZE", "--fragment-bytes"),
    (r"\(with overwrite\)", "(with --overwrite)", "--overwrite"),
    (r"\bcolumns= and label=", "--columns and --label", "--label"),
]


def exit_code(exc: BaseException) -> int:
    """2 when the command line is wrong (a flag, a path, a name), 1 when the data or the machine is."""
    return USAGE if isinstance(_ours(exc) or exc, _USAGE_ERRORS) else DATA


def _ours(exc: BaseException) -> StreamfeedError | None:
    """The streamfeed error in ``exc``'s chain, or in its text.

    A framework may wrap the error raised while it pulled a batch: Keras on
    TensorFlow raises an ``InvalidArgumentError`` whose message holds the
    original traceback as text, ending in ``streamfeed.errors.DataError: ...``.
    """
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, StreamfeedError):
            return current
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    for name, text in reversed(_EMBEDDED.findall(str(exc))):
        kind = _error_class(name)
        if kind is not None:
            return kind(text)
    return None


def _error_class(name: str) -> type[StreamfeedError] | None:
    classes: list[type[StreamfeedError]] = [StreamfeedError]
    while classes:
        kind = classes.pop()
        if kind.__name__ == name:
            return kind
        classes.extend(kind.__subclasses__())
    return None


def error_message(prog: str, exc: BaseException, flags: Collection[str] = ()) -> str:
    """One line of what and where, one of the fix (in the command's flags)."""
    ours = _ours(exc)
    if ours is not None:
        message = str(ours)
        if ours.cli_fix:  # the error's own fix for a shell user, in place of the one for a Python caller
            message = message.rpartition(" Fix: ")[0] or message
            message = f"{message} Fix: {ours.cli_fix.rstrip('.')}."
    elif isinstance(exc, OSError):
        message = _os_message(exc)
    elif isinstance(exc, MemoryError):
        message = describe(
            "Out of memory",
            fix="lower --batch-size or --memory-limit" if "--batch-size" in flags else "lower --memory-limit",
        )
    else:
        message = describe(
            f"Unexpected {type(exc).__name__}: {exc}",
            fix="rerun with --debug to see where it happened, and report it if streamfeed is at fault",
        )
    message = " ".join(cli_words(message, flags).split())
    head, separator, fix = message.rpartition(" Fix: ")
    if not separator:
        return f"{prog}: error: {message}"
    return f"{prog}: error: {head}\n{prog}: fix: {fix}"


def _os_message(exc: OSError) -> str:
    where = " -> ".join(str(name) for name in (exc.filename, exc.filename2) if name is not None) or None
    if isinstance(exc, PermissionError):
        return describe("Permission denied", where=where, fix="check the path and its permissions, or choose another")
    if isinstance(exc, FileNotFoundError):
        return describe("No such file or directory", where=where, fix="check the path")
    return describe(exc.strerror or str(exc) or type(exc).__name__, where=where)


def cli_words(message: str, flags: Collection[str]) -> str:
    """The library's keywords in ``message`` (``nulls='drop'``) as the command's flags (``--nulls drop``)."""
    for pattern, replacement, flag in _CLI_WORDS:
        if flag in flags:
            message = re.sub(pattern, replacement, message)
    return message


def usage(args: argparse.Namespace, message: str) -> int:
    """Says a usage mistake found by a command itself (``describe``'s shape) and gives its exit code."""
    print(error_message(f"streamfeed {args.command}", ArgumentError(message), args.flags), file=sys.stderr)
    return USAGE
