"""A source's idle database connections, reused by its fragment reads and closed with it.

Opening a PostgreSQL connection (TCP, SCRAM authentication, ADBC's setup)
costs more than reading a fragment of a few thousand rows, so each read
borrows an idle connection and gives it back; at most ``size`` stay idle.
A connection whose statement failed is closed, never given back. The idle
ones are closed by :meth:`ConnectionPool.close`, or by a finalizer when
the source is collected (closing a socket: it waits on no lock of ours).
"""

from __future__ import annotations

import weakref
from contextlib import contextmanager
from typing import Any, Iterator

from .connection import Connection

IDLE_CONNECTIONS = 8


def _close_quietly(handle: Any) -> None:
    try:
        handle.close()
    except Exception:  # noqa: BLE001  a connection already broken has nothing left to release
        pass


def _close_all(idle: list[Any]) -> None:
    while True:
        try:
            handle = idle.pop()  # another read thread may take the last one between a check and the pop
        except IndexError:
            return
        _close_quietly(handle)


class ConnectionPool:
    """Up to ``size`` idle connections to one database (list append/pop: atomic, no lock)."""

    def __init__(
        self, connection: Connection, what: str, size: int = IDLE_CONNECTIONS, timeout: float | None = None
    ) -> None:
        self._connection = connection
        self._timeout = timeout  # seconds per statement (PostgreSQL's is set once per ADBC session)
        self._what = what
        self._size = size
        self._idle: list[Any] = []
        self._finalizer = weakref.finalize(self, _close_all, self._idle)

    @contextmanager
    def borrowed(self) -> Iterator[tuple[Any, bool]]:
        """``(connection, fresh)``: an idle one (``fresh`` False) or a new one; given back if no error escaped."""
        try:
            handle, fresh = self._idle.pop(), False
        except IndexError:
            handle, fresh = self._connection.connect(self._what, self._timeout), True
        done = False
        try:
            yield handle, fresh
            done = True
        finally:
            if done and len(self._idle) < self._size:
                self._idle.append(handle)
            else:
                _close_quietly(handle)

    @property
    def idle(self) -> int:
        """Connections open and idle now."""
        return len(self._idle)

    def close(self) -> None:
        """Closes the idle connections (a later read opens new ones)."""
        _close_all(self._idle)
