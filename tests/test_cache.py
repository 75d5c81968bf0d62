"""The conversion cache (``Dataset.cache``) on CSV written by pandas and csv.

What the cache served is told apart from what the source served by the
store's count of source reads, and by rewriting the CSV files with other
values of the same size and modification time (the source's identity is
unchanged, so the cache is reused and yields the *old* values).
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import textwrap
import threading
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from streamfeed.cache import CachedSource, CacheWarning
from streamfeed.cache import writer as cache_writer  # where parts are written: write_part, WRITE_QUEUE
from streamfeed.errors import ManifestMismatchError
from streamfeed.files.paths import MANIFEST_NAME
from streamfeed.files.publish import verify_output
from streamfeed.readers import read_csv

ROWS = (300, 250, 320)
FRAGMENT_BYTES = 2000  # several byte-range fragments per file, of uneven row counts


def _write(root: Path, letter: str = "n") -> None:
    start = 0
    for number, rows in enumerate(ROWS):
        ids = np.arange(start, start + rows)
        frame = pd.DataFrame({"id": ids, "x": ids / 2.0, "name": [f"{letter}{i % 7}" for i in ids]})
        frame.to_csv(root / f"part-{number}.csv", index=False)
        start += rows


@pytest.fixture
def data(tmp_path: Path) -> Path:
    root = tmp_path / "csv"
    root.mkdir()
    _write(root)
    return root


def _open(root: Path):
    return read_csv(root, fragment_bytes=FRAGMENT_BYTES, count_cache=False)


def _epoch(ds, epoch: int = 0, state=None) -> list[dict[str, np.ndarray]]:
    with ds.iter_epoch(epoch, state=state) as stream:
        return [{name: np.array(column, copy=True) for name, column in batch.items()} for batch in stream]


def _same(first: list[dict], second: list[dict]) -> None:
    assert len(first) == len(second)
    for a, b in zip(first, second):
        assert list(a) == list(b)
        for name in a:
            assert a[name].dtype == b[name].dtype, name
            np.testing.assert_array_equal(a[name], b[name])


def _store(ds):
    assert isinstance(ds.source, CachedSource)
    return ds.source.store


def _staging(cache: Path) -> list[str]:
    return [name for name in os.listdir(cache) if ".caching-" in name] if cache.exists() else []


def _published(ds) -> Path:
    return Path(_store(ds).published)


def test_first_epoch_writes_the_cache_and_later_reads_serve_it(data, tmp_path):
    cache = tmp_path / "cache"
    plain = _open(data).shuffle(3).batch(64)
    cached = _open(data).cache(cache, verify="metadata").shuffle(3).batch(64)  # the limit checked below
    fragments = len(cached.source.fragments)
    assert fragments >= 6

    first = _epoch(cached, 0)
    _same(first, _epoch(plain, 0))
    assert _store(cached).source_reads == fragments
    assert (_published(cached) / MANIFEST_NAME).is_file() and _staging(cache) == []
    manifest = verify_output(_published(cached))  # every part's xxh3_128 as listed
    assert [entry["rows"] for entry in manifest["files"]] == [f.num_rows for f in cached.source.fragments]

    _same(_epoch(cached, 1), _epoch(plain, 1))
    assert _store(cached).source_reads == fragments  # epoch 2: nothing read from the source

    # Same sizes and times, other values: under verify="metadata" the source's identity is unchanged, so a
    # new dataset reads the cache, which still holds the old values ("content": tests/test_cache_content.py).
    times = {path: path.stat().st_mtime_ns for path in data.iterdir()}
    _write(data, letter="m")
    for path, mtime in times.items():
        os.utime(path, ns=(mtime, mtime))
    again = _open(data).cache(cache, verify="metadata").shuffle(3).batch(64)
    _same(_epoch(again, 0), first)
    assert _store(again).source_reads == 0
    assert {str(name)[0] for batch in _epoch(_open(data).shuffle(3).batch(64)) for name in batch["name"]} == {"m"}


def _image_folder(root: Path) -> Path:
    """23 PNGs of several sizes in two class folders."""
    from PIL import Image

    rng = np.random.default_rng(0)
    for label, count in (("a", 9), ("b", 14)):
        (root / label).mkdir(parents=True)
        for number in range(count):
            pixels = rng.integers(0, 256, size=(12 + number, 10, 3), dtype=np.uint8)
            Image.fromarray(pixels).save(root / label / f"{number}.png")
    return root


def _recording_writers(monkeypatch) -> list[str]:
    """The names of the threads that write parts, from now on."""
    writers: list[str] = []
    write_part = cache_writer.write_part

    def recording(chunk, path):
        writers.append(threading.current_thread().name)
        return write_part(chunk, path)

    monkeypatch.setattr(cache_writer, "write_part", recording)
    return writers


def test_read_only_chunks_are_written_by_the_writer_thread(data, tmp_path, monkeypatch):
    """CSV columns are Arrow-backed, read-only: their parts go to the writer thread, off the read threads."""
    writers = _recording_writers(monkeypatch)
    cached = _open(data).cache(tmp_path / "cache").shuffle(2).batch(64)
    _same(_epoch(cached, 0), _epoch(_open(data).shuffle(2).batch(64), 0))
    assert "streamfeed-cache-writer" in writers  # the first part at least (read threads write when it is behind)
    assert (_published(cached) / MANIFEST_NAME).is_file()  # published when the epoch's last batch was served
    verify_output(_published(cached))


def test_a_queue_of_no_parts_has_the_read_threads_write(data, tmp_path, monkeypatch):
    """``WRITE_QUEUE = 0`` (as the tests and ``benchmarks/cache.py --inline`` set it) leaves the writer thread idle."""
    monkeypatch.setattr(cache_writer, "WRITE_QUEUE", 0)
    writers = _recording_writers(monkeypatch)
    cached = _open(data).cache(tmp_path / "cache").batch(64)
    _same(_epoch(cached, 0), _epoch(_open(data).batch(64), 0))
    assert writers and "streamfeed-cache-writer" not in writers
    verify_output(_published(cached))


def test_writable_chunks_are_cached_as_read_before_in_place_ops(tmp_path, monkeypatch):
    """Decoded images are writable: a map that changes them in place runs after their part was written.

    Read back from the cache, the rows are the source's, not the halved ones.
    """
    from streamfeed.readers import read_images

    root = _image_folder(tmp_path / "images")
    writers = _recording_writers(monkeypatch)

    def halve_in_place(columns):
        columns["image"] //= 2  # the decoded array, changed after the fragment was read
        return columns

    def images():
        return read_images(root, size=(8, 6), fragment_size=5).with_options(read_threads=1)

    plain = images().map(halve_in_place).shuffle(2).batch(6)
    cached = images().cache(tmp_path / "cache").map(halve_in_place).shuffle(2).batch(6)
    _same(_epoch(cached, 0), _epoch(plain, 0))
    assert writers and "streamfeed-cache-writer" not in writers
    again = images().cache(tmp_path / "cache").shuffle(2).batch(6)
    _same(_epoch(again, 1), _epoch(images().shuffle(2).batch(6), 1))
    assert _store(again).source_reads == 0  # read from the cache


def test_states_move_between_the_cached_and_the_plain_dataset(data, tmp_path):
    plain = _open(data).shuffle(5, window=2).batch(50)
    cached = _open(data).cache(tmp_path / "cache").shuffle(5, window=2).batch(50)
    assert cached.fingerprint() == plain.fingerprint() and len(cached) == len(plain)
    for saver, restorer in ((plain, cached), (cached, plain), (cached, cached)):
        with saver.iter_epoch(1) as stream:
            head = [next(stream) for _ in range(4)]
            state = stream.get_state()
        assert len(head) == 4
        _same(_epoch(restorer, state=state), _epoch(plain, 1)[4:])


def test_a_changed_source_file_gets_another_key(data, tmp_path):
    cache = tmp_path / "cache"
    first = _open(data).cache(cache).batch(100)
    _epoch(first)
    path = data / "part-1.csv"
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
    second = _open(data).cache(cache).batch(100)
    assert _store(second).key != _store(first).key
    _same(_epoch(second), _epoch(_open(data).batch(100)))
    assert _store(second).source_reads == len(second.source.fragments)
    assert sorted(os.listdir(cache)) == sorted([_store(first).key, _store(second).key, ".streamfeed-cache-secret"])


def test_max_bytes_stops_caching_with_one_warning_and_leaves_no_directory(data, tmp_path):
    cache = tmp_path / "cache"
    cached = _open(data).cache(cache, max_bytes=3000).shuffle(1).batch(64)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = _epoch(cached)
    messages = [str(w.message) for w in caught if issubclass(w.category, CacheWarning)]
    assert len(messages) == 1 and "max_bytes=3000" in messages[0], messages
    _same(got, _epoch(_open(data).shuffle(1).batch(64)))
    assert os.listdir(cache) == [".streamfeed-cache-secret"]
    _same(_epoch(cached, 1), _epoch(_open(data).shuffle(1).batch(64), 1))  # off for the run: no new warning


def test_an_interrupted_epoch_is_continued_by_the_next_one(data, tmp_path):
    cache = tmp_path / "cache"
    cached = _open(data).cache(cache).with_options(read_threads=1).batch(20)
    fragments = len(cached.source.fragments)
    with cached.iter_epoch(0) as stream:
        next(stream)
    staged = _staging(cache)
    assert len(staged) == 1 and not _published(cached).exists()
    assert 0 < _store(cached).source_reads < fragments
    _same(_epoch(cached), _epoch(_open(data).batch(20)))
    assert _store(cached).source_reads == fragments  # each fragment read from the source once in all
    assert _published(cached).is_dir() and _staging(cache) == []


_CHILD = """
import os, sys
from streamfeed.readers import read_csv

cache = sys.argv[2]


def die_after_three_parts(columns):  # runs in the read thread; parts are written by the cache's writer thread
    staged = [name for name in os.listdir(cache) if ".caching-" in name]
    journal = os.path.join(cache, staged[0], "_parts.jsonl")
    if os.path.exists(journal) and len(open(journal).read().splitlines()) >= 3:
        os._exit(0)  # killed mid-epoch: no cleanup runs
    return columns


ds = read_csv(sys.argv[1], fragment_bytes={fragment_bytes}, count_cache=False).cache(cache)
for batch in ds.with_options(read_threads=1).map(die_after_three_parts).batch(20):
    pass
os._exit(3)
"""


def test_a_dead_runs_staging_directory_is_adopted_and_a_damaged_part_rewritten(data, tmp_path):
    cache = tmp_path / "cache"
    child = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(_CHILD.format(fragment_bytes=FRAGMENT_BYTES)), str(data), str(cache)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert child.returncode == 0, child.stderr
    (staged,) = _staging(cache)
    lines = (cache / staged / "_parts.jsonl").read_text().splitlines()
    entries = [json.loads(line) for line in lines]
    damaged = cache / staged / f"part-{entries[0]['index']:06d}.parquet"
    damaged.write_bytes(damaged.read_bytes()[:-40])  # cut short: its size and checksum no longer match

    cached = _open(data).cache(cache).batch(20)
    _same(_epoch(cached), _epoch(_open(data).batch(20)))
    fragments = len(cached.source.fragments)
    assert _store(cached).source_reads == fragments - len(entries) + 1  # the others were adopted
    assert _staging(cache) == []
    verify_output(_published(cached))


@pytest.mark.parametrize("damage", ["truncate", "flip", "footer"])
def test_a_damaged_published_part_is_rewritten_not_served(data, tmp_path, damage):
    cache = tmp_path / "cache"
    _epoch(_open(data).cache(cache).batch(64))
    cached = _open(data).cache(cache).batch(64)
    part = _published(cached) / "part-000002.parquet"
    raw = bytearray(part.read_bytes())
    if damage == "truncate":
        part.write_bytes(bytes(raw[: len(raw) // 2]))
    elif damage == "flip":  # the same size, one byte of page data changed
        raw[len(raw) // 4] ^= 0xFF
        part.write_bytes(bytes(raw))
    else:  # the same size, a column's name in the footer's schema changed ("name" -> "nbme"): no page covers it
        at = raw.index(b"name")
        raw[at + 1] ^= 0x03
        part.write_bytes(bytes(raw))
    _same(_epoch(cached), _epoch(_open(data).batch(64)))
    assert _store(cached).source_reads == 1
    verify_output(_published(cached))  # published again, whole
    assert _staging(cache) == []


def test_verify_output_checks_each_parts_xxh3_128(data, tmp_path):
    cache = tmp_path / "cache"
    cached = _open(data).cache(cache).batch(64)
    _epoch(cached)
    manifest = json.loads((_published(cached) / MANIFEST_NAME).read_text())
    assert all(len(entry["xxh3_128"]) == 32 and "sha256" not in entry for entry in manifest["files"])
    part = _published(cached) / manifest["files"][1]["path"]
    raw = bytearray(part.read_bytes())
    raw[len(raw) // 3] ^= 0x01
    part.write_bytes(bytes(raw))
    with pytest.raises(ManifestMismatchError, match=r"(?s)part-000001\.parquet.*xxh3_128"):
        verify_output(_published(cached))


@pytest.mark.parametrize("writer", ["thread", "inline"])
def test_an_unwritable_cache_degrades_to_the_source(data, tmp_path, monkeypatch, writer):
    """The staging directory becomes unwritable mid-epoch (replaced by a file: chmod does not stop root).

    ``inline``: no writer thread (a queue of 0 parts), so the first part is
    written before the sabotage; with the thread, parts may or may not be.
    """
    if writer == "inline":
        monkeypatch.setattr(cache_writer, "WRITE_QUEUE", 0)
    cache = tmp_path / "cache"
    moved = tmp_path / "moved"
    sabotaged: list[str] = []

    def sabotage(columns):
        if not sabotaged:  # after the first fragment was written, in the read thread
            (staging,) = _staging(cache)
            os.rename(cache / staging, moved)
            (cache / staging).write_text("not a directory")
            sabotaged.append(staging)
        return columns

    cached = _open(data).cache(cache).with_options(read_threads=1).map(sabotage, name="sabotage").batch(64)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = _epoch(cached)
    messages = [str(w.message) for w in caught if issubclass(w.category, CacheWarning)]
    assert len(messages) == 1 and "failed" in messages[0], messages
    _same(got, _epoch(_open(data).batch(64)))
    assert not _published(cached).exists()
    # What was written before is whole: renamed into place only once complete. (The writer thread may have
    # been writing a part to a temporary name in the directory when it was moved away: that file went with it.)
    parts = sorted(moved.glob("part-*.parquet"))
    assert (parts and not list(moved.glob(".*.tmp"))) if writer == "inline" else len(list(moved.glob(".*.tmp"))) <= 1
    for path in parts:
        assert pq.read_metadata(path).num_rows > 0


@pytest.mark.parametrize("writer", ["thread", "inline"])
def test_a_part_arrow_cannot_write_stops_caching_not_reading(data, tmp_path, monkeypatch, writer):
    """An error other than OSError while writing a part (injected: Arrow refusing it) degrades like a full disk."""
    import pyarrow as pa

    if writer == "inline":
        monkeypatch.setattr(cache_writer, "WRITE_QUEUE", 0)
    write_part = cache_writer.write_part
    calls: list[str] = []

    def refusing(chunk, path):
        calls.append(path)
        if len(calls) == 2:
            raise pa.ArrowInvalid("injected: a column Arrow cannot write")
        return write_part(chunk, path)

    monkeypatch.setattr(cache_writer, "write_part", refusing)
    cached = _open(data).cache(tmp_path / "cache").shuffle(4).batch(64)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = [_epoch(cached, epoch) for epoch in range(2)]  # the second epoch reads every fragment again
    messages = [str(w.message) for w in caught if issubclass(w.category, CacheWarning)]
    assert len(messages) == 1 and "injected" in messages[0], messages
    for epoch, batches in enumerate(got):
        _same(batches, _epoch(_open(data).shuffle(4).batch(64), epoch))
    assert _store(cached).source_reads == 2 * len(cached.source.fragments)
    assert _staging(tmp_path / "cache") == [] and not _published(cached).exists()


def test_auto_mode_measures_once_and_says_why(data, tmp_path, caplog):
    cache = tmp_path / "cache"
    with caplog.at_level(logging.INFO, logger="streamfeed"):
        ds = _open(data).cache(cache, mode="auto").batch(64)
    records = [r.getMessage() for r in caplog.records if "cache(mode='auto')" in r.getMessage()]
    assert len(records) == 1 and "us/row from the source" in records[0] and "us/row from the cache" in records[0]
    assert isinstance(ds.source, CachedSource) == records[0].startswith("cache(mode='auto'): caching")
    _same(_epoch(ds), _epoch(_open(data).batch(64)))
    _epoch(_open(data).cache(cache).batch(64))  # publish one
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="streamfeed"):
        again = _open(data).cache(cache, mode="auto")
    assert isinstance(again.source, CachedSource) and "exists" in caplog.text


def test_invalid_settings_are_refused(data, tmp_path):
    with pytest.raises(ValueError, match="cache mode"):
        _open(data).cache(tmp_path, mode="sometimes")
    with pytest.raises(ValueError, match="max_bytes"):
        _open(data).cache(tmp_path, max_bytes=-1)


def test_no_thread_or_file_is_left_open(data, tmp_path):
    before_threads = threading.active_count()
    before_fds = len(os.listdir("/proc/self/fd"))
    cached = _open(data).cache(tmp_path / "cache").shuffle(2).batch(64)
    for epoch in range(2):
        _epoch(cached, epoch)
    with cached.iter_epoch(2) as stream:
        next(stream)
    assert threading.active_count() == before_threads, [thread.name for thread in threading.enumerate()]
    assert len(os.listdir("/proc/self/fd")) == before_fds


def test_decoded_images_keep_their_shape_and_the_size_is_in_the_key(tmp_path):
    from streamfeed.readers import read_images

    root = _image_folder(tmp_path / "images")
    cache = tmp_path / "cache"

    def images(size):
        return read_images(root, size=size, fragment_size=5).shuffle(4).batch(6)

    cached = images((8, 6)).cache(cache)
    first = _epoch(cached)
    assert first[0]["image"].shape == (6, 8, 6, 3) and first[0]["image"].dtype == np.uint8
    _same(first, _epoch(images((8, 6))))
    _same(_epoch(cached, 1), _epoch(images((8, 6)), 1))
    assert _store(cached).source_reads == len(cached.source.fragments)
    assert cached.source.info == images((8, 6)).source.info  # what the source declares passes through
    bigger = images((9, 6)).cache(cache)
    assert _store(bigger).key != _store(cached).key
    assert _epoch(bigger)[0]["image"].shape == (6, 9, 6, 3)


def test_image_tensors_are_cached_as_arrow_ipc_with_one_fixed_size_value_of_raw_bytes_per_image(tmp_path):
    """A part with an n-D uint8 column is an Arrow IPC file: one fixed-size binary value per row, a byte per byte."""
    from streamfeed.readers import read_images

    root = _image_folder(tmp_path / "images")
    cached = read_images(root, size=(8, 6), fragment_size=5).cache(tmp_path / "cache").batch(6)
    _same(_epoch(cached), _epoch(read_images(root, size=(8, 6), fragment_size=5).batch(6)))
    parts = sorted(_published(cached).glob("part-*"))
    assert [part.suffix for part in parts] == [".arrow"] * len(cached.source.fragments)
    manifest = json.loads((_published(cached) / MANIFEST_NAME).read_text())
    assert manifest["data_format"] == "arrow"
    for part in parts:
        with pa.ipc.open_file(pa.py_buffer(part.read_bytes())) as reader:
            table = reader.read_all()
        image = table.column("image").combine_chunks()
        assert image.type == pa.binary(8 * 6 * 3) and image.null_count == 0
        assert image.buffers()[1].size == len(image) * 8 * 6 * 3  # the pixels, nothing else
        assert part.stat().st_size <= len(image) * 8 * 6 * 3 + 2048, (part.name, part.stat().st_size)
    again = read_images(root, size=(8, 6), fragment_size=5).cache(tmp_path / "cache").batch(6)
    first = _epoch(again)
    _same(first, _epoch(read_images(root, size=(8, 6), fragment_size=5).batch(6)))
    assert _store(again).source_reads == 0 and first[0]["image"].dtype == np.uint8


def test_a_changed_byte_in_an_image_part_is_rewritten_not_served(tmp_path):
    from streamfeed.readers import read_images

    root = _image_folder(tmp_path / "images")

    def images():
        return read_images(root, size=(8, 6), fragment_size=5).batch(6)

    _epoch(images().cache(tmp_path / "cache"))
    cached = images().cache(tmp_path / "cache")
    part = _published(cached) / "part-000001.arrow"
    raw = bytearray(part.read_bytes())
    raw[len(raw) // 2] ^= 0x10  # one byte in the middle of the file, the same size
    part.write_bytes(bytes(raw))
    _same(_epoch(cached), _epoch(images()))
    assert _store(cached).source_reads == 1
    verify_output(_published(cached))


def test_an_unreadable_manifest_is_written_again(data, tmp_path, caplog):
    cache = tmp_path / "cache"
    first = _open(data).cache(cache).batch(64)
    _epoch(first)
    (_published(first) / MANIFEST_NAME).write_text('{"format": "streamfeed-manifest", "version": 1, "rows": 3')
    with caplog.at_level(logging.WARNING, logger="streamfeed"):
        again = _open(data).cache(cache).batch(64)
    assert "not one of this cache" in caplog.text
    _same(_epoch(again), _epoch(_open(data).batch(64)))
    assert _store(again).source_reads == len(again.source.fragments)
    verify_output(_published(again))
