"""The conversion cache behind :meth:`Dataset.cache <streamfeed.pipeline.Dataset.cache>`.

A slow source's fragments are kept as part files, written while the first
epoch reads them; later epochs and runs read the parts. One job a module:

- ``source.py``: :func:`cache_source`, the :class:`CachedSource` and
  :class:`CachedFragment` that stand in for the source (same fingerprint,
  fragments and plan), and :func:`default_directory`;
- ``key.py``: :func:`cache_key`, what the cache is keyed by (the source's
  type, fingerprint and columns, :data:`CACHE_FORMAT_VERSION`);
- ``store.py``: :class:`FragmentStore`, the read-through of one source
  (a part when it is intact, else the source) under its one lock, and
  :class:`CacheWarning`;
- ``writer.py``: :class:`~.writer.PartWriter`, who writes a part: the
  writer thread through its queue of one part (:data:`~.writer.WRITE_QUEUE`),
  or the read thread;
- ``staging.py``: :class:`~.staging.Staging`, which parts exist on disk: the staging
  directory and its journal, adopting a dead run's parts, publishing with
  the manifest, stopping on a full disk or ``max_bytes``;
- ``parts.py``: the part file format (Parquet or Arrow IPC, checksummed),
  read only from a regular file of the cache's own (no link, FIFO, device);
- ``trust.py``: whose cache this is: a root others own or can write is
  refused unless ``trust_directory=True``; the cache's secret (0600) and
  the HMAC that seals each part's record to it;
- ``content.py``: ``verify=``, :func:`resolve_verify` (the default per
  format, :data:`CONTENT_BY_DEFAULT`) and :func:`content_digest`, the
  xxh3_128 of the source files' bytes that ``"content"`` puts in the key;
- ``auto.py``: ``mode="auto"``, :func:`probe_cache` and
  :data:`AUTO_MIN_RATIO`, the measured decision whether to cache.

Imports run source -> store -> writer -> staging -> key/trust -> parts, and
source -> auto -> key/parts, source -> content; the package may import only ``core``,
``errors``, ``memory`` and ``files`` (``tests/test_layering.py``).
"""

from .auto import AUTO_MIN_RATIO, CacheProbe, probe_cache, should_cache
from .content import CONTENT_BY_DEFAULT, content_digest, resolve_verify
from .key import CACHE_FORMAT_VERSION, cache_key
from .source import CachedFragment, CachedSource, cache_source, default_directory, key_for
from .store import CacheWarning, FragmentStore

__all__ = [
    "AUTO_MIN_RATIO",
    "CACHE_FORMAT_VERSION",
    "CONTENT_BY_DEFAULT",
    "CacheProbe",
    "CacheWarning",
    "CachedFragment",
    "CachedSource",
    "FragmentStore",
    "cache_key",
    "cache_source",
    "content_digest",
    "default_directory",
    "key_for",
    "probe_cache",
    "resolve_verify",
    "should_cache",
]
