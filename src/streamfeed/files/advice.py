"""Local files read in no particular order: no kernel read-ahead, the bytes a read needs requested at once.

A Parquet row group is read as one column chunk after another. The kernel
sees a sequential stream on the open file and reads ahead past its end
(``read_ahead_kb``: 8 MiB on issue 28's machine, about a row group there).
Read in file order that is the next row group, used at once; read in a
shuffled order on data larger than the page cache it is evicted before its
turn and read again then: 1.19x the file bytes from disk for a shuffled
epoch in issue 28, 1.90x here (``benchmarks/larger_than_memory.py``, 3.9 GB in
a 1.5 GiB memory cgroup), 1.00x unshuffled.

``POSIX_FADV_RANDOM`` turns read-ahead off, but only for the open file that
passes it, so :func:`random_access_filesystem` is the local filesystem
opening every file so advised (a native ``OSFile``, so reads stay in C++: a
Python file object cost 13 % more CPU a row group, measured); a reader uses
it for a read that jumps (:class:`ReadOrder`: it does not continue a run of
reads in file order), and :func:`will_need` asks for the row group's column
chunks in one request per contiguous range, which read-ahead no longer does. Measured on
row groups of 3.9 GB read in a shuffled order in a 400 MiB cgroup: WILLNEED
alone, or pyarrow's ``pre_buffer``, still read 1.71x the file bytes; RANDOM
on the reading file 1.00x.
"""

from __future__ import annotations

import os
import threading
from typing import Any, Iterable, Sequence

import pyarrow as pa
import pyarrow.fs as pafs

ByteRange = tuple[int, int]  # (offset, length)


def coalesce(ranges: Iterable[ByteRange]) -> tuple[ByteRange, ...]:
    """Byte ranges sorted, with ranges that touch or overlap merged (a gap, an unread column, stays out)."""
    merged: list[list[int]] = []
    for offset, length in sorted(ranges):
        if length <= 0:
            continue
        if merged and offset <= merged[-1][0] + merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], offset + length - merged[-1][0])
        else:
            merged.append([offset, length])
    return tuple((offset, length) for offset, length in merged)


def will_need(path: str, ranges: Sequence[ByteRange]) -> None:
    """Asks the kernel to read ``ranges`` of a local file into the page cache now (WILLNEED acts on the file).

    Advice only: where the platform has no ``posix_fadvise`` or the file
    cannot be opened nothing happens, and the read that follows reports
    what is wrong with the file.
    """
    if not ranges or not hasattr(os, "posix_fadvise"):
        return
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        for offset, length in ranges:
            os.posix_fadvise(fd, offset, length, os.POSIX_FADV_WILLNEED)
    except OSError:
        pass  # advice refused (a file system without it): the read works as it would have
    finally:
        os.close(fd)


class ReadOrder:
    """Whether each local file's next read jumps, or continues a run of reads in file order.

    Reads in file order keep the kernel's read-ahead (with it off, an
    unshuffled cold epoch ran at 0.57x the rows/s, measured); a read that
    jumps turns it off. A read continues a run when it is the unit after
    the one read before and that one began or continued a run (the file's
    first unit read first does): a shuffled order often reads a unit's
    successor next by chance (1.13x the file bytes when one such read kept
    read-ahead), rarely two in a row. Shared by one source's reading threads.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._last: dict[str, tuple[int, int]] = {}  # path -> (unit read last, reads in file order ending there)

    def note(self, path: str, unit: int) -> bool:
        """Records a read of ``unit`` (a row group) of ``path``; whether it jumps (see the class)."""
        with self._lock:
            last, run = self._last.get(path, (-1, 1))  # a file's unit 0 read first begins a run
            if unit == last + 1:
                jumps, run = run == 0, run + 1
            else:
                jumps, run = True, 0
            self._last[path] = (unit, run)
            return jumps

    def __reduce__(self) -> tuple[Any, tuple]:
        return (ReadOrder, ())  # a copy in another process learns the order afresh


class _RandomAccessHandler(pafs.FileSystemHandler):
    """pyarrow's ``LocalFileSystem``, every file opened for reading advised ``POSIX_FADV_RANDOM``."""

    def __init__(self) -> None:
        self.local = pafs.LocalFileSystem()

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _RandomAccessHandler)

    def __ne__(self, other: object) -> bool:
        return not self == other

    def __hash__(self) -> int:
        return hash(type(self))

    def __reduce__(self) -> tuple[Any, tuple]:
        return (_RandomAccessHandler, ())

    def get_type_name(self) -> str:
        return "streamfeed-local-random-access"

    def normalize_path(self, path: str) -> str:
        return self.local.normalize_path(path)

    def get_file_info(self, paths: list[str]) -> list[pafs.FileInfo]:
        return self.local.get_file_info(paths)

    def get_file_info_selector(self, selector: pafs.FileSelector) -> list[pafs.FileInfo]:
        return self.local.get_file_info(selector)

    def open_input_file(self, path: str) -> pa.NativeFile:
        handle = pa.OSFile(path, "r")
        if hasattr(os, "posix_fadvise"):
            try:
                os.posix_fadvise(handle.fileno(), 0, 0, os.POSIX_FADV_RANDOM)
            except OSError:
                pass  # advice refused: read with the kernel's read-ahead, as pyarrow would
        return handle

    def open_input_stream(self, path: str) -> pa.NativeFile:
        return self.local.open_input_stream(path)

    # Reading needs none of these; they refuse rather than write through a reader's filesystem.
    def _refuse(self, *args: Any, **kwargs: Any) -> Any:
        raise pa.ArrowNotImplementedError("a read-only filesystem (streamfeed reads local files through it)")

    create_dir = delete_dir = delete_dir_contents = delete_root_dir_contents = delete_file = _refuse
    move = copy_file = open_output_stream = open_append_stream = _refuse


def random_access_filesystem() -> pafs.FileSystem:
    """The local filesystem, every file opened for reading without the kernel's read-ahead (see the module)."""
    return pafs.PyFileSystem(_RandomAccessHandler())
