"""The one pass that reads every fragment through a dataset's per-fragment ops: counting, statistics, quality.

Counting the rows left by a filter (``Resolution.fragment_rows``),
``compute_stats`` and ``inspect --quality`` all read the fragments the same
way: each in a bounded thread pool (``runtime.reader.read_fragment``: the
error policy applies, and the decode bound), results summarised in the
pool thread and handed back in fragment order, at most ``2 x threads`` in
flight. Stopping early (a sample's quota reached, Ctrl-C) cancels what has
not started and waits for what has.
"""

from __future__ import annotations

import concurrent.futures
from typing import Callable, Generator, Sequence, TypeVar

from ..core import Chunk, Fragment
from ..errors import BadInputReport
from ..files.arrow import TEXT_AS_ARROW
from ..memory import default_read_threads
from ..runtime.reader import in_order, read_fragment
from ..runtime.rows import first_rows
from ..runtime.spec import Op

T = TypeVar("T")


def fragment_pass(
    fragments: Sequence[Fragment],
    row_ops: Sequence[Op],
    report: BadInputReport,
    summarise: Callable[[int, Chunk], T],
    *,
    indices: Sequence[int] | None = None,
    threads: int | None = None,
    decode_bytes: int | None = None,
    name: str = "pass",
    text_as_arrow: bool = False,
) -> Generator[T | None, None, None]:
    """``summarise(index, chunk)`` of each fragment (``indices``: these only), in order; None for one skipped as bad.

    ``summarise`` runs in the pool's threads, so its NumPy work runs in
    parallel; the caller merges the results in order on its own thread.
    """
    threads = max(1, threads or default_read_threads())
    chosen = range(len(fragments)) if indices is None else indices

    arrow = text_as_arrow and not row_ops  # a map or filter is given NumPy, as in an epoch
    starts = first_rows(fragments) if row_ops else []  # a random_map draws as in epoch 0

    def work(index: int) -> T | None:
        token = TEXT_AS_ARROW.set(arrow)
        try:
            first = starts[index] if starts else 0
            chunk = read_fragment(fragments[index], row_ops, report, decode_bytes=decode_bytes, first_row=first)
        finally:
            TEXT_AS_ARROW.reset(token)
        return None if chunk is None else summarise(index, chunk)

    pool = concurrent.futures.ThreadPoolExecutor(threads, thread_name_prefix=f"streamfeed-{name}")
    try:
        yield from in_order(lambda index: pool.submit(work, index), chosen, 2 * threads)
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
