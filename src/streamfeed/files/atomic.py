"""Writing one file whole, under its name, or not at all: never through a planted link.

Every single-file write the project makes (statistics, suspects, HTML
reports, label maps, the CSV row-count index, checkpoint states) goes
through :func:`atomic_open` or :func:`write_atomic`.

The threat: a writer that first writes ``<dest>.tmp`` (or
``.<dest>.<pid>.tmp``) and then renames it follows a symlink that someone
who can write the destination's directory (a shared output or cache
directory, ``/tmp``) planted at that predictable name, and overwrites the
file it points to (a victim's ``~/.bashrc``, another run's results) with
the writer's rights. A writer that opens the destination itself follows a
link planted there in the same way. Here:

* the temporary file is created by :func:`tempfile.mkstemp` in the
  destination's directory: an unpredictable name, opened
  ``O_CREAT | O_EXCL | O_NOFOLLOW``, so nothing that exists at that name
  (file or link) is ever opened, and a new name is drawn instead;
* it is published with one :func:`os.replace`, which replaces a link at
  the destination rather than writing through it (the destination becomes
  a regular file), atomically: a reader sees the old file or the new one;
* on any error (including ``KeyboardInterrupt``) the temporary file is
  removed and the destination is left as it was;
* ``durable=True`` also ``fsync``-s the file before the rename and the
  directory after it (the checkpoint's commit needs it; a report does not).

Not defended: someone who can write the directory can still replace the
destination after it is written, or swap the directory itself; the
destination's permissions are those ``open`` would give (``0o666`` less the
umask), read from ``/proc/self/status`` (the one thread-safe way to read the
umask); where that is unavailable they stay ``mkstemp``'s ``0o600``.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from typing import IO, BinaryIO, Callable, Iterator, Literal, TextIO, overload

from ..errors import ArgumentError, describe

__all__ = ["atomic_open", "write_atomic"]


def _umask() -> int | None:
    """The process's umask without changing it (``os.umask`` sets it, racing other threads' file creation)."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    return None


def _sync_directory(directory: str) -> None:
    descriptor = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


@contextlib.contextmanager
def _atomic(path: str | os.PathLike, binary: bool, encoding: str, durable: bool) -> Iterator[IO]:
    target = os.path.abspath(os.fspath(path))
    directory, name = os.path.split(target)
    try:
        descriptor, temporary = tempfile.mkstemp(dir=directory, prefix=f".{name}.", suffix=".tmp")
    except OSError as exc:  # a directory one cannot write: name the file asked for, not a random temporary name
        exc.filename = target
        raise
    try:
        umask = _umask()
        if umask is not None:
            os.fchmod(descriptor, 0o666 & ~umask)
        file: IO = os.fdopen(descriptor, "wb") if binary else os.fdopen(descriptor, "w", encoding=encoding)
        with file:
            yield file
            file.flush()
            if durable:
                os.fsync(file.fileno())
        os.replace(temporary, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
    if durable:
        _sync_directory(directory)


@overload
def atomic_open(
    path: str | os.PathLike, mode: Literal["w"] = "w", *, encoding: str = "utf-8", durable: bool = False
) -> contextlib.AbstractContextManager[TextIO]: ...
@overload
def atomic_open(
    path: str | os.PathLike, mode: Literal["wb"], *, encoding: str = "utf-8", durable: bool = False
) -> contextlib.AbstractContextManager[BinaryIO]: ...
def atomic_open(
    path: str | os.PathLike, mode: Literal["w", "wb"] = "w", *, encoding: str = "utf-8", durable: bool = False
) -> contextlib.AbstractContextManager[IO]:
    """A file to write ``path``'s new content into; published when the block ends without an error.

    ``mode`` is ``"w"`` (text in ``encoding``) or ``"wb"``. An error inside
    the block (or while publishing) removes the temporary file and leaves
    ``path`` untouched. See the module docstring for what this defends.
    """
    if mode not in ("w", "wb"):
        raise ArgumentError(describe("atomic_open writes a whole file", expected="mode 'w' or 'wb'", found=repr(mode)))
    return _atomic(path, mode == "wb", encoding, durable)


def write_atomic(
    path: str | os.PathLike,
    data: str | bytes | Callable[[TextIO], object],
    *,
    encoding: str = "utf-8",
    durable: bool = False,
) -> None:
    """Writes ``data`` (text, bytes, or a callback writing text into the file) as ``path``'s whole content."""
    if isinstance(data, bytes):
        with atomic_open(path, "wb", durable=durable) as binary:
            binary.write(data)
        return
    with atomic_open(path, "w", encoding=encoding, durable=durable) as text:
        if isinstance(data, str):
            text.write(data)
        else:
            data(text)
