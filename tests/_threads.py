"""The threads a test started and that have not ended, for the tests that no thread outlives its iterator."""

from __future__ import annotations

import threading
import time


def threads_left(baseline: set[threading.Thread], seconds: float) -> list[str]:
    """Names of the Python threads started since ``baseline`` still alive after joining each, ``seconds`` in all.

    A thread Python did not start (a native thread of Arrow's or a
    framework's that ran a Python callback shows up as a dummy thread)
    cannot be joined and is not the pipeline's: it is left out. The wait is
    a bound for a hang, not a timing assertion.
    """
    deadline = time.monotonic() + seconds
    started = [thread for thread in set(threading.enumerate()) - baseline if not _foreign(thread)]
    for thread in started:
        thread.join(timeout=max(0.0, deadline - time.monotonic()))
    return sorted(thread.name for thread in started if thread.is_alive())


def _foreign(thread: threading.Thread) -> bool:
    return isinstance(thread, threading._DummyThread)  # noqa: SLF001  threading names no public test for it
