"""Flags shared by the sub-commands, and the dataset they describe.

The library's reading options as flags (``--columns``, ``--nulls``,
``--fill``, ``--on-error``), sizes written as people write them (``512MB``,
``1GiB``, ``2G``), and a batch size that fits the memory limit when the
user did not choose one (a batch of 1,024 decoded images alone is 588 MiB).
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
from typing import Any, Callable, Mapping

from .. import memory
from ..errors import ArgumentError, MemoryLimitError, SchemaError, UnknownNameError, describe
from ..sources.detect import FORMATS
from ..sources.names import served_name

DEFAULT_BATCH_SIZE = 1024
NULL_FORMATS = ("parquet", "csv")  # the readers with a null policy and a column projection by name
FRAGMENT_BYTES_FORMATS = ("csv", "tfrecord")  # the readers cut into byte ranges by ``fragment_bytes``
IMAGE_FORMATS = ("images", "zip")  # read by ``read_images``: an image folder, or a zip archive of one


def parse_size(text: str) -> int:
    """:func:`streamfeed.memory.parse_size` for argparse's ``type=`` (whose error it must raise to be shown)."""
    try:
        return memory.parse_size(text)
    except ArgumentError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def names(text: str | None) -> list[str]:
    """``"a, b,c"`` -> ``["a", "b", "c"]``."""
    return [name.strip() for name in (text or "").split(",") if name.strip()]


DATA_HELP = "file, directory or glob (also a .zip of class folders, or WebDataset .tar shards)"


def add_format(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--format",
        choices=FORMATS,
        default=None,
        help="source format (default: detected from suffixes, and a local file's first bytes: "
        "zip for a .zip archive of class folders, webdataset for .tar shards)",
    )


def add_memory_limit(parser: argparse.ArgumentParser, help: str = "memory for the pipeline's buffers") -> None:  # noqa: A002
    parser.add_argument(
        "--memory-limit",
        type=parse_size,
        default=None,
        metavar="SIZE",
        help=f"{help}, e.g. 512MB (10^6 bytes each), 512MiB or 512M (2^20), 1GiB, 2G (default 512MiB)",
    )


def add_reading(parser: argparse.ArgumentParser) -> None:
    """``--columns``, ``--nulls``, ``--fill`` and ``--on-error``: how the source is read."""
    parser.add_argument("--columns", default=None, metavar="A,B", help="comma-separated columns to read (default: all)")
    parser.add_argument(
        "--nulls",
        choices=["raise", "drop", "fill"],
        default=None,
        help="a null or NaN in a column read (Parquet, CSV): stop naming it (raise, the default), "
        "drop its row, or fill it with --fill",
    )
    parser.add_argument(
        "--fill",
        default=None,
        metavar="VALUE",
        help="the value for nulls (implies --nulls fill): one value, or COLUMN=VALUE,... per column",
    )
    parser.add_argument(
        "--fragment-bytes",
        type=parse_size,
        default=None,
        metavar="SIZE",
        help="CSV and TFRecord: cut files into pieces of about this size, e.g. 4MiB (default 16MiB; "
        "smaller pieces need less memory)",
    )
    parser.add_argument(
        "--on-error",
        choices=["raise", "skip"],
        default="raise",
        help="an unreadable file, row group or record: stop naming it (default) or skip it and report it",
    )


def _value(text: str) -> Any:
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def fill_value(text: str) -> Any:
    """``"0"`` -> 0, ``"a=0,b=x"`` -> ``{"a": 0, "b": "x"}``."""
    if "=" not in text:
        return _value(text)
    pairs = [part.split("=", 1) for part in text.split(",") if part.strip()]
    return {name.strip(): _value(value.strip()) for name, value in pairs}


def reader_options(args: argparse.Namespace, source_format: str, *, columns: list[str] | None) -> dict[str, Any]:
    """The ``read_<format>`` keywords that the reading flags ask for; a flag the format cannot take is refused."""
    nulls, fill = getattr(args, "nulls", None), getattr(args, "fill", None)
    if fill is not None and nulls in (None, "fill"):
        nulls = "fill"
    elif fill is not None:
        raise ArgumentError(
            describe(
                f"--fill gives the value of --nulls fill, not of --nulls {nulls}",
                fix=f"drop --fill, or pass --nulls fill --fill {fill}",
            )
        )
    elif nulls == "fill":
        raise ArgumentError(describe("--nulls fill needs the value", fix="pass --fill VALUE (or COLUMN=VALUE,...)"))
    options: dict[str, Any] = {"on_error": getattr(args, "on_error", "raise")}
    fragment_bytes = getattr(args, "fragment_bytes", None)
    if fragment_bytes is not None and source_format not in FRAGMENT_BYTES_FORMATS:
        raise ArgumentError(
            describe(
                f"--fragment-bytes applies to CSV and TFRecord; this source is {source_format}",
                fix="leave out --fragment-bytes (this format's pieces are its files' own)",
            )
        )
    if fragment_bytes is not None:
        options["fragment_bytes"] = fragment_bytes
    if source_format in NULL_FORMATS:
        if nulls is not None:
            options["nulls"] = nulls
        if fill is not None:
            options["fill"] = fill_value(fill)
        if columns:
            options["columns"] = columns
    elif nulls is not None:
        raise ArgumentError(
            describe(
                f"--nulls applies to Parquet and CSV; this source is {source_format}",
                fix="leave out --nulls and --fill",
            )
        )
    return options


def detected_format(args: argparse.Namespace, path: str) -> str:
    """``--format``, or the format detected from the path's suffixes (then kept in ``args.format``)."""
    from ..sources.detect import detect_format

    if args.format is None:
        args.format = detect_format(path)
    return str(args.format)


def open_dataset(
    args: argparse.Namespace,
    path: str,
    *,
    read: list[str] | None = None,
    named: Mapping[str, list[str]] | None = None,
    **extra: Any,
) -> tuple[str, Any]:
    """``(format, dataset)``: the path opened with the reading flags.

    ``read``: the columns to read, and only they (None: all). ``named``: the
    column names each flag gave (``{"--label": ["y"]}``); one that is not in
    the data is a usage error naming its flag, not the data's fault.
    """
    name = detected_format(args, path)
    options = reader_options(args, name, columns=read)
    reader = reader_of(name, path)
    try:
        dataset = reader(path, **options, **extra)
    except SchemaError:
        if "columns" in options:  # the source refuses an unknown name: find which flag gave it
            options.pop("columns")
            check_names(reader(path, **options, **extra), named or {})
        raise
    check_names(dataset, named or {})
    if read and "columns" not in options:
        dataset = select_columns(dataset, [served_name(dataset.source, column) for column in read])
    return name, dataset


def reader_of(source_format: str, path: str) -> Callable[..., Any]:
    """The ``read_*`` function for a format name; ``"zip"`` is :func:`~streamfeed.read_images` reading an archive.

    ``read_images`` takes a path as an archive by its ``.zip`` name or, for
    a local file, its ``PK`` signature; under ``--format zip`` the archive
    is read as one whatever its name (a local file through the local
    filesystem, a URI through fsspec), as the user said it is.
    """
    from ..readers import read_images, reader_for
    from ..sources.zip import is_zip_archive

    if source_format != "zip":
        return reader_for(source_format)
    if is_zip_archive(path):
        return read_images
    if "://" in path:
        return functools.partial(read_images, storage_options={})
    return _local_archive


def _local_archive(path: str, **options: Any) -> Any:
    """``read_images`` on a local file read as a zip archive whatever its name (the local filesystem given)."""
    import pyarrow.fs as pafs

    from ..readers import read_images

    return read_images(os.path.abspath(path), filesystem=pafs.LocalFileSystem(), **options)


def check_names(dataset: Any, named: Mapping[str, list[str]]) -> None:
    """Refuses a name given with a flag that is not a column of ``dataset``, naming the flag."""
    available = list(dataset.column_names)
    for flag, wanted in named.items():
        unknown = [name for name in wanted if served_name(dataset.source, name, available) not in available]
        if unknown:
            raise UnknownNameError(
                describe(
                    f"No column {unknown[0]!r}" + (f" (nor {unknown[1:]})" if len(unknown) > 1 else ""),
                    expected=f"one of {available}",
                    fix=f"check the spelling in {flag}",
                )
            )


def select_columns(dataset: Any, columns: list[str]) -> Any:
    """Keeps ``columns`` of a source that cannot project by name (a per-fragment op)."""
    wanted = list(dict.fromkeys(columns))

    def project(chunk: dict) -> dict:
        return {name: chunk[name] for name in wanted}

    return dataset.map(project, name="columns:" + ",".join(wanted))


def batched(dataset: Any, batch_size: int | None, *, command: str) -> Any:
    """``dataset.batch(...)``: the size asked for, or the largest up to 1,024 rows that fits the memory limit.

    A size the user chose that does not fit, where a smaller one would,
    is refused naming ``--batch-size`` (the knob that matters) and the
    largest size that fits; a size chosen for the user is said on stderr
    (even under ``--quiet``, which silences progress bars, not this).
    """
    wanted = batch_size or DEFAULT_BATCH_SIZE
    try:
        return _checked(dataset.batch(wanted))
    except MemoryLimitError as refusal:
        fits = _largest_fitting(dataset, wanted)
        if fits is None:  # not the batch: even one row does not fit
            raise
        need, limit, row = _estimate(dataset.batch(wanted)), _limit(dataset), _size(dataset.source.row_bytes)
        if batch_size is not None:
            raise MemoryLimitError(
                describe(
                    f"A batch of {wanted:,} rows does not fit the memory limit",
                    expected=f"at most {_size(limit)} (--memory-limit)",
                    found=f"about {_size(need)} for batches of {wanted:,} rows of {row}",
                    fix=f"pass --batch-size {fits} (the largest that fits) or less, "
                    f"or --memory-limit {size_flag(need * 1.1)}",
                )
            ) from refusal
    print(
        f"streamfeed {command}: batches of {fits:,} rows, the most that fit the memory limit of {_size(limit)} "
        f"({wanted:,} rows of {row} need about {_size(need)}); set them with --batch-size or --memory-limit",
        file=sys.stderr,
    )
    return dataset.batch(fits)


def _checked(dataset: Any) -> Any:
    dataset.layout()
    return dataset


def _largest_fitting(dataset: Any, upper: int) -> int | None:
    """The largest batch size below ``upper`` whose layout fits, or None if one row does not."""
    try:
        _checked(dataset.batch(1))
    except MemoryLimitError:
        return None
    low, high = 1, upper - 1  # low fits
    while low < high:
        middle = (low + high + 1) // 2
        try:
            _checked(dataset.batch(middle))
            low = middle
        except MemoryLimitError:
            high = middle - 1
    return low


def _limit(dataset: Any) -> int:
    return int(dataset.resolution.memory_limit)


def _estimate(dataset: Any) -> float:
    """The bytes of the smallest layout with this batch (what the memory limit refused)."""
    from ..memory import estimate_bytes

    rows = [fragment.num_rows for fragment in dataset.source.fragments] or [1]
    return estimate_bytes(
        float(dataset.source.row_bytes),
        max(1.0, sum(rows) / len(rows)),
        dataset.batch_size,
        read_ahead=1,
        window=1,
        prefetch=2,
        shuffled=dataset.shuffled,
        read_threads=1,
        read_scratch=dataset.resolution.read_scratch,
    )


def _size(value: float) -> str:
    for unit in ("bytes", "KiB", "MiB"):
        if value < 1024:
            return f"{value:,.0f} {unit}" if unit == "bytes" else f"{value:,.1f} {unit}"
        value /= 1024
    return f"{value:,.1f} GiB"


def size_flag(value: float) -> str:
    """A size to pass back as a flag, at least ``value``: the next 64 MiB, as ``704MiB`` or ``1GiB``."""
    step = 64 * 2**20
    rounded = -(-int(value) // step) * step
    return f"{rounded // 2**30}GiB" if rounded % 2**30 == 0 else f"{rounded // 2**20}MiB"
