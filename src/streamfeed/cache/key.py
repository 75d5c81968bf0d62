"""What the conversion cache is keyed by: the source's identity and the version of what a part holds.

The key hashes the source's type, its fingerprint and
:data:`CACHE_FORMAT_VERSION`. The fingerprint is the complete description
of what the fragments yield: the files (size and modification time), every
reader setting (``core.records_settings`` records all constructor
arguments but the few :data:`~streamfeed.core.NOT_ROW_SETTINGS`), and the
fragmenting (every fragment's key, which encodes its boundaries, and row
count: ``core.fragmenting_digest``). A changed file, setting or cut reads
and writes another key, so a cache is never served for rows it does not
hold, nor one fragment's part as another's. The user's ops are not in the
key and need not be: a part holds the source's rows before any
``map``/``filter``, which run on them every epoch. The cached dataset keeps
the source's own fingerprint (``source.py``): the key names the directory,
not the dataset. With ``verify="content"`` (``content.py``) the key also
holds an xxh3_128 of the source files' bytes: a same-size rewrite with its
modification time put back then names another key too.
"""

from __future__ import annotations

import hashlib
import json

from ..core import Source

CACHE_FORMAT_VERSION = 4  # 2: n-D columns as fixed-size binary; 3: xxh3_128, no page checksums; 4: .arrow parts
"""Bumped when what a part holds changes: older caches then get another key and are not reused."""


def cache_key(source: Source, content: str | None = None) -> str:
    """The cache's name for ``source``: its type, fingerprint and columns, the cache format version.

    ``content``: the digest of the source files' bytes (``content.content_digest``), or None (metadata only).
    """
    identity: dict = {
        "cache_format": CACHE_FORMAT_VERSION,
        "type": f"{type(source).__module__}.{type(source).__qualname__}",
        "source": source.fingerprint(),
        "columns": list(source.column_names),
    }
    if content is not None:  # absent, not null, under "metadata": those caches keep their key
        identity["content"] = content
    return hashlib.sha256(json.dumps(identity, sort_keys=True, default=str).encode()).hexdigest()[:20]
