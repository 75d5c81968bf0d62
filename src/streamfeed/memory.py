"""Sizing the pipeline's buffers to a memory limit, and measuring RSS.

The pipeline holds data in three places: fragments being read (``read_ahead``),
the shuffle window (two unit buffers: one served while the next unit loads),
and the prefetch queues of finished batches (the epoch's, and the next
epoch's once the Keras adapter starts it early). Their sum is a
figure we can compute before the first read; :func:`plan_layout` shrinks
read-ahead to the read threads, then prefetch, then read-ahead further,
until it fits. It never shrinks the shuffle window: the window belongs to
the order (``plan.default_window``), which no machine setting may change.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import re
from dataclasses import asdict, dataclass
from typing import Iterator

from .errors import ArgumentError, MemoryLimitError, describe

DEFAULT_MEMORY_LIMIT = 512 * 2**20
DECODE_SHARE = 4
"""One item (an image) may decode to at most ``memory_limit // DECODE_SHARE`` bytes before it is resized.

Its full-size pixels exist only inside one read thread, for a moment, on
top of the buffers the layout sizes; a quarter keeps a bomb from taking the
whole limit while a 10 000 x 10 000 RGB scan fits the default 512 MiB.
"""


def default_read_threads(read_parallelism: int | None = None) -> int:
    """Read threads when none are named: at most 4, at most the cores, at most what the source can use at once."""
    return min(4, os.cpu_count() or 1, read_parallelism or 4)


def resolve_memory_limit(memory_limit: int | None) -> int:
    """The limit in force: ``memory_limit``, or :data:`DEFAULT_MEMORY_LIMIT` when None (the one place that says so)."""
    return DEFAULT_MEMORY_LIMIT if memory_limit is None else int(memory_limit)


def decode_bytes_limit(memory_limit: int | None) -> int:
    """The most one item may decode to under ``memory_limit`` (the default if None)."""
    return resolve_memory_limit(memory_limit) // DECODE_SHARE


_DECODE_BOUND: contextvars.ContextVar[int | None] = contextvars.ContextVar("streamfeed_decode_bound", default=None)


def decode_bound() -> int | None:
    """The decode bound of the pipeline reading in this thread now, or None outside one.

    Decoders check a header's declared size against it (and their own
    ``max_image_bytes``) before allocating: a source is opened before
    ``with_options(memory_limit=...)`` is known, so the bound reaches the
    decoder through the reading thread's context, set by the runtime.
    """
    return _DECODE_BOUND.get()


@contextlib.contextmanager
def decoding_within(nbytes: int | None) -> Iterator[None]:
    """Runs the block with :func:`decode_bound` at ``nbytes`` (None: unchanged)."""
    if nbytes is None:
        yield
        return
    token = _DECODE_BOUND.set(int(nbytes))
    try:
        yield
    finally:
        _DECODE_BOUND.reset(token)


@dataclass(frozen=True)
class Layout:
    """How many fragments and batches the pipeline keeps in flight."""

    read_threads: int
    read_ahead: int  # fragments submitted to the reader ahead of consumption
    window: int  # fragments per read unit (1 without shuffling)
    prefetch: int  # finished batches queued
    estimated_bytes: int
    decode_bytes: int  # the most one item (an image) may decode to, before resizing

    def to_dict(self) -> dict:
        return asdict(self)


READ_TRANSIENT = 4
"""Bytes a reader holds while decoding, beyond its output, per decoded byte of the fragment.

Measured (``benchmarks/memory_limit.py``'s note in docs/performance.md):
pyarrow reading one 4 MiB row group of 16 float32 columns peaks at 20 MiB
in its pool (compressed column chunks, decompressed pages, the arrays),
five times its output. Each read thread has one fragment in decoding.
"""


def estimate_bytes(
    row_bytes: float,
    fragment_rows: float,
    batch_rows: int | None,
    *,
    read_ahead: int,
    window: int,
    prefetch: int,
    shuffled: bool,
    read_threads: int = 1,
    read_scratch: float | None = None,
) -> int:
    """Peak bytes held by the pipeline's own buffers for this layout, decoding included.

    ``batch_rows`` None: unbatched, the chunks served are the fragments
    read (views of them), so the queue holds one copy of each and nothing
    is packed or queued for a next epoch (the Keras adapter needs batches).
    Counting them three times refused a 72 MB CSV of narrow rows at the
    default limit (issue 23); ``tests/test_default_limits.py`` checks that
    peak RSS stays inside the smaller figure. ``read_scratch``: the source's
    bytes a read holds per fragment byte (``Source.read_scratch``; None:
    :data:`READ_TRANSIENT`).
    """
    assembly = (2 if shuffled else 1) * window  # the unit being served + the next one loading
    scratch = READ_TRANSIENT if read_scratch is None else read_scratch  # an image source caps its own decode's
    decoding = scratch * min(read_threads, read_ahead)  # in-flight reads' scratch
    fragments = (read_ahead + assembly + decoding) * fragment_rows
    if batch_rows is None:
        batches = prefetch * fragment_rows
    else:
        batches = 3 * prefetch * batch_rows  # a batch and its packed form, and the next epoch's queue
    return int(row_bytes * (fragments + batches))


PASS_COPIES = 1 + READ_TRANSIENT + 1
"""Decoded bytes a one-pass reader holds per byte of the fragment it is reading.

The fragment itself, its decoding scratch (:data:`READ_TRANSIENT`) and the
summary's working copy of a column (statistics convert to float64).
Measured: ``compute_stats`` of a CSV of three one-digit integer columns
grew peak RSS by 4.8x its 4 MiB fragments per read thread.
"""


def smaller_fragments_fix(setting: str | None) -> str:
    """How to read smaller fragments, for a source whose fragment size is the reader keyword ``setting``.

    None: the fragments are the files' own pieces (Parquet row groups).
    The command line takes ``fragment_bytes`` as ``--fragment-bytes``.
    """
    if setting is None:
        return (
            "rewrite the data once with smaller row groups (streamfeed convert, given a memory limit that holds "
            "these, writes row groups sized for streaming)"
        )
    flag = " (--fragment-bytes on the command line)" if setting == "fragment_bytes" else ""
    return f"read smaller fragments with {setting}={flag}"


def pass_threads(largest_fragment_bytes: float, memory_limit: int | None, threads: int, fix: str) -> int:
    """Threads of a one-pass read (statistics, counting, quality) that fit ``memory_limit``: at most ``threads``.

    Each thread reads one fragment at a time (:data:`PASS_COPIES` its
    size); a pass's result does not depend on its thread count, so the
    limit may lower it. A limit that cannot hold one read is refused,
    naming ``fix`` (:func:`smaller_fragments_fix`).
    """
    limit = resolve_memory_limit(memory_limit)
    need = PASS_COPIES * max(largest_fragment_bytes, 1.0)
    if need > limit:
        raise MemoryLimitError(
            describe(
                "A fragment is too large to read within the memory limit",
                expected=f"at most {limit / 2**20:.0f} MiB for one fragment in reading ({PASS_COPIES} times its size)",
                found=f"the largest fragment is {largest_fragment_bytes / 2**20:.0f} MiB decoded",
                fix=f"raise memory_limit to {-(-int(need) // 2**20)} MiB or more, project fewer columns, or {fix}",
            )
        )
    return max(1, min(threads, int(limit // need)))


def plan_layout(
    *,
    row_bytes: float,
    fragment_rows: float,
    batch_rows: int | None,
    shuffled: bool,
    window: int,
    read_threads: int | None,
    prefetch: int | None,
    memory_limit: int | None,
    largest_fragment_rows: float | None = None,
    read_parallelism: int | None = None,
    smaller_fragments: str | None = None,
    read_scratch: float | None = None,
) -> Layout:
    """The largest layout within ``memory_limit`` (the library's default if None) for a given ``window``.

    The window is the order's (``plan.default_window`` or the user's): it is
    never changed here, so no memory limit changes what is served or in
    which order. Read-ahead shrinks to the read threads, then prefetch to
    two batches, then read-ahead below the threads; a limit too small
    for the window is refused, naming the largest window it would hold.
    ``read_parallelism`` caps the default read threads (``Source.read_parallelism``);
    ``read_scratch`` is what each read holds decoding (``Source.read_scratch``).

    Buffers are sized from the mean fragment, but the largest one must fit
    too (read, and converted once): a single huge fragment, such as a bz2
    CSV that cannot be split, is refused here rather than exhausting memory.
    ``batch_rows`` None: unbatched (see :func:`estimate_bytes`).
    ``smaller_fragments``: how this source reads smaller fragments, for the
    refusals (:func:`smaller_fragments_fix` of its ``fragment_setting``).
    """
    limit = resolve_memory_limit(memory_limit)
    smaller_fragments = smaller_fragments or smaller_fragments_fix(None)
    largest = max(fragment_rows, largest_fragment_rows or 0.0)
    if 2 * row_bytes * largest > limit:
        raise MemoryLimitError(
            describe(
                "A fragment is larger than the memory limit allows",
                expected=f"fragments below {limit / 2**20:.0f} MiB / 2 (read, then converted)",
                found=f"one of {largest:.0f} rows x {row_bytes:.0f} bytes = {row_bytes * largest / 2**20:.0f} MiB",
                fix=f"raise memory_limit, project fewer columns, or {smaller_fragments}",
            )
        )
    threads = read_threads or default_read_threads(read_parallelism)
    depth = prefetch or 8
    window = window if shuffled else 1
    ahead = max(threads, window) if shuffled else 2 * threads

    def size(ahead_: int, window_: int, depth_: int) -> int:
        return estimate_bytes(
            row_bytes,
            fragment_rows,
            batch_rows,
            read_ahead=ahead_,
            window=window_,
            prefetch=depth_,
            shuffled=shuffled,
            read_threads=threads,
            read_scratch=read_scratch,
        )

    # Read-ahead first, but not below the threads while prefetch can give: a read thread with no fragment
    # to read is idle. Shuffled 256x256 JPEGs at the default limit had read-ahead 1 and prefetch 6, and
    # two threads decoded one at a time: 2 100 images/s against 4 500 unshuffled (2 cores).
    while size(ahead, window, depth) > limit:
        if ahead > threads:
            ahead -= 1
        elif depth > 2:
            depth -= 1
        elif ahead > 1:
            ahead -= 1
        else:
            held = max((w for w in range(window - 1, 0, -1) if size(1, w, 2) <= limit), default=0)
            needed = size(1, window, 2)
            raise MemoryLimitError(
                describe(
                    "The pipeline cannot fit in its memory limit",
                    expected=f"at most {limit / 2**20:.0f} MiB",
                    found=f"{needed / 2**20:.0f} MiB with a shuffle window of {window} fragment(s) of "
                    f"{fragment_rows:.0f} rows x {row_bytes:.0f} bytes and the smallest buffers",
                    fix=f"raise memory_limit to {-(-needed // 2**20)} MiB or more"
                    + (
                        f", or shuffle with window={held} (a smaller window mixes fewer fragments: another order)"
                        if held
                        else ""
                    )
                    + f", or project fewer columns, or {smaller_fragments}",
                )
            )
    return Layout(
        read_threads=threads,
        read_ahead=ahead,
        window=window,
        prefetch=depth,
        estimated_bytes=size(ahead, window, depth),
        decode_bytes=decode_bytes_limit(limit),
    )


def reset_peak_rss() -> bool:
    """Resets this process's peak RSS (``VmHWM``) to its current RSS: Linux, ``/proc/self/clear_refs``.

    So that what a process did before (writing data, importing) does not
    count in the peak of what it does next; False where that is not possible.
    """
    try:
        with open("/proc/self/clear_refs", "w") as refs:
            refs.write("5")  # 5: reset the high-water mark (proc(5))
    except OSError:
        return False
    return high_water_bytes() is not None


def high_water_bytes() -> int | None:
    """This process's peak RSS since it started or since :func:`reset_peak_rss` (``VmHWM``); None without ``/proc``."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def rss_bytes() -> int:
    """Resident set size of this process now."""
    import psutil

    return psutil.Process().memory_info().rss


def peak_rss_bytes() -> int:
    """Peak resident set size of this process so far.

    Linux reports the high-water mark in KiB and updates it lazily, so it
    can trail the current RSS; the larger of the two is the peak.
    """
    import resource

    return max(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024, rss_bytes())


_SIZE_UNITS = {
    "": 1,
    "b": 1,
    "k": 2**10,
    "kb": 10**3,
    "kib": 2**10,
    "m": 2**20,
    "mb": 10**6,
    "mib": 2**20,
    "g": 2**30,
    "gb": 10**9,
    "gib": 2**30,
    "t": 2**40,
    "tb": 10**12,
    "tib": 2**40,
}
_SIZE = re.compile(r"^\s*(?P<number>\d+(?:\.\d*)?|\.\d+)\s*(?P<unit>[a-z]*)\s*$", re.IGNORECASE)


def parse_size(text: str) -> int:
    """Bytes from ``512MB`` (10^6), ``512MiB`` or ``512M`` (2^20), ``1GiB``, ``2G``, or a plain byte count.

    The one reading of sizes as people write them: the CLI's ``--memory-limit``
    and ``--fragment-bytes``, and ``with_options(memory_limit="1GiB")``.
    Raises :class:`ArgumentError` for anything else, and for less than one byte.
    """
    match = _SIZE.match(text)
    unit = match.group("unit").lower() if match else None
    if match is None or unit not in _SIZE_UNITS:
        raise ArgumentError(
            describe(
                "Not a size",
                expected="a number of bytes with an optional unit, such as 512MB, 512MiB, 1GiB or 2G",
                found=repr(text),
            )
        )
    size = float(match.group("number")) * _SIZE_UNITS[unit]
    if size < 1 or size != int(size):
        raise ArgumentError(
            describe(
                "Not a size", expected="a whole number of bytes, at least 1, such as 512MB or 1GiB", found=repr(text)
            )
        )
    return int(size)
