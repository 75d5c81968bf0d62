"""The fast TFRecord paths give exactly what the general, record-by-record ones give.

* Decoding: records that share one byte layout are decoded at once
  (``_tfrecord_fast.py``); every other record goes to the general parser.
  On files written by ``tf.io.TFRecordWriter`` (+ ``tf.train.Example``) and
  on hand-made and randomly damaged records, the layout decoder must yield
  the general parser's columns bit for bit and its errors word for word,
  and the reader must name and skip bad records exactly as before.
* Framing: runs of records of one length are walked and CRC-checked at
  once (``_tfrecord_framing.py``); the scan and the split must equal a
  record-by-record walk, and a damaged record must still be found.
"""

from __future__ import annotations

import os
import random
import struct
from dataclasses import astuple
from pathlib import Path

import numpy as np
import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import tensorflow as tf  # the reference writer and parser; CI installs it

from streamfeed.errors import CorruptFileError, DataError, ErrorPolicy
from streamfeed.pipeline import Dataset
from streamfeed.readers import read_tfrecord
from streamfeed.sources.tfrecord import fast, framing
from streamfeed.sources.tfrecord import format as fmt
from streamfeed.sources.tfrecord import index as tfrecord_index
from streamfeed.sources.tfrecord.source import TFRecordSource
from streamfeed.writers.tfrecord import write_tfrecord


# --------------------------------------------------------------------- helpers
def feature(kind: str, values) -> tf.train.Feature:
    if kind == "float":
        return tf.train.Feature(float_list=tf.train.FloatList(value=values))
    if kind == "int64":
        return tf.train.Feature(int64_list=tf.train.Int64List(value=values))
    return tf.train.Feature(bytes_list=tf.train.BytesList(value=values))


def example(**features: tf.train.Feature) -> bytes:
    return tf.train.Example(features=tf.train.Features(feature=features)).SerializeToString()


def tf_write(path: Path, records: list[bytes]) -> Path:
    with tf.io.TFRecordWriter(str(path)) as writer:
        for record in records:
            writer.write(record)
    return path


def offsets(records: list[bytes]) -> list[int]:
    sizes = [fmt.HEADER_BYTES + len(r) + fmt.FOOTER_BYTES for r in records]
    return [sum(sizes[:i]) for i in range(len(records))]


class Counted:
    """Wraps the general parser to count the records the layout decoder left to it."""

    def __init__(self) -> None:
        self.records = 0
        self.general = fmt.decode_examples

    def __call__(self, buf, raw, starts, lengths, specs):
        self.records += len(starts)
        return self.general(buf, raw, starts, lengths, specs)


def decode_both(records: list[bytes], specs: list[fmt.FeatureSpec], monkeypatch=None):
    """Frames ``records`` and decodes them with both parsers; returns (general, layout, records left to general)."""
    data = b"".join(fmt.frame(record) for record in records)
    starts, lengths, bad, problem = fmt.split_records(data, len(records))
    assert problem is None and bad == []
    buf = np.frombuffer(data + bytes(fmt.PAD_BYTES), dtype=np.uint8)
    general = fmt.decode_examples(buf, data, starts, lengths, specs)
    counted = Counted()
    if monkeypatch is not None:
        monkeypatch.setattr(fast.fmt, "decode_examples", counted)
    layout = fast.decode_examples(buf, data, starts, lengths, specs)
    if monkeypatch is not None:
        monkeypatch.undo()
    return general, layout, counted.records


def assert_identical(got: tuple[dict, dict], want: tuple[dict, dict]) -> None:
    """Same columns (dtype, shape, every bit) and the same errors."""
    got_columns, got_errors = got
    want_columns, want_errors = want
    assert sorted(got_columns) == sorted(want_columns)
    for name, column in want_columns.items():
        other = got_columns[name]
        assert other.dtype == column.dtype and other.shape == column.shape, name
        if column.dtype == object:
            assert other.tolist() == column.tolist(), name
        else:
            assert other.tobytes() == column.tobytes(), name  # bit for bit: NaN payloads, -0.0
    assert got_errors == want_errors


def read_rows(ds: Dataset) -> dict[str, np.ndarray]:
    with ds.iter_epoch(0) as it:
        chunks = list(it)
    if not chunks:
        return {}
    return {name: np.concatenate([chunk[name] for chunk in chunks]) for name in chunks[0]}


def general_dataset(path: Path, **options) -> Dataset:
    errors = {key: options.pop(key) for key in ("on_error",) if key in options}
    report = ErrorPolicy(**errors).new_report()
    source = TFRecordSource(path, parser="general", report=report, **options)
    return Dataset(source, report=report)


def assert_same_rows(got: dict, want: dict) -> None:
    assert sorted(got) == sorted(want)
    for name in want:
        if want[name].dtype == object:
            assert got[name].tolist() == want[name].tolist(), name
        else:
            assert got[name].tobytes() == want[name].tobytes(), name


def both_readers_agree(path: Path, features=None, *, layout_share: float = 0.5, **options) -> dict[str, np.ndarray]:
    """read_tfrecord and the general parser read the same rows and report the same skips.

    At least ``layout_share`` of the records read must have taken the layout path.
    """
    ds = read_tfrecord(path, features=features, **options)
    reference = general_dataset(path, features=features, **options)
    counted = Counted()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(fast.fmt, "decode_examples", counted)
        got = read_rows(ds)
    want = read_rows(reference)
    assert counted.records <= (1 - layout_share) * ds.report.total_rows
    assert_same_rows(got, want)
    assert sorted(astuple(e) for e in ds.report.entries) == sorted(astuple(e) for e in reference.report.entries)
    return got


# ------------------------------------------------- files TensorFlow wrote
def fixed_records(n: int, seed: int = 0) -> list[bytes]:
    """Fixed-shape records: floats, a float list, small, growing, negative and extreme ints, fixed-size bytes."""
    rng = np.random.default_rng(seed)
    records = []
    for i in range(n):
        records.append(
            example(
                x=feature("float", rng.standard_normal(4).astype(np.float32).tolist()),
                weight=feature("float", [float(np.float32(i) / 7)]),
                label=feature("int64", [i % 10]),
                id=feature("int64", [200 + i * 37]),  # 2 and 3-byte varints: with "extreme", 2 layouts of one length
                delta=feature("int64", [-1 - (i % 3)]),  # negative: 10-byte varints
                extreme=feature("int64", [[-(2**63), 2**63 - 1, 0][i % 3]]),
                pair=feature("int64", [i % 100, 100 + i % 20]),
                key=feature("bytes", [b"k\x00" + bytes([i % 251]) + b"\x00"]),  # trailing NUL kept
            )
        )
    return records


FIXED_SPEC = {
    "x": ("float", (2, 2)),
    "weight": ("float", ()),
    "label": ("int64", ()),
    "id": ("int64", ()),
    "delta": ("int64", ()),
    "extreme": ("int64", ()),
    "pair": ("int64", (2,)),
    "key": ("bytes", ()),
}


def tf_parse(records: list[bytes], spec: dict) -> dict[str, np.ndarray]:
    types = {"float": tf.float32, "int64": tf.int64, "bytes": tf.string}
    tf_spec = {name: tf.io.FixedLenFeature(list(shape), types[kind]) for name, (kind, shape) in spec.items()}
    parsed = tf.io.parse_example(tf.constant(records), tf_spec)
    return {name: value.numpy() for name, value in parsed.items()}


def test_fixed_layout_file_decodes_like_the_general_parser_and_tensorflow(tmp_path, monkeypatch):
    records = fixed_records(1200)
    specs = fmt.parse_feature_specs(FIXED_SPEC)
    general, layout, left = decode_both(records, specs, monkeypatch)
    assert_identical(layout, general)
    assert layout[1] == {} and left == 0  # every record took the layout path
    path = tf_write(tmp_path / "fixed.tfrecord", records)
    rows = both_readers_agree(path, FIXED_SPEC, fragment_bytes=40_000)
    want = tf_parse(records, FIXED_SPEC)
    for name, column in want.items():
        assert rows[name].tolist() == column.tolist(), name
    assert rows["extreme"][:3].tolist() == [-(2**63), 2**63 - 1, 0] and rows["delta"][:3].tolist() == [-1, -2, -3]
    assert rows["key"][5] == b"k\x00\x05\x00"


def test_a_record_missing_a_feature_in_the_middle_is_named_and_skipped_as_before(tmp_path):
    records = fixed_records(1200)
    records[77] = example(x=feature("float", [1.0, 2, 3, 4]), weight=feature("float", [1.0]))  # 'label' and more gone
    records[78] = records[78].replace(b"label", b"lbael")  # same length, another key: the layout refuses it
    path = tf_write(tmp_path / "missing.tfrecord", records)
    starts = offsets(records)
    for ds in (read_tfrecord(path, features=FIXED_SPEC), general_dataset(path, features=FIXED_SPEC)):
        with pytest.raises(DataError) as excinfo:
            read_rows(ds)
        message = str(excinfo.value)
        assert str(path) in message and f"record 77 (byte offset {starts[77]})" in message
        assert "is missing" in message
    rows = both_readers_agree(path, FIXED_SPEC, on_error="skip", fragment_bytes=40_000)
    assert len(rows["id"]) == 1198
    ds = read_tfrecord(path, features=FIXED_SPEC, on_error="skip")
    read_rows(ds)
    assert [(e.location, e.rows) for e in ds.report.entries] == [
        (f"record {i} (byte offset {starts[i]})", 1) for i in (77, 78)
    ]
    assert "'label' is missing" in ds.report.entries[1].reason


def test_varying_lengths_and_a_varying_feature_not_asked_for(tmp_path, monkeypatch):
    rng = np.random.default_rng(5)
    records = []
    for _ in range(1500):
        records.append(
            example(
                x=feature("float", rng.standard_normal(3).astype(np.float32).tolist()),
                # random widths: many record lengths, some too rare for a layout
                n=feature("int64", [int(rng.integers(0, 2 ** int(rng.integers(1, 40))))]),
                note=feature("bytes", [b"?" * int(rng.integers(0, 4))]),  # not asked for: free bytes, varying size
                other=feature("float", rng.standard_normal(2).tolist()),  # not asked for
            )
        )
    spec = {"x": ("float", (3,)), "n": ("int64", ())}
    general, layout, left = decode_both(records, fmt.parse_feature_specs(spec), monkeypatch)
    assert_identical(layout, general)
    assert 0 < left < 1500  # both paths were used
    path = tf_write(tmp_path / "varying.tfrecord", records)
    rows = both_readers_agree(path, spec, layout_share=0.1)
    assert rows["n"].tolist() == tf_parse(records, spec)["n"].tolist()


def unpacked(values_by_name: dict[str, tuple[str, list]], packed: bool) -> bytes:
    """An Example with int64 and float lists written packed or unpacked (both valid protobuf)."""
    tag = fmt.tag_len
    entries = b""
    for name, (kind, values) in values_by_name.items():
        if kind == "int64" and not packed:
            body = b"".join(b"\x08" + fmt.encode_varint(v) for v in values)
        elif kind == "float" and not packed:
            body = b"".join(b"\x0d" + np.float32(v).tobytes() for v in values)
        else:
            body = fmt.list_body(kind, values)
        value = tag(fmt.KIND_FIELD[kind], len(body)) + body
        key = name.encode()
        entry = tag(1, len(key)) + key + tag(2, len(value)) + value
        entries += tag(1, len(entry)) + entry
    return tag(1, len(entries)) + entries


def test_packed_and_unpacked_int64_and_float_lists(tmp_path, monkeypatch):
    records = []
    for i in range(640):
        values = {"v": ("int64", [i, -i, 2**40 + i]), "f": ("float", [i / 3, -1.5])}
        records.append(unpacked(values, packed=(i // 80) % 2 == 0))  # runs of 80 of each encoding
    spec = {"v": ("int64", (3,)), "f": ("float", (2,))}
    general, layout, left = decode_both(records, fmt.parse_feature_specs(spec), monkeypatch)
    assert_identical(layout, general)
    assert 0 < left < 640 and general[1] == {}
    path = tf_write(tmp_path / "packing.tfrecord", records)
    rows = both_readers_agree(path, spec, fragment_bytes=12_000, layout_share=0.3)  # half are unpacked
    want = tf_parse(records, spec)
    assert rows["v"].tolist() == want["v"].tolist() and rows["f"].tobytes() == want["f"].tobytes()


def test_two_map_orders_in_one_file(tmp_path):
    """Records of one length in two map orders (streamfeed's writer's and another): two layouts, one file."""
    ids = np.arange(100, 400)
    x = np.linspace(-1, 1, 300, dtype=np.float32)
    write_tfrecord({"x": x[:150], "id": ids[:150]}, tmp_path / "mine" / "part")  # x first
    data = next(iter((tmp_path / "mine").glob("part-*.tfrecord"))).read_bytes()
    theirs = [
        unpacked({"id": ("int64", [int(i)]), "x": ("float", [v])}, packed=True) for i, v in zip(ids[150:], x[150:])
    ]
    path = tmp_path / "mixed.tfrecord"
    path.write_bytes(data + b"".join(fmt.frame(r) for r in theirs) + data)
    rows = both_readers_agree(path, {"x": ("float", ()), "id": ("int64", ())})
    assert rows["id"].tolist() == ids.tolist() + ids[:150].tolist()


def test_corrupt_records_are_named_and_skipped_exactly_as_before(tmp_path):
    records = fixed_records(1200)
    data = bytearray(b"".join(fmt.frame(r) for r in records))
    starts = offsets(records)
    data[starts[40] + 12 + 30] ^= 0x10  # a flipped data byte: the data CRC fails
    damaged = bytearray(records[120])  # a re-framed record (CRCs good) whose key is damaged
    damaged[damaged.index(b"label")] = ord("L")
    data[starts[120] : starts[121]] = fmt.frame(bytes(damaged))
    damaged = bytearray(records[200])  # a structural length byte: malformed protobuf, CRCs good
    damaged[1] ^= 0x04
    data[starts[200] : starts[201]] = fmt.frame(bytes(damaged))
    data[starts[250] + 12 + len(records[250]) + 1] ^= 0x01  # a damaged stored data CRC
    path = tmp_path / "corrupt.tfrecord"
    path.write_bytes(bytes(data))
    for ds in (read_tfrecord(path, features=FIXED_SPEC), general_dataset(path, features=FIXED_SPEC)):
        with pytest.raises(CorruptFileError) as excinfo:
            read_rows(ds)
        message = str(excinfo.value)
        assert f"record 40 (byte offset {starts[40]})" in message and "data CRC" in message
    rows = both_readers_agree(path, FIXED_SPEC, on_error="skip", fragment_bytes=40_000)
    ds = read_tfrecord(path, features=FIXED_SPEC, on_error="skip", fragment_bytes=40_000)
    assert len(read_rows(ds)["id"]) == len(rows["id"]) == 1196
    entries = sorted(ds.report.entries, key=lambda e: int(e.location.split()[1]))  # read threads report in any order
    assert [(e.location.split(" (")[0], e.rows) for e in entries] == [
        ("record 40", 1),
        ("record 120", 1),
        ("record 200", 1),
        ("record 250", 1),
    ]
    reasons = [e.reason for e in entries]
    assert "data CRC" in reasons[0] and "'label' is missing" in reasons[1] and "data CRC" in reasons[3]
    assert "not a valid tf.train.Example" in reasons[2] or "missing" in reasons[2]


# ------------------------------------------------- randomised: both parsers agree
def random_record(rng: random.Random, names: list[str]) -> bytes:
    """A record of ``names`` with mostly the fixed shape, sometimes perturbed in one of many ways."""
    values = {
        "a": ("float", [rng.uniform(-1e6, 1e6) for _ in range(3)]),
        "b": ("int64", [rng.choice([0, 1, 127, 128, 300, 2**35, -1, -(2**63), 2**63 - 1, rng.randrange(1000)])]),
        "c": ("bytes", [bytes(rng.getrandbits(8) for _ in range(2)), b"xy"]),
        "d": ("int64", [rng.randrange(100) for _ in range(2)]),
        "skip": ("float", [rng.random() for _ in range(rng.choice([1, 1, 1, 2]))]),
    }
    order = list(names)
    change = rng.random()
    if change < 0.05:
        del values[rng.choice(["a", "b", "c", "d"])]  # a missing feature
    elif change < 0.10:
        values["a"] = ("float", values["a"][1][:2])  # a list of the wrong length
    elif change < 0.15:
        values["b"] = ("float", [1.0])  # the wrong kind
    elif change < 0.20:
        rng.shuffle(order)  # another map order
    elif change < 0.25:
        return unpacked({name: values[name] for name in ("a", "b", "d")}, packed=False)  # and no 'c'
    tag = fmt.tag_len
    entries = b""
    for name in order:
        if name not in values:
            continue
        kind, items = values[name]
        body = fmt.list_body(kind, items)
        value = tag(fmt.KIND_FIELD[kind], len(body)) + body
        key = name.encode()
        entry = tag(1, len(key)) + key + tag(2, len(value)) + value
        entries += tag(1, len(entry)) + entry
    record = bytearray(tag(1, len(entries)) + entries)
    if change > 0.97:  # a damaged byte anywhere: malformed, or just other values
        record[rng.randrange(len(record))] ^= 1 << rng.randrange(8)
    elif change > 0.95:  # and an empty Feature
        key = b"empty"
        entry = tag(1, len(key)) + key + tag(2, 0)
        entries += tag(1, len(entry)) + entry
        record = bytearray(tag(1, len(entries)) + entries)
    return bytes(record)


@pytest.mark.parametrize("seed", range(12))
def test_random_records_decode_identically(seed, monkeypatch):
    rng = random.Random(seed)
    names = ["a", "b", "c", "d", "skip"]
    rng.shuffle(names)
    records = [random_record(rng, names) for _ in range(rng.choice([30, 1000, 2500]))]
    spec = {"a": ("float", (3,)), "b": ("int64", ()), "c": ("bytes", (2,)), "d": ("int64", (1, 2))}
    general, layout, left = decode_both(records, fmt.parse_feature_specs(spec), monkeypatch)
    assert_identical(layout, general)
    assert left < len(records) or len(records) < fast.MIN_GROUP * 2
    assert general[1], "the random records include bad ones"


def test_an_overlong_varint_is_only_its_own_records_fault():
    good = unpacked({"v": ("int64", [5])}, packed=True)
    payload = b"\x80" * 10 + b"\x01"  # 11 bytes: longer than any int64
    body = fmt.tag_len(1, len(payload)) + payload
    value = fmt.tag_len(3, len(body)) + body
    entry = fmt.tag_len(1, 1) + b"v" + fmt.tag_len(2, len(value)) + value
    bad = fmt.tag_len(1, len(entry) + 2) + fmt.tag_len(1, len(entry)) + entry
    records = [good] * 70 + [bad] + [good] * 70
    general, layout, _ = decode_both(records, fmt.parse_feature_specs({"v": ("int64", ())}))
    assert_identical(layout, general)
    assert list(general[1]) == [70] and "longer than 10 bytes" in general[1][70]
    assert general[0]["v"].tolist() == [5] * 70 + [0] + [5] * 70


# ------------------------------------------------------------------- framing
def reference_scan(data: bytes, fragment_bytes: int) -> tuple:
    """A record-by-record walk of the framing (what the scan did before it walked runs at once)."""
    size, records, position, first, begin = len(data), 0, 0, 0, 0
    ranges, problem = [], None
    while position < size:
        if size - position < fmt.HEADER_BYTES:
            problem = (records, position, f"the file ends inside a record header ({size - position} of 12 bytes)", 1)
            break
        length, good = fmt.read_header(data, position)
        if not good:
            what = "the length field's CRC does not match"
            if records == 0:
                what += (
                    " in the very first record: this is not a TFRecord file, "
                    "or it is compressed (pass compression='GZIP')"
                )
            problem = (records, position, what, None)
            break
        end = position + fmt.HEADER_BYTES + length + fmt.FOOTER_BYTES
        if end > size:
            problem = (
                records,
                position,
                f"the file ends inside a record of {length} bytes ({size - position} bytes are left)",
                1,
            )
            break
        records, position = records + 1, end
        if position - begin >= fragment_bytes:
            ranges.append((first, records - first, begin, position))
            first, begin = records, position
    if records > first:
        ranges.append((first, records - first, begin, position))
    return records, tuple(ranges), problem, (ranges[-1][3] if ranges else 0)


class Stream:
    def __init__(self, data: bytes) -> None:
        self.data = data

    def read_at(self, count: int, at: int) -> bytes:
        return self.data[at : at + count]


def random_file(rng: random.Random) -> bytes:
    mode = rng.choice(["one length", "two lengths", "runs", "random"])
    records = []
    for i in range(rng.randrange(0, 300)):
        length = {"one length": 40, "two lengths": rng.choice([40, 41]), "runs": 40 + (i // 37) % 3}.get(
            mode, rng.randrange(0, 500)
        )
        records.append(bytes(rng.getrandbits(8) for _ in range(length)))
    data = bytearray(b"".join(fmt.frame(r) for r in records))
    damage = rng.choice(["none", "truncated", "flipped", "appended"])
    if data and damage == "truncated":
        data = data[: rng.randrange(len(data))]
    elif data and damage == "flipped":
        data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
    elif damage == "appended":
        data += bytes(rng.randrange(1, 20))
    return bytes(data)


@pytest.mark.parametrize("seed", range(6))
def test_scan_and_split_equal_a_record_by_record_walk(seed, monkeypatch):
    rng = random.Random(seed)
    for _ in range(40):
        data = random_file(rng)
        fragment_bytes = rng.choice([1, 100, 1000, 1 << 20])
        monkeypatch.setattr(tfrecord_index, "_BLOCK", rng.choice([97, 2048, 1 << 20]))
        index = tfrecord_index._scan_plain(Stream(data), "p", len(data), fragment_bytes)
        problem = index.problem and astuple(index.problem)
        assert (index.records, index.ranges, problem, index.data_bytes) == reference_scan(data, fragment_bytes)
        # split_records: the same records, and the same data CRC verdicts as one check per record
        count = rng.randrange(0, 320)
        starts, lengths, bad, problem = framing.split_records(data, count)
        view = memoryview(data)
        heads, at = [], 0
        while len(heads) < count and at + 8 <= len(data):
            heads.append(at)
            at += struct.unpack_from("<Q", data, at)[0] + 16
        framed = len(starts)
        assert starts.tolist() == [h + 12 for h in heads[:framed]]
        want_bad = [
            row
            for row, (s, n) in enumerate(zip(starts.tolist(), lengths.tolist()))
            if fmt.masked_crc(view[s : s + n]) != struct.unpack_from("<I", data, s + n)[0]
        ]
        assert bad == want_bad


def test_one_damaged_record_in_a_long_run_is_found():
    records = [bytes([i % 256]) * 64 for i in range(500)]
    data = bytearray(b"".join(fmt.frame(r) for r in records))
    for row in (0, 250, 499):
        damaged = bytearray(data)
        damaged[row * (64 + 16) + 12 + 7] ^= 0x80
        assert framing.split_records(bytes(damaged), 500)[2] == [row]
    damaged = bytearray(data)
    for row in (10, 11):  # the same flip at the same place of two records cannot cancel out
        damaged[row * (64 + 16) + 12 + 3] ^= 0x01
    assert framing.split_records(bytes(damaged), 500)[2] == [10, 11]
    assert framing.split_records(bytes(data), 500)[2] == []
