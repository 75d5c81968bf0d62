"""Tar shards in the WebDataset layout, indexed at open: exact counts, shuffle across shards, resume mid-shard.

webdataset streams a shard from its start to its end: it has no count
before reading, no iterator state (its author advises resampling over
resume, webdataset#271) and ``with_epoch`` is not an exact epoch (#158).
Here every shard's tar headers are walked when the source opens
(``tarindex.py``: headers only, data skipped), its members grouped into
samples with webdataset's own rule (``samples.py``), and each shard cut
into fragments of ``fragment_samples`` consecutive samples that know their
members' byte offsets (``fragment.py``). The pipeline then gives what every
source has: an exact count, a seeded shuffle of fragments (and rows)
across shards, equal shards for workers, and a resume position inside a
shard.

**Bad input is a bad unit, named by shard, member and byte offset**, found
at open where the index can see it, so counts stay exact:

* a truncated or damaged tar: the samples before the damage are kept; the
  sample cut by it and the rest of the shard are lost (``on_error="raise"``
  raises ``CorruptFileError``; ``"skip"`` reports it, rows=1 for the cut
  sample: how many samples followed is unknown);
* a sample missing a member that is served (``DataError``, rows=1);
* a member named absolutely or with ``..`` and a sample with two members of
  one extension (refused, ``samples.py``); members that are not regular
  files (directories, links, devices) are ignored, as webdataset ignores them;
* a member that does not decode is found when its fragment is read
  (``fragment.py``): under ``"skip"`` the dataset then counts with one pass.

Only uncompressed tar shards are read (a ``.tar.gz`` is refused by name:
GZIP has no random access).
"""

from __future__ import annotations

import concurrent.futures
from typing import Any, Mapping, Sequence

import numpy as np
import pyarrow.fs as pafs

from ...core import AlikeRows, SourceInfo, fragmenting_digest, records_settings
from ...errors import ArgumentError, BadInputReport, CorruptFileError, DataError, SchemaError, describe
from ...files.paths import PathLike, file_digest, file_stats, resolve_files
from .decode import KINDS, Column, DecodeError, Kind, column_for, decode_value, default_kind
from .fragment import Decoder, WebDatasetFragment, member_where
from .samples import BadSample, Sample, group
from .tarindex import TarIndex, scan_tar

DEFAULT_FRAGMENT_SAMPLES = 256


class WebDatasetSource(AlikeRows):
    """Opens tar shards: header index, samples by basename, fragments of consecutive samples."""

    settings: dict[str, Any]  # every constructor argument but core.NOT_ROW_SETTINGS (records_settings)

    @records_settings
    def __init__(
        self,
        paths: PathLike,
        *,
        keys: Sequence[str] | Mapping[str, Kind] | None = None,
        names: Mapping[str, str] | None = None,
        key_column: str | None = "__key__",
        image_size: tuple[int, int] | tuple[int, int, int] | None = None,
        fragment_samples: int = DEFAULT_FRAGMENT_SAMPLES,
        filesystem: pafs.FileSystem | None = None,
        report: BadInputReport | None = None,
        threads: int = 8,
    ) -> None:
        if fragment_samples < 1:
            raise ArgumentError(describe("Invalid fragment_samples", expected=">= 1", found=f"{fragment_samples}"))
        if image_size is not None and (len(image_size) not in (2, 3) or min(image_size) < 1):
            raise ArgumentError(
                describe(
                    "Invalid image_size",
                    expected="(height, width) or (height, width, channels)",
                    found=repr(image_size),
                )
            )
        self.report = report or BadInputReport()
        self.image_size = None if image_size is None else tuple(int(v) for v in image_size)
        resolved = resolve_files(paths, suffixes=(".tar",), filesystem=filesystem)
        self.filesystem, files = resolved.filesystem, list(resolved.files)
        with concurrent.futures.ThreadPoolExecutor(max(1, min(threads, len(files)))) as pool:
            indexes = list(pool.map(self._scan, files))
        shards: list[tuple[str, list[Sample]]] = []
        bad = 0
        for path, index in zip(files, indexes):
            if isinstance(index, Exception):
                error = CorruptFileError(
                    describe("Could not read a tar shard", where=path, found=f"{type(index).__name__}: {index}")
                )
                self.report.reject(error, path=path, cause=index)
                continue
            grouped = group(index)
            if index.damage is not None:
                bad += self._damaged(index, grouped)
            good: list[Sample] = []
            for sample in grouped:
                if isinstance(sample, BadSample):
                    bad += 1
                    self.report.reject(
                        DataError(
                            describe(
                                "A webdataset sample is refused",
                                where=member_where(path, sample.member, sample.offset),
                                found=sample.problem,
                                fix="rewrite the shard, or pass on_error='skip' to leave the sample out",
                            )
                        ),
                        path=path,
                        location=f"sample {sample.key!r}, member {sample.member!r} (header at byte {sample.offset})",
                        rows=1,
                    )
                else:
                    good.append(sample)
            shards.append((path, good))
        self.columns = self._columns(keys, names, key_column, shards)
        self.key_column = key_column
        served: list[tuple[str, list[Sample]]] = []
        for path, samples in shards:
            complete = []
            for sample in samples:
                missing = [c.extension for c in self.columns if c.extension not in sample.members]
                if missing:
                    bad += 1
                    self._missing(path, sample, missing)
                else:
                    complete.append(sample)
            served.append((path, complete))
        self.files = tuple(path for path, _ in served)
        decoder = Decoder(self.filesystem, self.columns, key_column, self.image_size, self.report.on_error, self.report)
        self.fragments = [
            WebDatasetFragment(
                key=f"{path}#samples={first}-{first + len(part) - 1}",
                num_rows=len(part),
                path=path,
                first=first,
                samples=tuple(part),
                _decoder=decoder,
            )
            for path, samples in served
            for first in range(0, len(samples), fragment_samples)
            for part in [samples[first : first + fragment_samples]]
        ]
        served_rows = sum(fragment.num_rows for fragment in self.fragments)
        self.report.total_rows = served_rows + bad
        self.report.total_files = len(files)
        self.report.check_budget()
        self.row_bytes = self._row_bytes(served)
        self._fingerprint: dict | None = None
        self.exact_counts = self.report.on_error == "raise"  # a member failing to decode shortens its fragment
        self.read_parallelism: int | None = None
        self.read_scratch: float | None = None  # the library's figure for its decode (core.Source)

    def _scan(self, path: str) -> TarIndex | Exception:
        try:
            size = self.filesystem.get_file_info(path).size or 0
            with self.filesystem.open_input_file(path) as stream:
                return scan_tar(path, stream.read_at, size)
        except OSError as exc:
            return exc

    def _damaged(self, index: TarIndex, grouped: list[Sample | BadSample]) -> int:
        """Reports the damage that ended a shard's index; drops the sample it cut. Returns samples lost (known)."""
        damage = index.damage
        assert damage is not None
        cut = 0
        last = grouped[-1] if grouped else None
        if last is not None and damage.member is not None and damage.member.startswith(last.key + "."):
            grouped.pop()
            cut = 1
        rest = f"bytes {damage.offset}-{index.size}: the sample there and every later one"
        self.report.reject(
            CorruptFileError(
                describe(
                    "A tar shard is damaged: its members cannot be followed past this point",
                    where=member_where(index.path, damage.member, damage.offset),
                    found=f"{damage.problem}; {len(grouped)} samples before it are intact",
                    fix="rewrite or re-download the shard, or pass on_error='skip' to read the intact samples",
                )
            ),
            path=index.path,
            location=rest,
            rows=cut or None,
        )
        return cut

    def _missing(self, path: str, sample: Sample, missing: list[str]) -> None:
        names = ", ".join(f"{sample.key}.{extension}" for extension in missing)
        self.report.reject(
            DataError(
                describe(
                    "A webdataset sample is missing a member that is served",
                    where=member_where(path, names, sample.header),
                    expected="members " + ", ".join(f"{sample.key}.{c.extension}" for c in self.columns),
                    found="members " + ", ".join(member.name for member in sample.members.values()),
                    fix="add the member, choose keys=[...] that every sample has, or pass on_error='skip'",
                )
            ),
            path=path,
            location=f"sample {sample.key!r} (header at byte {sample.header}): no {names}",
            rows=1,
        )

    def _columns(
        self,
        keys: Sequence[str] | Mapping[str, Kind] | None,
        names: Mapping[str, str] | None,
        key_column: str | None,
        shards: list[tuple[str, list[Sample]]],
    ) -> tuple[Column, ...]:
        """The served columns: chosen (or the first sample's extensions), their shapes from the first sample."""
        first = next(((path, samples[0]) for path, samples in shards if samples), None)
        if keys is None:
            if first is None:
                return ()
            keys = sorted(first[1].members)
        if isinstance(keys, str):
            keys = [keys]
        kinds: dict[str, Kind] = (
            {str(k).lower(): v for k, v in keys.items()}
            if isinstance(keys, Mapping)
            else {str(k).lower(): default_kind(str(k)) for k in keys}
        )
        for extension, kind in kinds.items():
            if kind not in KINDS:
                raise ArgumentError(
                    describe(
                        f"Unknown decoder for {extension!r}", expected=" or ".join(map(repr, KINDS)), found=repr(kind)
                    )
                )
        renamed = dict(names or {})
        unknown = sorted(set(renamed) - set(kinds))
        if unknown:
            raise ArgumentError(describe("names= renames extensions that are not served", found=", ".join(unknown)))
        column_names = [renamed.get(extension, extension) for extension in kinds]
        taken = column_names + ([key_column] if key_column is not None else [])
        if len(set(taken)) != len(taken):
            raise ArgumentError(describe("Two columns would have one name", found=", ".join(taken)))
        columns = []
        for extension, kind in kinds.items():
            name = renamed.get(extension, extension)
            having = next(((p, s) for p, samples in shards for s in samples if extension in s.members), None)
            if having is None:  # no sample has it: every sample is missing it (reported), the column is empty
                columns.append(column_for(name, extension, kind, np.zeros((0,)) if kind == "npy" else None))
                continue
            path, sample = having
            member = sample.members[extension]
            try:
                with self.filesystem.open_input_file(path) as stream:
                    data = stream.read_at(member.size, member.offset)
            except OSError as exc:
                raise CorruptFileError(
                    describe(
                        "Could not read a tar shard",
                        where=member_where(path, member.name, member.header),
                        found=f"{type(exc).__name__}: {exc}",
                    )
                ) from exc
            try:
                value = decode_value(bytes(data), kind, self.image_size)
            except DecodeError as exc:
                raise SchemaError(
                    describe(
                        f"The first sample's {extension!r} member, which gives the column its shape, does not decode",
                        where=member_where(path, member.name, member.header),
                        found=str(exc),
                        fix="choose another decoder in keys={extension: kind}, or fix the shard",
                    )
                ) from exc
            columns.append(column_for(name, extension, kind, value))
        return tuple(columns)

    def _row_bytes(self, served: list[tuple[str, list[Sample]]]) -> float:
        """Decoded bytes per sample: arrays exactly, other values by their members' mean size."""
        count = sum(len(samples) for _, samples in served)
        total = 64.0 if self.key_column is not None else 0.0
        for column in self.columns:
            if column.dtype != "object":
                total += float(np.prod(column.shape)) * np.dtype(column.dtype).itemsize
            else:
                stored = sum(s.members[column.extension].size for _, samples in served for s in samples)
                total += 2 * stored / max(count, 1) + 64
        return max(8.0, total)

    @property
    def column_names(self) -> list[str]:
        return ([self.key_column] if self.key_column is not None else []) + [c.name for c in self.columns]

    @property
    def info(self) -> SourceInfo:
        """Format (``core.SourceInfo``): what layers that see only the protocol read."""
        return SourceInfo("webdataset", filesystem=self.filesystem, fragment_setting="fragment_samples")

    def fingerprint(self) -> dict:
        if self._fingerprint is None:
            self._fingerprint = {
                "format": "webdataset",
                "files": len(self.files),
                "digest": file_digest(file_stats(list(self.files), self.filesystem)),
                "columns": [[c.name, c.extension, c.kind, list(c.shape), c.dtype] for c in self.columns],
                "fragments": len(self.fragments),
                "settings": self.settings,  # every constructor argument (core.records_settings)
                "fragmenting": fragmenting_digest(self.fragments),
            }
        return self._fingerprint
