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
after the pass, mid-run, is the readers' check at each open (size, time,
inode: ``files/stamps.py``), not this one.

The default, resolved in :func:`resolve_verify` only, is ``"content"`` for
the formats of :data:`CONTENT_BY_DEFAULT`, where the pass was measured to
cost under 5 % of the cached epoch's first read (docs/self-healing.md,
"Conversion cache"); ``"metadata"`` elsewhere (not measured).
"""

from __future__ import annotations

from typing import Literal

from ..core import Source
from ..errors import ArgumentError, describe
from ..files.publish import DIGESTS
from ..files.storage import is_remote

Verify = Literal["content", "metadata"]

CONTENT_BY_DEFAULT = frozenset({"csv", "parquet"})
"""Formats cached with ``verify="content"`` by default: the hash measured under 5 % of the first epoch."""

CONTENT_DIGEST = "xxh3_128"  # the cache's own checksum (files.publish.DIGESTS), 7.4 GB/s a core here
_BLOCK = 8 << 20  # bytes read per call while hashing


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
    that cannot be read raises (the source could not read it either).
    """
    if is_remote(source.info.filesystem):
        return None
    digest = DIGESTS[CONTENT_DIGEST]()
    buffer = bytearray(_BLOCK)
    view = memoryview(buffer)
    for path in source.files:
        digest.update(f"{path}\0".encode())
        with open(path, "rb", buffering=0) as file:
            while count := file.readinto(buffer):
                digest.update(view[:count])
        digest.update(b"\0")
    return digest.hexdigest()
