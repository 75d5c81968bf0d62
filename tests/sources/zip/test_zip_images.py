"""read_images on zip archives written by Python's ``zipfile``, against read_images on the folder they hold.

Archives are written by ``zipfile`` from folders Pillow wrote
(``tests/factories/zip.py``); damage, bombs and encryption flags are made by
rewriting the bytes ``zipfile`` wrote (a real encrypted or bomb archive
differs from these only in the bytes the guards never read). The HTTP test
reads through the storage tests' loopback range server, started and
stopped by pid.
"""

from __future__ import annotations

import io
import json
import struct
import sys
import tracemalloc
import zipfile
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

import streamfeed as sf
from factories.images import _write_tree
from factories.zip import zip_folder

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "storage"))
from _http_server import HttpServer  # noqa: E402 - the storage tests' server, by path


def epoch(ds: sf.Dataset, epoch_number: int = 0, state: dict | None = None) -> dict[str, np.ndarray]:
    columns: dict[str, list] = {}
    with ds.batch(7).iter_epoch(epoch_number, state=state) as stream:
        for batch in stream:
            for name, column in batch.items():
                columns.setdefault(name, []).append(np.array(column, copy=True))
    return {name: np.concatenate(parts) for name, parts in columns.items()}


def _png(value: int, side: int = 6) -> bytes:
    out = io.BytesIO()
    Image.fromarray(np.full((side, side, 3), value % 256, dtype=np.uint8)).save(out, "PNG")
    return out.getvalue()


def _archive(tmp_path: Path, shuffled: bool = True) -> tuple[Path, Path]:
    _write_tree(tmp_path / "tree")
    return tmp_path / "tree", zip_folder(tmp_path / "tree", tmp_path / "images.zip", shuffled=shuffled)


def _names(paths: np.ndarray, prefix: str) -> list[str]:
    return [str(p)[len(prefix) + 1 :] for p in paths]


def test_rows_and_labels_are_read_images_of_the_extracted_folder(tmp_path):
    folder, archive = _archive(tmp_path)
    for options in ({}, {"dtype": "float32", "resize": "pad", "size": (5, 7)}, {"channels": 1}):
        options = {"size": (8, 8), "fragment_size": 16, **options}
        want = sf.read_images(folder, **options)  # type: ignore[arg-type]
        got = sf.read_images(archive, **options)  # type: ignore[arg-type]
        assert len(got) == len(want) == 270  # exact, from the central directory, before any batch
        assert got.source.label_map == want.source.label_map and got.source.class_counts == want.source.class_counts
        a, b = epoch(want), epoch(got)
        np.testing.assert_array_equal(b["image"], a["image"])
        np.testing.assert_array_equal(b["label"], a["label"])
        assert b["image"].dtype == a["image"].dtype
        assert _names(b["path"], str(archive)) == _names(a["path"], str(folder))


def test_decode_false_serves_the_members_bytes(tmp_path):
    folder, archive = _archive(tmp_path)
    got = epoch(sf.read_images(archive, decode=False))
    assert len(got["image_bytes"]) == 270
    for path, data in zip(got["path"], got["image_bytes"]):
        assert (folder / str(path)[len(str(archive)) + 1 :]).read_bytes() == data


def test_seeded_shuffle_every_image_once_equal_shards_and_resume(tmp_path):
    _, archive = _archive(tmp_path)
    ds = sf.read_images(archive, size=(8, 8), fragment_size=9)
    names = sorted(epoch(ds)["path"])
    first = epoch(ds.shuffle(11, window=4))["path"]
    assert sorted(first) == names and list(first) != names
    assert list(epoch(ds.shuffle(11, window=4))["path"]) == list(first)  # the seed decides
    assert list(epoch(ds.shuffle(11, window=4), 1)["path"]) != list(first)
    shards = [epoch(ds.shuffle(11).shard(i, 3))["path"] for i in range(3)]
    assert len({len(s) for s in shards}) == 1  # equal shards
    assert not set(shards[0]) & set(shards[1]) and not set(shards[1]) & set(shards[2])
    shuffled = ds.shuffle(3, window=2)
    whole = epoch(shuffled, 1)["path"]
    with shuffled.batch(7).iter_epoch(1) as stream:
        served = [np.array(next(stream)["path"]) for _ in range(3)]
        state = json.loads(json.dumps(stream.get_state()))
    assert state["offset"] > 0  # inside a fragment
    np.testing.assert_array_equal(np.concatenate(served + [epoch(shuffled, state=state)["path"]]), whole)


def _write(archive: Path, members: dict[str, bytes], method: int = zipfile.ZIP_STORED) -> Path:
    with zipfile.ZipFile(archive, "w", compression=method) as out:
        for name, data in members.items():
            out.writestr(zipfile.ZipInfo(name), data, compress_type=method)
    return archive


def _good(count: int = 6) -> dict[str, bytes]:
    return {f"{('cat', 'dog')[i % 2]}/{i}.png": _png(i) for i in range(count)}


@pytest.mark.parametrize("name", ["../evil/1.png", "/abs/1.png", "cat/../../1.png", "C:/x/1.png", "cat\\..\\..\\1.png"])
def test_path_traversal_is_refused_by_name(tmp_path, name):
    archive = _write(tmp_path / "t.zip", {**_good(), name: _png(9)})
    with pytest.raises(sf.DataError, match="path traversal") as raised:
        sf.read_images(archive, size=(6, 6))
    assert str(archive) in str(raised.value) and repr(name) in str(raised.value)
    ds = sf.read_images(archive, size=(6, 6), on_error="skip")
    assert len(ds) == 6 and len(epoch(ds)["path"]) == 6
    assert [entry.rows for entry in ds.report.entries] == [1]


def test_duplicate_names_and_nested_zips_and_hidden_members(tmp_path):
    nested = _write(tmp_path / "inner.zip", _good(4))
    members = {**_good(), "cat/inner.zip": nested.read_bytes(), "__MACOSX/cat/._0.png": b"x", "cat/.h.png": b""}
    archive = _write(tmp_path / "d.zip", members)
    with zipfile.ZipFile(archive, "a") as out, pytest.warns(UserWarning, match="Duplicate"):
        out.writestr("dog/1.png", _png(200))  # a second entry of one name
    with pytest.raises(sf.DataError, match="2 entries have this name"):
        sf.read_images(archive, size=(6, 6))
    ds = sf.read_images(archive, size=(6, 6), on_error="skip")
    assert len(ds) == 5  # both entries of dog/1.png refused; the nested zip is not followed
    assert ds.source.summary()["ignored"] == {"hidden": 2, "not_image": 1, "outside_class_folders": 0, "links": 0}
    assert ds.source.class_names == ["cat", "dog"]  # __MACOSX is no class
    assert len(ds.report.entries) == 2


def _bomb_member(archive: Path, prefix: bytes, declared: int, zeros: int = 20 << 20) -> Path:
    """A deflated member ``cat/bomb.png``: ``prefix`` then ``zeros`` zero bytes, its headers declaring ``declared``."""
    with zipfile.ZipFile(archive, "w") as out:
        for name, data in _good().items():
            out.writestr(name, data)
        out.writestr("cat/bomb.png", prefix + bytes(zeros), compress_type=zipfile.ZIP_DEFLATED)
    data = bytearray(archive.read_bytes())
    with zipfile.ZipFile(archive) as zf:
        info = zf.getinfo("cat/bomb.png")
    struct.pack_into("<I", data, info.header_offset + 22, declared)  # local header: uncompressed size
    position = data.index(b"cat/bomb.png", data.index(b"PK\x01\x02")) - 46  # its central entry
    assert data[position : position + 4] == b"PK\x01\x02"
    struct.pack_into("<I", data, position + 24, declared)  # central entry: uncompressed size
    archive.write_bytes(bytes(data))
    return archive


@pytest.mark.parametrize("verify_headers", [True, False])
def test_a_member_inflating_past_its_declared_size_is_a_bomb(tmp_path, verify_headers):
    png = _png(1)
    archive = _bomb_member(tmp_path / "b.zip", png, len(png))  # declares its PNG, inflates to 20 MB more
    assert zipfile.ZipFile(archive).getinfo("cat/bomb.png").compress_size < 100_000
    with pytest.raises(sf.CorruptFileError, match="inflates past") as raised:
        epoch(sf.read_images(archive, size=(6, 6), verify_headers=verify_headers))
    assert "cat/bomb.png" in str(raised.value) and "local header at byte" in str(raised.value)
    ds = sf.read_images(archive, size=(6, 6), verify_headers=verify_headers, on_error="skip")
    assert len(epoch(ds)["path"]) == 6 and [e.rows for e in ds.report.entries] == [1]


def test_inflating_stops_at_the_declared_size(tmp_path):
    """A member inflating to 96 MB more than it declares is never inflated whole (peak far below 96 MB)."""
    png = _png(1)
    archive = _bomb_member(tmp_path / "b.zip", png, len(png), zeros=96 << 20)
    ds = sf.read_images(archive, size=(6, 6), verify_headers=False, on_error="skip")
    tracemalloc.start()
    try:
        got = epoch(ds)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert len(got["path"]) == 6 and "inflates past" in ds.report.entries[0].reason
    assert peak < 16 << 20, peak


def test_a_huge_declared_size_is_refused_at_open(tmp_path):
    archive = _bomb_member(tmp_path / "h.zip", b"", 0xFFFF0000)  # 4 GiB declared from ~20 KB
    with pytest.raises(sf.CorruptFileError, match="zip bomb") as raised:
        sf.read_images(archive, size=(6, 6), verify_headers=False)
    assert "declares 4294901760 bytes uncompressed, more than the" in str(raised.value)
    assert len(sf.read_images(archive, size=(6, 6), on_error="skip")) == 6


def test_a_declared_size_deflate_cannot_produce_is_refused(tmp_path):
    archive = _bomb_member(tmp_path / "r.zip", b"", 100 << 20)  # 100 MB declared (under the bound) from ~20 KB
    with pytest.raises(sf.CorruptFileError, match="more than deflate can produce") as raised:
        sf.read_images(archive, size=(6, 6), verify_headers=False)
    assert "cat/bomb.png" in str(raised.value)


def test_an_encrypted_member_is_refused(tmp_path):
    archive = _write(tmp_path / "e.zip", _good())
    data = bytearray(archive.read_bytes())
    with zipfile.ZipFile(archive) as zf:
        info = zf.getinfo("dog/3.png")
    data[info.header_offset + 6] |= 1  # local header: general purpose flag bit 0 (encrypted)
    position = data.index(b"dog/3.png", data.index(b"PK\x01\x02")) - 46
    data[position + 8] |= 1  # central entry
    archive.write_bytes(bytes(data))
    with pytest.raises(sf.DataError, match="encrypted"):
        sf.read_images(archive, size=(6, 6))
    ds = sf.read_images(archive, size=(6, 6), on_error="skip")
    assert len(ds) == 5 and "dog/3.png" in ds.report.entries[0].location


@pytest.mark.parametrize("verify_headers", [True, False])
def test_a_damaged_member_is_named_by_archive_member_and_offset_and_skipped(tmp_path, verify_headers):
    archive = _write(tmp_path / "c.zip", _good(8))
    data = bytearray(archive.read_bytes())
    with zipfile.ZipFile(archive) as zf:
        info = zf.getinfo("cat/4.png")
    data[info.header_offset + 30 + len("cat/4.png") + 20] ^= 0xFF  # a byte of its stored data: its CRC fails
    archive.write_bytes(bytes(data))
    with pytest.raises(sf.CorruptFileError, match="CRC-32") as raised:
        epoch(sf.read_images(archive, size=(6, 6), verify_headers=verify_headers))
    assert f"{archive}, member 'cat/4.png' (local header at byte {info.header_offset})" in str(raised.value)
    ds = sf.read_images(archive, size=(6, 6), verify_headers=verify_headers, on_error="skip")
    got = epoch(ds)
    assert len(got["path"]) == 7 and f"{archive}/cat/4.png" not in set(got["path"])
    (entry,) = ds.report.entries
    assert entry.path == str(archive) and "cat/4.png" in entry.location and entry.rows == 1


def test_a_truncated_archive_has_no_directory_and_is_refused(tmp_path):
    archive = _write(tmp_path / "cut.zip", _good())
    archive.write_bytes(archive.read_bytes()[:-40])
    with pytest.raises(sf.CorruptFileError, match="central directory") as raised:
        sf.read_images(archive)
    assert str(archive) in str(raised.value)


def test_a_zip_without_the_suffix_is_found_by_its_signature(tmp_path):
    archive = _write(tmp_path / "images.cbz", _good())
    assert len(epoch(sf.read_images(archive, size=(6, 6)))["path"]) == 6


def test_fingerprint_follows_the_archive_and_every_option(tmp_path):
    archive = _write(tmp_path / "f.zip", _good())
    base = sf.read_images(archive, size=(6, 6)).fingerprint()
    assert sf.read_images(archive, size=(6, 6)).fingerprint() == base
    for other in ({"size": (5, 6)}, {"fragment_size": 2}, {"labels": None}, {"label_map": {"cat": 1, "dog": 0}}):
        assert sf.read_images(archive, **{"size": (6, 6), **other}).fingerprint() != base  # type: ignore[arg-type]
    _write(archive, {**_good(), "dog/1.png": _png(77)})  # another member's bytes (same names, same sizes)
    assert sf.read_images(archive, size=(6, 6)).fingerprint() != base


def test_an_archive_over_https_is_read_with_ranged_requests(tmp_path):
    (tmp_path / "www").mkdir()
    _write_tree(tmp_path / "tree")
    archive = zip_folder(tmp_path / "tree", tmp_path / "www" / "images.zip", shuffled=True)
    local = epoch(sf.read_images(archive, size=(8, 8), fragment_size=32).shuffle(5))
    with HttpServer(tmp_path / "www") as server:
        ds = sf.read_images(f"{server.url}/images.zip", size=(8, 8), fragment_size=32).shuffle(5)
        assert len(ds) == 270
        opened = len(server.log())
        remote = epoch(ds)
        log = server.log()
    np.testing.assert_array_equal(remote["image"], local["image"])
    np.testing.assert_array_equal(remote["label"], local["label"])
    gets = [entry for entry in log if entry.get("method") == "GET"]
    assert gets and all(entry.get("range") for entry in gets)  # byte ranges, never the whole archive
    # members out of name order, one read a fragment all the same (gaps spanned): not a request a member
    assert len(log) - opened <= len(ds.source.fragments) < 270 / 8


def test_large_members_are_probed_by_their_first_bytes_and_checked_when_read(tmp_path):
    """Members over fragment.PROBE_WHOLE: the probe reads their heads; a damaged body is found when read."""
    rng = np.random.default_rng(4)
    members = {}
    for i in range(4):
        out = io.BytesIO()
        Image.fromarray(rng.integers(0, 256, (330, 330, 3), dtype=np.uint8)).save(out, "TIFF" if i == 3 else "PNG")
        members[f"{('cat', 'dog')[i % 2]}/{i}.{'tiff' if i == 3 else 'png'}"] = out.getvalue()
    assert min(len(data) for data in members.values()) > 256 << 10
    archive = _write(tmp_path / "big.zip", members, method=zipfile.ZIP_DEFLATED)
    got = epoch(sf.read_images(archive, size=(330, 330)))
    for path, image in zip(got["path"], got["image"]):
        reference = np.asarray(Image.open(io.BytesIO(members[str(path)[len(str(archive)) + 1 :]])).convert("RGB"))
        np.testing.assert_array_equal(image, reference)
    data = bytearray(archive.read_bytes())
    with zipfile.ZipFile(archive) as zf:
        info = zf.getinfo("dog/1.png")
    data[info.header_offset + 30 + len("dog/1.png") + info.compress_size - 100] ^= 0xFF  # past the probed head
    archive.write_bytes(bytes(data))
    ds = sf.read_images(archive, size=(330, 330), on_error="skip")
    assert len(ds.source.members) == 4 and not ds.report.entries  # the probe passes: its head is intact
    assert len(ds) == len(epoch(ds)["path"]) == 3  # under "skip", counted by a pass that reads every member
    (entry,) = ds.report.entries
    assert "dog/1.png" in entry.location and entry.rows == 1


def test_class_folders_wrapped_in_one_folder_are_said(tmp_path, caplog):
    archive = _write(tmp_path / "w.zip", {f"images/{name}": data for name, data in _good().items()})
    with caplog.at_level("WARNING", logger="streamfeed"):
        ds = sf.read_images(archive, size=(6, 6))
    assert ds.source.class_names == ["images"]  # as read_images on the extracted folder: one class
    assert "one folder 'images'" in caplog.text and "one class" in caplog.text
    caplog.clear()
    with caplog.at_level("WARNING", logger="streamfeed"):
        sf.read_images(_write(tmp_path / "ok.zip", _good()), size=(6, 6))
    assert "one class" not in caplog.text


def test_entries_sharing_their_bytes_are_refused(tmp_path):
    """The overlapping-entries bomb: two directory entries pointing at one local header (copied, renamed)."""
    archive = _write(tmp_path / "o.zip", _good())
    data = bytearray(archive.read_bytes())
    end = data.rindex(b"PK\x05\x06")
    entry = data.index(b"cat/0.png", data.index(b"PK\x01\x02")) - 46
    name_length, extra_length, comment_length = struct.unpack("<HHH", data[entry + 28 : entry + 34])
    copy = bytearray(data[entry : entry + 46 + name_length + extra_length + comment_length])
    copy[46 : 46 + name_length] = b"cat/9.png"
    count, size = struct.unpack("<H", data[end + 10 : end + 12])[0], struct.unpack("<I", data[end + 12 : end + 16])[0]
    struct.pack_into("<HHI", data, end + 8, count + 1, count + 1, size + len(copy))
    data[end:end] = copy  # after the last central entry, before the end record
    archive.write_bytes(bytes(data))
    assert sorted(zipfile.ZipFile(archive).namelist()) == sorted([*_good(), "cat/9.png"])  # zipfile takes it
    with pytest.raises(sf.CorruptFileError, match="overlap"):
        sf.read_images(archive, size=(6, 6))
    ds = sf.read_images(archive, size=(6, 6), on_error="skip")
    assert len(ds) == 5 and sorted(e.location.split("'")[1] for e in ds.report.entries) == ["cat/0.png", "cat/9.png"]
