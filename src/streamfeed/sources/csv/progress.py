"""Progress of the row-count scan that opening a CSV runs: log lines, and a hook for a progress bar.

Counting a large file's rows takes seconds to minutes before the first
batch (a 27.4 GB click log: 61 s before issue 27), so the scan reports how
far it is. Sources must not import ``inspect`` (its progress bar is a
command's), so the scan reports in two ways that need nothing above it:

* the ``streamfeed`` logger, at INFO: a line every
  :data:`LOG_EVERY_SECONDS` once a file's count has taken longer than
  that, and one when it is done (bytes, share, MB/s);
* :func:`count_progress`: a context manager that hands every open in its
  block a callback ``(path, bytes scanned, bytes in all)``, for a caller
  that draws a bar (``with count_progress(advance): read_csv(path)``).
  It is taken in the thread that opens the source and passed to the
  threads that count, so a bar sees every file's scan; with several files
  it is called from several opening threads at once.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import time
from typing import Callable, Iterator

CountProgress = Callable[[str, int, int], None]
"""``callback(path, bytes scanned, bytes in all)``, called while a file's rows are counted."""

LOG_EVERY_SECONDS = 5.0
logger = logging.getLogger("streamfeed")
_callback: contextvars.ContextVar[CountProgress | None] = contextvars.ContextVar(
    "streamfeed_csv_count_progress", default=None
)


@contextlib.contextmanager
def count_progress(callback: CountProgress) -> Iterator[None]:
    """Calls ``callback(path, scanned, total)`` while the CSV sources opened in this block count rows."""
    token = _callback.set(callback)
    try:
        yield
    finally:
        _callback.reset(token)


def current_callback() -> CountProgress | None:
    """The :func:`count_progress` callback of the calling thread's context, if any."""
    return _callback.get()


class ScanProgress:
    """One file's scan: forwards to the callback, logs every :data:`LOG_EVERY_SECONDS` once it runs that long."""

    def __init__(
        self, path: str, total: int, callback: CountProgress | None, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.path, self.total, self.callback, self.clock = path, total, callback, clock
        self.started = self.last_log = clock()
        self.logged = False

    def __call__(self, scanned: int) -> None:
        if self.callback is not None:
            self.callback(self.path, scanned, self.total)
        now = self.clock()
        if now - self.last_log >= LOG_EVERY_SECONDS:
            self.last_log, self.logged = now, True
            share = f" ({100 * scanned / self.total:.0f} %)" if self.total else ""
            logger.info(
                "counting the rows of %s: %.2f of %.2f GB%s, %.0f MB/s",
                self.path, scanned / 1e9, self.total / 1e9, share, scanned / 1e6 / max(now - self.started, 1e-9),
            )  # fmt: skip

    def done(self, rows: int, scanned: int) -> None:
        """Logs the count of a scan that logged its progress (a short one stays quiet)."""
        if self.logged:
            seconds = self.clock() - self.started
            logger.info(
                "counted %d rows of %s (%.2f GB) in %.1f s, %.0f MB/s",
                rows, self.path, scanned / 1e9, seconds, scanned / 1e6 / max(seconds, 1e-9),
            )  # fmt: skip
