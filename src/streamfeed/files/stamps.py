"""A local file's size and modification time, taken when a source opens it, checked when a read reopens it.

A file rewritten or replaced mid-epoch (the same size, other values) would otherwise
serve the new version's rows next to the old one's without a word. The
fragments of every format take the stamps of their files when the source
makes them (at open) and :func:`unchanged` checks them around each read:
after it, and when it fails (a rewrite in the middle of a read shows as a
corrupt file, which ``on_error="skip"`` would skip). A change is a
:class:`~streamfeed.errors.FileChangedError` naming the file.

Not defended: a rewrite that keeps both the size and the modification
time (restored with ``os.utime``, or within the filesystem's clock tick),
and files not on the local filesystem (their stamp is ``None``: object
storage checks the version it opened on its own).
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator

import pyarrow.fs as pafs

from ..errors import FileChangedError, describe

Stamps = tuple["Stamp | None", ...]


@dataclass(frozen=True)
class Stamp:
    """A file's size, modification time (ns) and device and inode (a file replaced by a rename is another one)."""

    size: int
    mtime_ns: int
    inode: tuple[int, int]

    @classmethod
    def of(cls, stat: os.stat_result) -> Stamp:
        return cls(stat.st_size, stat.st_mtime_ns, (stat.st_dev, stat.st_ino))


def stamps_field() -> Any:
    """The dataclass field a frozen fragment keeps its files' stamps in (set in ``__post_init__``)."""
    return field(default=(), init=False, repr=False, compare=False)


def take_stamps(paths: Iterable[str], filesystem: pafs.FileSystem | None = None) -> Stamps:
    """Each local file's :class:`Stamp` now; ``None`` for one that is not a local file (a URI, gone).

    ``filesystem``: the one the paths are on; other than the local one, no stamp is taken.
    """
    if filesystem is not None and not isinstance(filesystem, pafs.LocalFileSystem):
        return tuple(None for _ in paths)
    return tuple(stamp_of(path) for path in paths)


def stamp_of(path: str) -> Stamp | None:
    try:
        stat = os.stat(path)
    except (OSError, ValueError):
        return None
    return Stamp.of(stat)


def check_stamps(paths: Iterable[str], stamps: Stamps) -> None:
    """Raises :class:`FileChangedError` naming the first file whose stamp is not the one taken at open."""
    for path, taken in zip(paths, stamps):
        if taken is not None:
            check_stamp(path, taken, stamp_of(path))


def check_stamp(path: str, taken: Stamp, now: Stamp | None) -> None:
    """Raises :class:`FileChangedError` if ``now`` (the file as it is) is not ``taken`` (as it was at open)."""
    if now == taken:
        return
    raise FileChangedError(
        describe(
            "A file changed after the dataset opened it (rewritten while it is read)",
            where=path,
            expected=f"{taken.size} bytes, modified at {taken.mtime_ns} ns, inode {taken.inode[1]} (as at open)",
            found="the file is gone"
            if now is None
            else f"{now.size} bytes, modified at {now.mtime_ns} ns, inode {now.inode[1]}",
            fix="do not rewrite input files while a dataset reads them; open the dataset again to read the new version",
        )
    )


@contextlib.contextmanager
def unchanged(paths: tuple[str, ...], stamps: Stamps) -> Iterator[None]:
    """Checks the stamps after the block, and when it fails: a changed file is the error, not what it caused."""
    try:
        yield
    except BaseException as exc:
        if not isinstance(exc, FileChangedError):
            try:
                check_stamps(paths, stamps)
            except FileChangedError as changed:
                raise changed from exc
        raise
    check_stamps(paths, stamps)
