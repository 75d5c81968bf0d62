"""``cache(mode="auto")``: cache only a source measured to cost :data:`AUTO_MIN_RATIO` times the cache's read.

A cache pays when reading the source (decoding CSV, JPEG) costs more
than reading the part back; for a source that is already fast (Parquet),
the first epoch's writing is a cost for nothing. :func:`should_cache`
decides from one measurement, :func:`probe_cache`, which ``streamfeed
doctor`` repeats on several fragments.
"""

from __future__ import annotations

import logging
import os
import tempfile
import time
from dataclasses import dataclass

from ..core import Fragment, Source, chunk_len
from ..files.paths import MANIFEST_NAME
from .key import cache_key
from .parts import part_format, read_part, write_part

logger = logging.getLogger("streamfeed")

AUTO_MIN_RATIO = 2.0  # mode="auto" caches when the source costs at least this many times the cache read


def should_cache(source: Source, directory: str, content: str | None = None) -> bool:
    """``mode="auto"``: whether reading the source costs at least :data:`AUTO_MIN_RATIO` x reading the cache.

    Measured on the smallest non-empty fragment: its read from the source,
    then the same rows written to and read back from Parquet in a temporary
    file. A cache already published for this source is used without
    measuring. The decision and both costs are logged once.
    """
    key = cache_key(source, content)  # content: as the store will key it (content.py)
    if os.path.isfile(os.path.join(directory, key, MANIFEST_NAME)):
        logger.info("cache(mode='auto'): a cache of this source exists in %s: using it", directory)
        return True
    sized = [fragment for fragment in source.fragments if fragment.num_rows > 0]
    if not sized:
        return False
    fragment = min(sized, key=lambda f: f.num_rows)
    probe = probe_cache(fragment)
    decision = probe.source_seconds >= AUTO_MIN_RATIO * probe.read_seconds
    logger.info(
        "cache(mode='auto'): %s: reading %s costs %.3g us/row from the source and %.3g us/row from the cache "
        "(written once at %.3g us/row), measured on %d rows; caching needs the source >= %.0fx slower",
        "caching" if decision else "not caching",
        fragment.path,
        1e6 * probe.source_seconds / probe.rows,
        1e6 * probe.read_seconds / probe.rows,
        1e6 * probe.write_seconds / probe.rows,
        probe.rows,
        AUTO_MIN_RATIO,
    )
    return decision


@dataclass(frozen=True)
class CacheProbe:
    """One fragment read from its source, and the same rows written to and read back from a cache part."""

    path: str
    rows: int
    source_seconds: float
    read_seconds: float  # the part read back, its checksum verified, as the cache serves it
    write_seconds: float


def probe_cache(fragment: Fragment) -> CacheProbe:
    """Times ``fragment.read()`` against writing its rows as a part and reading them back (a temporary file).

    The measurement of ``mode="auto"``; ``streamfeed doctor`` repeats it on several fragments.
    """
    started = time.perf_counter()
    chunk = fragment.read()
    source_seconds = time.perf_counter() - started
    with tempfile.TemporaryDirectory(prefix="streamfeed-cache-probe-") as scratch:
        path = os.path.join(scratch, f"probe.{part_format(chunk)}")
        started = time.perf_counter()
        _, size, digest = write_part(chunk, path)
        written = time.perf_counter()
        read_part(path, size, digest)
        read_seconds = time.perf_counter() - written
    return CacheProbe(fragment.path, max(1, chunk_len(chunk)), source_seconds, read_seconds, written - started)
