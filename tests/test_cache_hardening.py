"""The conversion cache under attack: a root others can write, planted links and caches, parts that are not files.

Real symlinks, FIFOs and directories are planted; a real second
unprivileged user (``useradd``; the tests run as root) plants files as
itself through ``subprocess.run(..., user=...)``; interrupted runs are real
subprocesses stopped by ``SIGKILL`` or ``SIGINT``. What the cache served is
told apart from what the source served by the store's count of source reads
and by rewriting the CSV files with other values of the same size and
modification time (under ``verify="metadata"``, which these tests use, the
key is unchanged: a stale or planted cache would yield the old values).
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import textwrap
import uuid
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from streamfeed.cache import CachedSource, FragmentStore
from streamfeed.errors import ArgumentError
from streamfeed.files.publish import verify_output
from streamfeed.readers import read_csv

ROWS = (300, 250, 320)
FRAGMENT_BYTES = 2000  # several byte-range fragments per file


def _write(root: Path, letter: str) -> None:
    start = 0
    for number, rows in enumerate(ROWS):
        ids = np.arange(start, start + rows)
        frame = pd.DataFrame({"id": ids, "x": ids / 2.0, "name": [f"{letter}{i % 7}" for i in ids]})
        frame.to_csv(root / f"part-{number}.csv", index=False)
        start += rows


def _rewrite_keeping_identity(root: Path, letter: str) -> None:
    """Other values, the same sizes and modification times: the source's key is unchanged."""
    times = {path: path.stat().st_mtime_ns for path in root.iterdir()}
    _write(root, letter)
    for path, mtime in times.items():
        os.utime(path, ns=(mtime, mtime))


@pytest.fixture
def data(tmp_path: Path) -> Path:
    root = tmp_path / "csv"
    root.mkdir()
    _write(root, "n")
    return root


@pytest.fixture(scope="session")
def other_user():
    """A real unprivileged second user, removed at the end of the session."""
    name = f"sfc{uuid.uuid4().hex[:8]}"
    subprocess.run(["useradd", "--no-create-home", "--shell", "/usr/sbin/nologin", name], check=True)
    try:
        yield pwd.getpwnam(name)
    finally:
        subprocess.run(["userdel", name], check=True)


@pytest.fixture
def shared(other_user):
    """A directory both users can write (mode 1777, like /tmp), outside root's private pytest directory."""
    path = Path(tempfile.mkdtemp(prefix="streamfeed-shared-"))
    path.chmod(0o1777)
    try:
        yield path
    finally:
        shutil.rmtree(path)


def _open(root: Path):
    return read_csv(root, fragment_bytes=FRAGMENT_BYTES, count_cache=False)


def _names(ds) -> set[str]:
    """The first letters of the ``name`` column over one epoch: which writing of the data was served."""
    with ds.iter_epoch(0) as stream:
        return {str(name)[0] for batch in stream for name in batch["name"]}


def _store(ds) -> FragmentStore:
    assert isinstance(ds.source, CachedSource)
    return ds.source.store


def _staging(cache: Path) -> list[str]:
    return sorted(name for name in os.listdir(cache) if ".caching-" in name)


def _dead_pid() -> int:
    """The pid of a process that has exited and been reaped."""
    child = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    return int(child.stdout)


def _plant_as(user, root: Path, files: dict[str, bytes]) -> None:
    """Writes ``files`` (relative path -> bytes) under ``root`` as ``user`` (``cp`` run as them): theirs, 0755/0644."""
    source = Path(tempfile.mkdtemp(prefix="streamfeed-plant-"))
    try:
        source.chmod(0o755)
        for name, data in files.items():
            path = source / name
            path.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
            path.parent.chmod(0o755)
            path.write_bytes(data)
            path.chmod(0o644)
        for top in {name.split("/")[0] for name in files}:
            subprocess.run(["cp", "-r", str(source / top), str(root)], check=True, user=user.pw_uid, env={})
    finally:
        shutil.rmtree(source)
    assert all((root / name).stat().st_uid == user.pw_uid for name in files)


def _cache_files(published: Path) -> dict[str, bytes]:
    """A published cache's files by their path relative to the cache root (``<key>/<name>``)."""
    return {f"{published.name}/{path.name}": path.read_bytes() for path in published.iterdir()}


# ------------------------------------------------------------------ item 5: planted links and caches
def test_a_planted_link_under_an_abandoned_staging_name_is_not_adopted(data, tmp_path):
    cache = tmp_path / "cache"
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "thesis.txt").write_text("years of work")
    (victim / "part-000000.parquet").write_text("not a part")
    cached = _open(data).cache(cache, verify="metadata").batch(64)
    cache.mkdir(exist_ok=True)
    planted = cache / f".{_store(cached).key}.caching-{_dead_pid()}-0badc0de"
    planted.symlink_to(victim, target_is_directory=True)

    assert _names(cached) == {"n"}
    assert sorted(os.listdir(victim)) == ["part-000000.parquet", "thesis.txt"]  # nothing deleted, nothing added
    assert (victim / "thesis.txt").read_text() == "years of work"
    assert not planted.is_symlink() or os.readlink(planted) == str(victim)
    assert _store(cached).source_reads == len(cached.source.fragments)
    verify_output(_store(cached).published)
    published = Path(_store(cached).published)
    assert not published.is_symlink() and published.is_dir()


def test_a_planted_link_at_the_published_name_is_not_served_nor_emptied(data, tmp_path):
    cache, elsewhere = tmp_path / "cache", tmp_path / "elsewhere"
    first = _open(data).cache(elsewhere, verify="metadata").batch(64)
    _names(first)
    key = _store(first).key
    cache.mkdir()
    (cache / key).symlink_to(elsewhere / key, target_is_directory=True)  # a valid cache, but through a link
    _rewrite_keeping_identity(data, "m")

    again = _open(data).cache(cache, verify="metadata").batch(64)
    assert _names(again) == {"m"}  # read from the source, not through the link
    assert _store(again).source_reads == len(again.source.fragments)
    verify_output(elsewhere / key)  # the link's target is untouched
    assert not (cache / key).is_symlink()


@pytest.mark.parametrize("target", ["nowhere", "an-empty-directory"])
def test_a_planted_dangling_link_at_the_published_name_does_not_stop_caching(data, tmp_path, target):
    cache, empty = tmp_path / "cache", tmp_path / "empty"
    empty.mkdir()
    cached = _open(data).cache(cache, verify="metadata").batch(64)
    published = Path(_store(cached).published)
    published.symlink_to(empty if target == "an-empty-directory" else tmp_path / "nowhere", target_is_directory=True)
    assert _names(cached) == {"n"}  # no CacheWarning (an error in the tests): the link is removed, not followed
    assert not published.is_symlink() and os.listdir(empty) == []
    verify_output(published)


def test_a_cache_planted_with_the_right_key_without_the_secret_is_rewritten(data, tmp_path):
    """The planter knows the key (it is computable from file metadata) and writes a consistent cache."""
    theirs, cache = tmp_path / "theirs", tmp_path / "cache"
    planted = _open(data).cache(theirs, verify="metadata").batch(64)
    _names(planted)
    _rewrite_keeping_identity(data, "m")
    mine = _open(data).cache(cache, verify="metadata").batch(64)
    cache.mkdir(exist_ok=True)
    shutil.copytree(_store(planted).published, cache / _store(planted).key)  # parts, manifest: all consistent

    again = _open(data).cache(cache, verify="metadata").batch(64)
    assert _names(again) == {"m"}
    assert _store(again).source_reads == len(again.source.fragments)
    # and what was written in its place is served
    assert _names(_open(data).cache(cache, verify="metadata").batch(64)) == {"m"}
    del mine


def test_a_cache_root_writable_by_others_is_refused(data, shared, other_user):
    key = _store(_open(data).cache(shared / "probe", verify="metadata")).key
    shutil.rmtree(shared / "probe", ignore_errors=True)
    # The other user plants a consistent cache of the old rows under the right key.
    stale = Path(tempfile.mkdtemp(prefix="streamfeed-stale-"))
    try:
        _names(_open(data).cache(stale, verify="metadata").batch(64))
        files = _cache_files(stale / key)
    finally:
        shutil.rmtree(stale)
    _plant_as(other_user, shared, files)
    _rewrite_keeping_identity(data, "m")

    with pytest.raises(ArgumentError) as refused:
        _open(data).cache(shared, verify="metadata")
    assert str(shared) in str(refused.value) and "trust_directory" in str(refused.value)


@pytest.mark.parametrize("mode", [0o770, 0o757])
def test_a_cache_root_writable_by_a_group_or_anyone_is_refused(data, tmp_path, mode):
    cache = tmp_path / "cache"
    cache.mkdir()
    cache.chmod(mode)
    with pytest.raises(ArgumentError):
        _open(data).cache(cache, verify="metadata")
    # named as trusted, it is used, and serves the source's rows
    trusted = _open(data).cache(cache, trust_directory=True, verify="metadata").batch(64)
    assert _names(trusted) == _names(_open(data).batch(64))


def test_a_cache_root_owned_by_another_user_is_refused(data, tmp_path, other_user):
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o755)
    os.chown(cache, other_user.pw_uid, other_user.pw_gid)
    with pytest.raises(ArgumentError) as refused:
        _open(data).cache(cache, verify="metadata")
    assert str(cache) in str(refused.value)


def test_a_trusted_shared_root_still_serves_no_part_of_another_user(data, shared, other_user):
    """``trust_directory=True`` takes a root others can write; what another user put there is still not served."""
    source = _open(data).source
    store = FragmentStore(source, str(shared), None, trust_directory=True)
    stale = Path(tempfile.mkdtemp(prefix="streamfeed-stale-"))
    try:
        _names(_open(data).cache(stale, verify="metadata").batch(64))
        files = _cache_files(stale / store.key)
    finally:
        shutil.rmtree(stale)
    _plant_as(other_user, shared, files)
    _rewrite_keeping_identity(data, "m")

    source = _open(data).source
    store = FragmentStore(source, str(shared), None, trust_directory=True)
    letters = {str(name)[0] for i in range(len(source.fragments)) for name in store.read(i)["name"]}
    assert letters == {"m"}
    assert store.source_reads == len(source.fragments)


@pytest.mark.parametrize("change", ["writable", "owner"])
def test_a_part_writable_by_others_or_owned_by_another_user_is_rewritten(data, tmp_path, other_user, change):
    cache = tmp_path / "cache"
    _names(_open(data).cache(cache, verify="metadata").batch(64))
    _rewrite_keeping_identity(data, "m")
    cached = _open(data).cache(cache, verify="metadata").batch(64)
    part = Path(_store(cached).published) / "part-000002.parquet"
    if change == "writable":
        part.chmod(0o666)
    else:
        os.chown(part, other_user.pw_uid, other_user.pw_gid)
    with cached.iter_epoch(0) as stream:
        served = list(stream)
    assert _store(cached).source_reads == 1  # that part, rewritten from the source
    rewritten = part.lstat()
    assert rewritten.st_uid == os.geteuid() and not rewritten.st_mode & 0o022
    assert sum(len(batch["id"]) for batch in served) == sum(ROWS)


def test_the_secret_is_the_owners_alone(data, tmp_path):
    cache = tmp_path / "cache"
    _names(_open(data).cache(cache, verify="metadata").batch(64))
    secrets = [path for path in cache.iterdir() if path.is_file()]
    assert len(secrets) == 1
    assert stat.S_IMODE(secrets[0].lstat().st_mode) == 0o600 and secrets[0].lstat().st_uid == os.geteuid()
    secrets[0].chmod(0o644)  # readable by others: a planter could have read it
    with pytest.raises(ArgumentError) as refused:
        _open(data).cache(cache, verify="metadata")
    assert str(secrets[0]) in str(refused.value)


# ------------------------------------------------------------------ item 11: parts that are not files
@pytest.mark.parametrize("kind", ["dev-zero", "fifo", "directory", "link-to-a-copy"])
def test_a_part_that_is_not_a_regular_file_is_rewritten_never_read(data, tmp_path, kind):
    cache = tmp_path / "cache"
    _names(_open(data).cache(cache, verify="metadata").batch(64))
    _rewrite_keeping_identity(data, "m")
    cached = _open(data).cache(cache, verify="metadata").batch(64)
    part = Path(_store(cached).published) / "part-000002.parquet"
    copy = tmp_path / "copy.parquet"
    shutil.copyfile(part, copy)
    part.unlink()
    if kind == "dev-zero":
        part.symlink_to("/dev/zero")
    elif kind == "fifo":
        os.mkfifo(part)
    elif kind == "directory":
        part.mkdir()
        (part / "inside").write_text("x")
    else:  # the same bytes, through a link the cache did not make: not followed
        part.symlink_to(copy)

    with cached.iter_epoch(0) as stream:
        served = list(stream)
    assert sum(len(batch["id"]) for batch in served) == sum(ROWS)
    assert _store(cached).source_reads == 1
    assert stat.S_ISREG(part.lstat().st_mode)  # rewritten as a file of the cache's own
    verify_output(_store(cached).published)
    assert _staging(cache) == []


# ------------------------------------------------------------------ item 15a: interrupted runs' staging directories
_BLOCKED_CHILD = """
import os, sys
from streamfeed.readers import read_csv

cache = sys.argv[2]


def wait_after_two_parts(columns):  # the read thread: parts are journaled by the writer meanwhile
    staged = [name for name in os.listdir(cache) if ".caching-" in name]
    journal = os.path.join(cache, staged[0], "_parts.jsonl")
    if os.path.exists(journal) and len(open(journal).read().splitlines()) >= 2:
        print("ready", flush=True)
        sys.stdin.read()  # until the parent stops this run (SIGKILL; or SIGINT, then stdin closed)
        raise RuntimeError("interrupted")  # after SIGINT: this thread reads and caches no further fragment
    return columns


ds = read_csv(sys.argv[1], fragment_bytes={fragment_bytes}, count_cache=False).cache(cache, verify="metadata")
for batch in ds.with_options(read_threads=1).map(wait_after_two_parts).batch(20):
    pass
os._exit(3)
"""


@pytest.mark.parametrize("stop", ["SIGKILL", "SIGINT"])
def test_an_interrupted_runs_staging_directory_is_removed_once_a_cache_is_published(data, tmp_path, stop):
    cache = tmp_path / "cache"
    script = textwrap.dedent(_BLOCKED_CHILD.format(fragment_bytes=FRAGMENT_BYTES))
    child = subprocess.Popen(
        [sys.executable, "-c", script, str(data), str(cache)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None and child.stdout.readline() == "ready\n"
        (interrupted,) = _staging(cache)
        # While it is alive its directory is its own: this run writes and publishes beside it.
        publisher = _open(data).cache(cache, verify="metadata").batch(64)
        assert _names(publisher) == {"n"}
        assert _staging(cache) == [interrupted]
        if stop == "SIGKILL":
            child.kill()
        else:
            child.send_signal(signal.SIGINT)  # Ctrl-C
    finally:
        assert child.stdin is not None
        child.stdin.close()
        child.wait()
        assert child.stdout is not None and child.stderr is not None
        child.stdout.close()
        errors = child.stderr.read()
        child.stderr.close()
    assert child.returncode != 3  # stopped mid-epoch
    assert child.returncode == -signal.SIGKILL if stop == "SIGKILL" else "KeyboardInterrupt" in errors
    assert _staging(cache) == [interrupted]  # what it left

    later = _open(data).cache(cache, verify="metadata").batch(64)
    assert _staging(cache) == []  # removed: the key's cache is published, nothing will adopt it
    assert _names(later) == {"n"} and _store(later).source_reads == 0


_KILLED_CHILD = """
import os, signal, sys
from streamfeed.readers import read_csv

cache = sys.argv[2]


def die_after_three_parts(columns):  # the read thread: parts are journaled by the writer meanwhile
    staged = [name for name in os.listdir(cache) if ".caching-" in name]
    journal = os.path.join(cache, staged[0], "_parts.jsonl")
    if os.path.exists(journal) and len(open(journal).read().splitlines()) >= 3:
        os.kill(os.getpid(), signal.SIGKILL)  # kill -9 mid-epoch: no cleanup runs
    return columns


ds = read_csv(sys.argv[1], fragment_bytes={fragment_bytes}, count_cache=False).cache(cache, verify="metadata")
for batch in ds.with_options(read_threads=1).map(die_after_three_parts).batch(20):
    pass
os._exit(3)
"""


def test_a_dead_runs_parts_that_are_not_files_are_rewritten_not_adopted(data, tmp_path):
    cache, victim = tmp_path / "cache", tmp_path / "victim.parquet"
    script = textwrap.dedent(_KILLED_CHILD.format(fragment_bytes=FRAGMENT_BYTES))
    child = subprocess.run([sys.executable, "-c", script, str(data), str(cache)], capture_output=True, text=True)
    assert child.returncode == -signal.SIGKILL, child.stderr
    (staged,) = _staging(cache)
    journaled = []  # what the run recorded (a part renamed in but not yet journaled is not adopted)
    for line in (cache / staged / "_parts.jsonl").read_text().splitlines():
        try:
            journaled.append(json.loads(line)["path"])
        except ValueError:  # a line cut short by the kill
            continue
    assert len(journaled) >= 3
    directory, fifo, link = (cache / staged / name for name in journaled[:3])
    shutil.copyfile(link, victim)  # the same bytes: a link to them would pass every check but the link's
    for part in (directory, fifo, link):
        part.unlink()
    directory.mkdir()
    os.mkfifo(fifo)
    link.symlink_to(victim)

    cached = _open(data).cache(cache, verify="metadata").batch(20)
    assert _names(cached) == {"n"}
    assert _store(cached).source_reads == len(cached.source.fragments) - len(journaled) + 3
    for part in (directory, fifo, link):
        published = Path(_store(cached).published) / part.name
        assert stat.S_ISREG(published.lstat().st_mode)
    assert victim.is_file() and not victim.is_symlink()
    verify_output(_store(cached).published)
    assert _staging(cache) == []
