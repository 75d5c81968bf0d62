"""A source read through the conversion cache: what :meth:`Dataset.cache` wraps the source in.

:meth:`Dataset.cache <streamfeed.pipeline.Dataset.cache>` calls
:func:`cache_source`, which wraps the source in a :class:`CachedSource`.
Each fragment is read from the cache when it is there, otherwise from the
source, and what was read is written to the cache by one writer thread
while the read threads decode on, or, for decoded images, by the read
thread (:meth:`.writer.PartWriter.store` says why): the first epoch is the
conversion, with no extra pass. What is cached is the source's output
(decoded rows, before the user's ``map``/``filter``, which still run every
epoch), so the cached dataset keeps the source's fingerprint, fragments,
row counts and plan: batches, order and saved states are the same with
and without the cache. The cache's directory is ``directory``, default
:func:`default_directory`; ``mode="auto"`` first measures whether caching
pays (``auto.py``); ``verify`` says whether the source files' bytes are in
the key (``content.py``).
"""

from __future__ import annotations

import os
from typing import Any, Sequence

from ..core import Chunk, Fragment, Source, SourceInfo
from ..errors import ArgumentError, describe
from .auto import should_cache
from .content import content_digest, resolve_verify
from .key import cache_key
from .store import FragmentStore


def default_directory() -> str:
    """``$STREAMFEED_CACHE_DIR``, else ``~/.cache/streamfeed/cache``."""
    return os.environ.get("STREAMFEED_CACHE_DIR") or os.path.join(
        os.path.expanduser("~"), ".cache", "streamfeed", "cache"
    )


class CachedFragment:
    """A source fragment read through the cache; its identity and row count are the source's."""

    def __init__(self, store: FragmentStore, index: int, inner: Fragment) -> None:
        self._store, self._index, self.inner = store, index, inner

    @property
    def key(self) -> str:
        return self.inner.key

    @property
    def num_rows(self) -> int:
        return self.inner.num_rows

    @property
    def path(self) -> str:
        return self.inner.path

    @property
    def location(self) -> str:
        return self.inner.location

    def read(self) -> Chunk:
        return self._store.read(self._index)


class CachedSource:
    """``inner`` with its fragments read through a :class:`FragmentStore`; what it declares (``info``) is ``inner``'s.

    The fingerprint is the source's own, so states move freely between the
    cached and the uncached dataset.
    """

    def __init__(
        self,
        inner: Source,
        directory: str,
        max_bytes: int | None,
        *,
        trust_directory: bool = False,
        content: str | None = None,
    ) -> None:
        self.inner = inner
        self.store = FragmentStore(inner, directory, max_bytes, trust_directory=trust_directory, content=content)
        self.fragments = tuple(CachedFragment(self.store, i, f) for i, f in enumerate(inner.fragments))

    @property
    def column_names(self) -> list[str]:
        return self.inner.column_names

    @property
    def files(self) -> Sequence[str]:
        return self.inner.files

    @property
    def row_bytes(self) -> float:
        return self.inner.row_bytes

    @property
    def exact_counts(self) -> bool:
        return self.inner.exact_counts

    @property
    def read_parallelism(self) -> int | None:
        # No limit: the layout, chosen once, serves every epoch, and every epoch after the first reads
        # parts (Parquet, Arrow IPC), whose decoding runs in parallel. A source that cannot read in
        # parallel (HDF5: one lock) is decode-bound in its first epoch whatever the threads.
        return None

    @property
    def read_scratch(self) -> float | None:
        # The source's: the first epoch decodes it (and writes each part from the chunk read); a later read
        # holds one part while checking it. Measured on 1024x1024 JPEGs read to 256, 128 a fragment: beyond
        # the fragment's array, 0.18x while writing, 0.03x reading the part (the source says 0.38x).
        return self.inner.read_scratch

    def fragment_row_bytes(self, fragment: Fragment) -> float:
        inner = fragment.inner if isinstance(fragment, CachedFragment) else fragment
        return self.inner.fragment_row_bytes(inner)

    @property
    def info(self) -> SourceInfo:
        return self.inner.info  # the rows are the source's: so are their schema and classes

    def fingerprint(self) -> Any:
        return self.inner.fingerprint()


def cache_source(
    source: Source,
    directory: str | os.PathLike | None = None,
    *,
    max_bytes: int | None = None,
    mode: str = "always",
    trust_directory: bool = False,
    verify: str | None = None,
) -> Source:
    """``source`` read through the conversion cache, or (``mode="auto"`` deciding against it) as it is.

    ``mode``: ``"always"`` or ``"auto"``, checked here (it comes as a string from ``Dataset.cache``).
    ``trust_directory``: take a root that another user owns or others can write (``trust.py``); else refused.
    ``verify``: ``"content"`` (the source files' bytes hashed once per run, in the key), ``"metadata"`` (path,
    size, time only), or None: the format's default (``content.resolve_verify``).
    A source whose fingerprint cannot see its values (``info.sees_values`` False: a Ray source without
    ``version=``) is refused: its cache could not tell old rows from new.
    """
    if isinstance(source, CachedSource):
        source = source.inner
    if mode not in ("always", "auto"):
        raise ArgumentError(describe("Invalid cache mode", expected="'always' or 'auto'", found=repr(mode)))
    if max_bytes is not None and (isinstance(max_bytes, bool) or not isinstance(max_bytes, int) or max_bytes < 0):
        raise ArgumentError(describe("Invalid max_bytes", expected="an integer >= 0 or None", found=repr(max_bytes)))
    if not isinstance(trust_directory, bool):
        raise ArgumentError(describe("Invalid trust_directory", expected="True or False", found=repr(trust_directory)))
    if not source.info.sees_values:
        # The cache is keyed by the fingerprint: one that cannot see the values would serve old rows forever.
        raise ArgumentError(
            describe(
                f"A {source.info.format} source cannot be cached: its fingerprint cannot see its values",
                where=", ".join(source.files[:3]),
                expected="a source whose identity changes when its rows do (files by size and time, or a version)",
                found="an identity from the pipeline's description only (a changed input or map keeps it)",
                fix="pass version= (e.g. read_ray(ds, version='2024-06-01')) and change it when the inputs "
                "or the code change",
            )
        )
    root = os.fspath(directory) if directory is not None else default_directory()
    content = content_digest(source) if resolve_verify(source, verify) == "content" else None
    if mode == "auto" and not should_cache(source, root, content):
        return source
    return CachedSource(source, root, max_bytes, trust_directory=trust_directory, content=content)


def key_for(source: Source, verify: str | None = None) -> str:
    """The key ``Dataset.cache(verify=verify)`` keeps a cache of ``source`` under (its content read if checked so)."""
    if isinstance(source, CachedSource):
        source = source.inner
    return cache_key(source, content_digest(source) if resolve_verify(source, verify) == "content" else None)
