"""Writing sharded TFRecord files of ``tf.train.Example`` records, without TensorFlow.

Each row becomes one Example with one feature per column: floating columns
a ``float_list`` (stored as float32: the only float type Examples have),
integer and boolean columns an ``int64_list``, bytes and str columns (str as
UTF-8) a ``bytes_list``. A column of shape ``(rows, *shape)`` stores
``prod(shape)`` values per row; read it back with
``features={name: (kind, shape)}``.

Files are named ``name-00000-of-00004.tfrecord`` (``.tfrecord.gz`` with
GZIP). Their directory is the unit of output, published whole
(``files/publish.py``): the shards are written into a hidden temporary
sibling directory, named once their count is known, listed in a manifest
written last, and the directory is put in place with one rename. A crash
leaves no directory, or the previous one, never a set that looks whole.
"""

from __future__ import annotations

import gzip
import os
import re
from typing import Any, Iterable, Literal, Mapping

import numpy as np
import pyarrow.fs as pafs

from ..core import Chunk, chunk_len
from ..errors import ArgumentError, SchemaError, describe
from ..files.paths import filesystem_for
from ..files.publish import Publication
from ..sources.tfrecord import format as fmt

_SUFFIX = re.compile(r"\.(tfrecords?|tfrec)(\.gz)?$", re.IGNORECASE)


def _column_features(name: str, column: np.ndarray) -> list[bytes]:
    """Every row's serialized ``Feature`` for one column (vectorized per column)."""
    column = np.asarray(column)
    rows = len(column)
    flat = column.reshape(rows, -1) if column.ndim != 1 else column.reshape(rows, 1)
    per_row = flat.shape[1]
    kind = column.dtype.kind
    if kind == "f":
        payload = np.ascontiguousarray(flat, dtype="<f4").tobytes()
        body_prefix = fmt.tag_len(1, 4 * per_row) if per_row else b""
        body_len = len(body_prefix) + 4 * per_row
        prefix = fmt.tag_len(fmt.KIND_FIELD["float"], body_len) + body_prefix
        step = 4 * per_row
        return [prefix + payload[i * step : (i + 1) * step] for i in range(rows)]
    if kind in "iub":
        if kind == "u" and flat.size and int(flat.max()) > np.iinfo(np.int64).max:
            raise SchemaError(
                describe(
                    f"Column {name!r} holds values above the int64 range",
                    expected="values an Example's int64_list can hold",
                    found=f"max {int(flat.max())}",
                )
            )
        values = flat.astype(np.int64).ravel()
        sizes = fmt.varint_sizes(values)
        payload = fmt.encode_varints(values, sizes)
        ends = np.cumsum(sizes.reshape(rows, per_row).sum(axis=1)).tolist()
        out, begin = [], 0
        for end in ends:
            body = fmt.tag_len(1, end - begin) + payload[begin:end] if end > begin or per_row else b""
            out.append(fmt.tag_len(fmt.KIND_FIELD["int64"], len(body)) + body)
            begin = end
        return out
    if kind in "SUO":
        out = []
        for row in flat.tolist():
            parts = []
            for value in row:
                if isinstance(value, str):
                    value = value.encode("utf-8")
                elif not isinstance(value, (bytes, bytearray, memoryview)):
                    raise SchemaError(
                        describe(
                            f"Column {name!r} holds a {type(value).__name__}",
                            expected="bytes or str in an object column",
                            fix="convert the column to bytes, str or a numeric dtype",
                        )
                    )
                value = bytes(value)
                parts.append(fmt.tag_len(1, len(value)) + value)
            body = b"".join(parts)
            out.append(fmt.tag_len(fmt.KIND_FIELD["bytes"], len(body)) + body)
        return out
    raise SchemaError(
        describe(
            f"Column {name!r} has dtype {column.dtype}, which an Example cannot hold",
            expected="float, int, bool, bytes or str columns",
            fix="convert the column with .map() first",
        )
    )


def encode_chunk(chunk: Chunk) -> list[bytes]:
    """One serialized ``tf.train.Example`` per row of ``chunk``."""
    rows = chunk_len(chunk)
    columns = []
    for name, column in chunk.items():
        key = name.encode("utf-8")
        columns.append((fmt.tag_len(1, len(key)) + key, _column_features(name, column)))
    examples = []
    for row in range(rows):
        entries = []
        for key, features in columns:
            feature = features[row]
            entry_len = len(key) + len(fmt.tag_len(2, len(feature))) + len(feature)
            entries.append(b"".join((fmt.tag_len(1, entry_len), key, fmt.tag_len(2, len(feature)), feature)))
        joined = b"".join(entries)
        examples.append(fmt.tag_len(1, len(joined)) + joined)
    return examples


def _chunks(data: Any) -> Iterable[Chunk]:
    from ..pipeline import Dataset

    if isinstance(data, Dataset):
        with data.iter_epoch(0) as iterator:
            yield from iterator
    elif isinstance(data, Mapping):
        yield dict(data)
    else:
        yield from data


def write_tfrecord(
    dataset_or_chunks: Any,
    path_pattern: str | os.PathLike,
    *,
    shard_rows: int = 100_000,
    compression: Literal["GZIP"] | None = None,
    overwrite: bool = False,
    filesystem: pafs.FileSystem | None = None,
) -> list[str]:
    """Writes rows as ``tf.train.Example`` records into sharded TFRecord files.

    Args:
        dataset_or_chunks: a :class:`streamfeed.Dataset` (epoch 0 is written,
            in its order), one chunk (dict of equal-length arrays), or an
            iterable of chunks.
        path_pattern: ``dir/name`` (a ``.tfrecord`` suffix is allowed); files
            become ``dir/name-00000-of-0000N.tfrecord`` (``.tfrecord.gz``),
            beside a manifest ``dir/_streamfeed_manifest.json``. ``dir`` is
            published whole: it must be absent or empty.
        shard_rows: rows per file (the last may have fewer).
        compression: ``None`` or ``"GZIP"``.
        overwrite: replace a previous output in ``dir`` (its manifest and
            shards, or a set of this name without a manifest), atomically.
            A directory holding any other file is refused even so: write
            each set into its own directory.

    Returns:
        The paths written, in order. No rows still gives one empty file.
    """
    if shard_rows < 1:
        raise ArgumentError(describe("Invalid shard_rows", expected=">= 1", found=f"{shard_rows}"))
    if compression not in (None, "GZIP"):
        raise ArgumentError(describe("Invalid compression", expected="None or 'GZIP'", found=f"{compression!r}"))
    fs, prefix = filesystem_for(os.fspath(path_pattern), filesystem)
    prefix = _SUFFIX.sub("", prefix)
    directory, name = prefix.rsplit("/", 1) if "/" in prefix else (".", prefix)
    extension = ".tfrecord" + (".gz" if compression == "GZIP" else "")
    # what a set of this name without a manifest (written by older versions) holds: overwrite may replace it
    previous = re.compile(re.escape(name) + r"(-\d{5}-of-\d{5}\.tfrecord(\.gz)?|-\d{5}\.tfrecord(\.gz)?\.incomplete)")

    written: list[int] = []  # rows of each shard, in order
    state: dict[str, Any] = {"raw": None, "out": None}

    def staged(publication: Publication, number: int) -> str:
        return publication.path(f"{name}-{number:05d}{extension}.incomplete")

    def open_next(publication: Publication) -> None:
        state["raw"] = fs.open_output_stream(staged(publication, len(written)), compression=None)
        state["out"] = (
            gzip.GzipFile(fileobj=state["raw"], mode="wb", mtime=0) if compression == "GZIP" else state["raw"]
        )
        written.append(0)

    def close_current() -> None:
        if state["out"] is not None:
            if state["out"] is not state["raw"]:
                state["out"].close()
            state["raw"].close()
            state["out"] = state["raw"] = None

    with Publication(
        directory,
        filesystem=fs,
        overwrite=overwrite,
        owns=lambda base: bool(previous.fullmatch(base.lstrip("."))),
        data_format="tfrecord",
    ) as publication:
        try:
            open_next(publication)
            for chunk in _chunks(dataset_or_chunks):
                records = encode_chunk(chunk)
                at = 0
                while at < len(records):
                    if written[-1] == shard_rows:
                        close_current()
                        open_next(publication)
                    take = min(shard_rows - written[-1], len(records) - at)
                    state["out"].write(b"".join(fmt.frame(record) for record in records[at : at + take]))
                    written[-1] += take
                    at += take
        finally:
            close_current()
        final = [f"{name}-{number:05d}-of-{len(written):05d}{extension}" for number in range(len(written))]
        for number, (target, rows) in enumerate(zip(final, written)):
            fs.move(staged(publication, number), publication.path(target))
            publication.add(target, rows)
        publication.commit()
    return [f"{directory}/{target}" for target in final]
