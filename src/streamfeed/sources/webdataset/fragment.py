"""Reading a webdataset fragment: consecutive samples of one shard, read by offset and decoded into columns.

One ranged read covers the fragment's members (from the first one's data
to the last one's end), through the source's filesystem: local files,
``s3://``, ``gs://`` and ``https://`` alike (``files/storage.py``). A
member that does not decode, or decodes to another shape than its column's,
makes its sample bad: ``on_error="raise"`` names shard, member and byte
offset; ``"skip"`` leaves the sample out and reports it (rows=1).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow.fs as pafs

from ...core import Chunk
from ...errors import BadInputReport, CorruptFileError, DataError, OnError, SkippedUnit, describe
from ...files.stamps import Stamps, stamps_field, take_stamps, unchanged
from .decode import Column, DecodeError, decode_value, empty, fits
from .samples import Sample


def member_where(path: str, member: str | None, offset: int) -> str:
    """How every message names a place in a shard: the shard, the member, its header's byte offset."""
    return f"{path}, byte {offset}" if member is None else f"{path}, member {member!r} (header at byte {offset})"


@dataclass(frozen=True)
class Decoder:
    """What every fragment needs to turn bytes into columns (shared, read-only)."""

    filesystem: pafs.FileSystem
    columns: tuple[Column, ...]
    key_column: str | None
    image_size: tuple[int, ...] | None
    on_error: OnError
    report: BadInputReport = field(compare=False)


@dataclass(frozen=True)
class WebDatasetFragment:
    """Samples ``first`` to ``first + num_rows - 1`` of one shard, with their members' offsets."""

    key: str
    num_rows: int
    path: str
    first: int
    samples: tuple[Sample, ...] = field(repr=False)
    _decoder: Decoder = field(repr=False, compare=False)
    _stamps: Stamps = stamps_field()

    def __post_init__(self) -> None:
        object.__setattr__(self, "_stamps", take_stamps((self.path,), self._decoder.filesystem))

    @property
    def location(self) -> str:
        return f"samples {self.first}-{self.first + self.num_rows - 1}"

    def read(self) -> Chunk:
        """:meth:`_read`, refused if the shard changed since the source opened it (``files/stamps.py``)."""
        with unchanged((self.path,), self._stamps):
            return self._read()

    def load(self) -> tuple[int, bytes]:
        """The bytes from the first served member's data to the last one's end, and where they start."""
        wanted = [sample.members[c.extension] for sample in self.samples for c in self._decoder.columns]
        if not wanted:
            return 0, b""
        start = min(member.offset for member in wanted)
        end = max(member.offset + member.size for member in wanted)
        try:
            with self._decoder.filesystem.open_input_file(self.path) as stream:
                data = stream.read_at(end - start, start)
        except OSError as exc:
            raise CorruptFileError(
                describe(
                    "Could not read a tar shard",
                    where=f"{self.path}, {self.location} (bytes {start}-{end})",
                    found=f"{type(exc).__name__}: {exc}",
                    fix="check the shard; it may have changed since the dataset was opened",
                )
            ) from exc
        if len(data) != end - start:
            raise CorruptFileError(
                describe(
                    "A tar shard is shorter than when it was opened",
                    where=f"{self.path}, {self.location}",
                    expected=f"{end - start} bytes from byte {start}",
                    found=f"{len(data)} bytes",
                    fix="do not modify shards while streaming them; open the dataset again",
                )
            )
        return start, bytes(data)

    def _read(self) -> Chunk:
        start, data = self.load()
        columns = self._decoder.columns
        values: dict[str, list[Any]] = {column.name: [] for column in columns}
        errors: dict[int, tuple[str, int, str]] = {}  # row -> (member, header offset, problem)
        for row, sample in enumerate(self.samples):
            for column in columns:
                member = sample.members[column.extension]
                raw = data[member.offset - start : member.offset - start + member.size]
                try:
                    value = decode_value(raw, column.kind, self._decoder.image_size)
                except DecodeError as exc:
                    errors.setdefault(row, (member.name, member.header, f"{column.kind} member {exc}"))
                    value = None
                else:
                    problem = fits(column, value)
                    if problem is not None:
                        errors.setdefault(row, (member.name, member.header, f"the member {problem}"))
                values[column.name].append(value)
        keep = [row for row in range(len(self.samples)) if row not in errors]
        if errors:
            self._handle(errors)
        chunk: Chunk = {}
        if self._decoder.key_column is not None:
            keys = np.empty(len(keep), dtype=object)
            keys[:] = [self.samples[row].key for row in keep]
            chunk[self._decoder.key_column] = keys
        for column in columns:
            out = empty(column, len(keep))  # object columns element by element: a dict or list stays one value
            for position, row in enumerate(keep):
                out[position] = values[column.name][row]
            chunk[column.name] = out
        return chunk

    def _handle(self, errors: dict[int, tuple[str, int, str]]) -> None:
        """Raises for the first bad sample, or reports every bad sample (left out of the chunk)."""
        if self._decoder.on_error == "raise":
            row = min(errors)
            member, offset, problem = errors[row]
            raise DataError(
                describe(
                    "A webdataset sample does not decode",
                    where=member_where(self.path, member, offset),
                    found=problem,
                    fix="rewrite the shard, or pass on_error='skip' to leave such samples out and report them",
                )
            )
        for row in sorted(errors):
            member, offset, problem = errors[row]
            location = (
                f"sample {self.first + row} {self.samples[row].key!r}, member {member!r} (header at byte {offset})"
            )
            self._decoder.report.add(SkippedUnit(self.path, location, problem, 1))
