"""Reading a Parquet row group brings that row group's bytes into the page cache, and nothing past it.

Issue 28: a shuffled epoch over files larger than RAM read 1.19x the file
bytes from disk, an unshuffled one 1.00x. The kernel's read-ahead runs past
the end of each row group read (this machine's disk: 8 MiB of it); read in
file order that is the next row group, used at once, but read out of order it
is evicted before its turn comes and read again then. The observable here is
the page cache itself: the file is evicted (``POSIX_FADV_DONTNEED``), one row
group is read through the source, and ``mincore`` says which of the file's
pages are now resident. Only the row group's column chunks (of the columns
read) and the footer may be; the benchmark ``benchmarks/larger_than_memory.py``
measures what that costs in disk bytes (``/proc/self/io``). Row groups read in
file order keep the read-ahead: it is what makes a cold unshuffled epoch fast.
"""

from __future__ import annotations

import ctypes
import mmap
import os
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.dataset as pads
import pyarrow.parquet as pq
import pytest

from streamfeed.sources.parquet import ParquetSource

ROWS_PER_GROUP = 32_768
COLUMNS = 32  # float32, uncompressed: 4 MiB a row group, past the kernel's smallest read-ahead many times over
GROUPS = 4
PAGE = mmap.PAGESIZE

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
_libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
_libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p]


def resident_pages(path: Path) -> np.ndarray:
    """Which pages of the file are in the page cache (``mincore`` of a shared read-only mapping)."""
    size = path.stat().st_size
    fd = os.open(path, os.O_RDONLY)
    try:
        address = _libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
        if address in (None, ctypes.c_void_p(-1).value):
            raise OSError(ctypes.get_errno(), "mmap failed")
        try:
            pages = (size + PAGE - 1) // PAGE
            vector = ctypes.create_string_buffer(pages)
            if _libc.mincore(address, size, vector) != 0:
                raise OSError(ctypes.get_errno(), "mincore failed")
            return np.frombuffer(vector.raw, dtype=np.uint8)[:pages] & 1 == 1
        finally:
            _libc.munmap(address, size)
    finally:
        os.close(fd)


def evict(path: Path) -> None:
    """Drops the file's pages from the page cache (written back first: only clean pages drop; no root needed)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def chunk_pages(path: Path, group: int, columns: set[str] | None = None) -> np.ndarray:
    """The pages holding row group ``group``'s column chunks (of ``columns``, or all)."""
    metadata = pq.ParquetFile(path).metadata
    pages = np.zeros((path.stat().st_size + PAGE - 1) // PAGE, dtype=bool)
    row_group = metadata.row_group(group)
    for i in range(row_group.num_columns):
        column = row_group.column(i)
        if columns is not None and column.path_in_schema not in columns:
            continue
        start = column.dictionary_page_offset if column.has_dictionary_page else column.data_page_offset
        pages[start // PAGE : (start + column.total_compressed_size + PAGE - 1) // PAGE] = True
    return pages


FOOTER_READ = 64 * 1024  # pyarrow reads a footer as the file's last 64 KiB (or the whole footer if longer)


def footer_pages(path: Path) -> np.ndarray:
    """The pages of pyarrow's read of the footer: the footer, or the file's last 64 KiB if more."""
    size = path.stat().st_size
    with open(path, "rb") as handle:
        handle.seek(size - 8)
        footer = int.from_bytes(handle.read(4), "little") + 8
    pages = np.zeros((size + PAGE - 1) // PAGE, dtype=bool)
    pages[(size - max(footer, FOOTER_READ)) // PAGE :] = True
    return pages


@pytest.fixture
def wide_file(tmp_path) -> Path:
    rng = np.random.default_rng(0)
    table = pa.table({f"c{i}": rng.standard_normal(ROWS_PER_GROUP * GROUPS, dtype=np.float32) for i in range(COLUMNS)})
    path = tmp_path / "wide.parquet"
    pq.write_table(table, path, row_group_size=ROWS_PER_GROUP, compression="none", use_dictionary=False)
    evict(path)
    if resident_pages(path).any():
        pytest.skip(f"{tmp_path} keeps evicted pages resident (tmpfs?): the page cache is not observable there")
    return path


def _outside(resident: np.ndarray, allowed: np.ndarray) -> str:
    stray = resident & ~allowed
    count = int(stray.sum())
    return f"{count} pages ({count * PAGE:,} bytes) outside, first at byte {int(np.argmax(stray)) * PAGE:,}"


def test_a_shuffled_epoch_caches_only_each_row_groups_own_bytes(wide_file):
    source = ParquetSource(wide_file)
    by_group = {fragment.row_group: fragment for fragment in source.fragments}
    for group in (2, 0, 3, 1):  # out of file order, each from a cold cache: what a shuffled epoch does
        evict(wide_file)
        chunk = by_group[group].read()
        assert len(chunk["c0"]) == ROWS_PER_GROUP
        resident = resident_pages(wide_file)
        wanted = chunk_pages(wide_file, group)
        assert resident[wanted].all(), "the row group read is not in the page cache"
        assert not (resident & ~(wanted | footer_pages(wide_file))).any(), (
            f"reading row group {group} cached bytes of other row groups: "
            + _outside(resident, wanted | footer_pages(wide_file))
        )


def test_a_projection_caches_only_the_projected_column_chunks(wide_file):
    columns = {"c3", "c4", "c20"}
    source = ParquetSource(wide_file, columns=sorted(columns))
    fragment = next(fragment for fragment in source.fragments if fragment.row_group == 1)
    evict(wide_file)
    chunk = fragment.read()
    assert sorted(chunk) == sorted(columns)
    resident = resident_pages(wide_file)
    wanted = chunk_pages(wide_file, 1, columns)
    assert resident[wanted].all()
    assert not (resident & ~(wanted | footer_pages(wide_file))).any(), _outside(
        resident, wanted | footer_pages(wide_file)
    )


def test_a_filtered_read_with_no_ranges_asked_ahead_still_reads_no_further(wide_file):
    # With a filter the chunks are not asked for ahead (its columns are not known): only the
    # file's open without read-ahead keeps the read to the row group's own bytes.
    source = ParquetSource(wide_file, filter=pads.field("c0") > -100.0)
    fragment = next(fragment for fragment in source.fragments if fragment.row_group == 1)
    evict(wide_file)
    chunk = fragment.read()
    assert len(chunk["c0"]) == ROWS_PER_GROUP
    resident = resident_pages(wide_file)
    allowed = chunk_pages(wide_file, 1) | footer_pages(wide_file)
    assert not (resident & ~allowed).any(), _outside(resident, allowed)


def test_reads_in_file_order_keep_the_kernels_read_ahead(wide_file):
    # Unshuffled reads are what read-ahead is for (without it a cold unshuffled epoch ran at
    # 0.57x the rows/s): row group 1 read right after row group 0 is read ahead past its end.
    source = ParquetSource(wide_file)
    by_group = {fragment.row_group: fragment for fragment in source.fragments}
    evict(wide_file)
    by_group[0].read()
    by_group[1].read()
    resident = resident_pages(wide_file)
    beyond = chunk_pages(wide_file, 2) & ~chunk_pages(wide_file, 1) & ~footer_pages(wide_file)  # not a shared page
    assert resident[beyond].any(), "no read-ahead past row group 1, read in file order"
