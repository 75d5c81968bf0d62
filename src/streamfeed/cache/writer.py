"""Writing the conversion cache's parts: by one writer thread through a queue of one part, or by the read thread.

A fragment read from the source is handed to :meth:`PartWriter.store`,
which says who writes its part and why (the measured reasons are there).
A part is written outside the lock (the threads write in parallel) to a
temporary name in the staging directory, then renamed in and journaled
under the lock (:meth:`.staging.Staging.commit`); the write that stages
the last part publishes the cache. Any error writing a part stops
caching, never reading: the read goes on from the source.
"""

from __future__ import annotations

import collections
import os
import secrets
import threading

from ..core import Chunk
from .parts import PART_DIGEST, part_name, write_part
from .staging import Staging, remove_file

WRITE_QUEUE = 1  # parts waiting for the writer thread (one fragment each); past it the read thread writes


class PartWriter:
    """The parts of one :class:`~.store.FragmentStore` being written: its writer thread, its queue, the read threads'.

    ``lock`` is the store's; ``idle`` (on it) is notified when a part is in
    (or dropped) and when the writer thread ends.
    """

    def __init__(self, staging: Staging, lock: threading.Lock) -> None:
        self.staging = staging
        self._lock = lock
        self.idle = threading.Condition(lock)
        self.queued: set[int] = set()  # fragments whose part is queued or being written
        self._queue: collections.deque[tuple[int, Chunk, str]] = collections.deque()  # parts for the writer thread
        self._thread: threading.Thread | None = None

    def wait_for(self, index: int) -> None:
        """Under the lock: returns once fragment ``index``'s part is not queued or being written."""
        while index in self.queued:
            self.idle.wait()

    def store(self, index: int, chunk: Chunk) -> None:
        """Has ``chunk`` written as fragment ``index``'s part: by the writer thread, or here.

        A chunk of 1-D columns goes to one writer thread through a queue of
        :data:`WRITE_QUEUE` parts (its writable columns copied, as the
        pipeline's ops may change them in place; Arrow-backed numbers, as
        CSV gives, are read-only and not copied), and the read thread goes
        on decoding; when the queue is full the read thread writes the part
        itself, so the queue stays bounded. A chunk with a writable n-D
        column (decoded images) is written here, before the ops can change
        it: queuing it would need a copy (147 KiB an image, held beside the
        pipeline's), and on 10 000 JPEGs the writer thread with the copy was
        not faster than writing here (docs/self-healing.md).
        The read of the last fragment still to be written waits for the
        writer: when the first epoch's last batch is served, the cache is
        published.
        """
        staging = self.staging
        with self._lock:
            if not staging.enabled or staging.manifest is not None or index in staging.parts or index in self.queued:
                return
            directory = staging.open()
            if directory is None:
                return
            self.queued.add(index)
            inline = len(self._queue) >= WRITE_QUEUE or any(
                values.flags.writeable and values.ndim > 1 for values in chunk.values()
            )
            if not inline:  # writable columns (strings as objects: a copy of pointers) copied, read-only ones not
                copy = {name: values.copy() if values.flags.writeable else values for name, values in chunk.items()}
                self._queue.append((index, copy, directory))
                if self._thread is None:
                    self._thread = threading.Thread(target=self._drain, name="streamfeed-cache-writer")
                    self._thread.start()
        if inline:
            self._write_or_stop(index, chunk, directory)
        with self._lock:
            thread = self._thread if staging.required <= staging.parts.keys() | self.queued else None
        if thread is not None:
            thread.join()  # it ends once the queue is empty: the last parts are in, the cache published

    def _drain(self) -> None:
        """The writer thread: writes queued parts until the queue is empty, then ends (a new one starts on demand)."""
        while True:
            with self._lock:
                if not self._queue:
                    self._thread = None
                    self.idle.notify_all()
                    return
                index, chunk, directory = self._queue.popleft()
                if not self.staging.enabled or self.staging.directory != directory:
                    # caching stopped meanwhile: the part is dropped unwritten
                    self.queued.discard(index)
                    self.staging.discard_if_stopped(len(self.queued))
                    self.idle.notify_all()
                    continue
            self._write_or_stop(index, chunk, directory)

    def _write_or_stop(self, index: int, chunk: Chunk, directory: str) -> None:
        """:meth:`_write`; an error it does not handle (a column Arrow cannot write) stops caching, not reading."""
        try:
            self._write(index, chunk, directory)
        except BaseException as exc:
            with self._lock:
                if isinstance(exc, Exception):
                    self.staging.stop(f"writing {part_name(index, chunk)} failed: {exc!r}")
                self.queued.discard(index)  # if _write failed before it counted the part out
                self.staging.discard_if_stopped(len(self.queued))
                self.idle.notify_all()
            if not isinstance(exc, Exception):
                raise

    def _write(self, index: int, chunk: Chunk, directory: str) -> None:
        """Writes one part to a temporary name, then (under the lock) renames it in, journals it, maybe publishes."""
        name = part_name(index, chunk)
        temporary = os.path.join(directory, f".{name}.{secrets.token_hex(4)}.tmp")
        problem: str | None = None
        entry: dict = {}
        try:
            rows, size, digest = write_part(chunk, temporary)
            entry = {"index": index, "path": name, "rows": rows, "bytes": size, PART_DIGEST: digest}
        except OSError as exc:  # a full disk, a directory not writable or gone
            problem = f"writing {name} failed: {exc}"
        except BaseException:
            remove_file(temporary)
            raise
        with self._lock:
            self.queued.discard(index)
            if problem is None:
                problem = self.staging.commit(directory, temporary, entry)
            if problem is not None:
                self.staging.stop(problem)
            if index not in self.staging.parts:
                remove_file(temporary)
            self.staging.discard_if_stopped(len(self.queued))
            self.staging.publish_if_complete()
            self.idle.notify_all()
