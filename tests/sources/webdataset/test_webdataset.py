"""read_webdataset against shards written by the real ``webdataset`` library, and its own reader as the reference.

Every shard here is written by ``webdataset.TarWriter`` (damage is made
by cutting or rewriting those files); the reference samples are
``webdataset.WebDataset``'s on the same shards. The HTTP test reads through
the loopback range server of the storage tests (``tests/storage/_http_server.py``),
started and stopped by pid.
"""

from __future__ import annotations

import io
import json
import sys
import tarfile
from pathlib import Path

import numpy as np
import pytest
import webdataset as wds
from PIL import Image

import streamfeed as sf

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "storage"))
from _http_server import HttpServer  # noqa: E402 - the storage tests' server, by path

BOUNDS = [0, 23, 64, 73]  # three shards of 23, 41 and 9 samples


def _sample(i: int) -> dict:
    rng = np.random.default_rng(i)
    return {
        "__key__": f"img{i:05d}",
        "png": rng.integers(0, 256, (6, 5, 3), dtype=np.uint8),
        "cls": i % 4,
        "npy": np.arange(3, dtype=np.float32) * i,
        "json": {"id": i, "tags": ["a", str(i)]},
        "txt": f"caption {i}",
    }


def write_shards(root: Path, bounds: list[int] = BOUNDS, drop: dict[int, str] | None = None) -> list[Path]:
    """Shards of ``_sample(i)`` by TarWriter; ``drop``: sample id -> extension left out of that sample."""
    root.mkdir(parents=True, exist_ok=True)
    paths = []
    for number in range(len(bounds) - 1):
        path = root / f"shard-{number:03d}.tar"
        with wds.TarWriter(str(path)) as writer:
            for i in range(bounds[number], bounds[number + 1]):
                sample = _sample(i)
                if drop and i in drop:
                    del sample[drop[i]]
                writer.write(sample)
        paths.append(path)
    return paths


def webdatasets_samples(paths: list[Path]) -> list[dict]:
    """webdataset's own reading of the shards: its tar expander, its grouping by key, its decoder ("rgb8")."""
    from webdataset.autodecode import Decoder, imagehandler
    from webdataset.tariterators import group_by_keys, tar_file_expander

    decode = Decoder([imagehandler("rgb8")])
    streams = [open(path, "rb") for path in paths]  # closed here: WebDataset() leaves its files to the collector
    try:
        opened = [{"stream": stream, "url": str(path)} for stream, path in zip(streams, paths)]
        return [decode(sample) for sample in group_by_keys(tar_file_expander(opened))]
    finally:
        for stream in streams:
            stream.close()


def epoch(ds: sf.Dataset, epoch_number: int = 0, state: dict | None = None) -> dict[str, np.ndarray]:
    columns: dict[str, list] = {}
    with ds.batch(7).iter_epoch(epoch_number, state=state) as stream:
        for batch in stream:
            for name, column in batch.items():
                columns.setdefault(name, []).append(np.array(column, copy=True))
    return {name: np.concatenate(parts) for name, parts in columns.items()}


def test_count_and_exact_epoch_equal_webdatasets_own_reader(tmp_path):
    paths = write_shards(tmp_path)
    ds = sf.read_webdataset(tmp_path, fragment_samples=10)
    assert len(ds) == 73
    assert ds.source.column_names == ["__key__", "cls", "json", "npy", "png", "txt"]
    got = epoch(ds)
    reference = webdatasets_samples(paths)
    assert len(reference) == len(got["__key__"]) == 73
    for row, sample in enumerate(reference):
        assert got["__key__"][row] == sample["__key__"]
        np.testing.assert_array_equal(got["png"][row], sample["png"])
        assert got["cls"][row] == sample["cls"]
        np.testing.assert_array_equal(got["npy"][row], sample["npy"])
        assert got["json"][row] == sample["json"]
        assert got["txt"][row] == sample["txt"]
    assert got["png"].dtype == np.uint8 and got["png"].shape == (73, 6, 5, 3)
    assert got["npy"].dtype == np.float32 and got["cls"].dtype == np.int64


def test_keys_names_and_image_size_choose_what_is_served(tmp_path):
    write_shards(tmp_path)
    ds = sf.read_webdataset(
        tmp_path,
        keys={"png": "image", "cls": "int", "txt": "bytes"},
        names={"cls": "label"},
        key_column=None,
        image_size=(4, 4),
    )
    got = epoch(ds)
    assert sorted(got) == ["label", "png", "txt"]
    assert got["png"].shape == (73, 4, 4, 3)
    np.testing.assert_array_equal(got["label"], np.arange(73) % 4)
    assert got["txt"][5] == b"caption 5"


def test_shuffle_mixes_shards_by_seed_every_sample_once(tmp_path):
    write_shards(tmp_path)
    ds = sf.read_webdataset(tmp_path, fragment_samples=5)
    keys = sorted(epoch(ds)["__key__"])
    first = epoch(ds.shuffle(11, window=4), 0)["__key__"]
    assert sorted(first) == keys
    assert list(epoch(ds.shuffle(11, window=4), 0)["__key__"]) == list(first)  # the seed decides
    assert list(epoch(ds.shuffle(11, window=4), 1)["__key__"]) != list(first)  # another epoch, another order
    shard_of = {f"img{i:05d}": number for number in range(3) for i in range(BOUNDS[number], BOUNDS[number + 1])}
    assert len({shard_of[key] for key in first[:15]}) > 1  # the first rows come from several shards


def test_resume_mid_shard_serves_the_rest_of_the_epoch(tmp_path):
    write_shards(tmp_path)
    ds = sf.read_webdataset(tmp_path, fragment_samples=8).shuffle(3, window=2)
    whole = epoch(ds, 1)["__key__"]
    with ds.batch(7).iter_epoch(1) as stream:
        served = [np.array(next(stream)["__key__"]) for _ in range(3)]
        state = json.loads(json.dumps(stream.get_state()))
    assert state["offset"] > 0  # inside a read unit: the middle of a shard's samples
    rest = epoch(ds, state=state)["__key__"]
    np.testing.assert_array_equal(np.concatenate(served + [rest]), whole)


def _truncated(tmp_path: Path) -> tuple[Path, str, int]:
    """The second shard cut inside sample 40's png member: (its path, that member, its header's offset)."""
    paths = write_shards(tmp_path)
    with tarfile.open(paths[1]) as tar:
        member = tar.getmember("img00040.png")
    data = paths[1].read_bytes()
    paths[1].write_bytes(data[: member.offset_data + 10])
    return paths[1], member.name, member.offset


def test_a_truncated_tar_is_named_by_shard_member_and_offset(tmp_path):
    path, member, offset = _truncated(tmp_path)
    with pytest.raises(sf.CorruptFileError) as raised:
        sf.read_webdataset(tmp_path)
    message = str(raised.value)
    assert str(path) in message and repr(member) in message and f"byte {offset}" in message and "truncated" in message


def test_a_truncated_tar_under_skip_keeps_the_intact_samples_and_reports(tmp_path):
    path, member, offset = _truncated(tmp_path)
    ds = sf.read_webdataset(tmp_path, on_error="skip")
    keys = list(epoch(ds)["__key__"])
    assert keys == [f"img{i:05d}" for i in list(range(40)) + list(range(64, 73))]
    assert len(ds) == 49
    (entry,) = ds.report.entries
    assert entry.path == str(path) and entry.rows == 1 and str(offset) in entry.location


def test_a_sample_missing_a_served_member_is_a_bad_unit(tmp_path):
    paths = write_shards(tmp_path, drop={30: "cls"})
    with pytest.raises(sf.DataError) as raised:
        sf.read_webdataset(tmp_path)
    message = str(raised.value)
    assert str(paths[1]) in message and "img00030.cls" in message and "header at byte" in message
    ds = sf.read_webdataset(tmp_path, on_error="skip")
    assert len(ds) == 72 and "img00030" not in set(epoch(ds)["__key__"])
    (entry,) = ds.report.entries
    assert entry.path == str(paths[1]) and "img00030" in entry.location and entry.rows == 1
    assert len(sf.read_webdataset(tmp_path, keys=["png", "txt"])) == 73  # not served: not missing


def test_a_member_that_does_not_decode_is_named_or_skipped(tmp_path):
    paths = write_shards(tmp_path)
    data = bytearray(paths[2].read_bytes())
    with tarfile.open(paths[2]) as tar:
        member = tar.getmember("img00070.png")
    data[member.offset_data : member.offset_data + 8] = b"NOTPNG!!"
    paths[2].write_bytes(bytes(data))
    with pytest.raises(sf.DataError, match="img00070.png"):
        epoch(sf.read_webdataset(tmp_path))
    ds = sf.read_webdataset(tmp_path, on_error="skip")
    assert len(epoch(ds)["__key__"]) == 72
    (entry,) = ds.report.entries
    assert "img00070" in entry.location and f"byte {member.offset}" in entry.location


def _add(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    tar.addfile(info, io.BytesIO(data))


def test_traversal_names_are_refused_and_other_members_ignored(tmp_path):
    path = tmp_path / "odd.tar"
    with tarfile.open(path, "w") as tar:
        _add(tar, "a.cls", b"1")
        _add(tar, "../evil.cls", b"2")
        directory = tarfile.TarInfo("folder")
        directory.type = tarfile.DIRTYPE
        tar.addfile(directory)
        link = tarfile.TarInfo("b.cls")
        link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
        tar.addfile(link)
        _add(tar, "c.cls", b"3")
        _add(tar, "x" * 150 + ".cls", b"4")  # a long name: a PAX header
    with pytest.raises(sf.DataError, match="climbs"):
        sf.read_webdataset(path)
    ds = sf.read_webdataset(path, on_error="skip")
    got = epoch(ds)
    assert list(got["__key__"]) == ["a", "c", "x" * 150] and list(got["cls"]) == [1, 3, 4]
    (entry,) = ds.report.entries
    assert "../evil.cls" in entry.location


def test_a_gzip_shard_is_refused_by_name(tmp_path):
    path = tmp_path / "shard.tar"
    with tarfile.open(path, "w:gz") as tar:
        _add(tar, "a.cls", b"1")
    with pytest.raises(sf.CorruptFileError, match="GZIP"):
        sf.read_webdataset(path)


def test_fingerprint_follows_shards_and_every_option(tmp_path):
    paths = write_shards(tmp_path)
    base = sf.read_webdataset(tmp_path).fingerprint()
    assert sf.read_webdataset(tmp_path).fingerprint() == base
    for other in (
        sf.read_webdataset(tmp_path, keys=["png", "cls"]),
        sf.read_webdataset(tmp_path, names={"cls": "label"}),
        sf.read_webdataset(tmp_path, image_size=(3, 3)),
        sf.read_webdataset(tmp_path, fragment_samples=4),
        sf.read_webdataset(tmp_path, key_column="k"),
    ):
        assert other.fingerprint() != base
    write_shards(tmp_path / "again", [0, 23])
    paths[0].write_bytes((tmp_path / "again" / "shard-000.tar").read_bytes())  # rewritten: another stamp
    import os

    os.utime(paths[0], ns=(1, 1))
    assert sf.read_webdataset(tmp_path).fingerprint() != base


def test_https_range_reads_equal_local_reads(tmp_path):
    paths = write_shards(tmp_path / "www")
    local = epoch(sf.read_webdataset(tmp_path / "www", fragment_samples=10).shuffle(5))
    with HttpServer(tmp_path / "www") as server:
        urls = [f"{server.url}/{path.name}" for path in paths]
        ds = sf.read_webdataset(urls, fragment_samples=10).shuffle(5)
        remote = epoch(ds)
        ranged = [entry for entry in server.log() if entry.get("range")]
    assert list(remote["__key__"]) == list(local["__key__"])
    np.testing.assert_array_equal(remote["png"], local["png"])
    assert ranged  # read by byte ranges, not whole files


def test_pillow_and_webdataset_agree_on_the_png_written(tmp_path):
    """The reference decode is Pillow's, as streamfeed's stored-size path is (a check on the test itself)."""
    write_shards(tmp_path, [0, 1])
    with tarfile.open(tmp_path / "shard-000.tar") as tar:
        data = tar.extractfile("img00000.png").read()  # type: ignore[union-attr]
    np.testing.assert_array_equal(np.asarray(Image.open(io.BytesIO(data)).convert("RGB")), _sample(0)["png"])


def test_a_file_that_is_not_a_tar_is_a_damaged_shard(tmp_path):
    write_shards(tmp_path, [0, 5])
    (tmp_path / "noise.tar").write_bytes(np.random.default_rng(0).bytes(3000))
    with pytest.raises(sf.CorruptFileError, match="checksum") as raised:
        sf.read_webdataset(tmp_path)
    assert "noise.tar, byte 0" in str(raised.value)
    ds = sf.read_webdataset(tmp_path, on_error="skip")
    assert len(ds) == 5 and [entry.path for entry in ds.report.entries] == [str(tmp_path / "noise.tar")]


def test_a_header_whose_size_is_not_a_number_is_damage_not_a_crash(tmp_path):
    path = tmp_path / "odd.tar"
    with tarfile.open(path, "w", format=tarfile.USTAR_FORMAT) as tar:
        _add(tar, "a.cls", b"1")
        _add(tar, "b.cls", b"2")
    data = bytearray(path.read_bytes())
    header = bytearray(data[1024:1536])  # b.cls's header, after a.cls's header and data block
    header[124:136] = b"zzzzzzzzzzz\0"
    header[148:156] = b" " * 8
    header[148:156] = f"{sum(header):06o}\0 ".encode()
    data[1024:1536] = header
    path.write_bytes(bytes(data))
    with pytest.raises(sf.CorruptFileError, match="do not parse") as raised:
        sf.read_webdataset(path)
    assert "byte 1024" in str(raised.value)
    assert list(epoch(sf.read_webdataset(path, on_error="skip"))["cls"]) == [1]
