"""Reading rows of a file: the handles read threads keep open, and the worker-process reader.

Each of streamfeed's read threads keeps the last file it read open, with
its datasets, for its next read (opening, closing and the first lookup of
each dataset in a fresh handle cost ~1.2 ms per 8 MiB fragment, as long
as reading half of it); the file closes when the thread ends, with its
epoch's reader, so no handle outlives the reading. Reads elsewhere (the
main thread) open and close the file each time. A file that was replaced
or rewritten since (``os.stat``) is opened afresh.

``processes=N`` reads fragments in N worker processes instead
(:class:`ProcessReader`; each writes into shared memory that the fragment
copies out once; a ragged column, whose size is known only once read,
comes back pickled instead); see ``benchmarks/hdf5.py`` for when that pays.
Both paths read through :func:`read_range`, which applies the external-storage guard
(``guard.py``) before each dataset is touched.
"""

from __future__ import annotations

import concurrent.futures
import os
import threading
import weakref
from typing import Any, Callable, MutableMapping, Sequence

import numpy as np

from ...core import Chunk
from .catalog import Column, load_h5py, ragged_rows
from .guard import CheckedFiles, file_identity, open_identity, refuse_outside_data


class _KeptFile:
    """A read thread's open file and the datasets opened in it."""

    def __init__(self, path: str, identity: tuple[int, ...], handle: Any) -> None:
        self.path, self.identity, self.handle = path, identity, handle
        self.datasets: dict[str, Any] = {}

    def dataset(self, name: str) -> Any:
        found = self.datasets.get(name)
        if found is None:
            found = self.datasets[name] = self.handle[name]
        return found


_KEPT = threading.local()  # .file: this thread's _KeptFile; released (and the file closed) when the thread ends
_KEEPING_THREADS = "streamfeed-"  # the read pools' threads, which end with their epoch (or pass)


def _kept_file(path: str) -> _KeptFile | None:
    """This read thread's open file at ``path``, opened if it is not open yet, or is no longer the file there.

    An open, a close and the first lookup of each dataset in a fresh
    handle cost ~1.2 ms per fragment (measured: 2 M rows x 33 float32 in
    31 fragments, 36 ms of them against 79 ms of reading data), so a read
    thread keeps its last file open. Only streamfeed's own pool threads keep one: they
    end with their epoch (the reader's pool) or pass, and the file closes
    with them, so no handle outlives the reading. ``os.stat`` before each
    use (~3 us) finds a replaced or rewritten file, which is opened afresh.
    None elsewhere (the caller opens the file for this read only).
    """
    thread = threading.current_thread()
    if thread is threading.main_thread() or not thread.name.startswith(_KEEPING_THREADS):
        return None
    kept: _KeptFile | None = getattr(_KEPT, "file", None)
    try:
        identity = file_identity(os.stat(path))
    except OSError:
        identity = None
    if kept is not None and kept.path == path and kept.identity == identity:
        return kept
    _drop_kept()
    if identity is None:
        return None  # the plain open raises the error, naming the file
    handle = load_h5py().File(path, "r")
    if open_identity(handle) != identity:  # changed while opening (or no descriptor): this read only
        handle.close()
        return None
    _KEPT.file = kept = _KeptFile(path, identity, handle)
    return kept


def _drop_kept() -> None:
    kept: _KeptFile | None = getattr(_KEPT, "file", None)
    _KEPT.file = None
    if kept is not None:
        kept.datasets.clear()
        kept.handle.close()


def read_range(
    path: str,
    columns: Sequence[Column],
    start: int,
    stop: int,
    out: MutableMapping[str, Any],
    allow_external: bool = False,
    checked: CheckedFiles | None = None,
) -> None:
    """Reads rows ``[start, stop)`` of every column into ``out`` (arrays of stop-start rows).

    One contiguous slice per dataset; a ragged column's rows are put in
    ``out`` as a new :class:`~streamfeed.core_ragged.Ragged` (:func:`empty_out`
    leaves them out); a compound dataset shared by several columns is read
    once. Unless ``allow_external``, each dataset's storage is checked again
    first (the file may have been replaced since it was opened), unless
    ``checked`` says this same file passed already. In
    streamfeed's read threads the file stays open for the thread's next
    read (:func:`_kept_file`).
    """
    kept = _kept_file(path)
    if kept is None:
        with load_h5py().File(path, "r") as handle:
            identity = open_identity(handle) if checked is not None else None
            _read_datasets(
                handle, handle.__getitem__, identity, path, columns, start, stop, out, allow_external, checked
            )
        return
    try:
        _read_datasets(
            kept.handle, kept.dataset, kept.identity, path, columns, start, stop, out, allow_external, checked
        )
    except BaseException:
        _drop_kept()  # whatever failed is not kept for the next read
        raise


def _read_datasets(
    handle: Any,
    dataset_at: Callable[[str], Any],
    identity: tuple[int, ...] | None,
    path: str,
    columns: Sequence[Column],
    start: int,
    stop: int,
    out: MutableMapping[str, Any],
    allow_external: bool,
    checked: CheckedFiles | None,
) -> None:
    """:func:`read_range` in an open ``handle`` (``identity``: its file's), datasets found by ``dataset_at``."""
    by_dataset: dict[str, list[Column]] = {}
    for column in columns:
        by_dataset.setdefault(column.dataset, []).append(column)
    for name, wanted in by_dataset.items():
        if not allow_external:
            if checked is not None:
                checked.refuse_outside_data(handle, name, path, identity)
            else:
                refuse_outside_data(handle, name, path)
        dataset = dataset_at(name)
        if len(wanted) == 1 and wanted[0].vlen is not None:
            out[wanted[0].name] = ragged_rows(dataset[start:stop], wanted[0].vlen)
            continue
        if len(wanted) == 1 and wanted[0].field is None:
            if stop > start:
                dataset.read_direct(out[wanted[0].name], np.s_[start:stop])
            continue
        records = dataset[start:stop]
        for column in wanted:
            values = records[column.field]
            out[column.name][...] = values if column.index is None else values[:, column.index]


def empty_out(columns: Sequence[Column], rows: int, buffer: Any = None) -> dict[str, Any]:
    """Arrays for ``rows`` rows of every fixed-size column, fresh or laid out in ``buffer`` (ragged: read fills)."""
    out: dict[str, Any] = {}
    offset = 0
    for column in columns:
        if column.vlen is not None:
            continue
        shape = (rows, *column.shape)
        if buffer is None:
            out[column.name] = np.empty(shape, dtype=column.dtype)
        else:
            count = int(np.prod(shape))
            out[column.name] = np.frombuffer(buffer, dtype=column.dtype, count=count, offset=offset).reshape(shape)
            offset += count * column.dtype.itemsize
    return out


def _process_read(
    path: str, columns: Sequence[Column], start: int, stop: int, shm_name: str | None, allow_external: bool
) -> dict[str, Any]:
    """Worker-process side of ``processes=N``: reads rows into the named shared memory.

    Returns the ragged columns (pickled back: their size is known only once read).
    """
    from multiprocessing import shared_memory

    if shm_name is None:  # no fixed-size column
        out: dict[str, Any] = {}
        read_range(path, columns, start, stop, out, allow_external)
        return out
    # The parent owns and unlinks the block. Spawned workers share the
    # parent's resource tracker, so attaching here registers nothing new.
    block = shared_memory.SharedMemory(name=shm_name)
    try:
        out = empty_out(columns, stop - start, block.buf)
        read_range(path, columns, start, stop, out, allow_external)
        ragged = {c.name: out[c.name] for c in columns if c.vlen is not None}
        del out
        return ragged
    finally:
        block.close()


class ProcessReader:
    """A lazily started pool of worker processes shared by a source's fragments."""

    def __init__(self, processes: int) -> None:
        self.processes = processes
        self._pool: concurrent.futures.ProcessPoolExecutor | None = None
        self._lock = threading.Lock()

    def _get(self) -> concurrent.futures.ProcessPoolExecutor:
        with self._lock:
            if self._pool is None:
                import multiprocessing

                # spawn, not fork: the pipeline's threads are running when the pool starts.
                self._pool = concurrent.futures.ProcessPoolExecutor(
                    self.processes, mp_context=multiprocessing.get_context("spawn")
                )
                weakref.finalize(self, self._pool.shutdown, wait=False, cancel_futures=True)
            return self._pool

    def read(self, path: str, columns: Sequence[Column], start: int, stop: int, allow_external: bool) -> Chunk:
        from multiprocessing import shared_memory

        rows = stop - start
        size = rows * sum(c.fixed_row_bytes for c in columns)
        ragged = any(c.vlen is not None for c in columns)
        if size == 0 and not ragged:
            return empty_out(columns, rows)
        if size == 0:
            return self._get().submit(_process_read, path, list(columns), start, stop, None, allow_external).result()
        block = shared_memory.SharedMemory(create=True, size=size)
        try:
            lists = self._get().submit(_process_read, path, list(columns), start, stop, block.name, allow_external)
            chunk = lists.result()  # the worker has filled the block
            views = empty_out(columns, rows, block.buf)
            chunk.update({name: view.copy() for name, view in views.items()})
            del views
            return {c.name: chunk[c.name] for c in columns}
        finally:
            block.close()
            block.unlink()

    def close(self) -> None:
        with self._lock:
            if self._pool is not None:
                self._pool.shutdown(wait=True, cancel_futures=True)
                self._pool = None
