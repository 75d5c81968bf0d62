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
  whose size, checksum and rows match the journal and rewrites the others;
  once the key's cache is published, the staging directories dead runs
  left for it are removed (:meth:`Staging.sweep`);
- ``.streamfeed-cache-secret``: the cache's secret (0600), under which
  every journal and manifest record of a part carries an HMAC
  (``trust.py``): a record without it is not this user's cache's.

Nothing under the root is followed: a link, FIFO, device or directory
where a part, a staging directory or a published cache should be is never
read nor adopted (``lstat`` first, ``O_NOFOLLOW`` opens); a link is
removed, never what it points to. A root that other users own or can
write is refused unless trusted (``trust.check_root``).

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

import io
import json
import logging
import os
import re
import secrets
import shutil
import stat
import threading
import weakref

import pyarrow.fs as pafs

from ..core import Fragment
from ..errors import CorruptFileError, describe
from ..files.paths import MANIFEST_FORMAT, MANIFEST_NAME, MANIFEST_VERSION, load_manifest
from ..files.publish import sync_directory, write_manifest
from .key import CACHE_FORMAT_VERSION
from .parts import DIGESTS, PART_DIGEST, PART_NAME, read_part_bytes
from .trust import SEAL, check_root, load_secret, own_entry, seal, sealed

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
        self,
        key: str,
        directory: str,
        fragments: tuple[Fragment, ...],
        exact: bool,
        max_bytes: int | None,
        trust_directory: bool = False,
    ) -> None:
        self.key = key
        self.fragments = fragments
        self.exact = exact
        # Resolved once: a link the user named is theirs; nothing under the root is followed (trust.py).
        self.root = os.path.realpath(directory)
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
        weakref.finalize(self, _unclaim, self._claims)
        try:
            os.makedirs(self.root, mode=0o700, exist_ok=True)  # the leaf only: 0700 whatever the umask
        except OSError:
            pass  # not writable: open() stops caching with its reason
        check_root(self.root, trust_directory)  # ArgumentError: the user named a directory others control
        self.secret: bytes | None = None
        try:
            self.secret = load_secret(self.root)
        except OSError as exc:  # ArgumentError (a secret not the owner's alone) is not an OSError: it is raised
            self.stop(f"cannot read or make the cache's secret: {exc}")
        self.load_published()

    # ------------------------------------------------------------------ staging
    def open(self) -> str | None:
        """This run's staging directory: one a dead run left (adopted), else a new one; None if it cannot be made."""
        if self.directory is not None:
            return self.directory
        try:
            os.makedirs(self.root, mode=0o700, exist_ok=True)
            mine = os.path.join(self.root, f".{self.key}.caching-{os.getpid()}-{secrets.token_hex(4)}")
            for path in self._abandoned_stagings():
                try:
                    os.rename(path, mine)  # one run wins the rename
                except OSError:
                    continue
                if not own_entry(os.lstat(mine), directory=True):  # swapped between the check and the rename
                    remove_entry(mine)
                    continue
                self._claim(mine)
                self._adopt(mine)
                return mine
            os.mkdir(mine, 0o700)
        except OSError as exc:
            self.stop(f"cannot create the cache directory: {exc}")
            return None
        self._claim(mine)
        return mine

    def _abandoned_stagings(self) -> list[str]:
        """This key's staging directories whose writer is gone, real directories of ours only.

        A link or a file under a staging name (planted: this run never makes
        one) is removed, never followed; a directory of another user (a
        trusted shared root) is left alone.
        """
        found = []
        for entry in sorted(os.listdir(self.root)):
            match = _STAGING.fullmatch(entry)
            path = os.path.join(self.root, entry)
            if not match or match["key"] != self.key or path in self._claims:
                continue
            try:
                st = os.lstat(path)
            except OSError:
                continue
            if not stat.S_ISDIR(st.st_mode):
                logger.warning("cache: %s is not a directory (planted?): removing it, not following it", path)
                remove_entry(path)
            elif own_entry(st, directory=True) and _abandoned(path, int(match["pid"])):
                found.append(path)
        return found

    def sweep(self) -> None:
        """Removes the staging directories that dead runs left for this key, once its cache is published.

        Nothing adopts them then (an interrupted run's, after Ctrl-C or
        ``kill -9``): without this they were kept forever.
        """
        try:
            for path in self._abandoned_stagings():
                logger.info("cache: removing %s, left by an interrupted run: the cache is published", path)
                remove_entry(path)
        except OSError:
            pass  # the root not listable: nothing to sweep

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
        if self.secret is None:  # only enabled with a secret
            return "the cache has no secret"
        entry = {**entry, SEAL: seal(self.secret, self.key, entry)}
        try:
            target = os.path.join(staging, entry["path"])
            if os.path.lexists(target) and not stat.S_ISREG(os.lstat(target).st_mode):
                remove_entry(target)  # a directory in its place would make the rename fail
            os.rename(temporary, target)
            with _journal(os.path.join(staging, _JOURNAL), os.O_APPEND) as journal:
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
            remove_entry(self.directory)
            self.directory = None

    # ----------------------------------------------------------------- adopting
    def _adopt(self, staging: str) -> None:
        """Keeps the parts of an adopted run that match its journal (size, checksum, rows); deletes the rest."""
        recorded: dict[int, dict] = {}
        try:
            with _journal(os.path.join(staging, _JOURNAL), 0) as journal:
                for line in journal:
                    try:
                        entry = json.loads(line)
                        recorded[int(entry["index"])] = entry
                    except (ValueError, KeyError, TypeError):  # a line cut short by the kill
                        continue
        except OSError:  # none (killed before the first part), or not a file of ours: nothing adopted
            pass
        kept = []
        for index, entry in sorted(recorded.items()):
            named = PART_NAME.fullmatch(str(entry.get("path")))
            if (
                named is not None
                and int(named["index"]) == index < len(self.fragments)
                and sealed(self.secret, self.key, entry)
                and self._intact(os.path.join(staging, entry["path"]), entry, self.fragments[index])
            ):
                self.parts[index] = entry
                self.bytes += entry["bytes"]
                kept.append(entry)
        keep = {entry["path"] for entry in kept}
        for name in os.listdir(staging):
            if name not in keep:
                remove_entry(os.path.join(staging, name))
        with _journal(os.path.join(staging, _JOURNAL), os.O_TRUNC) as journal:
            journal.writelines(json.dumps(entry) + "\n" for entry in kept)
        logger.info("cache: continuing %s: %d of %d fragments already written", staging, len(kept), len(self.required))

    def _intact(self, path: str, entry: dict, fragment: Fragment) -> bool:
        try:
            digest = DIGESTS[PART_DIGEST](read_part_bytes(path, entry["bytes"])).hexdigest()
        except (OSError, KeyError, TypeError):  # CorruptFileError: not a regular file of ours of its size
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
                        SEAL: entry[SEAL],
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
            if os.path.lexists(self.published) and not stat.S_ISDIR(os.lstat(self.published).st_mode):
                remove_entry(self.published)  # a link or file planted at the name: removed, not followed
            try:
                os.rename(staging, self.published)
            except OSError:
                if not os.path.isfile(os.path.join(self.published, MANIFEST_NAME)):
                    raise
                remove_entry(staging)  # another run published the same key first
            sync_directory(self.root)
        except OSError as exc:
            self.stop(f"publishing the cache failed: {exc}")
            remove_entry(staging)
            self.directory = None
            return
        self.directory, self.parts = None, {}
        self.load_published()
        logger.info("cache: published %s (%d fragments, %d bytes)", self.published, len(files), self.bytes)

    def load_published(self) -> None:
        """Reads the published manifest of this key, if there is one; one of another cache is removed."""
        path = os.path.join(self.published, MANIFEST_NAME)
        try:
            folder = os.lstat(self.published)
        except OSError:
            return
        if not stat.S_ISDIR(folder.st_mode):  # a link (planted: the cache publishes by renaming a directory)
            logger.warning("cache: %s is not a directory: removing it, not following it", self.published)
            remove_entry(self.published)
            return
        if not own_entry(folder, directory=True) or self.secret is None:
            logger.warning("cache: %s is not the cache's own (or its secret unreadable): not served", self.published)
            return
        try:
            if not stat.S_ISREG(os.lstat(path).st_mode):
                raise CorruptFileError(describe("A cache manifest is not a regular file", where=path))
            manifest = load_manifest(pafs.LocalFileSystem(), path)
            names = {entry["path"]: entry for entry in manifest["files"]}
            parts = {int(match["index"]): names[name] for name in names if (match := PART_NAME.fullmatch(name))}
            cache = manifest.get("cache")
            if len(parts) != len(names) or not isinstance(cache, dict) or cache.get("key") != self.key:
                raise CorruptFileError(describe("Not a cache manifest of this source", where=path))
            if not all(sealed(self.secret, self.key, entry) for entry in names.values()):
                raise CorruptFileError(describe("A cache not sealed by this cache's secret", where=path))
        except FileNotFoundError:  # no manifest: not a published cache
            return
        except CorruptFileError:
            logger.warning("cache: the manifest %s is not one of this cache: writing the cache again", path)
            remove_entry(self.published)
            return
        self.manifest = parts
        self.sweep()

    def _reopen_published(self, damaged: int) -> None:
        """The published cache becomes this run's staging directory without ``damaged``, to be rewritten."""
        manifest, self.manifest = self.manifest or {}, None
        staging = os.path.join(self.root, f".{self.key}.caching-{os.getpid()}-{secrets.token_hex(4)}")
        try:
            os.rename(self.published, staging)
            remove_file(os.path.join(staging, MANIFEST_NAME))
            remove_entry(os.path.join(staging, manifest[damaged]["path"]))  # a directory in its place too
            kept = [{"index": index, **entry} for index, entry in sorted(manifest.items()) if index != damaged]
            with _journal(os.path.join(staging, _JOURNAL), os.O_TRUNC) as journal:
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


def _journal(path: str, flags: int) -> io.TextIOWrapper:
    """A staging directory's journal, opened without following a link: read (``flags=0``), or appended/truncated."""
    if flags:
        flags |= os.O_WRONLY | os.O_CREAT
    descriptor = os.open(path, flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, 0o600)
    if not stat.S_ISREG(os.fstat(descriptor).st_mode):
        os.close(descriptor)
        raise CorruptFileError(describe("A cache journal is not a regular file", where=path))
    return open(descriptor, "w" if flags else "r", encoding="utf-8")


def remove_entry(path: str) -> None:
    """Removes a file, a link (never what it points to) or a directory of the cache; best effort."""
    try:
        if stat.S_ISDIR(os.lstat(path).st_mode):
            shutil.rmtree(path, ignore_errors=True)  # does not follow the links inside it
        else:
            os.remove(path)
    except OSError:
        pass


def remove_file(path: str) -> None:
    """Best-effort removal of a file of ours: gone, or its directory unusable, is the degrade path's normal case."""
    try:
        os.remove(path)
    except OSError:
        pass
