"""Variable-length TFRecord features (``("int64", None)``, ``("float", None)``) read as ragged rows.

Records are written by TensorFlow (``tf.train.Example`` through
``tf.io.TFRecordWriter``) and the truth is TensorFlow's own
``tf.io.VarLenFeature`` parse of the same records. Lengths 0 to 300,
int64 values over the whole range (10-byte varints), a record whose list is
not packed (protobuf allows it), a malformed list named and skipped.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import tensorflow as tf  # the reference writer and parser; CI installs it

import streamfeed as sf  # noqa: E402
from streamfeed.core_ragged import Ragged  # noqa: E402
from streamfeed.errors import ArgumentError, DataError  # noqa: E402
from streamfeed.sources.tfrecord import format as fmt  # noqa: E402

FEATURES = {"tok": ("int64", None), "w": ("float", None), "y": ("int64", ())}
TF_FEATURES = {
    "tok": tf.io.VarLenFeature(tf.int64),
    "w": tf.io.VarLenFeature(tf.float32),
    "y": tf.io.FixedLenFeature([], tf.int64),
}


def _record(rng: np.random.Generator, index: int) -> bytes:
    length = 0 if index % 7 == 0 else int(min(300, 1 + rng.pareto(1.0) * 5))
    tokens = rng.integers(-(2**63), 2**63 - 1, size=length, dtype=np.int64) if index % 3 == 0 else np.arange(length)
    feature = {
        "tok": tf.train.Feature(int64_list=tf.train.Int64List(value=tokens.tolist())),
        "w": tf.train.Feature(float_list=tf.train.FloatList(value=(np.arange(index % 5) / 3).tolist())),
        "y": tf.train.Feature(int64_list=tf.train.Int64List(value=[index])),
    }
    return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()


def _write(path: Path, records: list[bytes]) -> Path:
    with tf.io.TFRecordWriter(str(path)) as writer:
        for record in records:
            writer.write(record)
    return path


def _tf_rows(records: list[bytes]) -> dict[int, dict[str, list]]:
    rows = {}
    for record in records:
        parsed = tf.io.parse_single_example(record, TF_FEATURES)
        rows[int(parsed["y"])] = {
            "tok": parsed["tok"].values.numpy().tolist(),
            "w": parsed["w"].values.numpy().tolist(),
        }
    return rows


def _served(dataset) -> dict[int, dict[str, list]]:
    rows = {}
    for chunk in dataset.iter_epoch():
        assert isinstance(chunk["tok"], Ragged) and isinstance(chunk["w"], Ragged)
        assert chunk["tok"].dtype == np.int64 and chunk["w"].dtype == np.float32
        for index, y in enumerate(chunk["y"].tolist()):
            assert y not in rows
            rows[y] = {"tok": chunk["tok"].row(index).tolist(), "w": chunk["w"].row(index).tolist()}
    return rows


@pytest.fixture(scope="module")
def records() -> list[bytes]:
    rng = np.random.default_rng(11)
    return [_record(rng, index) for index in range(400)]


def test_variable_length_features_equal_tensorflows_varlen_parse(tmp_path, records):
    path = _write(tmp_path / "v.tfrecord", records)
    dataset = sf.read_tfrecord(path, features=FEATURES, fragment_bytes=4000)
    assert len(dataset.source.fragments) > 3
    assert _served(dataset) == _tf_rows(records)


def test_shuffled_padded_batches_hold_every_row_once(tmp_path, records):
    path = _write(tmp_path / "v.tfrecord", records)
    truth = _tf_rows(records)
    dataset = sf.read_tfrecord(path, features=FEATURES, fragment_bytes=4000).shuffle(seed=3)
    seen = set()
    for batch in dataset.batch(32, pad=sf.Pad(columns=["tok"], mark="length")).iter_epoch():
        for y, row, length in zip(batch["y"].tolist(), batch["tok"], batch["tok_length"].tolist()):
            assert row[:length].tolist() == truth[y]["tok"] and not row[length:].any()
            seen.add(y)
    assert seen == set(truth)


def test_a_list_that_is_not_packed_reads_the_same(tmp_path):
    """Protobuf lets a writer repeat field 1 per value; TensorFlow parses it, and so must the reader."""
    unpacked = b"".join(b"\x08" + fmt.encode_varint(value) for value in (5, -3, 2**40))

    def entry(key: bytes, feature: bytes) -> bytes:
        body = fmt.tag_len(1, len(key)) + key + fmt.tag_len(2, len(feature)) + feature
        return fmt.tag_len(1, len(body)) + body

    features = (
        entry(b"tok", fmt.tag_len(3, len(unpacked)) + unpacked)
        + entry(b"w", fmt.tag_len(2, 0))
        + entry(b"y", fmt.tag_len(3, 2) + b"\x08\x07")
    )
    record = fmt.tag_len(1, len(features)) + features
    path = _write(tmp_path / "odd.tfrecord", [record])
    assert (
        _served(sf.read_tfrecord(path, features=FEATURES))
        == _tf_rows([record])
        == {7: {"tok": [5, -3, 2**40], "w": []}}
    )


def _malformed_float_record(y: int) -> bytes:
    """A float list whose packed payload is 6 bytes: not a whole number of floats."""

    def entry(key: bytes, feature: bytes) -> bytes:
        body = fmt.tag_len(1, len(key)) + key + fmt.tag_len(2, len(feature)) + feature
        return fmt.tag_len(1, len(body)) + body

    floats = fmt.tag_len(1, 6) + bytes(6)
    features = (
        entry(b"tok", fmt.tag_len(3, 0))
        + entry(b"w", fmt.tag_len(2, len(floats)) + floats)
        + entry(b"y", fmt.tag_len(3, 2) + b"\x08" + bytes([y]))
    )
    return fmt.tag_len(1, len(features)) + features


def test_a_malformed_list_is_named_or_skipped_and_reported(tmp_path, records):
    path = _write(tmp_path / "bad.tfrecord", [*records[:5], _malformed_float_record(99), *records[5:9]])
    with pytest.raises(
        DataError, match=r"record 5 .*'w': float, any length.*a packed float list's length is not a multiple of 4"
    ):
        list(sf.read_tfrecord(path, features=FEATURES).iter_epoch())
    dataset = sf.read_tfrecord(path, features=FEATURES, on_error="skip")
    assert _served(dataset) == _tf_rows(records[:9])
    assert [entry.rows for entry in dataset.report.entries] == [1]


def test_a_bytes_list_of_any_length_is_refused_with_what_to_do(tmp_path, records):
    path = _write(tmp_path / "v.tfrecord", records[:3])
    with pytest.raises(ArgumentError, match="bytes list of any length"):
        sf.read_tfrecord(path, features={"tok": ("bytes", None)})


def test_the_fingerprint_tells_a_variable_length_feature_from_a_fixed_one(tmp_path):
    rng = np.random.default_rng(0)
    fixed = [
        tf.train.Example(
            features=tf.train.Features(
                feature={"tok": tf.train.Feature(int64_list=tf.train.Int64List(value=rng.integers(0, 9, 3).tolist()))}
            )
        ).SerializeToString()
        for _ in range(20)
    ]
    path = _write(tmp_path / "f.tfrecord", fixed)
    variable = sf.read_tfrecord(path, features={"tok": ("int64", None)})
    rectangular = sf.read_tfrecord(path, features={"tok": ("int64", (3,))})
    assert variable.fingerprint() != rectangular.fingerprint()
    assert next(iter(rectangular.iter_epoch()))["tok"].shape == (20, 3)
    assert next(iter(variable.iter_epoch()))["tok"].lengths().tolist() == [3] * 20


def test_the_gathering_decoder_names_each_malformed_payload_and_keeps_the_others():
    """The decoder's own checks, on payloads laid end to end: a float payload of 6 bytes, a varint
    running past its list, one of 11 bytes; the good rows around them keep their values."""
    from streamfeed.sources.tfrecord.varlen import decode_varlen_column

    good = fmt.encode_varint(300) + fmt.encode_varint(-1)
    payloads = [good, b"\x81", b"\xff" * 10 + b"\x01", fmt.encode_varint(7)]
    raw = b"".join(payloads)
    buf = np.frombuffer(raw + bytes(fmt.PAD_BYTES), dtype=np.uint8)
    ends = np.cumsum([len(p) for p in payloads])
    begins = ends - [len(p) for p in payloads]
    every = np.ones(len(payloads), dtype=bool)
    errors: dict[int, str] = {}
    rows = decode_varlen_column(buf, "int64", "tok", begins, ends, every, every, errors)
    assert sorted(errors) == [1, 2] and all("malformed int64_list" in why for why in errors.values())
    assert rows.to_list() == [[300, -1], [], [], [7]]

    floats = np.array([1.5, -2], dtype="<f4").tobytes()
    raw = floats + bytes(6) + floats[:4]
    buf = np.frombuffer(raw + bytes(fmt.PAD_BYTES), dtype=np.uint8)
    begins, ends = np.array([0, 8, 14]), np.array([8, 14, 18])
    errors = {}
    rows = decode_varlen_column(buf, "float", "w", begins, ends, np.ones(3, bool), np.ones(3, bool), errors)
    assert list(errors) == [1] and "not a whole number of floats" in errors[1]
    assert rows.to_list() == [[1.5, -2.0], [], [1.5]]
