"""The conversion cache's content check: a same-size rewrite with its modification time restored.

A CSV file and a Parquet file (real files of pandas and pyarrow) are
cached in one pass, then rewritten with other values of the same size and
their modification time put back with ``os.utime``, so their identity
(path, size, mtime) is unchanged. A NEW dataset (what a new run opens) then
reads them through the same cache directory. With ``verify="content"``
(the default for both formats) the new rows are served and the stale parts
are not; with ``verify="metadata"`` the documented limit holds: the old
rows are served (docs/self-healing.md, "Conversion cache").
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from streamfeed.cache import CachedSource, resolve_verify
from streamfeed.errors import ArgumentError
from streamfeed.readers import read_csv, read_parquet

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


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
@pytest.mark.parametrize("verify", ["content", None])  # None: the default, content for CSV and Parquet
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
    with pytest.raises(ArgumentError, match="verify"):
        _open(path, "csv").cache(tmp_path / "cache", verify="contents")
