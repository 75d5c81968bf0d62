"""Rewriting any source as sharded Parquet (or TFRecord): one pass, bounded memory.

Columns keep their dtypes; arrays with more than one dimension per row
(images, embeddings) are stored as fixed-size lists with their row shape in
the field metadata, which ``read_parquet`` restores, so reading the shards
gives back exactly the samples that were written.

The destination directory is published whole (``files/publish.py``): the
shards are written into a hidden temporary sibling, a manifest
(``_streamfeed_manifest.json``: every shard's rows, bytes and sha256) is
written last, and one rename of the directory puts it in place. A killed
conversion leaves no destination, or the previous one; a non-empty
destination is refused unless ``overwrite=True`` and it holds a previous
output, which is then replaced as atomically.

Converted data keeps its meaning. An image folder (``read_images``,
``decode=False`` as ``streamfeed convert`` reads it) is written with its
``path`` column relative to the folder (``cat/more/a.jpg``, ``/``-separated)
and, in every shard's schema metadata (key ``streamfeed``, JSON, see
``sources/parquet.converted_metadata``), its label map, class names and
``{"format": "images", "root": "<the folder's name>"}`` — never an absolute
path, which would name the machine's layout and mean nothing elsewhere. A
zip archive of such a folder (``read_images("images.zip")``) is written as
the folder it holds would be: ``path`` is the member's name (``cat/a.jpg``),
the origin ``{"format": "zip", "root": "images.zip"}``.
``read_parquet`` gives them back as ``source.label_map``, ``class_names``
and ``converted_from``; converting such Parquet again carries them on. The
written labels are checked against the map (a ``map`` that changed them is
refused rather than written under a map that no longer describes them).
Each image is decoded once while converting (:func:`checked_images`), so
that no file cut short is written: it is refused, or under
``on_error="skip"`` left out and reported, naming the file.
"""

from __future__ import annotations

import json
import logging
import os
import re
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Iterator, Literal

import numpy as np
import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from .core import Chunk, Source, chunk_len, slice_chunk
from .errors import SchemaError, describe
from .files.arrow import chunk_to_table, is_temporal
from .files.paths import MANIFEST_NAME
from .files.publish import Publication
from .inspect.progress import progress as progress_bar
from .sources.parquet import METADATA_VERSION, STREAMFEED_METADATA

if TYPE_CHECKING:
    from .pipeline import Dataset

logger = logging.getLogger("streamfeed")
DEFAULT_SHARD_ROWS = 1_000_000
DEFAULT_ROW_GROUP_ROWS = 65_536
ROW_GROUP_BYTES = 64 * 2**20  # wide rows (images) get fewer rows per group
_PARQUET_SHARD = re.compile(r"part-\d{5}\.parquet")  # what an output without a manifest (older versions) holds


@dataclass
class ConvertSummary:
    """What a conversion wrote, and what it had to leave out."""

    destination: str
    files: list[str] = field(default_factory=list)
    manifest: str = ""
    rows: int = 0
    bytes_written: int = 0
    seconds: float = 0.0
    skipped: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return asdict(self)


LABEL_COLUMN = "label"
PATH_COLUMN = "path"


class Meaning:
    """What a dataset's columns mean, carried into the Parquet it is converted to.

    ``label_map`` (``{}``: none), ``origin`` (``{"format", "root"}`` or
    None) and ``root``, the absolute folder the ``path`` column is made
    relative to (None: paths are written as they are).
    """

    def __init__(self, source: Source) -> None:
        info = source.info
        self.label_map: dict[str, int] = dict(info.label_map)
        self.origin: dict | None = None if info.converted_from is None else dict(info.converted_from)
        self.root: str | None = None
        if info.format in ("images", "zip") and info.root is not None:  # a folder, or a zip archive of one
            self.root = info.root
            self.origin = {"format": info.format, "root": os.path.basename(info.root.rstrip(os.sep)) or info.root}
        self._allowed = np.array(sorted(self.label_map.values()), dtype=np.int64)

    def schema_metadata(self, columns: list[str]) -> dict[bytes, bytes]:
        """The ``streamfeed`` schema metadata for shards of these columns (``{}``: nothing to record)."""
        meta: dict = {}
        if self.origin:
            meta["source"] = self.origin
        if self.label_map and LABEL_COLUMN in columns:
            meta["label_column"] = LABEL_COLUMN
            meta["label_map"] = self.label_map
            meta["class_names"] = sorted(self.label_map, key=self.label_map.__getitem__)
        if not meta:
            return {}
        return {STREAMFEED_METADATA: json.dumps({"version": METADATA_VERSION, **meta}, ensure_ascii=False).encode()}

    def apply(self, chunk: Chunk, destination: str) -> Chunk:
        """``chunk`` with paths relative to the root; its labels checked against the label map."""
        if self.root is not None and PATH_COLUMN in chunk:
            chunk = {**chunk, PATH_COLUMN: _relative(chunk[PATH_COLUMN], self.root)}
        if self.label_map and LABEL_COLUMN in chunk:
            self._check_labels(chunk[LABEL_COLUMN], destination)
        return chunk

    def _check_labels(self, labels: np.ndarray, destination: str) -> None:
        if labels.ndim == 1 and labels.dtype.kind in "iu":
            outside = np.unique(labels[~np.isin(labels, self._allowed)])
            if not len(outside):
                return
            found = f"labels {outside[:10].tolist()}{' ...' if len(outside) > 10 else ''}"
        else:
            found = f"a label column of dtype {labels.dtype} and shape {list(labels.shape)}"
        raise SchemaError(
            describe(
                "The labels to write are not those of the source's label map",
                where=f"column {LABEL_COLUMN!r} written to {destination}",
                expected=f"int labels among {self._allowed.tolist()[:20]} (the label map {self.label_map})"[:300],
                found=found,
                fix=(
                    "convert the labels as the source gives them (a map op changed them), "
                    "or read the source with a label_map=... that names every label"
                ),
            )
        )


def _relative(paths: np.ndarray, root: str) -> np.ndarray:
    """Paths below ``root`` made relative to it, ``/``-separated; others left as they are."""
    prefix = root.rstrip(os.sep) + os.sep
    out = np.empty(len(paths), dtype=object)
    for index, path in enumerate(paths):
        text = str(path)
        if text.startswith(prefix):
            text = text[len(prefix) :]
            if os.sep != "/":
                text = text.replace(os.sep, "/")
        out[index] = text
    return out


def _rows(dataset: "Dataset") -> Iterator[Chunk]:
    with dataset.iter_epoch(0) as epoch:
        yield from epoch


def checked_images(dataset: "Dataset") -> "Dataset":
    """``dataset`` with each image decoded once to check it, if it is an image folder read undecoded.

    The header probe at open cannot see a JPEG cut short; what is written
    must decode when it is read back (``transforms.images.verify_images``:
    a bad file is raised, or under ``on_error="skip"`` left out and
    reported as that file, never copied into a row group where decoding it
    would cost the whole group).
    """
    source = dataset.source
    if source.info.format not in ("images", "zip") or "image_bytes" not in source.column_names:
        return dataset
    from .transforms.images import verify_images

    return dataset.map(verify_images(), name="streamfeed.verify_images")


def convert_to_parquet(
    dataset: "Dataset",
    destination: str | Path,
    *,
    shard_rows: int = DEFAULT_SHARD_ROWS,
    row_group_rows: int = DEFAULT_ROW_GROUP_ROWS,
    compression: str = "zstd",
    progress: bool | None = False,
    overwrite: bool = False,
) -> ConvertSummary:
    """Writes ``dataset`` (one unshuffled pass) as ``part-00000.parquet``, ``part-00001``, ...

    Row groups of ``row_group_rows`` (fewer for rows wider than
    ``ROW_GROUP_BYTES`` allows) make good fragments for streaming back;
    each shard holds at most ``shard_rows`` rows. ``progress``: a bar with
    rows/s and ETA (None: on a terminal). The directory appears whole, with
    its manifest, or not at all; ``overwrite`` replaces a previous output
    there (never a directory holding other files). An image folder's label
    map and class names go into every shard's schema metadata and its paths
    are stored relative to the folder (see the module's description).
    """
    target = Path(destination)
    total = dataset.num_rows()  # before the images are checked: counting the rows left would decode them twice
    dataset = checked_images(dataset)
    meaning = Meaning(dataset.source)
    schema = dataset.source.info.schema  # Arrow-backed sources: their date and time types
    temporal = {f.name: f.type for f in schema if is_temporal(f.type)} if isinstance(schema, pa.Schema) else {}
    summary = ConvertSummary(destination=str(target))
    started = time.perf_counter()
    row_group_rows = max(1, min(row_group_rows, int(ROW_GROUP_BYTES // dataset.source.row_bytes)))
    with Publication(
        str(target),
        filesystem=pafs.LocalFileSystem(),
        overwrite=overwrite,
        owns=lambda name: bool(_PARQUET_SHARD.fullmatch(name)),
        data_format="parquet",
    ) as publication:
        writer: pq.ParquetWriter | None = None
        name, in_shard = "", 0
        skipped = dataset.report.skipped_rows
        try:
            with progress_bar(total, "converting", unit="rows", enabled=progress) as advance:
                for chunk in _rows(dataset.batch(row_group_rows).prefetch(2)):
                    start = 0
                    while start < chunk_len(chunk):
                        if writer is not None and in_shard >= shard_rows:
                            writer.close()
                            publication.add(name, in_shard)
                            writer, in_shard = None, 0
                        take = min(shard_rows - in_shard, chunk_len(chunk) - start)
                        piece = meaning.apply(slice_chunk(chunk, start, start + take), str(target))
                        table = chunk_to_table(piece, temporal)
                        if writer is None:
                            name = f"part-{len(publication.shards):05d}.parquet"
                            schema = table.schema.with_metadata(meaning.schema_metadata(list(piece)) or None)
                            writer = pq.ParquetWriter(publication.path(name), schema, compression=compression)
                        writer.write_table(table, row_group_size=row_group_rows)
                        in_shard += take
                        start += take
                        summary.rows += take
                        advance(take + dataset.report.skipped_rows - skipped)  # rows left out pass too
                        skipped = dataset.report.skipped_rows
        finally:
            if writer is not None:
                writer.close()
        if writer is not None:  # the last shard, closed above
            publication.add(name, in_shard)
        manifest = publication.commit()
    summary.files = [str(target / entry["path"]) for entry in manifest["files"]]
    summary.manifest = str(target / MANIFEST_NAME)
    summary.seconds = time.perf_counter() - started
    summary.bytes_written = sum(entry["bytes"] for entry in manifest["files"])
    summary.skipped = dataset.report.to_dict()
    return summary


def convert_to_tfrecord(
    dataset: "Dataset",
    destination: str | Path,
    *,
    shard_rows: int = 100_000,
    compression: Literal["GZIP"] | None = None,
    overwrite: bool = False,
) -> ConvertSummary:
    """Writes ``dataset`` (one unshuffled pass) as ``part-0000i-of-0000N.tfrecord`` shards, published whole."""
    from .writers.tfrecord import write_tfrecord

    started = time.perf_counter()
    dataset = checked_images(dataset)
    files = write_tfrecord(
        dataset, Path(destination) / "part", shard_rows=shard_rows, compression=compression, overwrite=overwrite
    )
    manifest = Path(destination) / MANIFEST_NAME
    return ConvertSummary(
        destination=str(destination),
        files=files,
        manifest=str(manifest),
        rows=int(json.loads(manifest.read_text(encoding="utf-8"))["rows"]),  # written: no second pass to count
        bytes_written=sum(Path(path).stat().st_size for path in files),
        seconds=time.perf_counter() - started,
        skipped=dataset.report.to_dict(),
    )
