"""The TFRecord reader and writer against TensorFlow's own writer and reader.

Files are written by ``tf.io.TFRecordWriter`` (plain and GZIP) and read back
by streamfeed, and written by streamfeed and read back by
``tf.data.TFRecordDataset`` + ``tf.io.parse_single_example``; damaged copies
(truncated, a flipped data byte, a flipped length byte, zero bytes, another
format) must raise naming the file, the record index and the byte offset,
or, under ``on_error="skip"``, be reported exactly.
"""

from __future__ import annotations

import io
import os
import zlib
from pathlib import Path

import numpy as np
import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import tensorflow as tf  # the reference writer and reader; CI installs it

import streamfeed as sf  # noqa: E402
from streamfeed.errors import CorruptFileError, DataError, ErrorBudgetExceeded, SchemaError  # noqa: E402
from streamfeed.readers import read_tfrecord  # noqa: E402
from streamfeed.sources.tfrecord import format as fmt  # noqa: E402
from streamfeed.writers.tfrecord import write_tfrecord  # noqa: E402

SPEC = {"x": ("float", (4,)), "label": ("int64", ()), "name": ("bytes", ())}
TF_SPEC = {
    "x": tf.io.FixedLenFeature([4], tf.float32),
    "label": tf.io.FixedLenFeature([], tf.int64),
    "name": tf.io.FixedLenFeature([], tf.string),
}


def example(i: int, **override) -> bytes:
    """Record ``i``: x = [i, -i, i/3, 1e30] (float32), a label that spans the int64 range, bytes with NULs."""
    label = [-(2**63), 2**63 - 1, -1, 0][i % 4] if i % 5 == 0 else i * 1_000_003
    feature = {
        "x": tf.train.Feature(float_list=tf.train.FloatList(value=[i, -i, i / 3, 1e30])),
        "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[label])),
        "name": tf.train.Feature(bytes_list=tf.train.BytesList(value=[b"r\x00" + str(i).encode() + b"\x00"])),
    }
    feature.update(override)
    for key in [key for key, value in feature.items() if value is None]:
        del feature[key]
    return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()


def tf_write(path: Path, records: list[bytes], options: str | None = None) -> Path:
    with tf.io.TFRecordWriter(str(path), options=options) as writer:
        for record in records:
            writer.write(record)
    return path


def offsets(records: list[bytes]) -> list[int]:
    """Byte offset of each record in a plain TFRecord file of ``records``."""
    sizes = [fmt.HEADER_BYTES + len(r) + fmt.FOOTER_BYTES for r in records]
    return [sum(sizes[:i]) for i in range(len(records))]


def tf_parse(records: list[bytes], spec=TF_SPEC) -> dict[str, np.ndarray]:
    parsed = tf.io.parse_example(tf.constant(records), spec)
    return {name: value.numpy() for name, value in parsed.items()}


def read_all(ds: sf.Dataset) -> dict[str, np.ndarray]:
    with ds.iter_epoch(0) as it:
        chunks = list(it)
    if not chunks:
        return {}
    return {name: np.concatenate([chunk[name] for chunk in chunks]) for name in chunks[0]}


def assert_same(got: dict[str, np.ndarray], want: dict[str, np.ndarray]) -> None:
    assert sorted(got) == sorted(want)
    for name in want:
        np.testing.assert_array_equal(got[name], want[name], err_msg=name)


RECORDS = [example(i) for i in range(300)]


# ------------------------------------------------------ TensorFlow → streamfeed
@pytest.mark.parametrize("options,suffix", [(None, ".tfrecord"), ("GZIP", ".tfrecord.gz")], ids=["plain", "gzip"])
def test_reads_tensorflow_writer_output_exactly(tmp_path, options, suffix):
    path = tf_write(tmp_path / f"data{suffix}", RECORDS, options)
    ds = read_tfrecord(path, features=SPEC, fragment_bytes=2000)
    assert len(ds) == 300
    got = read_all(ds)
    assert_same(got, tf_parse(RECORDS))
    assert got["x"].dtype == np.float32 and got["x"].shape == (300, 4) and got["label"].dtype == np.int64
    assert got["name"][7] == b"r\x007\x00"  # trailing NULs kept
    fragments = ds.source.fragments
    assert sum(f.num_rows for f in fragments) == 300
    # contiguous record ranges of about fragment_bytes (decompressed for GZIP), ending on record boundaries
    biggest = max(fmt.HEADER_BYTES + len(r) + fmt.FOOTER_BYTES for r in RECORDS)
    framed = sum(fmt.HEADER_BYTES + len(r) + fmt.FOOTER_BYTES for r in RECORDS)
    assert len(fragments) > 5 and all(f.compressed == bool(options) for f in fragments)
    assert [f.start for f in fragments[1:]] == [f.end for f in fragments[:-1]] and fragments[-1].end == framed
    assert all(2000 <= f.end - f.start < 2000 + biggest for f in fragments[:-1])
    assert set(offsets(RECORDS)) >= {f.start for f in fragments}
    if not options:
        assert framed == path.stat().st_size


def test_features_inferred_from_the_first_record(tmp_path):
    path = tf_write(tmp_path / "data.tfrecord", RECORDS[:20])
    ds = read_tfrecord(path)
    assert {spec.name: (spec.kind, spec.shape) for spec in ds.source.specs} == SPEC
    assert_same(read_all(ds), tf_parse(RECORDS[:20]))


def test_non_canonical_encodings_decode_like_tensorflow(tmp_path):
    """Unpacked lists, value before key, unknown fields: valid protobuf TF's writer never emits."""
    tag = fmt.tag_len
    unpacked_floats = b"".join(b"\x0d" + np.float32(v).tobytes() for v in (1.5, -2, 3, 4))
    unpacked_ints = b"\x08" + fmt.encode_varint(-7)
    name = tag(1, 3) + b"abc"

    def entry(key: bytes, feature: bytes, value_first: bool = False) -> bytes:
        parts = [tag(2, len(feature)) + feature, tag(1, len(key)) + key]
        body = b"".join(parts if value_first else parts[::-1])
        return tag(1, len(body)) + body

    features = (
        entry(b"x", tag(2, len(unpacked_floats)) + unpacked_floats, value_first=True)
        + entry(b"unused", tag(3, 2) + b"\x08\x01")
        + entry(b"label", tag(3, len(unpacked_ints)) + unpacked_ints)
        + entry(b"name", tag(1, len(name)) + name)
    )
    odd = tag(1, len(features)) + features + b"\x10\x2a"  # + an unknown Example field 2 = 42
    records = [RECORDS[0], odd, RECORDS[2]]
    path = tf_write(tmp_path / "odd.tfrecord", records)
    assert_same(read_all(read_tfrecord(path, features=SPEC)), tf_parse(records))


# ------------------------------------------------------ streamfeed → TensorFlow
@pytest.mark.parametrize("compression", [None, "GZIP"])
def test_writer_output_reads_back_in_tensorflow(tmp_path, compression):
    ids = np.arange(230)
    chunk = {
        "id": ids,
        "x": np.stack([ids / 2, -ids / 4, np.full(230, 1e-3)], axis=1),  # float64 → float32
        "flag": ids % 2 == 0,
        "big": np.where(ids % 2 == 0, -(2**63) + ids, 2**62 + ids),
        "text": np.array([f"é{i}" for i in ids], dtype=object),
        "blob": np.array([bytes([i % 256, 0]) for i in ids], dtype=object),
    }
    paths = write_tfrecord(
        [{k: v[:100] for k, v in chunk.items()}, {k: v[100:] for k, v in chunk.items()}],
        tmp_path / "out" / "train",
        shard_rows=70,
        compression=compression,
    )
    ext = ".tfrecord.gz" if compression else ".tfrecord"
    assert [Path(p).name for p in paths] == [f"train-{i:05d}-of-00004{ext}" for i in range(4)]
    # no temporary files left: the shards and the manifest written last
    assert sorted(os.listdir(tmp_path / "out")) == ["_streamfeed_manifest.json", *(Path(p).name for p in paths)]
    assert sorted(os.listdir(tmp_path)) == ["out"]  # nor beside the directory
    spec = {
        "id": tf.io.FixedLenFeature([], tf.int64),
        "x": tf.io.FixedLenFeature([3], tf.float32),
        "flag": tf.io.FixedLenFeature([], tf.int64),
        "big": tf.io.FixedLenFeature([], tf.int64),
        "text": tf.io.FixedLenFeature([], tf.string),
        "blob": tf.io.FixedLenFeature([], tf.string),
    }
    rows = [
        tf.io.parse_single_example(r, spec) for r in tf.data.TFRecordDataset(paths, compression_type=compression or "")
    ]
    got = {name: np.stack([row[name].numpy() for row in rows]) for name in spec if name not in ("text", "blob")}
    got.update(
        {name: [row[name].numpy() for row in rows] for name in ("text", "blob")}
    )  # a bytes_ array would strip trailing NULs
    np.testing.assert_array_equal(got["id"], ids)
    np.testing.assert_array_equal(got["x"], chunk["x"].astype(np.float32))
    np.testing.assert_array_equal(got["flag"], chunk["flag"].astype(np.int64))
    np.testing.assert_array_equal(got["big"], chunk["big"])
    assert [t.decode() for t in got["text"]] == list(chunk["text"])
    assert list(got["blob"]) == list(chunk["blob"])
    # and streamfeed reads its own output back, with the same values
    back = read_all(
        read_tfrecord(
            tmp_path / "out",
            features={"id": ("int64", ()), "x": ("float", (3,)), "big": ("int64", ()), "blob": ("bytes", ())},
        )
    )
    np.testing.assert_array_equal(back["x"], got["x"])
    np.testing.assert_array_equal(back["big"], got["big"])
    assert list(back["blob"]) == list(chunk["blob"])


def test_writer_takes_a_dataset_and_refuses_to_overwrite(tmp_path):
    source = write_tfrecord({"id": np.arange(50), "x": np.arange(50) / 2}, tmp_path / "a" / "src", shard_rows=50)
    ds = read_tfrecord(source, fragment_bytes=300).shuffle(3, window=2)
    copied = write_tfrecord(ds, tmp_path / "b" / "copy.tfrecord", shard_rows=20)
    assert [Path(p).name for p in copied] == [f"copy-{i:05d}-of-00003.tfrecord" for i in range(3)]
    assert sorted(read_all(read_tfrecord(copied))["id"]) == list(range(50))
    with pytest.raises(FileExistsError, match="copy-00000-of-00003"):
        write_tfrecord({"id": np.arange(3)}, tmp_path / "b" / "copy")
    again = write_tfrecord({"id": np.arange(3)}, tmp_path / "b" / "copy", overwrite=True)
    assert sorted(os.listdir(tmp_path / "b")) == ["_streamfeed_manifest.json", "copy-00000-of-00001.tfrecord"]
    assert len(again) == 1 and sorted(read_all(read_tfrecord(tmp_path / "b"))["id"]) == [0, 1, 2]


def test_writer_refuses_a_directory_holding_other_files_even_with_overwrite(tmp_path):
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "notes.txt").write_text("mine")
    for overwrite in (False, True):
        with pytest.raises(FileExistsError, match="notes.txt"):
            write_tfrecord({"id": np.arange(3)}, tmp_path / "d" / "train", overwrite=overwrite)
        assert sorted(os.listdir(tmp_path / "d")) == ["notes.txt"]


def test_writer_failing_midway_leaves_the_old_set_and_no_temporaries(tmp_path):
    write_tfrecord({"id": np.arange(10)}, tmp_path / "d" / "train", shard_rows=4)

    def chunks():
        yield {"id": np.arange(5)}
        raise RuntimeError("the source broke")

    with pytest.raises(RuntimeError, match="the source broke"):
        write_tfrecord(chunks(), tmp_path / "d" / "train", shard_rows=2, overwrite=True)
    assert sorted(os.listdir(tmp_path)) == ["d"]
    assert sorted(read_all(read_tfrecord(tmp_path / "d"))["id"]) == list(range(10))
    assert len(os.listdir(tmp_path / "d")) == 4  # three shards and the manifest


def test_writer_with_no_rows_leaves_one_empty_file_tensorflow_reads(tmp_path):
    paths = write_tfrecord([], tmp_path / "none")
    assert [Path(p).name for p in paths] == ["none-00000-of-00001.tfrecord"]
    assert list(tf.data.TFRecordDataset(paths)) == []


# ------------------------------------------------------------------ sharded sets
def test_sharded_directory_and_glob(tmp_path):
    root = tmp_path / "set"
    root.mkdir()
    sizes = [40, 110, 25, 75]
    start = 0
    for number, size in enumerate(sizes):
        tf_write(root / f"train-{number:05d}-of-00004", [example(i) for i in range(start, start + size)])
        start += size
    (root / "README.txt").write_text("not data")
    (root / "_SUCCESS").write_text("")
    tf_write(root / "eval.tfrecord-00000-of-00001", [example(1000)])
    ds = read_tfrecord(root, features=SPEC, fragment_bytes=1500)
    assert [Path(p).name for p in ds.source.files] == ["eval.tfrecord-00000-of-00001"] + [
        f"train-{n:05d}-of-00004" for n in range(4)
    ]
    assert len(ds) == 251
    train = read_tfrecord(str(root / "train-*-of-00004"), features=SPEC, fragment_bytes=1500)
    assert len(train) == 250 and len(train.source.fragments) > 4
    assert_same(read_all(train), tf_parse([example(i) for i in range(250)]))


def test_changed_file_is_scanned_again(tmp_path):
    path = tf_write(tmp_path / "data.tfrecord", RECORDS[:10])
    assert len(read_tfrecord(path, features=SPEC)) == 10
    tf_write(path, RECORDS[:25])
    assert len(read_tfrecord(path, features=SPEC)) == 25


# ------------------------------------------------------------ GZIP in fragments
def test_gzip_file_is_read_in_record_ranges_from_checkpoints(tmp_path):
    """A GZIP file cut into many fragments: each resumes from a checkpoint, every record once, in any order."""
    records = [example(i) for i in range(2000)]  # ~180 KB decompressed: several 16 KiB counting blocks
    path = tf_write(tmp_path / "data.tfrecord.gz", records, "GZIP")
    ds = read_tfrecord(path, features=SPEC, fragment_bytes=6000)
    fragments = ds.source.fragments
    assert len(ds) == 2000 and len(fragments) > 20 and sum(f.num_rows for f in fragments) == 2000
    points = fragments[0]._checkpoints
    assert 5 < len(points) <= len(fragments)  # one per counting block that starts a range, never more than ranges
    assert all(points.before(f.start).out_offset <= f.start for f in fragments)
    want = tf_parse(records)
    assert_same(read_all(ds), want)
    got = [fragment.read() for fragment in reversed(fragments)]  # random access: no fragment needs the one before
    assert_same({name: np.concatenate([chunk[name] for chunk in reversed(got)]) for name in SPEC}, want)
    # concatenated gzip members (cat a.gz b.gz), as gzip and TensorFlow read them
    second = tf_write(tmp_path / "second.tfrecord.gz", records[:700], "GZIP")
    joined = tmp_path / "joined.tfrecord.gz"
    joined.write_bytes(path.read_bytes() + second.read_bytes())
    both = read_tfrecord(joined, features=SPEC, fragment_bytes=6000)
    assert len(both) == 2700 == len(list(tf.data.TFRecordDataset(str(joined), compression_type="GZIP")))
    assert_same(read_all(both), tf_parse(records + records[:700]))


_MEASURE_GZIP = """
import resource, sys
import streamfeed.pipeline
from streamfeed.readers import read_tfrecord

def read(path):
    ds = read_tfrecord(path, fragment_bytes=1 << 20).with_options(read_threads=1)
    rows = 0
    with ds.iter_epoch(0) as it:
        for chunk in it:
            assert (chunk["x"] == chunk["id"] / 2).all()
            rows += len(chunk["id"])
    return rows, len(ds.source.fragments)

read(sys.argv[1])  # warm-up: imports, allocator pools and a few fragments in flight are the baseline
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
rows, fragments = read(sys.argv[2])
print(rows, fragments, (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) * 1024)
"""


def _write_text_records(path: Path, count: int) -> Path:
    text = b"".join(b"%d the quick brown fox jumps over the lazy dog; " % i for i in range(80))  # ~4 KB, compressible
    with tf.io.TFRecordWriter(str(path), options="GZIP") as writer:
        for i in range(count):
            feature = {
                "id": tf.train.Feature(int64_list=tf.train.Int64List(value=[i])),
                "x": tf.train.Feature(float_list=tf.train.FloatList(value=[i / 2])),
                "text": tf.train.Feature(bytes_list=tf.train.BytesList(value=[text[i % 7 :]])),
            }
            writer.write(tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString())
    return path


def test_reading_a_large_gzip_file_holds_a_fragment_not_the_file(tmp_path):
    """~37 MiB decompressed, 1 MiB fragments, in a fresh process: peak RSS grows by far less than the file.

    Reading it whole (one fragment, as before checkpoints) grew RSS by ~120 MiB.
    """
    import subprocess
    import sys

    small = _write_text_records(tmp_path / "small.tfrecord.gz", 1000)
    large = _write_text_records(tmp_path / "large.tfrecord.gz", 10_000)
    decompressed = len(zlib.decompress(large.read_bytes(), 31))
    assert decompressed > 36 * 2**20
    out = subprocess.run(
        [sys.executable, "-c", _MEASURE_GZIP, str(small), str(large)], capture_output=True, text=True, check=True
    )
    rows, fragments, grown = map(int, out.stdout.split())
    assert rows == 10_000 and fragments >= 35
    assert grown < decompressed / 4, f"peak RSS grew by {grown / 2**20:.1f} MiB reading {decompressed / 2**20:.1f} MiB"


# --------------------------------------------------------------- damaged copies
def damaged(tmp_path: Path, name: str, change) -> tuple[Path, bytes]:
    path = tf_write(tmp_path / name, RECORDS[:40])
    data = bytearray(path.read_bytes())
    change(data)
    path.write_bytes(bytes(data))
    return path, bytes(data)


def skipped(ds: sf.Dataset) -> tuple[dict[str, np.ndarray], list]:
    return read_all(ds), ds.report.entries


def test_truncated_mid_record(tmp_path):
    starts = offsets(RECORDS[:40])
    path, _ = damaged(tmp_path, "cut.tfrecord", lambda d: d.__delitem__(slice(starts[39] + 20, None)))
    with pytest.raises(CorruptFileError) as excinfo:
        read_tfrecord(path, features=SPEC)
    message = str(excinfo.value)
    assert (
        str(path) in message
        and "record 39" in message
        and f"byte offset {starts[39]}" in message
        and "1 record" in message
    )
    ds = read_tfrecord(path, features=SPEC, on_error="skip")
    rows, entries = skipped(ds)
    assert len(ds) == len(rows["label"]) == 39
    assert [(e.path, e.location, e.rows) for e in entries] == [
        (str(path), f"records from 39 on (bytes {starts[39]}-{starts[39] + 20})", 1)
    ]
    assert len(rows["label"]) + ds.report.skipped_rows == ds.report.total_rows == 40
    assert_same(rows, tf_parse(RECORDS[:39]))


def test_flipped_data_byte_loses_only_that_record(tmp_path):
    starts = offsets(RECORDS[:40])
    path, _ = damaged(
        tmp_path, "flip.tfrecord", lambda d: d.__setitem__(starts[17] + 12 + 5, d[starts[17] + 12 + 5] ^ 0x01)
    )
    ds = read_tfrecord(path, features=SPEC, fragment_bytes=1000)  # the framing scan does not read data
    assert len(ds) == 40
    with pytest.raises(CorruptFileError) as excinfo:
        read_all(ds)
    message = str(excinfo.value)
    assert (
        str(path) in message
        and "record 17" in message
        and f"byte offset {starts[17]}" in message
        and "data CRC" in message
    )
    # tf.data agrees that the file is damaged
    with pytest.raises(tf.errors.DataLossError):
        list(tf.data.TFRecordDataset(str(path)))
    ds = read_tfrecord(path, features=SPEC, fragment_bytes=1000, on_error="skip")
    assert len(ds) == 39  # counted before the first batch (one pass)
    rows, entries = skipped(ds)
    assert [(e.location, e.rows) for e in entries] == [(f"record 17 (byte offset {starts[17]})", 1)]
    assert "data CRC" in entries[0].reason
    assert len(rows["label"]) + ds.report.skipped_rows == ds.report.total_rows == 40
    assert_same(rows, tf_parse(RECORDS[:17] + RECORDS[18:40]))
    assert_same(read_all(ds), rows)  # a second epoch reports nothing new
    assert len(ds.report.entries) == 1


def test_flipped_length_byte_loses_the_rest_of_the_file(tmp_path):
    starts = offsets(RECORDS[:40])
    path, data = damaged(tmp_path, "len.tfrecord", lambda d: d.__setitem__(starts[25] + 1, d[starts[25] + 1] ^ 0x40))
    with pytest.raises(CorruptFileError) as excinfo:
        read_tfrecord(path, features=SPEC)
    message = str(excinfo.value)
    assert str(path) in message and "record 25" in message and f"byte offset {starts[25]}" in message
    assert "length field's CRC" in message and "unknown number of records" in message
    ds = read_tfrecord(path, features=SPEC, on_error="skip")
    rows, entries = skipped(ds)
    assert len(ds) == len(rows["label"]) == 25
    assert [(e.location, e.rows) for e in entries] == [(f"records from 25 on (bytes {starts[25]}-{len(data)})", None)]
    assert_same(rows, tf_parse(RECORDS[:25]))
    with pytest.raises(ErrorBudgetExceeded):  # an unknown loss counts as the file's share of files
        read_tfrecord(path, features=SPEC, on_error="skip", max_bad_fraction=0.5)


def test_zero_byte_file_is_an_empty_file(tmp_path):
    (tmp_path / "empty.tfrecord").write_bytes(b"")
    ds = read_tfrecord(tmp_path / "empty.tfrecord", features=SPEC)
    assert len(ds) == 0 and read_all(ds) == {} and ds.report.entries == []
    assert list(tf.data.TFRecordDataset(str(tmp_path / "empty.tfrecord"))) == []  # as TensorFlow sees it
    with pytest.raises(SchemaError, match="pass features"):
        read_tfrecord(tmp_path / "empty.tfrecord")


def test_not_a_tfrecord_file(tmp_path):
    path = tmp_path / "table.tfrecord"
    path.write_text("id,x\n" + "".join(f"{i},{i / 2}\n" for i in range(50)))
    with pytest.raises(CorruptFileError) as excinfo:
        read_tfrecord(path, features=SPEC)
    message = str(excinfo.value)
    assert str(path) in message and "record 0 (byte offset 0)" in message and "not a TFRecord file" in message
    ds = read_tfrecord([path, tf_write(tmp_path / "good.tfrecord", RECORDS[:5])], features=SPEC, on_error="skip")
    assert len(read_all(ds)["label"]) == 5
    assert [(e.path, e.location) for e in ds.report.entries] == [
        (str(path), f"records from 0 on (bytes 0-{path.stat().st_size})")
    ]


def test_gzip_without_extension_says_so(tmp_path):
    path = tf_write(tmp_path / "data.tfrecord", RECORDS[:5], "GZIP")
    with pytest.raises(CorruptFileError, match="compression='GZIP'"):
        read_tfrecord(path, features=SPEC)
    assert len(read_tfrecord(path, features=SPEC, compression="GZIP")) == 5


def test_truncated_gzip(tmp_path):
    path = tf_write(tmp_path / "data.tfrecord.gz", RECORDS[:200], "GZIP")
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    inflater = zlib.decompressobj(31)
    available = inflater.decompress(data[: len(data) // 2])  # everything the truncated stream still holds
    assert not inflater.eof
    intact = sum(
        1
        for o, r in zip(offsets(RECORDS[:200]), RECORDS)
        if o + fmt.HEADER_BYTES + len(r) + fmt.FOOTER_BYTES <= len(available)
    )
    with pytest.raises(CorruptFileError) as excinfo:
        read_tfrecord(path, features=SPEC)
    message = str(excinfo.value)
    assert str(path) in message and f"record {intact} " in message and "truncated" in message
    ds = read_tfrecord(path, features=SPEC, on_error="skip")
    rows = read_all(ds)
    assert 0 < intact < 200 and len(rows["label"]) == intact
    assert_same(rows, tf_parse(RECORDS[:intact]))
    assert [(e.location, e.rows) for e in ds.report.entries] == [
        (f"records from {intact} on (from decompressed byte {offsets(RECORDS)[intact]})", None)
    ]


# ------------------------------------------------------------ the feature spec
def test_missing_feature_and_wrong_length_name_the_record(tmp_path):
    records = RECORDS[:30]
    records[4] = example(4, label=None)
    records[11] = example(11, x=tf.train.Feature(float_list=tf.train.FloatList(value=[1, 2, 3])))
    records[20] = example(20, label=tf.train.Feature(float_list=tf.train.FloatList(value=[1.0])))
    path = tf_write(tmp_path / "spec.tfrecord", records)
    starts = offsets(records)
    with pytest.raises(DataError) as excinfo:
        read_all(read_tfrecord(path, features=SPEC))
    message = str(excinfo.value)
    assert str(path) in message and f"record 4 (byte offset {starts[4]})" in message and "'label' is missing" in message
    ds = read_tfrecord(path, features=SPEC, on_error="skip")
    assert len(ds) == 27
    rows, entries = skipped(ds)
    assert [(e.location, e.rows) for e in entries] == [
        (f"record {i} (byte offset {starts[i]})", 1) for i in (4, 11, 20)
    ]
    assert "has 3 values" in entries[1].reason and "float_list" in entries[2].reason
    assert_same(rows, tf_parse([r for i, r in enumerate(records) if i not in (4, 11, 20)]))
    with pytest.raises(ErrorBudgetExceeded):
        read_all(read_tfrecord(path, features=SPEC, on_error="skip", max_bad_count=2))


def test_a_spec_that_fits_no_record_is_a_setting_error_even_when_skipping(tmp_path):
    path = tf_write(tmp_path / "data.tfrecord", RECORDS[:5])
    with pytest.raises(SchemaError) as excinfo:
        read_tfrecord(path, features={"lable": ("int64", ())}, on_error="skip")
    assert str(path) in str(excinfo.value) and "'label'" in str(excinfo.value)
    with pytest.raises(SchemaError, match="is int64, not float"):
        read_tfrecord(path, features={"label": ("float", ())})


# --------------------------------------------------------------------- images
def test_decode_images(tmp_path):
    Image = pytest.importorskip("PIL.Image")
    rng = np.random.default_rng(0)
    pixels = rng.integers(0, 256, size=(6, 5, 7, 3), dtype=np.uint8)
    encoded = []
    for image in pixels:
        out = io.BytesIO()
        Image.fromarray(image).save(out, format="PNG")
        encoded.append(out.getvalue())
    encoded[3] = b"not an image"
    records = [
        example(i, name=tf.train.Feature(bytes_list=tf.train.BytesList(value=[data]))) for i, data in enumerate(encoded)
    ]
    path = tf_write(tmp_path / "images.tfrecord", records)
    ds = read_tfrecord(path, features=SPEC, decode_images=["name"], on_error="skip")
    rows, entries = skipped(ds)
    assert rows["name"].shape == (5, 5, 7, 3) and rows["name"].dtype == np.uint8
    np.testing.assert_array_equal(rows["name"], pixels[[0, 1, 2, 4, 5]])
    assert [e.location.split(" (")[0] for e in entries] == ["record 3"] and "not a decodable image" in entries[0].reason
    with pytest.raises(SchemaError, match="not a bytes feature"):
        read_tfrecord(path, features=SPEC, decode_images=["label"])


# ----------------------------------------------------------------------- CRC32C
def test_crc32c_backends_agree():
    assert fmt.crc32c_python(b"123456789") == 0xE3069283  # the standard check value
    data = np.random.default_rng(1).integers(0, 256, 3000, dtype=np.uint8).tobytes()
    for size in (0, 1, 7, 8, 100, 3000):
        assert fmt.crc32c_python(data[:size]) == fmt.crc32c(data[:size])
    # a frame we build is byte-identical to TensorFlow's
    path = tf_write(Path(os.environ.get("TMPDIR", "/tmp")) / f"crc-{os.getpid()}.tfrecord", RECORDS[:1])
    try:
        assert path.read_bytes() == fmt.frame(RECORDS[0])
    finally:
        path.unlink()
