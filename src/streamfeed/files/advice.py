"""Local files read in no particular order: no kernel read-ahead, the bytes a read needs requested at once.

A Parquet row group is read as one column chunk after another. The kernel
sees a sequential stream on the file descriptor and reads ahead past its
end (``read_ahead_kb``: 8 MiB on the disk issue 28 measured, about a row
group). Read in file order that is the next row group, used at once; read in
a shuffled order on data larger than the page cache it is evicted before its
turn and read again then: 1.19x the file bytes from disk for a shuffled
epoch, 1.00x unshuffled (issue 28; 1.89x here, ``benchmarks/larger_than_memory.py``).

``POSIX_FADV_RANDOM`` turns read-ahead off, but only for the open file that
passes it, so the file is opened here and handed to pyarrow as a file
object; ``POSIX_FADV_WILLNEED`` then asks for the row group's column chunks
in one request per contiguous range. Measured on the row groups of 3.9 GB
read in a shuffled order in a 400 MiB memory cgroup: WILLNEED alone (on
another descriptor) or pyarrow's ``pre_buffer`` still read 1.71x the file
bytes, RANDOM on the reading descriptor 1.00x.
"""

from __future__ import annotations

import contextlib
import os
from typing import Iterable, Iterator, Sequence

import pyarrow as pa

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


@contextlib.contextmanager
def random_access(path: str, ranges: Sequence[ByteRange]) -> Iterator[pa.NativeFile]:
    """The local file at ``path`` opened without read-ahead, ``ranges`` asked of the kernel now.

    An ``OSError`` opening it propagates (the caller reports the file);
    where the platform has no ``posix_fadvise`` the file is read as it
    would have been.
    """
    with open(path, "rb", buffering=0) as handle:
        if hasattr(os, "posix_fadvise"):
            fd = handle.fileno()
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)
            for offset, length in ranges:
                os.posix_fadvise(fd, offset, length, os.POSIX_FADV_WILLNEED)
        with pa.PythonFile(handle, mode="r") as native:
            yield native
