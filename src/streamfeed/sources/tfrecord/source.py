"""TFRecord files of ``tf.train.Example`` records, read without TensorFlow.

JAX and torch users read TFRecord data without installing TensorFlow: the
framing and its CRC32C checksums (``framing.py``) and the Example
protobuf are decoded by streamfeed, columnar, in the pipeline's read threads
(``fragment.py``: the layout decoder ``fast.py`` for records of one byte
layout, the general parser ``format.py`` for every other; measured there).

**Exact counts before training.** When the source opens, every file's
framing is scanned (``index.py``: record headers only, data skipped;
cached), which gives exact record counts, finds damaged files before the
first batch, and cuts files, GZIP ones too, into record-range fragments of
about ``fragment_bytes``.

**Damage is never silent.** tf.data's ``ignore_errors()`` drops every record
after the first corrupt one without saying how many. Here:

* a record whose *data* CRC does not match (or that does not match the
  feature spec) is that one record: ``on_error="raise"`` names file, record
  index and byte offset; ``"skip"`` leaves it out and reports it (rows=1);
* after a *length* field whose CRC does not match, no later record can be
  located reliably (a wrong length points anywhere; a valid-looking header
  found by searching could be data). The rest of the file is reported lost
  with its byte range; the count of records in it is unknown;
* a file that ends inside its last record loses exactly that record.

Under ``"skip"``, records that fail while reading make a fragment shorter
than scanned, so the Dataset counts rows with one (cached) pass before
training; yielded + reported == total holds exactly.
"""

from __future__ import annotations

import concurrent.futures
import re
from typing import Any, Mapping, Sequence

import numpy as np
import pyarrow.fs as pafs

from ...core import AlikeRows, SourceInfo, fragmenting_digest, records_settings
from ...errors import ArgumentError, BadInputReport, CorruptFileError, SchemaError, describe
from ...files.paths import PathLike, file_digest, file_stats, resolve_files
from . import format as fmt
from .fragment import Decoder, Parser, TFRecordFragment
from .index import Compression, FileIndex, is_gzip, record_where, scan_file

DEFAULT_FRAGMENT_BYTES = 16 << 20
# Names of TFRecord files in a directory: *.tfrecord(s)/.tfrec, TFDS's "name.tfrecord-00000-of-00008",
# sharded "train-00000-of-00004", each optionally .gz; other files in the directory are left out.
_TFRECORD_NAME = re.compile(r"(\.(tfrecords?|tfrec)(-\d+-of-\d+)?|-\d+-of-\d+)(\.gz|\.gzip|\.zlib)?$", re.IGNORECASE)


class TFRecordSource(AlikeRows):
    """Opens TFRecord input: framing scans, record-range fragments, the feature spec."""

    settings: dict[str, Any]  # every constructor argument but core.NOT_ROW_SETTINGS (records_settings)

    @records_settings
    def __init__(
        self,
        paths: PathLike,
        *,
        features: Mapping[str, tuple[str, Sequence[int] | int]] | None = None,
        compression: Compression = None,
        decode_images: Sequence[str] | Mapping[str, tuple[int, ...] | None] | None = None,
        fragment_bytes: int = DEFAULT_FRAGMENT_BYTES,
        filesystem: pafs.FileSystem | None = None,
        report: BadInputReport | None = None,
        threads: int = 8,
        parser: Parser = "layout",
    ) -> None:
        """``parser="general"`` decodes every record with the general parser only (tests and benchmarks)."""
        if fragment_bytes < 1:
            raise ArgumentError(describe("Invalid fragment_bytes", expected=">= 1", found=f"{fragment_bytes}"))
        if parser not in ("layout", "general"):
            raise ArgumentError(describe("Invalid parser", expected="'layout' or 'general'", found=f"{parser!r}"))
        self.report = report or BadInputReport()
        # a directory contributes only TFRecord-named files; explicit files and globs all count
        resolved = resolve_files(
            paths,
            suffixes=(),
            filesystem=filesystem,
            keep=lambda name: bool(_TFRECORD_NAME.search(name)),
            wanted="*.tfrecord, *.tfrecords, *.tfrec or *-NNNNN-of-NNNNN names, optionally .gz, .gzip or .zlib",
        )
        self.filesystem, files = resolved.filesystem, list(resolved.files)
        gzip = {path: is_gzip(path, compression) for path in files}

        def scan(path: str) -> FileIndex | Exception:
            try:
                return scan_file(self.filesystem, path, compressed=gzip[path], fragment_bytes=fragment_bytes)
            except OSError as exc:
                return exc

        with concurrent.futures.ThreadPoolExecutor(max(1, min(threads, len(files)))) as pool:
            indexes = list(pool.map(scan, files))
        lost = 0
        good: list[FileIndex] = []
        for path, index in zip(files, indexes):
            if isinstance(index, Exception):
                error = CorruptFileError(
                    describe(
                        "Could not read a TFRecord file",
                        where=path,
                        found=f"{type(index).__name__}: {index}",
                        fix="check the path and permissions",
                    )
                )
                self.report.reject(error, path=path, cause=index)
                continue
            if index.problem is not None:
                lost += index.problem.records_lost or 0
                self._framing_problem(index)
            good.append(index)
        self.files = tuple(index.path for index in good)
        self.indexes = good
        self.specs = self._feature_specs(features, good)
        self.images = self._image_features(decode_images)
        decoder = Decoder(self.filesystem, tuple(self.specs), self.images, self.report.on_error, self.report, parser)
        self.fragments = [
            TFRecordFragment(
                key=f"{index.path}#records={first}-{first + count - 1}",
                num_rows=count,
                path=index.path,
                first_record=first,
                start=start,
                end=end,
                compressed=index.compressed,
                _decoder=decoder,
                _checkpoints=index.checkpoints,
            )
            for index in good
            for first, count, start, end in index.ranges
        ]
        framed = sum(index.records for index in good)
        self.report.total_rows = framed + lost
        self.report.total_files = len(files)
        self.report.check_budget()
        self.row_bytes = self._row_bytes(good, framed)
        self._fingerprint: dict | None = None
        # Under "skip", records that fail while reading shorten their fragment: count once before training.
        self.exact_counts = self.report.on_error == "raise"
        self.read_parallelism: int | None = None  # reads run in parallel (core.Source)
        self.read_scratch: float | None = None  # the library's figure for its decode (core.Source)

    def _framing_problem(self, index: FileIndex) -> None:
        problem = index.problem
        assert problem is not None
        span = (
            f"from decompressed byte {problem.offset}" if index.compressed else f"bytes {problem.offset}-{index.size}"
        )
        rest = f"records from {problem.index} on ({span})"
        count = f"{problem.records_lost} record" if problem.records_lost == 1 else "an unknown number of records"
        message = describe(
            "A TFRecord file is damaged: its framing cannot be followed past this point",
            where=record_where(index.path, problem.index, problem.offset, index.compressed),
            found=f"{problem.problem}; {rest} are unreadable ({count}); {problem.index} records before it are intact",
            fix=(
                "rewrite or re-download the file, "
                "or pass on_error='skip' to read the intact records and report the rest"
            ),
        )
        self.report.reject(CorruptFileError(message), path=index.path, location=rest, rows=problem.records_lost)

    def _feature_specs(self, features: Mapping | None, good: Sequence[FileIndex]) -> list[fmt.FeatureSpec]:
        """The spec given (checked against the first record) or inferred from it.

        A spec that does not fit the first record is a setting to fix: it
        raises a SchemaError whatever ``on_error`` says, rather than skipping
        every record.
        """
        first = self._first_record(good)
        if features is not None:
            specs = fmt.parse_feature_specs(dict(features))
            if first is not None:
                path, record = first
                parsed = fmt.parse_example(record)
                for spec in specs:
                    kind, values = parsed.get(spec.name, (None, None))
                    if values is None or (kind not in (None, spec.kind)):
                        available = ", ".join(f"{name!r}: {k} x{len(v)}" for name, (k, v) in parsed.items())
                        raise SchemaError(
                            describe(
                                f"Feature {spec.name!r} ({spec.kind}) is not in the data"
                                if values is None
                                else f"Feature {spec.name!r} is {kind}, not {spec.kind}",
                                where=f"{path}, record 0",
                                expected=spec.text,
                                found=f"features {available}",
                                fix="check features={...} against the data",
                            )
                        )
            return specs
        if first is None:
            raise SchemaError(
                describe(
                    "Cannot infer the features of TFRecord input without records",
                    fix="pass features={name: (kind, shape)}",
                )
            )
        path, record = first
        specs = []
        for name, (kind, values) in fmt.parse_example(record).items():
            if kind is None:
                continue
            specs.append(fmt.FeatureSpec(name, kind, () if len(values) == 1 else (len(values),)))  # type: ignore[arg-type]
        return specs

    def _first_record(self, good: Sequence[FileIndex]) -> tuple[str, bytes] | None:
        for index in good:
            if index.records:
                first, count, start, end = index.ranges[0]
                fragment = TFRecordFragment(
                    "",
                    1,
                    index.path,
                    0,
                    start,
                    end,
                    index.compressed,
                    Decoder(self.filesystem, (), {}, "raise", self.report),
                    index.checkpoints,
                )
                data = fragment.load()
                starts, lengths, _, _ = fmt.split_records(data, 1)
                if len(starts):
                    return index.path, data[int(starts[0]) : int(starts[0] + lengths[0])]
        return None

    def _image_features(self, decode_images: Sequence[str] | Mapping | None) -> dict[str, tuple[int, ...] | None]:
        if decode_images is None:
            return {}
        images = dict(decode_images) if isinstance(decode_images, Mapping) else dict.fromkeys(decode_images)
        kinds = {spec.name: spec for spec in self.specs}
        for name in images:
            if name not in kinds or kinds[name].kind != "bytes" or kinds[name].shape != ():
                raise SchemaError(
                    describe(
                        f"decode_images names {name!r}, which is not a bytes feature of shape ()",
                        expected="names of features holding one encoded image each",
                        found=f"{kinds[name].kind} {kinds[name].shape}" if name in kinds else "no such feature",
                    )
                )
        return {name: None if target is None else tuple(target) for name, target in images.items()}

    def _row_bytes(self, good: Sequence[FileIndex], framed: int) -> float:
        """Bytes per decoded row: fixed features exactly, bytes features by the records' size."""
        record = sum(index.data_bytes for index in good) / max(framed, 1)
        total = 0.0
        for spec in self.specs:
            if spec.name in self.images:
                target = self.images[spec.name]
                total += (
                    float(np.prod(target))
                    if target and len(target) == 3
                    else (target[0] * target[1] * 3 if target else record * 10)
                )
            elif spec.shape is None:  # a list of any length: at most one value per byte of the record, plus its offset
                total += spec.dtype.itemsize * record + 8
            elif spec.kind == "bytes":
                total += record + 40 * spec.size
            else:
                total += spec.dtype.itemsize * spec.size
        return max(8.0, total + record)

    @property
    def column_names(self) -> list[str]:
        return [spec.name for spec in self.specs]

    @property
    def info(self) -> SourceInfo:
        """Format (``core.SourceInfo``): what layers that see only the protocol read."""
        return SourceInfo("tfrecord", filesystem=self.filesystem, fragment_setting="fragment_bytes")

    def fingerprint(self) -> dict:
        if self._fingerprint is None:
            self._fingerprint = {
                "format": "tfrecord",
                "files": len(self.indexes),
                "digest": file_digest(file_stats([index.path for index in self.indexes], self.filesystem)),
                "columns": self.column_names,
                "features": {
                    spec.name: [spec.kind, None if spec.shape is None else list(spec.shape)] for spec in self.specs
                },
                "fragments": len(self.fragments),
                "settings": self.settings,  # every constructor argument (core.records_settings)
                "fragmenting": fragmenting_digest(self.fragments),
            }
        return self._fingerprint
