"""The ``read_*`` functions: from a path to a :class:`~streamfeed.Dataset` in one call.

This is the top of the library's layering (``core`` -> ``sources`` ->
``runtime`` -> ``pipeline`` -> ``keras``/``stats``/``inspect`` -> here and
``commands``): each function opens its format's :class:`~streamfeed.core.Source`
with the bad-input policy the caller chose (the ``on_error``,
``max_bad_fraction``, ``max_bad_count`` and ``report_path`` keywords, see
:class:`~streamfeed.errors.ErrorPolicy`) and wraps it in a ``Dataset``.
Nothing below this module knows these functions exist.
"""

from __future__ import annotations

import dataclasses
import difflib
import inspect
import os
from typing import TYPE_CHECKING, Any, Callable, Literal, Mapping, Sequence

import pyarrow.fs as pafs

from .errors import ArgumentError, ErrorPolicy, describe
from .files.arrow import ColumnPolicy
from .files.storage import open_storage
from .pipeline import Dataset
from .sources.csv.source import CsvSource
from .sources.hdf5.source import HDF5Source
from .sources.images.source import ImageSource, decode_spec
from .sources.numpy import NumpySource, numpy_columns
from .sources.parquet import ParquetSource
from .sources.ray import RaySource
from .sources.tfrecord.source import TFRecordSource
from .sources.webdataset.source import WebDatasetSource
from .sources.zip.source import ZipImageSource, is_zip_archive

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from .core import NullPolicy
    from .errors import ErrorOptions
    from .files.paths import PathLike
    from .sources.csv.options import TypeSpec
    from .sources.images.decode import Decoder, OutputDType, Resize
    from .sources.images.listing import FollowLinks, Labels
    from .sources.numpy import Specs
    from .sources.tfrecord.index import Compression
    from .sources.webdataset.decode import Kind as WebDatasetKind

FORMATS = ("parquet", "csv", "hdf5", "numpy", "images", "tfrecord", "webdataset")


def reader_for(format_name: str) -> Callable[..., Dataset]:
    """The ``read_<format>`` function for a format name (as ``detect_format`` gives)."""
    if format_name not in FORMATS:
        raise ArgumentError(describe("Unknown format", expected=f"one of {list(FORMATS)}", found=repr(format_name)))
    return globals()[f"read_{format_name}"]


def read_parquet(
    paths: PathLike,
    *,
    columns: Sequence[str] | None = None,
    filter: Any = None,  # noqa: A002
    filesystem: pafs.FileSystem | None = None,
    storage_options: Mapping[str, Any] | None = None,
    nulls: NullPolicy = "raise",
    fill: Any = None,
    list_lengths: Mapping[str, int] | None = None,
    **errors: Unpack[ErrorOptions],
) -> Dataset:
    """Streams Parquet data: a file, a directory, a glob, a list, or URIs.

    Args:
        columns: the columns to read (projection); by default all but pandas
            index columns.
        filter: a ``pyarrow.dataset`` expression, pushed down to skip row
            groups by their statistics and rows by value.
        nulls: ``"raise"`` (default) names the column, file and row of the
            first null or NaN; ``"drop"`` drops such rows; ``"fill"`` uses
            ``fill`` (one value, or a dict by column).
        list_lengths: pads variable-length list columns to fixed lengths.
        storage_options: for URIs (``s3://bucket/prefix``): ``endpoint_url``,
            ``key``, ``secret``, ``token``, ``region``, ``anon``, ``deadline``
            (seconds a request retries network errors, default 60, then
            ``NetworkError``), ``connect_timeout``, ``read_timeout``,
            ``block_size``, ``cache`` (``{"dir": ..., "max_bytes": ...}``),
            ``client`` (more fsspec arguments); see ``docs/scale.md``.
        on_error: ``"raise"`` (default) or ``"skip"`` unreadable files and
            row groups, recorded in ``dataset.report`` (and as JSON lines in
            ``report_path``) with exact counts, within the error budget.

    Returns:
        A :class:`streamfeed.Dataset`. Dates, timestamps, times and durations
        come as float64 seconds (since the epoch, UTC; naive timestamps taken
        as UTC), nulls as NaN under ``nulls="fill"``.
    """
    report = error_policy_of(read_parquet, errors).new_report()
    policy = ColumnPolicy(nulls=nulls, fill=fill, list_lengths=dict(list_lengths or {}))
    filesystem, paths = open_storage(paths, storage_options, filesystem)
    source = ParquetSource(
        paths,
        columns=columns,
        filter=filter,
        filesystem=filesystem,
        policy=policy,
        report=report,
    )
    return Dataset(source, report=report)


def read_csv(
    paths: PathLike,
    *,
    delimiter: str | None = None,
    decimal: str | None = None,
    header: bool = True,
    column_names: Sequence[str] | None = None,
    column_types: Mapping[str, TypeSpec] | None = None,
    list_columns: Mapping[str, tuple[str, TypeSpec]] | None = None,
    null_values: Sequence[str] | None = None,
    strings_can_be_null: bool = False,
    quote_char: str | None = '"',
    encoding: str = "utf-8",
    nulls: NullPolicy = "raise",
    fill: Any = None,
    columns: Sequence[str] | None = None,
    fragment_bytes: int = 16 << 20,
    filesystem: pafs.FileSystem | None = None,
    storage_options: Mapping[str, Any] | None = None,
    count_cache: bool = True,
    **errors: Unpack[ErrorOptions],
) -> Dataset:
    """Streams CSV data: a file, a directory, a glob or a list; plain or .gz/.bz2/.zst.

    Args:
        delimiter: one character; ``None`` (default) sniffs ``, ; tab |`` from
            the first file. A first line that parses into one column but
            contains another of these raises instead of yielding one column
            of garbage.
        decimal: the decimal mark of numbers, ``"."`` or ``","``; ``None``
            (default) sniffs ``","`` when the delimiter is not a comma and the
            first lines write numbers only as ``25,04`` (European exports).
        header: the first record names the columns (default). Without it,
            columns are ``column_names`` or ``f0, f1, ...``.
        column_names: names to use instead of the header's (same count).
        column_types: ``{column: type}`` (``"float32"``, ``np.int64``,
            ``pa.string()``, ...); other columns' types are inferred from the
            first MiB of every file and then fixed for the whole dataset.
        list_columns: ``{column: (delimiter, type)}``, e.g.
            ``{"tokens": (" ", "int32")}``: the column's text is split on the
            delimiter into numbers of that type and served as ragged rows
            (:class:`~streamfeed.core_ragged.Ragged`; ``batch(pad=Pad())``
            pads them). An empty field is an empty list; a field that is a
            null token (``null_values`` but ``""``) is a null for ``nulls=``
            (``fill={"tokens": []}``); a token that is not a number raises
            naming file, line and column, or skips the row under
            ``on_error="skip"``. Not with ``strings_can_be_null=True``.
        null_values: tokens that make a value null; default
            :data:`DEFAULT_NULL_VALUES` (``""``, ``NA``, ``NaN``, ``null``, ...).
            They apply to numeric columns; string columns keep them as text
            unless ``strings_can_be_null=True``. Pass ``null_values=[""]`` to
            treat only empty fields as null.
        quote_char: the quote character, or ``None`` if fields are never quoted.
        encoding: the files' text encoding (ASCII-compatible: utf-8,
            latin-1, cp1252, ...). A byte that does not decode raises naming
            the file and line.
        nulls: ``"raise"`` (default) names the column, file and line of the
            first null or NaN; ``"drop"`` drops such rows; ``"fill"`` uses
            ``fill`` (one value, or a dict by column).
        columns: the columns to read (projection).
        fragment_bytes: an uncompressed file larger than this is read as
            byte ranges of about this size, in parallel threads.
        storage_options: for URIs (``s3://bucket/prefix``): ``endpoint_url``,
            ``key``, ``secret``, ``token``, ``region``, ``anon``, ``deadline``
            (seconds a request retries network errors, default 60, then
            ``NetworkError``), ``connect_timeout``, ``read_timeout``,
            ``block_size``, ``cache`` (``{"dir": ..., "max_bytes": ...}``),
            ``client`` (more fsspec arguments); see ``docs/scale.md``.
        count_cache: keep exact row counts in ``~/.cache/streamfeed/csv-counts/``
            (``$XDG_CACHE_HOME``), keyed by path, size and mtime.
        on_error: ``"raise"`` (default) on the first ragged row, line too
            long to parse (8 MiB and more: pyarrow's two parse blocks),
            undecodable or corrupt file; ``"skip"`` skips ragged rows and
            over-long lines (each reported with its line, the rows around
            them kept) and unreadable files or ranges, recorded in
            ``dataset.report`` (and as JSON lines in ``report_path``) with
            exact counts, within the error budget. The epoch length is then
            counted once, so that yielded + reported == total.

    Returns:
        A :class:`streamfeed.Dataset`. Columns typed or inferred as dates or
        timestamps come as float64 seconds since the epoch (UTC).
    """
    report = error_policy_of(read_csv, errors).new_report()
    filesystem, paths = open_storage(paths, storage_options, filesystem)
    source = CsvSource(
        paths,
        delimiter=delimiter,
        decimal=decimal,
        header=header,
        column_names=column_names,
        column_types=column_types,
        list_columns=list_columns,
        null_values=null_values,
        strings_can_be_null=strings_can_be_null,
        quote_char=quote_char,
        encoding=encoding,
        columns=columns,
        fragment_bytes=fragment_bytes,
        filesystem=filesystem,
        policy=ColumnPolicy(nulls=nulls, fill=fill),
        count_cache=count_cache,
        report=report,
    )
    return Dataset(source, report=report)


def read_hdf5(
    paths: PathLike,
    *,
    columns: Mapping[str, str] | None = None,
    rows_per_fragment: int | None = None,
    processes: int | None = None,
    allow_external: bool = False,
    **errors: Unpack[ErrorOptions],
) -> Dataset:
    """Streams HDF5 datasets: a file, a directory, a glob or a list of files.

    Args:
        columns: output column name → dataset path, e.g.
            ``{"x": "/images", "y": "/meta/labels"}``; a field of a compound
            dataset (a pandas/PyTables table) is ``"/df/table/<field>"``. By
            default every dataset is a column named by its path (without the
            leading ``/``; ``label=``, ``columns=`` and ``--label`` also take
            the path with its slash, ``/labels``), and a PyTables table's
            fields by the pandas column names (its ``index`` left out). All
            columns of a file
            must have the same length: a mismatch raises, naming both.
            A 1-D dataset of ``h5py.vlen_dtype(<number type>)`` is served as
            ragged rows (:class:`~streamfeed.core_ragged.Ragged`; pad them
            with ``batch(..., pad=sf.Pad())``).
        rows_per_fragment: rows per fragment, rounded down to a multiple of
            the HDF5 chunk rows (at least one chunk); by default about
            8 MiB of rows.
        processes: read fragments in this many worker processes (HDF5
            decoding holds h5py's global lock, so threads do not decode in
            parallel); ``None`` (default) reads in the pipeline's threads.
        allow_external: read datasets whose bytes live in another file
            (external raw storage, or a virtual dataset mapping other
            files). By default such a file is refused when the dataset
            opens, naming the dataset and the files it points at: a data
            file from a stranger could otherwise serve any file on this
            machine (``/etc/passwd``) as training data. External links are
            never followed either way.
        on_error: ``"raise"`` (default) or ``"skip"`` unreadable files (and
            files whose datasets are missing or of unequal lengths, or
            stored in other files) and unreadable row ranges, recorded in ``dataset.report`` (and as
            JSON lines in ``report_path``) within the error budget.

    Returns:
        A :class:`streamfeed.Dataset`.
    """
    report = error_policy_of(read_hdf5, errors).new_report()

    source = HDF5Source(
        paths,
        columns=columns,
        rows_per_fragment=rows_per_fragment,
        processes=processes,
        allow_external=allow_external,
        report=report,
    )
    return Dataset(source, report=report)


def read_numpy(
    x: Specs | None = None,
    y: Specs | None = None,
    *,
    arrays: Mapping[str, Specs] | None = None,
    rows_per_fragment: int | None = None,
    **errors: Unpack[ErrorOptions],
) -> Dataset:
    """Streams rows of NumPy arrays saved with ``np.save``/``np.savez``/``np.savez_compressed``.

    Args:
        x, y: the ``x`` and ``y`` columns: a ``.npy`` path, an ``.npz``
            member ``"file.npz:name"``, or a list of either (shards, paired
            by position). ``x`` as a whole ``.npz`` (with no ``y``) makes
            every member a column, named by the member.
        arrays: more columns, ``{name: spec}`` with specs as for ``x``.
        rows_per_fragment: rows per fragment; by default about 8 MiB of rows.
        on_error: ``"raise"`` (default) or ``"skip"`` groups of files that
            cannot be read (truncated, empty, not NumPy, object dtype,
            unequal lengths) and row ranges that fail to decompress,
            recorded in ``dataset.report`` within the error budget.

    Returns:
        A :class:`streamfeed.Dataset`.
    """
    report = error_policy_of(read_numpy, errors).new_report()
    source = NumpySource(numpy_columns(x, y, arrays), rows_per_fragment=rows_per_fragment, report=report)
    return Dataset(source, report=report)


def read_images(
    root: str | os.PathLike,
    *,
    size: tuple[int, int] = (224, 224),
    channels: Literal[1, 3, 4] = 3,
    dtype: OutputDType = "uint8",
    resize: Resize = "stretch",
    labels: Labels | None = "inferred",
    label_map: Mapping[str, int] | str | os.PathLike | None = None,
    decoder: Decoder = "auto",
    fragment_size: int = 128,
    verify_headers: bool = True,
    decode: bool = True,
    max_image_bytes: int | None = None,
    follow_links: FollowLinks = "inside",
    filesystem: pafs.FileSystem | None = None,
    storage_options: Mapping[str, Any] | None = None,
    **errors: Unpack[ErrorOptions],
) -> Dataset:
    """Streams a folder of images with one sub-folder per class, or a zip archive of one.

    ``root`` may be a ``.zip`` archive (by suffix, or a local file by its
    signature), local or a URI (``s3://``, ``gs://``, ``https://``): it is
    read member by member without extracting, as the folder it holds would
    be (``sources/zip/source.py``); refused members (path traversal, zip
    bombs, encryption, damage) are bad input, named by archive, member and
    byte offset.

    Args:
        size: ``(height, width)`` of every output image.
        channels: 1 (grayscale), 3 (RGB, alpha dropped) or 4 (RGBA).
        dtype: ``"uint8"`` (0..255) or ``"float32"`` (0..1). Never float64:
            it would double memory for no precision a model uses.
        resize: ``"stretch"`` (ignore aspect), ``"crop"`` (keep aspect,
            cover, centre crop) or ``"pad"`` (keep aspect, fit, centre on
            zeros).
        labels: ``"inferred"`` from top-level folders, or ``None``.
        label_map: ``{class: label}`` or a JSON file written by
            ``source.save_label_map``; default: sorted folder names. Labels
            are ints with ``0 <= label < 2**31``, one per class (gaps
            allowed); any other value raises naming the class when the
            dataset opens.
        decoder: ``"auto"`` (simplejpeg for JPEG if installed, else
            Pillow), ``"pillow"`` or ``"simplejpeg"``.
        fragment_size: files per fragment (the unit of parallel decoding,
            shuffling and sharding).
        verify_headers: open every file's header when the source opens.
        decode: ``False`` yields the files' encoded bytes as ``image_bytes``
            instead of ``image`` (what ``streamfeed convert`` stores; decode
            them later with :func:`streamfeed.transforms.decode_images`).
        max_image_bytes: the most one image may decode to (width x height x
            channels, from its header, checked before decoding); default a
            quarter of the default memory limit (128 MiB). While streaming,
            a quarter of ``with_options(memory_limit=...)`` bounds it too,
            whichever is lower. A larger image
            (a decompression bomb) is a bad file: it raises naming the file
            and its declared size, or is skipped and reported.
        follow_links: ``"inside"`` (default) follows links to folders only
            when their target is inside ``root`` (others are counted in
            ``source.summary()`` and said in one warning); ``"all"`` follows
            every link. Links to files are followed wherever they point. Either way
            a file reachable under two classes raises naming both paths.
            An archive's link entries are never followed.
        storage_options: for an archive's URI, as for :func:`read_parquet`.
        on_error: ``"raise"`` (default) at the first bad file, naming it, or
            ``"skip"`` bad files, recorded in ``dataset.report`` (and as JSON
            lines in ``report_path``) within the error budget.

    Returns:
        A :class:`streamfeed.Dataset` with columns ``image``, ``label``
        (unless ``labels=None``) and ``path``.
    """
    report = error_policy_of(read_images, errors).new_report()
    spec = decode_spec(size, channels, dtype, resize, decoder, max_image_bytes)
    if filesystem is not None or storage_options is not None or is_zip_archive(root):
        if follow_links != "inside":
            raise ArgumentError(describe("follow_links is for folders", where=os.fspath(root), found=follow_links))
        filesystem, root = open_storage(root, storage_options, filesystem)
        zipped = ZipImageSource(
            root,
            spec=spec,
            labels=labels,
            label_map=label_map if label_map is None or isinstance(label_map, Mapping) else os.fspath(label_map),
            fragment_size=fragment_size,
            verify_headers=verify_headers,
            decode=decode,
            filesystem=filesystem,
            report=report,
        )
        return Dataset(zipped, report=report)
    source = ImageSource(
        root,
        spec=spec,
        labels=labels,
        label_map=label_map,
        fragment_size=fragment_size,
        verify_headers=verify_headers,
        decode=decode,
        follow_links=follow_links,
        report=report,
    )
    return Dataset(source, report=report)


def read_tfrecord(
    paths: PathLike,
    *,
    features: Mapping[str, tuple[str, Sequence[int] | int]] | None = None,
    compression: Compression = None,
    decode_images: Sequence[str] | Mapping[str, tuple[int, ...] | None] | None = None,
    fragment_bytes: int = 16 << 20,
    filesystem: pafs.FileSystem | None = None,
    storage_options: Mapping[str, Any] | None = None,
    **errors: Unpack[ErrorOptions],
) -> Dataset:
    """Streams ``tf.train.Example`` records from TFRecord files; no TensorFlow needed.

    Args:
        paths: a file, a directory (its ``*.tfrecord``, ``*.tfrec``,
            ``name-00000-of-00008``-style files, optionally ``.gz``), a glob,
            or a list of these; local paths or URIs.
        features: ``{name: (kind, shape)}`` with kind ``"float"`` (float32),
            ``"int64"`` or ``"bytes"`` and a fixed shape: each record's list
            must hold exactly ``prod(shape)`` values, and a column holds
            ``(rows, *shape)``. Shape ``None`` (``("int64", None)``, as
            ``tf.io.VarLenFeature``) reads a float or int64 list of any
            length per record as ``streamfeed.Ragged`` rows (pad them with
            ``batch(..., pad=sf.Pad())``). By default inferred from the
            first record (a list of one value becomes a scalar).
        compression: ``None`` detects GZIP from a ``.gz`` extension;
            ``"GZIP"`` reads every file as GZIP.
        decode_images: bytes features holding encoded images (JPEG, MPO,
            PNG, WebP, TIFF, BMP or GIF, sniffed from the bytes; any other
            format is a bad record naming the format found) to decode into
            ``uint8`` arrays: a list of names (stored size, RGB; all images
            must share a shape) or ``{name: (height, width, channels)}`` to
            resize.
        fragment_bytes: files are cut into record ranges of about this many
            (decompressed) bytes, the unit of parallel reading, shuffling
            and memory.
        storage_options: for URIs (``s3://bucket/prefix``): ``endpoint_url``,
            ``key``, ``secret``, ``token``, ``region``, ``anon``, ``deadline``
            (seconds a request retries network errors, default 60, then
            ``NetworkError``), ``connect_timeout``, ``read_timeout``,
            ``block_size``, ``cache`` (``{"dir": ..., "max_bytes": ...}``),
            ``client`` (more fsspec arguments); see ``docs/scale.md``.
        on_error: ``"raise"`` (default) names the file, record index and byte
            offset of the first damaged or non-matching record; ``"skip"``
            leaves such records out and reports each in ``dataset.report``
            (and ``report_path``), within the error budget.

    Returns:
        A :class:`streamfeed.Dataset`.
    """
    report = error_policy_of(read_tfrecord, errors).new_report()
    filesystem, paths = open_storage(paths, storage_options, filesystem)
    source = TFRecordSource(
        paths,
        features=features,
        compression=compression,
        decode_images=decode_images,
        fragment_bytes=fragment_bytes,
        filesystem=filesystem,
        report=report,
    )
    return Dataset(source, report=report)


def read_ray(
    dataset: Any,
    *,
    name: str | None = None,
    version: str | int | None = None,
    nulls: NullPolicy = "raise",
    fill: Any = None,
    list_lengths: Mapping[str, int] | None = None,
    timeout: float | None = None,
) -> Dataset:
    """Streams a Ray Data dataset: Ray reads and decodes, streamfeed gives exact epochs.

    The dataset is materialized (in a stable block order) and each Ray block
    becomes one fragment with its exact row count, so ``shuffle(seed=)``,
    ``batch``, ``shard``, the state and ``to_keras`` work as on files; blocks
    are fetched with ``ray.get`` in the read pool. Needs ``streamfeed[ray]``;
    Ray Data starts a local Ray if none is running (call ``ray.init`` to
    choose). See ``docs/scale.md`` ("Ray Data").

    Args:
        dataset: a ``ray.data.Dataset``; fixed-shape tensor columns (images)
            become ``(rows, *shape)`` arrays.
        name, version: recorded in the fingerprint that validates a saved
            state. The fingerprint sees the blocks' row counts, the schema
            and Ray's plan text, never the values: change ``version`` when
            the inputs or a map function change without changing those.
            Without ``version`` the dataset cannot be cached
            (``.cache()`` refuses it: it could not tell old rows from new).
        nulls, fill, list_lengths: as for :func:`read_parquet`.
        timeout: seconds one ``ray.get`` of a block may wait (default: no
            limit). A block that cannot be fetched (lost, freed, timed out)
            raises :class:`~streamfeed.errors.StorageError` naming it; it is
            never skipped.

    Returns:
        A :class:`streamfeed.Dataset`.
    """
    policy = ColumnPolicy(nulls=nulls, fill=fill, list_lengths=dict(list_lengths or {}))
    return Dataset(RaySource(dataset, name=name, version=version, policy=policy, timeout=timeout))


def error_policy_of(reader: Callable[..., Dataset], errors: Mapping[str, Any]) -> ErrorPolicy:
    """The bad-input policy from a reader's ``**errors``; a keyword neither it nor the policy knows is named.

    Python sends any unknown keyword into ``**errors``: without this check a
    typo (``delimeter=``) surfaced as a ``TypeError`` of ``ErrorPolicy``, an
    internal class, and never named the keyword meant.
    """
    policy_keywords = [field.name for field in dataclasses.fields(ErrorPolicy)]
    unknown = [name for name in errors if name not in policy_keywords]
    if unknown:
        known = [name for name in inspect.signature(reader).parameters if name != "errors"] + policy_keywords
        near = difflib.get_close_matches(unknown[0], known, n=1)
        raise ArgumentError(
            describe(
                f"{reader.__name__}() got an unknown keyword {unknown[0]!r}",
                expected=f"one of {', '.join(known)}",
                found=", ".join(repr(name) for name in unknown),
                fix=f"did you mean {near[0]}=?" if near else f"see help(streamfeed.{reader.__name__})",
            )
        )
    return ErrorPolicy(**errors)


def read_webdataset(
    paths: PathLike,
    *,
    keys: Sequence[str] | Mapping[str, WebDatasetKind] | None = None,
    names: Mapping[str, str] | None = None,
    key_column: str | None = "__key__",
    image_size: tuple[int, int] | tuple[int, int, int] | None = None,
    fragment_samples: int = 256,
    filesystem: pafs.FileSystem | None = None,
    storage_options: Mapping[str, Any] | None = None,
    **errors: Unpack[ErrorOptions],
) -> Dataset:
    """Streams samples from tar shards in the WebDataset layout, indexed at open.

    The files of a shard sharing a basename (up to the first dot of the last
    path component, as webdataset groups them) are one sample; each served
    extension is a column. Every shard's tar headers are read at open, so
    the count is exact, samples shuffle across shards with the epoch's seed
    and an epoch resumes in the middle of a shard. See
    ``sources/webdataset/source.py``.

    Args:
        paths: a ``.tar`` shard, a directory of them, a glob, or a list;
            local paths or URIs (``s3://``, ``gs://``, ``https://``).
        keys: the extensions to serve: a list (decoded by extension: ``jpg``,
            ``jpeg``, ``png`` images; ``npy`` arrays, loaded without pickle;
            ``json``; ``cls`` int labels; ``txt`` strings; raw bytes for any
            other) or ``{extension: kind}`` with kind ``"image"``, ``"npy"``,
            ``"json"``, ``"int"``, ``"str"`` or ``"bytes"``. By default every
            extension of the first sample. A sample missing one is a bad sample.
        names: column names for extensions (``{"cls": "label"}``); by default
            the extension.
        key_column: the column holding each sample's key (``None``: none).
        image_size: ``(height, width[, channels])`` to resize images to; by
            default the stored size, which every image must share.
        fragment_samples: consecutive samples of a shard per fragment, the
            unit of parallel reading, shuffling and memory.
        storage_options: for URIs, as for :func:`read_parquet`.
        on_error: ``"raise"`` (default) names shard, member and byte offset of
            the first truncated tar, missing member, refused name or member
            that does not decode; ``"skip"`` leaves the sample out and reports
            it in ``dataset.report``, within the error budget.

    Returns:
        A :class:`streamfeed.Dataset`.
    """
    report = error_policy_of(read_webdataset, errors).new_report()
    filesystem, paths = open_storage(paths, storage_options, filesystem)
    source = WebDatasetSource(
        paths,
        keys=keys,
        names=names,
        key_column=key_column,
        image_size=image_size,
        fragment_samples=fragment_samples,
        filesystem=filesystem,
        report=report,
    )
    return Dataset(source, report=report)
