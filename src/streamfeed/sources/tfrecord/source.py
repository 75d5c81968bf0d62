"""TFRecord files of ``tf.train.Example`` records, read without TensorFlow.

JAX and torch users read TFRecord data without installing TensorFlow: the
framing and its CRC32C checksums (``_tfrecord_framing.py``) and the Example
protobuf are decoded here, columnar, in the pipeline's read threads.
Records that share one byte layout (a fixed-shape file: the same features
in the same order, lists of the same length) are decoded at once by
``_tfrecord_fast.py``, with strided NumPy views; every other record by the
general parser (``_tfrecord_format.py``), which reads any valid Example.
TensorFlow's parser is not used even when it is installed: on a fragment of
28 729 fixed-shape records, ``tf.io.parse_example`` took 0.15 CPU s, the
layout decoder 0.03 (``benchmarks/tfrecord.py`` compares whole reads with
tf.data).

**Exact counts before training.** When the source opens, every file's
framing is scanned (record headers only, each length's CRC checked, data
skipped; cached per file path, size and modification time). That gives
exact record counts, finds truncated, non-TFRecord and corrupt-length files
before the first batch, and cuts large uncompressed files into record-range
fragments of about ``fragment_bytes``.

A GZIP file is cut the same way, in decompressed bytes: its counting pass
(one decompression) also keeps a decompressor checkpoint per range
(``_inflate.py``), and a fragment resumes from its checkpoint and
decompresses only up to its last record, so memory is bounded by the
fragment, never the file. The checkpoints (about 40 KiB each, one per
range) live in the in-process scan cache with the counts, so opening the
same unchanged file again in the process costs no pass.

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

import collections
import concurrent.futures
import re
import threading
from dataclasses import dataclass, field
from typing import Any, Literal, Mapping, Sequence

import numpy as np
import pyarrow.fs as pafs

from ...core import Chunk, SourceInfo
from ...errors import (
    ArgumentError,
    BadInputReport,
    CorruptFileError,
    DataError,
    OnError,
    SchemaError,
    SkippedUnit,
    describe,
)
from ...files import inflate as _inflate
from ...files.paths import PathLike, file_digest, file_stats, resolve_files
from . import fast, framing
from . import format as fmt

Compression = Literal["GZIP"] | None
Parser = Literal["layout", "general"]
DEFAULT_FRAGMENT_BYTES = 16 << 20
_BLOCK = 1 << 20
_FRAME_BYTES = 16  # header + footer
_SKIP_FIX = "rewrite the file, or pass on_error='skip' to leave the damaged records out and report them"
# Names of TFRecord files in a directory: *.tfrecord(s)/.tfrec, TFDS's "name.tfrecord-00000-of-00008",
# sharded "train-00000-of-00004", each optionally .gz; other files in the directory are left out.
_TFRECORD_NAME = re.compile(r"(\.(tfrecords?|tfrec)(-\d+-of-\d+)?|-\d+-of-\d+)(\.gz|\.gzip|\.zlib)?$", re.IGNORECASE)


# ---------------------------------------------------------------------- scanning
@dataclass(frozen=True)
class FileIndex:
    """What one framing scan of a file found (cached; never holds record data)."""

    path: str
    compressed: bool
    size: int  # bytes on disk
    records: int  # records framed
    ranges: tuple[tuple[int, int, int, int], ...]  # (first record, records, start byte, end byte) per fragment
    problem: fmt.FramingProblem | None
    data_bytes: int  # bytes of framed records (decompressed)
    checkpoints: _inflate.Checkpoints | None = field(
        default=None, compare=False, repr=False
    )  # GZIP: where ranges resume


_scan_cache: dict[tuple, FileIndex] = {}
_scan_lock = threading.Lock()


def _where(path: str, index: int, offset: int, compressed: bool) -> str:
    unit = "byte offset (decompressed)" if compressed else "byte offset"
    return f"{path}, record {index} ({unit} {offset})"


def _scan_plain(stream: Any, path: str, size: int, fragment_bytes: int) -> FileIndex:
    """Walks the record headers of an uncompressed file, skipping the data.

    Block by block: the headers inside a block are followed by
    ``framing.walk`` (runs of one length at once) and checked with one CRC
    per distinct length; the first bad header or record running past the
    end of the file stops the scan, as a record-by-record walk would.
    """
    ranges: list[tuple[int, int, int, int]] = []
    records, position, first, begin = 0, 0, 0, 0
    problem = None
    while position < size:
        block = stream.read_at(min(_BLOCK, size - position), position)
        if len(block) < fmt.HEADER_BYTES:
            problem = fmt.FramingProblem(
                records, position, f"the file ends inside a record header ({size - position} of 12 bytes)", 1
            )
            break
        heads, lengths, after = framing.walk(block, len(block), need=fmt.HEADER_BYTES)
        good = framing.headers_ok(np.frombuffer(block, dtype=np.uint8), heads, lengths)
        bad = len(heads) if good.all() else int(np.argmin(good))
        ends = position + heads + np.minimum(lengths, np.uint64(size)).astype(np.int64) + _FRAME_BYTES
        past = np.flatnonzero(ends[:bad] > size)
        framed = int(past[0]) if len(past) else bad
        while framed:  # a new range at the first record end at least fragment_bytes past its start
            cut = int(np.searchsorted(ends[:framed], begin + fragment_bytes))
            if cut == framed:
                break
            ranges.append((first, records + cut + 1 - first, begin, int(ends[cut])))
            first, begin = records + cut + 1, int(ends[cut])
        if framed < len(heads):
            at = position + int(heads[framed])
            if framed == bad:
                what = "the length field's CRC does not match"
                if records + framed == 0:
                    what += (
                        " in the very first record: this is not a TFRecord file, "
                        "or it is compressed (pass compression='GZIP')"
                    )
                problem = fmt.FramingProblem(records + framed, at, what, None)
            else:
                problem = fmt.FramingProblem(
                    records + framed,
                    at,
                    f"the file ends inside a record of {int(lengths[framed])} bytes ({size - at} bytes are left)",
                    1,
                )
            records += framed
            position = at
            break
        records += framed
        position += after
    if records > first:
        ranges.append((first, records - first, begin, position))
    data_bytes = ranges[-1][3] if ranges else 0
    return FileIndex(path, False, size, records, tuple(ranges), problem, data_bytes)


def _scan_gzip(stream: Any, path: str, size: int, fragment_bytes: int) -> FileIndex:
    """Decompresses once, walking record headers; keeps a checkpoint per record range.

    Ranges are cut at record starts every ``fragment_bytes`` of decompressed
    data, as in an uncompressed file. Each range's checkpoint is the one at
    the start of the decompressed block holding the range's first byte (a
    header may straddle two blocks, so the last two blocks' are at hand).
    """
    records = 0  # records whose header was read (the last may still be incomplete)
    start = 0  # decompressed offset of the last header read
    position = 0  # decompressed offset just past the last header's record
    pending = bytearray()  # decompressed bytes from ``position`` on, while no record is being passed
    skip = 0  # bytes of the current record still to pass
    problem = None
    damage = None
    ranges: list[tuple[int, int, int, int]] = []
    first, begin = 0, 0
    points = _inflate.Checkpoints()
    recent: collections.deque[_inflate.Checkpoint] = collections.deque(maxlen=2)
    try:
        for before, block in _inflate.blocks(stream.read, _inflate.block_bytes(fragment_bytes)):
            recent.append(before)
            view = memoryview(block)
            if skip:
                taken = min(skip, len(view))
                skip -= taken
                view = view[taken:]
            pending += view
            while not skip and len(pending) >= fmt.HEADER_BYTES:
                length, good = fmt.read_header(memoryview(pending), 0)
                if not good:
                    what = "the length field's CRC does not match"
                    if records == 0:
                        what += " in the very first record: the decompressed data is not TFRecord"
                    problem = fmt.FramingProblem(records, position, what, None)
                    break
                if position - begin >= fragment_bytes and records > first:  # a record start: a new range
                    ranges.append((first, records - first, begin, position))
                    first, begin = records, position
                    point = _inflate.latest(recent, position)
                    if point is not None:  # else the range resumes from an earlier checkpoint
                        points.keep(point)
                record_bytes = fmt.HEADER_BYTES + length + fmt.FOOTER_BYTES
                taken = min(record_bytes, len(pending))
                del pending[:taken]
                skip = record_bytes - taken
                records += 1
                start, position = position, position + record_bytes
            if problem:
                break
    except _inflate.InflateError as exc:
        damage = str(exc)
    if problem is None:
        if skip:  # the last record read is incomplete
            records -= 1
            position = start
        if damage is not None:
            problem = fmt.FramingProblem(records, position, damage, None)
        elif skip:
            problem = fmt.FramingProblem(records, position, "the decompressed data ends inside a record", 1)
        elif pending:
            problem = fmt.FramingProblem(
                records, position, f"the decompressed data ends inside a record header ({len(pending)} of 12 bytes)", 1
            )
    if records > first:
        ranges.append((first, records - first, begin, position))
    return FileIndex(path, True, size, records, tuple(ranges), problem, position, points)


def _is_gzip(path: str, compression: Compression) -> bool:
    if compression == "GZIP":
        return True
    if compression is not None:
        raise ArgumentError(
            describe(
                "Invalid compression",
                expected="None (detect from the '.gz' extension) or 'GZIP'",
                found=f"{compression!r}",
            )
        )
    return path.lower().endswith((".gz", ".gzip"))


def scan_file(fs: pafs.FileSystem, path: str, *, compressed: bool, fragment_bytes: int) -> FileIndex:
    """The framing index of a file, from the cache when it has not changed."""
    info = fs.get_file_info(path)
    key = (type(fs).__name__, path, info.size, info.mtime_ns, compressed, fragment_bytes)
    with _scan_lock:
        cached = _scan_cache.get(key)
    if cached is not None:
        return cached
    if compressed:
        with fs.open_input_stream(path, compression=None) as stream:
            index = _scan_gzip(stream, path, info.size, fragment_bytes)
    else:
        with fs.open_input_file(path) as stream:
            index = _scan_plain(stream, path, info.size, fragment_bytes)
    with _scan_lock:
        _scan_cache[key] = index
    return index


# ---------------------------------------------------------------------- reading
def _decode_image(data: bytes, target: tuple[int, ...] | None) -> np.ndarray:
    """One encoded image → (height, width, channels) uint8: the swap point for image decoding.

    With a target ``(height, width[, channels])`` this uses the shared image
    decoder (``sources/_decode.py``: EXIF orientation, resize, channel
    rules); without one, Pillow at the stored size as RGB, after the same
    check of the header's declared size (a bomb is a bad record, not an allocation).
    """
    from ..images import decode as _decode

    if target is not None:
        spec = _decode.DecodeSpec(*target[:3])  # type: ignore[arg-type]  # (height, width[, channels]): ints only
        return _decode.decode(data, spec, _decode.resolve_decoder(spec.decoder))
    with _decode.open_header(data) as image:
        _decode.check_size(image, _decode.image_byte_limit(None), channels=3)
        return np.asarray(image.convert("RGB"))


@dataclass(frozen=True)
class _Decoder:
    """What every fragment needs to turn its bytes into columns (shared, read-only)."""

    filesystem: pafs.FileSystem
    specs: tuple[fmt.FeatureSpec, ...]
    images: Mapping[str, tuple[int, ...] | None]
    on_error: OnError
    report: BadInputReport = field(compare=False)
    parser: Parser = "layout"


@dataclass(frozen=True)
class TFRecordFragment:
    """A range of consecutive records of one file (GZIP: resumed from a decompressor checkpoint)."""

    key: str
    num_rows: int
    path: str
    first_record: int
    start: int  # byte offset of the first record (decompressed for GZIP)
    end: int
    compressed: bool
    _decoder: _Decoder = field(repr=False, compare=False)
    _checkpoints: _inflate.Checkpoints | None = field(default=None, repr=False, compare=False)

    @property
    def location(self) -> str:
        return f"records {self.first_record}-{self.first_record + self.num_rows - 1}"

    def read(self) -> Chunk:
        data = self._load()
        starts, lengths, bad_crc, problem = fmt.split_records(data, self.num_rows)
        if problem is not None:
            raise CorruptFileError(
                describe(
                    "A TFRecord file changed or became unreadable after it was opened",
                    where=_where(
                        self.path, self.first_record + problem.index, self.start + problem.offset, self.compressed
                    ),
                    found=problem.problem,
                    fix="do not modify input files while streaming them; open the dataset again",
                )
            )
        buf = np.frombuffer(data + bytes(fmt.PAD_BYTES), dtype=np.uint8)
        decode = fmt.decode_examples if self._decoder.parser == "general" else fast.decode_examples
        columns, errors = decode(buf, data, starts, lengths, self._decoder.specs)
        for row in bad_crc:
            errors[row] = "the record's data CRC does not match (the bytes were damaged)"
        self._decode_images(columns, errors)
        if errors:
            columns = self._handle(columns, errors, starts, bad_crc)
        return columns

    def _load(self) -> bytes:
        fs = self._decoder.filesystem
        try:
            if not self.compressed:
                with fs.open_input_file(self.path) as stream:
                    data = stream.read_at(self.end - self.start, self.start)
                if len(data) != self.end - self.start:
                    raise CorruptFileError(
                        describe(
                            "The file is shorter than when it was opened",
                            found=f"read {len(data)} of {self.end - self.start} bytes",
                        )
                    )
                return data
            points = self._checkpoints or _inflate.Checkpoints()
            return _inflate.read_range(lambda: fs.open_input_file(self.path), points, self.start, self.end)
        except (OSError, _inflate.InflateError) as exc:
            raise CorruptFileError(
                describe(
                    "Could not read a TFRecord file",
                    where=f"{self.path}, records {self.first_record}-{self.first_record + self.num_rows - 1}",
                    found=f"{type(exc).__name__}: {exc}",
                    fix="check the file; it may have changed since the dataset was opened",
                )
            ) from exc

    def _decode_images(self, columns: Chunk, errors: dict[int, str]) -> None:
        for name, target in self._decoder.images.items():
            encoded = columns[name]
            decoded: dict[int, np.ndarray] = {}
            shape = None
            for row, data in enumerate(encoded.tolist()):
                if row in errors:
                    continue
                try:
                    image = _decode_image(data, target)
                except (OSError, ValueError, SyntaxError, EOFError) as exc:
                    errors[row] = f"feature {name!r} is not a decodable image ({type(exc).__name__}: {exc})"
                    continue
                if shape is None:
                    shape = image.shape
                elif image.shape != shape:
                    errors[row] = (
                        f"feature {name!r} decodes to an image of shape {image.shape}, the others to {shape} "
                        f"(give decode_images={{{name!r}: (height, width, channels)}} to resize)"
                    )
                    continue
                decoded[row] = image
            out = np.zeros((len(encoded), *(shape or (0, 0, 3))), dtype=np.uint8)
            for row, image in decoded.items():
                out[row] = image
            columns[name] = out

    def _handle(self, columns: Chunk, errors: dict[int, str], starts: np.ndarray, bad_crc: list[int]) -> Chunk:
        """Raises for the first bad record, or drops and reports every bad record."""

        def offset(row: int) -> int:
            return self.start + int(starts[row]) - fmt.HEADER_BYTES

        if self._decoder.on_error == "raise":
            row = min(errors)
            error = CorruptFileError if row in bad_crc else DataError
            raise error(
                describe(
                    "A TFRecord record is damaged"
                    if row in bad_crc
                    else "A TFRecord record does not match the feature spec",
                    where=_where(self.path, self.first_record + row, offset(row), self.compressed),
                    found=errors[row],
                    expected=None
                    if row in bad_crc
                    else "features " + ", ".join(f"{s.name!r}: {s.kind} {s.shape}" for s in self._decoder.specs),
                    fix=_SKIP_FIX
                    if row in bad_crc
                    else "fix features={...}, or pass on_error='skip' to leave such records out and report them",
                )
            )
        for row in sorted(errors):
            location = (
                f"record {self.first_record + row} "
                f"(byte offset {'decompressed ' if self.compressed else ''}{offset(row)})"
            )
            self._decoder.report.add(SkippedUnit(self.path, location, errors[row], 1))
        keep = np.ones(self.num_rows, dtype=bool)
        keep[list(errors)] = False
        return {name: column[keep] for name, column in columns.items()}


# ----------------------------------------------------------------------- source
class TFRecordSource:
    """Opens TFRecord input: framing scans, record-range fragments, the feature spec."""

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
        gzip = {path: _is_gzip(path, compression) for path in files}

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
        decoder = _Decoder(self.filesystem, tuple(self.specs), self.images, self.report.on_error, self.report, parser)
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
            where=_where(index.path, problem.index, problem.offset, index.compressed),
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
                                expected=f"{spec.name!r}: {spec.kind} {spec.shape}",
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
                    _Decoder(self.filesystem, (), {}, "raise", self.report),
                    index.checkpoints,
                )
                data = fragment._load()
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
        return SourceInfo("tfrecord", filesystem=self.filesystem)

    def fingerprint(self) -> dict:
        if self._fingerprint is None:
            self._fingerprint = {
                "format": "tfrecord",
                "files": len(self.indexes),
                "digest": file_digest(file_stats([index.path for index in self.indexes], self.filesystem)),
                "columns": self.column_names,
                "features": {spec.name: [spec.kind, list(spec.shape)] for spec in self.specs},
                "fragments": len(self.fragments),
            }
        return self._fingerprint
