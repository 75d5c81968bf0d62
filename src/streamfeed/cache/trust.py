"""Whose cache this is: the root's owner and mode, the cache's secret, and the seal that binds each part to it.

The key names a cache's directory and is computable by anyone from the
source's file metadata, so the key alone cannot say that a directory's
parts were written by this user's runs. Three checks do:

- the root (:func:`check_root`) must be the process's user's and not
  writable by group or others, unless the user says otherwise
  (``trust_directory=True``): others could otherwise plant links, caches
  and staging directories in it;
- every directory and part the cache uses is checked with ``lstat``
  (:func:`own_entry`): a real directory or regular file, the user's, not
  writable by group or others; a link is never followed;
- each part's record (key, name, rows, bytes, checksum) carries an HMAC
  (:func:`seal`) under a secret kept in the root, 0600, readable only by
  its owner (:func:`load_secret`): a cache planted with the right key by
  someone who cannot read the secret is not served but written again.

What this does not defend against: a process running as the same user
(it can read the secret), root, or a user the owner trusted with
``trust_directory=True`` replacing the secret itself.
"""

from __future__ import annotations

import errno
import hashlib
import hmac
import json
import os
import secrets
import stat

from ..errors import ArgumentError, CorruptFileError, describe
from .parts import PART_DIGEST

SECRET_NAME = ".streamfeed-cache-secret"
"""The cache's secret in its root: :data:`SECRET_BYTES` random bytes, mode 0600."""
SECRET_BYTES = 32
SEAL = "hmac_sha256"  # the name of a part record's seal in the journal and the manifest
_OTHERS_WRITE = stat.S_IWGRP | stat.S_IWOTH


def own_entry(st: os.stat_result, directory: bool) -> bool:
    """Whether an ``lstat`` result is a real directory (or regular file) of this user that no one else can write."""
    kind = stat.S_ISDIR(st.st_mode) if directory else stat.S_ISREG(st.st_mode)
    return kind and st.st_uid == os.geteuid() and not st.st_mode & _OTHERS_WRITE


def check_root(root: str, trust_directory: bool) -> None:
    """Refuses a cache root owned by another user or writable by group or others, unless trusted.

    ``root`` is resolved (a link the user named is theirs to name); a root
    that is not a directory is left to the writing, which then degrades to
    the source with a warning.
    """
    try:
        st = os.stat(root)
    except OSError:
        return
    if trust_directory or not stat.S_ISDIR(st.st_mode):
        return
    if st.st_uid != os.geteuid() or st.st_mode & _OTHERS_WRITE:
        raise ArgumentError(
            describe(
                "A cache directory that other users own or can write is refused: they could plant links and caches",
                where=root,
                expected=f"a directory owned by uid {os.geteuid()}, not writable by group or others",
                found=f"owner uid {st.st_uid}, mode {stat.S_IMODE(st.st_mode):#o}",
                fix="use a directory of your own (chmod go-w), or pass trust_directory=True to cache() "
                "if everyone who can write it is trusted",
            )
        )


def load_secret(root: str) -> bytes:
    """The cache's secret in ``root``, made on first use; refused unless a regular file of this user's, 0600.

    ``OSError``: it cannot be read or made (the root not writable: the
    caller degrades to the source). Made under a temporary name and linked
    into place, so a concurrent run reads a whole secret or makes its own
    first.
    """
    path = os.path.join(root, SECRET_NAME)
    for _ in range(2):
        try:
            descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except FileNotFoundError:
            _make_secret(path)
            continue
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise _refuse(path, "a symbolic link") from exc
            raise
        try:
            st = os.fstat(descriptor)
            if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid() or st.st_mode & 0o077:
                raise _refuse(path, f"owner uid {st.st_uid}, mode {stat.S_IMODE(st.st_mode):#o}")
            data = os.read(descriptor, SECRET_BYTES + 1)
        finally:
            os.close(descriptor)
        if len(data) != SECRET_BYTES:
            raise _refuse(path, f"{len(data)} bytes")
        return data
    raise CorruptFileError(describe("The conversion cache's secret vanished twice while being made", where=path))


def _make_secret(path: str) -> None:
    temporary = f"{path}.{secrets.token_hex(4)}.tmp"
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        try:
            os.write(descriptor, secrets.token_bytes(SECRET_BYTES))
            os.fsync(descriptor)
        finally:
            os.close(descriptor)
        try:
            os.link(temporary, path)
        except FileExistsError:  # another run made it first: read theirs
            pass
    finally:
        os.remove(temporary)


def _refuse(path: str, found: str) -> ArgumentError:
    return ArgumentError(
        describe(
            "The conversion cache's secret is not readable by its owner alone",
            where=path,
            expected=f"a regular file of uid {os.geteuid()}, mode 0600, of {SECRET_BYTES} bytes",
            found=found,
            fix="delete it (the caches in this directory are then written again), and keep the directory your own",
        )
    )


def seal(secret: bytes, key: str, entry: dict) -> str:
    """The HMAC of a part's record under the cache's secret: its key, name, rows, bytes and checksum."""
    record = json.dumps([key, entry.get("path"), entry.get("rows"), entry.get("bytes"), entry.get(PART_DIGEST)])
    return hmac.new(secret, record.encode(), hashlib.sha256).hexdigest()


def sealed(secret: bytes | None, key: str, entry: dict) -> bool:
    """Whether a part's record carries the seal of this cache's secret (never without a secret)."""
    found = entry.get(SEAL)
    return secret is not None and isinstance(found, str) and hmac.compare_digest(found, seal(secret, key, entry))
