"""The conversion cache's content check: a same-size rewrite with its modification time restored.

A CSV file and a Parquet file (real files of pandas and pyarrow) are
cached in one pass, then rewritten with other values of the same size and
their modification time put back with ``os.utime``, so their identity
(path, size, mtime) is unchanged. A NEW dataset (what a new run opens) then
reads them through the same cache directory. With ``verify="content"``
(the default for CSV and image folders, also tested) the new rows are served and the stale parts are
not; with ``verify="metadata"`` (the default for Parquet) the documented
limit holds: the old rows are served (docs/self-healing.md, "Conversion
cache").
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from PIL import Image

from streamfeed.cache import CachedSource, resolve_verify
from streamfeed.errors import ArgumentError
from streamfeed.readers import read_csv, read_images, read_parquet

ROWS = 3000


def _write_csv(path: Path, letter: str) -> None:
    ids = np.arange(ROWS)
    pd.DataFrame({"id": ids, "name": [f"{letter}{i % 7}" for i in ids]}).to_csv(path, index=False)


def _write_parquet(path: Path, letter: str) -> None:
    ids = np.arange(ROWS)
    table = pa.table({"id": ids, "name": [f"{letter}{i % 7}" for i in ids]})
    pq.write_table(table, path, row_group_size=500, compression="none", use_dictionary=False)


WRITERS = {"csv": _write_csv, "parquet": _write_parquet}


def _open(path: Path, fmt: str):
    return read_csv(path, fragment_bytes=4000, count_cache=False) if fmt == "csv" else read_parquet(path)


def _letters(ds) -> set[str]:
    """The first letters of the ``name`` column over one epoch: which writing of the file was served."""
    with ds.iter_epoch(0) as stream:
        return {str(name)[0] for batch in stream for name in batch["name"]}


def _rewrite_keeping_identity(path: Path, fmt: str) -> None:
    """Other values of the same size, the modification time put back: (path, size, mtime) unchanged."""
    before = path.stat()
    WRITERS[fmt](path, "o")
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = path.stat()
    assert (after.st_size, after.st_mtime_ns) == (before.st_size, before.st_mtime_ns)


def _source_reads(ds) -> int:
    assert isinstance(ds.source, CachedSource)
    return ds.source.store.source_reads


# None: the default, "content" for CSV and images (Parquet's is "metadata": the hash measured 14 % of its first epoch)
@pytest.mark.parametrize(("fmt", "verify"), [("csv", "content"), ("csv", None), ("parquet", "content")])
def test_content_mode_serves_the_rewritten_rows_in_a_new_run(tmp_path: Path, fmt: str, verify: str | None) -> None:
    path, cache = tmp_path / f"data.{fmt}", tmp_path / "cache"
    WRITERS[fmt](path, "n")
    kwargs = {} if verify is None else {"verify": verify}
    first = _open(path, fmt).cache(cache, **kwargs)
    assert _letters(first) == {"n"}
    again = _open(path, fmt).cache(cache, **kwargs)
    assert _letters(again) == {"n"} and _source_reads(again) == 0  # the published cache is served

    _rewrite_keeping_identity(path, fmt)
    fresh = _open(path, fmt).cache(cache, **kwargs)  # a new run
    assert _letters(fresh) == {"o"}  # the new rows, not the stale parts
    assert _source_reads(fresh) == len(fresh.source.fragments)
    assert _letters(_open(path, fmt).cache(cache, **kwargs)) == {"o"}  # and the rewritten cache serves them next


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_metadata_mode_serves_the_old_rows_after_a_same_size_rewrite(tmp_path: Path, fmt: str) -> None:
    """The documented limit of ``verify="metadata"``: the file's identity is (path, size, mtime), so the old rows."""
    path, cache = tmp_path / f"data.{fmt}", tmp_path / "cache"
    WRITERS[fmt](path, "n")
    assert _letters(_open(path, fmt).cache(cache, verify="metadata")) == {"n"}
    _rewrite_keeping_identity(path, fmt)
    stale = _open(path, fmt).cache(cache, verify="metadata")
    assert _letters(stale) == {"n"} and _source_reads(stale) == 0
    assert _letters(_open(path, fmt)) == {"o"}  # the file itself holds the new rows


def test_verify_is_checked_and_its_default_resolved_in_one_place(tmp_path: Path) -> None:
    path = tmp_path / "data.csv"
    _write_csv(path, "n")
    source = _open(path, "csv").source
    assert resolve_verify(source, None) == "content"
    assert resolve_verify(source, "metadata") == "metadata"
    _write_parquet(tmp_path / "data.parquet", "n")
    parquet = _open(tmp_path / "data.parquet", "parquet").source
    assert resolve_verify(parquet, None) == "metadata" and resolve_verify(parquet, "content") == "content"
    _write_pngs(tmp_path / "images", 10)
    assert resolve_verify(read_images(tmp_path / "images", size=(8, 8)).source, None) == "content"
    with pytest.raises(ArgumentError, match="verify"):
        _open(path, "csv").cache(tmp_path / "cache", verify="contents")


def _write_pngs(root: Path, value: int) -> None:
    """Six uncompressed PNGs of one value (size independent of the value), in two class folders."""
    for number in range(6):
        folder = root / ("a" if number % 2 else "b")
        folder.mkdir(parents=True, exist_ok=True)
        Image.fromarray(np.full((8, 8, 3), value, dtype=np.uint8)).save(folder / f"{number}.png", compress_level=0)


def test_image_folders_are_checked_by_content_by_default(tmp_path: Path) -> None:
    root, cache = tmp_path / "images", tmp_path / "cache"
    _write_pngs(root, 10)

    def pixels() -> set[int]:
        ds = read_images(root, size=(8, 8), fragment_size=2).cache(cache)
        with ds.iter_epoch(0) as stream:
            return {int(value) for batch in stream for value in np.unique(batch["image"])}

    assert pixels() == {10}
    times = {path: path.stat() for path in root.glob("*/*.png")}
    _write_pngs(root, 200)
    for path, before in times.items():
        os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
        assert path.stat().st_size == before.st_size
    assert pixels() == {200}  # the rewritten images, not the stale parts
