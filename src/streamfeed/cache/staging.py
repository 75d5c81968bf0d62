"""The conversion cache on disk: which parts exist, staged under a journal, adopted after a dead run, published.

Layout under the cache directory (``source.py``: default
``$STREAMFEED_CACHE_DIR`` or ``~/.cache/streamfeed/cache``):

- ``<key>/``: a published cache: a part per fragment ``i``, exactly its
  rows, uncompressed: ``part-<i:06d>.parquet`` (one row group), or, for a
  fragment with n-D numeric columns such as decoded images,
  ``part-<i:06d>.arrow`` (an Arrow IPC file: :func:`.parts.part_format` says why),
  n-D columns as one fixed-size binary value of raw bytes per row
  (:func:`.parts.part_table`); and ``_streamfeed_manifest.json`` (the manifest
  of ``files/publish.py``: rows, bytes, xxh3_128 per part), written last;
- ``.<key>.caching-<pid>-<token>/``: a cache being written, with a journal
  ``_parts.jsonl`` (rows, bytes, xxh3_128 of every part renamed into place).
  One rename makes it ``<key>/`` once every fragment is in. A run whose
  writer process is dead is adopted by the next one, which keeps the parts
  whose size, checksum and rows match the journal and rewrites the others.

A part that does not read back as recorded is dropped here
(:meth:`Staging.forget`) and rewritten from the source; a damaged
published cache becomes a staging directory again without it.
``max_bytes`` bounds the parts written; passing it, or any ``OSError``
while writing (a full disk), stops caching (:meth:`Staging.stop`, one
:class:`~.store.CacheWarning` follows), removes the unpublished directory
and reads on from the source.

:class:`Staging` holds no lock of its own: every method is called under
the lock of the :class:`~.store.FragmentStore` that holds it, and does the
file work of each change of state (a rename, a journal line, the
manifest) there, so that a part is renamed in and counted at once.
"""

from __future__ import annotations

import json
import logging
import os
import re
import secrets
import shutil
import threading
import weakref

import pyarrow.fs as pafs

from ..core import Fragment
from ..errors import CorruptFileError, describe
from ..files.paths import MANIFEST_FORMAT, MANIFEST_NAME, MANIFEST_VERSION, load_manifest
from ..files.publish import seal_file, sync_directory, write_manifest
from .key import CACHE_FORMAT_VERSION
from .parts import PART_DIGEST, PART_NAME

logger = logging.getLogger("streamfeed")

_JOURNAL = "_parts.jsonl"
_STAGING = re.compile(r"\.(?P<key>[0-9a-f]{20})\.caching-(?P<pid>\d+)-[0-9a-f]{8}")
_CLAIMED: set[str] = set()  # staging directories that a live store of this process writes
_CLAIMED_LOCK = threading.Lock()


class Staging:
    """One source's cache on disk: its published parts, or this run's staging directory and the parts in it.

    ``manifest``: the published parts by fragment index (None while there
    is no published cache); ``parts``: the staged ones (rows, bytes,
    checksum), ``bytes`` their size; ``directory``: the staging directory,
    once one was opened. Called under the store's lock (see the module).
    """

    def __init__(
        self, key: str, directory: str, fragments: tuple[Fragment, ...], exact: bool, max_bytes: int | None
    ) -> None:
        self.key = key
        self.fragments = fragments
        self.exact = exact
        self.root = os.path.abspath(directory)
        self.published = os.path.join(self.root, self.key)
        self.max_bytes = max_bytes
        self.required = {i for i, fragment in enumerate(self.fragments) if fragment.num_rows > 0}
        self.manifest: dict[int, dict] | None = None
        self.directory: str | None = None
        self.parts: dict[int, dict] = {}
        self.bytes = 0
        self.enabled = True
        self._pending: str | None = None  # the warning of stop(), issued once the lock is released
        self._claims: set[str] = set()
        self.load_published()
        weakref.finalize(self, _unclaim, self._claims)

    # ------------------------------------------------------------------ staging
    def open(self) -> str | None:
        """This run's staging directory: one a dead run left (adopted), else a new one; None if it cannot be made."""
        if self.directory is not None:
            return self.directory
        try:
            os.makedirs(self.root, exist_ok=True)
            mine = os.path.join(self.root, f".{self.key}.caching-{os.getpid()}-{secrets.token_hex(4)}")
            for entry in sorted(os.listdir(self.root)):
                match = _STAGING.fullmatch(entry)
                if match and match["key"] == self.key and _abandoned(os.path.join(self.root, entry), int(match["pid"])):
                    try:
                        os.rename(os.path.join(self.root, entry), mine)  # one run wins the rename
                    except OSError:
                        continue
                    self._claim(mine)
                    self._adopt(mine)
                    return mine
            os.mkdir(mine)
        except OSError as exc:
            self.stop(f"cannot create the cache directory: {exc}")
            return None
        self._claim(mine)
        return mine

    def _claim(self, staging: str) -> None:
        self.directory = staging
        self._claims.add(staging)
        with _CLAIMED_LOCK:
            _CLAIMED.add(staging)

    def commit(self, staging: str, temporary: str, entry: dict) -> str | None:
        """Renames a part written to ``temporary`` into ``staging`` and journals it; the problem if that failed.

        Nothing happens (and the caller removes the file) if caching stopped
        or moved to another directory meanwhile.
        """
        if not self.enabled or self.directory != staging:
            return None
        if self.max_bytes is not None and self.bytes + entry["bytes"] > self.max_bytes:
            return f"the cache would pass max_bytes={self.max_bytes} ({self.bytes + entry['bytes']} bytes)"
        try:
            os.rename(temporary, os.path.join(staging, entry["path"]))
            with open(os.path.join(staging, _JOURNAL), "a", encoding="utf-8") as journal:
                journal.write(json.dumps(entry) + "\n")
            self.parts[entry["index"]] = entry
            self.bytes += entry["bytes"]
        except OSError as exc:
            return f"writing {entry['path']} failed: {exc}"
        return None

    def forget(self, index: int, entry: dict, published: bool) -> bool:
        """A part that did not read back is dropped, to be rewritten from the source, never served.

        False if it was not the part that failed: the parts moved meanwhile (look again).
        """
        if published and self.manifest is not None and self.manifest.get(index) is entry:
            logger.warning("cache: %s does not match its manifest: rewriting it", entry["path"])
            self._reopen_published(index)
            return True
        if not published and self.parts.get(index) is entry:
            logger.warning("cache: %s does not match its journal: rewriting it", entry["path"])
            del self.parts[index]
            self.bytes -= entry["bytes"]
            return True
        return False

    # ----------------------------------------------------------------- stopping
    def stop(self, reason: str) -> None:
        """Stops caching for this run (once; one warning follows); :meth:`discard_if_stopped` removes the directory."""
        if not self.enabled:
            return
        self.enabled = False
        self.parts.clear()
        self._pending = describe(
            "The conversion cache stopped; reading continues from the source",
            where=self.directory or self.root,
            found=reason,
            fix="raise max_bytes or free disk space (cache(max_bytes=...), $STREAMFEED_CACHE_DIR) to cache",
        )

    def take_warning(self) -> str | None:
        """The warning of :meth:`stop`, once: the store issues it outside the lock (a warnings filter may raise)."""
        message, self._pending = self._pending, None
        return message

    def discard_if_stopped(self, writing: int) -> None:
        """Once caching stopped and no part is being written (``writing``), removes the staging directory."""
        if not self.enabled and writing == 0 and self.directory is not None:
            shutil.rmtree(self.directory, ignore_errors=True)
            self.directory = None

    # ----------------------------------------------------------------- adopting
    def _adopt(self, staging: str) -> None:
        """Keeps the parts of an adopted run that match its journal (size, checksum, rows); deletes the rest."""
        recorded: dict[int, dict] = {}
        try:
            with open(os.path.join(staging, _JOURNAL), encoding="utf-8") as journal:
                for line in journal:
                    try:
                        entry = json.loads(line)
                        recorded[int(entry["index"])] = entry
                    except (ValueError, KeyError, TypeError):  # a line cut short by the kill
                        continue
        except FileNotFoundError:
            pass
        kept = []
        for index, entry in sorted(recorded.items()):
            named = PART_NAME.fullmatch(str(entry.get("path")))
            if (
                named is not None
                and int(named["index"]) == index < len(self.fragments)
                and self._intact(os.path.join(staging, entry["path"]), entry, self.fragments[index])
            ):
                self.parts[index] = entry
                self.bytes += entry["bytes"]
                kept.append(entry)
        keep = {entry["path"] for entry in kept}
        for name in os.listdir(staging):
            if name not in keep:
                remove_file(os.path.join(staging, name))
        with open(os.path.join(staging, _JOURNAL), "w", encoding="utf-8") as journal:
            journal.writelines(json.dumps(entry) + "\n" for entry in kept)
        logger.info("cache: continuing %s: %d of %d fragments already written", staging, len(kept), len(self.required))

    def _intact(self, path: str, entry: dict, fragment: Fragment) -> bool:
        try:
            if os.path.getsize(path) != entry["bytes"]:
                return False
            size, digest = seal_file(pafs.LocalFileSystem(), path, sync=False, algorithm=PART_DIGEST)
        except (OSError, KeyError):
            return False
        return digest == entry.get(PART_DIGEST) and (not self.exact or entry.get("rows") == fragment.num_rows)

    # --------------------------------------------------------------- publishing
    def publish_if_complete(self) -> None:
        """Publishes once every fragment with rows has its part staged (and caching goes on)."""
        if self.enabled and self.manifest is None and self.required <= self.parts.keys():
            self._publish()

    def _publish(self) -> None:
        """Writes the manifest last and renames the staging directory to the key."""
        staging = self.directory
        if staging is None:  # only called with parts staged
            return
        files = []
        try:
            # Parts are not fsynced (unlike convert's shards): a part lost or torn by a power cut fails the
            # size, checksum or row check at its next read and is rewritten from the source, and
            # syncing 528 MB of parts at the end of the 2 M-row CSV epoch costs its wall time.
            for index in sorted(self.parts):
                entry = self.parts[index]
                files.append(
                    {
                        "path": entry["path"],
                        "rows": entry["rows"],
                        "bytes": entry["bytes"],
                        PART_DIGEST: entry[PART_DIGEST],
                    }
                )
            manifest = {
                "format": MANIFEST_FORMAT,
                "version": MANIFEST_VERSION,
                "data_format": "+".join(sorted({os.path.splitext(entry["path"])[1][1:] for entry in files})),
                "rows": sum(entry["rows"] for entry in files),
                "files": files,
                "cache": {"version": CACHE_FORMAT_VERSION, "key": self.key, "fragments": len(self.fragments)},
            }
            remove_file(os.path.join(staging, _JOURNAL))
            write_manifest(pafs.LocalFileSystem(), staging, manifest)
            sync_directory(staging)
            try:
                os.rename(staging, self.published)
            except OSError:
                if not os.path.isfile(os.path.join(self.published, MANIFEST_NAME)):
                    raise
                shutil.rmtree(staging, ignore_errors=True)  # another run published the same key first
            sync_directory(self.root)
        except OSError as exc:
            self.stop(f"publishing the cache failed: {exc}")
            shutil.rmtree(staging, ignore_errors=True)
            self.directory = None
            return
        self.directory, self.parts = None, {}
        self.load_published()
        logger.info("cache: published %s (%d fragments, %d bytes)", self.published, len(files), self.bytes)

    def load_published(self) -> None:
        """Reads the published manifest of this key, if there is one; one of another cache is removed."""
        path = os.path.join(self.published, MANIFEST_NAME)
        if not os.path.isfile(path):
            return
        try:
            manifest = load_manifest(pafs.LocalFileSystem(), path)
            names = {entry["path"]: entry for entry in manifest["files"]}
            parts = {int(match["index"]): names[name] for name in names if (match := PART_NAME.fullmatch(name))}
            cache = manifest.get("cache")
            if len(parts) != len(names) or not isinstance(cache, dict) or cache.get("key") != self.key:
                raise CorruptFileError(describe("Not a cache manifest of this source", where=path))
        except CorruptFileError:
            logger.warning("cache: the manifest %s is not one of this cache: writing the cache again", path)
            shutil.rmtree(self.published, ignore_errors=True)
            return
        self.manifest = parts

    def _reopen_published(self, damaged: int) -> None:
        """The published cache becomes this run's staging directory without ``damaged``, to be rewritten."""
        manifest, self.manifest = self.manifest or {}, None
        staging = os.path.join(self.root, f".{self.key}.caching-{os.getpid()}-{secrets.token_hex(4)}")
        try:
            os.rename(self.published, staging)
            remove_file(os.path.join(staging, MANIFEST_NAME))
            remove_file(os.path.join(staging, manifest[damaged]["path"]))
            kept = [{"index": index, **entry} for index, entry in sorted(manifest.items()) if index != damaged]
            with open(os.path.join(staging, _JOURNAL), "w", encoding="utf-8") as journal:
                journal.writelines(json.dumps(entry) + "\n" for entry in kept)
        except OSError as exc:
            self.stop(f"cannot rewrite the damaged cache: {exc}")
            return
        self._claim(staging)
        self.parts = {entry["index"]: entry for entry in kept}
        self.bytes = sum(entry["bytes"] for entry in kept)


def _unclaim(claims: set[str]) -> None:
    """Lets a collected store's staging directories be adopted by another store of this process."""
    with _CLAIMED_LOCK:
        _CLAIMED.difference_update(claims)


def _abandoned(path: str, pid: int) -> bool:
    """Whether a staging directory's writer is gone: a dead process, or a store of this one that let it go."""
    if pid == os.getpid():
        with _CLAIMED_LOCK:
            return path not in _CLAIMED
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:  # alive, another user's
        return False
    return False


def remove_file(path: str) -> None:
    """Best-effort removal of a file of ours: gone, or its directory unusable, is the degrade path's normal case."""
    try:
        os.remove(path)
    except OSError:
        pass
