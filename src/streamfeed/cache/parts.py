"""The conversion cache's part files: one fragment's decoded rows, written once, checked at every read.

A part is exactly what a source fragment yielded. Tables of scalars are a
Parquet file (one row group, uncompressed); a fragment with an n-D numeric
column (decoded images) is an Arrow IPC file (:func:`part_format` says
why); n-D columns are one fixed-size binary value of raw bytes per row
(:func:`part_table`). Every part's whole file is hashed (:data:`PART_DIGEST`)
as it is written, and :func:`read_part` serves it only if that checksum
still holds. A part is named by its fragment (:func:`part_name`,
:data:`PART_NAME`). Which parts to write, where, and when they are
published is decided by ``store.py``, ``writer.py`` and ``staging.py``.
"""

from __future__ import annotations

import io
import json
import os
import re
import stat
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from ..core import Chunk
from ..errors import CorruptFileError, describe
from ..files.arrow import ColumnPolicy, Where, column_to_arrow, table_to_chunk
from ..files.publish import DIGESTS

PART_COMPRESSION = "none"  # see docs/self-healing.md: snappy cost write CPU for no size gain on floats
PART_DIGEST = "xxh3_128"  # of each part's whole file (files.publish.DIGESTS): see write_part
_TENSOR = b"streamfeed.cache.tensor"  # field metadata of an n-D column stored as fixed-size binary
# A cached chunk holds exactly what the source yielded, after its null policy: converting it back must
# apply no policy again ("mask" applies none and leaves NaN a value, as the source let it through).
_AS_WRITTEN = ColumnPolicy(nulls="mask")
PART_NAME = re.compile(r"part-(?P<index>\d{6})\.(?:parquet|arrow)")
"""The file name of a part: its fragment's index and its format (:func:`part_name`)."""


def part_name(index: int, chunk: Chunk) -> str:
    """The file name of fragment ``index``'s part holding ``chunk``: ``part-<index:06d>.<format>``."""
    return f"part-{index:06d}.{part_format(chunk)}"


def part_table(chunk: Chunk) -> pa.Table:
    """``chunk`` as the Arrow table of a part: n-D numeric columns as one fixed-size binary value per row.

    A decoded 224x224x3 image written as ``convert`` writes n-D columns (a
    fixed-size list of uint8, which Parquet stores as INT32) took 588 KiB,
    2.4 ms to write and 3.5 ms to read back, against 147 KiB, 0.25 ms and
    0.45 ms as one FIXED_LEN_BYTE_ARRAY (its raw bytes, no copy); decoding
    the JPEG took 1.1 ms. The field's metadata keeps the dtype and row shape.
    """
    arrays, fields = [], []
    for name, values in chunk.items():
        if _is_tensor(values):
            row_bytes = values.dtype.itemsize * int(np.prod(values.shape[1:], dtype=np.int64))
            raw = np.ascontiguousarray(values).reshape(-1).view(np.uint8)
            array: pa.Array = pa.FixedSizeBinaryArray.from_buffers(
                pa.binary(row_bytes), len(values), [None, pa.py_buffer(raw)]
            )
            tensor = {"dtype": values.dtype.str, "shape": list(values.shape[1:])}
            metadata = {_TENSOR: json.dumps(tensor).encode()}
        else:
            array, metadata = column_to_arrow(values)
        arrays.append(array)
        # A column without nulls is declared not nullable, so Parquet writes no definition levels for it:
        # 0.27 -> 0.175 CPU us/row to write 33 float32 columns (46 682 rows, median of 9).
        fields.append(pa.field(name, array.type, nullable=array.null_count > 0, metadata=metadata or None))
    return pa.Table.from_arrays(arrays, schema=pa.schema(fields))


def part_format(chunk: Chunk) -> str:
    """The file format of ``chunk``'s part: ``"arrow"`` (IPC) with an n-D numeric column, else ``"parquet"``.

    A decoded image is a few large fixed-size values, which Parquet's
    encoder copies value by value into pages: 150 CPU us to write a
    224x224x3 image against 82 us as an Arrow IPC record batch (its buffers
    written as they are, 70 us of which is the file write itself), and 80–94
    us against 42–48 to read it back with its checksum (scratch runs, 64
    images a part, load ~3), beside ~1.1 ms to decode the JPEG. Tables of
    scalars stay Parquet, as the issue asks: there plain encoding is cheap
    (0.175 CPU us/row for 33 float32 columns) and the files serve anything
    that reads Parquet.
    """
    return "arrow" if any(_is_tensor(values) for values in chunk.values()) else "parquet"


def _is_tensor(values: np.ndarray) -> bool:
    """An n-D numeric column with bytes in each row: stored as one fixed-size binary value per row."""
    return values.ndim > 1 and values.dtype.kind in "biuf" and all(values.shape[1:])


def read_part_bytes(path: str, size: int) -> bytes:
    """The ``size`` bytes of the part at ``path``, read only if it is a regular file of the cache's own.

    A link (to ``/dev/zero``, to another user's file), a FIFO, a device or
    a directory under a part's name is refused before it is opened
    (``lstat``): reading ``/dev/zero`` has no end and a FIFO blocks. The
    open does not follow links and does not block (``O_NOFOLLOW |
    O_NONBLOCK``), and ``fstat`` checks that the file opened is the one
    checked and still ``size`` bytes; at most ``size + 1`` bytes are read.
    A part of another user, or writable by group or others, is refused too
    (``trust.py``). Raises :class:`CorruptFileError` (an ``OSError``).
    """
    before = os.lstat(path)
    if not (
        stat.S_ISREG(before.st_mode)
        and before.st_uid == os.geteuid()
        and not before.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
        and before.st_size == size
    ):
        raise _not_a_part(path, size, _described(before))
    descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        after = os.fstat(descriptor)
        if (after.st_dev, after.st_ino) != (before.st_dev, before.st_ino) or after.st_size != size:
            raise _not_a_part(path, size, _described(after))
        pieces, left = [], size + 1
        while left > 0:
            piece = os.read(descriptor, min(left, 1 << 30))  # one read, one buffer (joined without a copy)
            if not piece:
                break
            pieces.append(piece)
            left -= len(piece)
    finally:
        os.close(descriptor)
    data = b"".join(pieces)
    if len(data) != size:
        raise _not_a_part(path, size, f"{len(data)} bytes read")
    return data


def _described(st: os.stat_result) -> str:
    regular = stat.S_ISREG(st.st_mode)
    kind = "a regular file" if regular else f"file type {stat.S_IFMT(st.st_mode):#o} (not a regular file)"
    return f"{kind}, owner uid {st.st_uid}, mode {stat.S_IMODE(st.st_mode):#o}, {st.st_size} bytes"


def _not_a_part(path: str, size: int, found: str) -> CorruptFileError:
    return CorruptFileError(
        describe(
            "A cache part is not the cache's own regular file of its recorded size",
            where=path,
            expected=f"a regular file of uid {os.geteuid()}, not writable by group or others, of {size} bytes",
            found=found,
            fix="nothing: the cache rewrites the part from the source",
        )
    )


def read_part(path: str, size: int, digest: str) -> Chunk:
    """A part's rows as written (:func:`part_table` undone), once its ``size`` bytes' checksum is ``digest``.

    The file is read by :func:`read_part_bytes` (a regular file of the
    cache's own, never more than ``size + 1`` bytes), then hashed whole
    before it is parsed, so a changed byte anywhere (a page, or the
    footer's schema, which Parquet's page checksums do not cover) refuses
    the part with :class:`CorruptFileError`.
    """
    data = read_part_bytes(path, size)
    found = DIGESTS[PART_DIGEST](data).hexdigest()
    if found != digest:
        raise CorruptFileError(
            describe(
                "A cache part's contents differ from what was written",
                where=path,
                expected=f"{PART_DIGEST} {digest}",
                found=f"{PART_DIGEST} {found}",
                fix="nothing: the cache rewrites the part from the source",
            )
        )
    if path.endswith(".arrow"):
        table = pa.ipc.open_file(pa.py_buffer(data)).read_all()  # no copy: the arrays keep ``data``
    else:
        table = pq.read_table(pa.py_buffer(data))
    tensors: dict[str, np.ndarray] = {}
    for field in table.schema:
        if field.metadata and _TENSOR in field.metadata:
            tensor = json.loads(field.metadata[_TENSOR])
            column = table.column(field.name).combine_chunks()  # one row group or batch: one chunk, no copy
            row_bytes = column.type.byte_width
            dtype, shape = np.dtype(tensor["dtype"]), tuple(tensor["shape"])
            if len(column) == 0:  # an empty part's buffer may be absent
                tensors[field.name] = np.empty((0, *shape), dtype=dtype)
                continue
            raw = np.frombuffer(
                column.buffers()[1], dtype=np.uint8, count=len(column) * row_bytes, offset=column.offset * row_bytes
            )
            tensors[field.name] = raw.view(dtype).reshape((len(column), *shape))
    rest = table_to_chunk(table.drop_columns(list(tensors)), _AS_WRITTEN, Where(path)) if tensors else None
    if rest is None:
        return table_to_chunk(table, _AS_WRITTEN, Where(path))
    return {name: tensors[name] if name in tensors else rest[name] for name in table.column_names}


def write_part(chunk: Chunk, path: str) -> tuple[int, int, str]:
    """Writes ``chunk`` as a part at ``path``; returns its rows, bytes and checksum.

    In :func:`part_format`'s format: Parquet, one row group; or Arrow IPC,
    one record batch. The bytes are hashed (:data:`PART_DIGEST`,
    xxh3_128) as they are written, and :func:`read_part` checks that
    checksum over the whole file. On 33 float32 columns (46 682 rows) the
    write cost 0.22–0.24 CPU us/row hashed as written, 0.31–0.32 read back
    from the page cache to hash, 0.54 with Parquet page checksums and a
    sha256 read back (page checksums alone cost 0.09 us/row and miss a
    changed footer; scratch runs, load ~3).
    """
    table = part_table(chunk)
    # A new file only (a link or file planted at the name is refused), readable by its owner alone.
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    with open(descriptor, "wb") as file:
        hashed = _HashingFile(file)
        with pa.PythonFile(hashed, mode="w") as sink:
            if part_format(chunk) == "arrow":
                with pa.ipc.new_file(sink, table.schema) as writer:
                    writer.write_table(table)
            else:
                pq.write_table(
                    table,
                    sink,
                    row_group_size=max(1, table.num_rows),
                    compression=PART_COMPRESSION,
                    write_statistics=False,  # nothing filters on them; 0.09 CPU us/row saved (33 float32 columns)
                    # Dictionaries only for text: on 33 random float32 columns they cost 4.5 CPU us/row to write
                    # against 0.45 without (measured, 50 000 rows), for no size gain.
                    use_dictionary=[name for name, values in chunk.items() if values.dtype.kind in "OUS"],
                )
    return table.num_rows, hashed.size, hashed.digest.hexdigest()


class _HashingFile(io.RawIOBase):
    """A file being written whose bytes are hashed (:data:`PART_DIGEST`) and counted on their way to it."""

    def __init__(self, file: io.BufferedWriter) -> None:
        super().__init__()
        self.file, self.digest, self.size = file, DIGESTS[PART_DIGEST](), 0

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        self.digest.update(data)
        written = self.file.write(data)
        self.size += written
        return written
