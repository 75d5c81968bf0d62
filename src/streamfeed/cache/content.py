"""``verify=``: whether the conversion cache checks its source's files by content or by metadata only.

The cache key (``key.py``) hashes the source's fingerprint, whose file
identity is (path, size, modification time): a rewrite of the same size
with its time put back (``os.utime``, ``cp -p``, ``rsync -t``, a coarse
clock) keeps the key, and a published cache would serve the old rows in
every later run. ``verify="content"`` adds an xxh3_128 of every source
file's bytes, hashed in one streaming pass when the cache is opened (once
per run), to the key: changed bytes name another key, whose parts are
written from the source, so no part made from other bytes is served.
``verify="metadata"`` skips the pass and keeps the limit.

Files on object storage are not hashed (it would download them): their
version (ETag, version id) is already in the fingerprint. A file rewritten
after the pass, within the run, is the readers' check at each open (size,
time, inode: ``files/stamps.py``), not this one: a same-size rewrite with
its time put back between the pass and the read is not defended.

The default, resolved in :func:`resolve_verify` only, is ``"content"`` for
the formats of :data:`CONTENT_BY_DEFAULT`, where the pass was measured to
cost under 5 % of the cached epoch's first read (docs/self-healing.md,
"Conversion cache"); ``"metadata"`` elsewhere (Parquet measured over it;
the other formats not measured).
"""

from __future__ import annotations

import os
from typing import Iterator, Literal

from ..core import Source
from ..errors import ArgumentError, describe
from ..files.publish import DIGESTS
from ..files.storage import is_remote

Verify = Literal["content", "metadata"]

# The hash pass against the first epoch of a cached dataset (reading the source and writing the parts),
# `benchmarks/cache.py --repeat 5`, medians, load ~4.5 (docs/self-healing.md): 2 M-row CSV (719 MB) 0.133 s
# of 4.02 s, 3.3 %; 2 M-row Parquet (272 MB, random float32, snappy: decoding costs little) 0.106 of 0.768 s,
# 13.8 %; 10 000 JPEGs (141 MB, `--images --repeat 3`) 0.098 of 10.45 s, 0.9 %. Other formats are not
# measured and keep "metadata".
CONTENT_BY_DEFAULT = frozenset({"csv", "images"})
"""Formats cached with ``verify="content"`` by default: the hash measured under 5 % of the first epoch."""

CONTENT_DIGEST = "xxh3_128"  # the cache's own checksum (files.publish.DIGESTS), 7.4 GB/s a core here
_BLOCK = 1 << 20  # bytes read per call: 0.12 s for the 719 MB benchmark CSV against 0.14 s at 8 MiB (L2-sized)


def resolve_verify(source: Source, verify: str | None) -> Verify:
    """``verify`` checked, or (None) the default for ``source``'s format: the one place it is decided."""
    if verify is None:
        return "content" if source.info.format in CONTENT_BY_DEFAULT else "metadata"
    if verify not in ("content", "metadata"):
        raise ArgumentError(
            describe("Invalid cache verify", expected="'content', 'metadata' or None (the default)", found=repr(verify))
        )
    return "content" if verify == "content" else "metadata"


def content_digest(source: Source) -> str | None:
    """The xxh3_128 of every local file of ``source`` (paths and bytes, in order); None on object storage.

    One streaming pass of :data:`_BLOCK` reads, one buffer reused. A file
    that cannot be read raises (the source could not read it either). A
    directory among the files (a subset of an image folder names the
    folder) stands for the files under it.
    """
    if is_remote(source.info.filesystem):
        return None
    digest = DIGESTS[CONTENT_DIGEST]()
    buffer = bytearray(_BLOCK)
    view = memoryview(buffer)
    for path in (name for entry in source.files for name in _files_under(entry)):
        digest.update(f"{path}\0".encode())
        with open(path, "rb", buffering=0) as file:
            while count := file.readinto(buffer):
                digest.update(view[:count])
        digest.update(b"\0")
    return digest.hexdigest()


def _files_under(path: str) -> Iterator[str]:
    """``path``, or for a directory the regular files under it, sorted (no FIFO opened, no directory link followed)."""
    if not os.path.isdir(path):
        yield path
        return
    for folder, directories, names in os.walk(path):
        directories.sort()
        yield from (file for name in sorted(names) if os.path.isfile(file := os.path.join(folder, name)))
