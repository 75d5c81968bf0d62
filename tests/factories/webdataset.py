"""Contract-test factories for the webdataset source (see ``tests/factories/__init__.py``).

Shards are written by the real ``webdataset`` library's ``TarWriter``: each
sample holds ``<key>.id.cls`` (the id, webdataset's class-label encoding) and
``<key>.x.npy`` (``id / 2`` saved by ``np.save``), served as columns ``id``
and ``x``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from streamfeed.readers import read_webdataset

NAMES = {"id.cls": "id", "x.npy": "x"}


def write_shards(root: Path, bounds: list[int]) -> list[Path]:
    """Shards ``shard-NNNNN.tar`` of the ids between consecutive ``bounds``, written by ``webdataset.TarWriter``."""
    import webdataset as wds

    root.mkdir(parents=True, exist_ok=True)
    paths = []
    for number in range(len(bounds) - 1):
        path = root / f"shard-{number:05d}.tar"
        with wds.TarWriter(str(path)) as writer:
            for i in range(bounds[number], bounds[number + 1]):
                writer.write({"__key__": f"sample{i:06d}", "id.cls": i, "x.npy": np.float64(i / 2)})
        paths.append(path)
    return paths


def webdataset_sharded(tmp_path: Path):
    """Three shards of 230, 410 and 95 samples cut into fragments of 37 samples (uneven)."""
    write_shards(tmp_path / "shards", [0, 230, 640, 735])
    ds = read_webdataset(tmp_path / "shards", names=NAMES, fragment_samples=37)
    assert len(ds.source.fragments) > 6
    return ds, np.arange(735)


FACTORIES = [pytest.param(webdataset_sharded, id="webdataset-sharded")]


def webdataset_zero_samples(tmp_path: Path):
    """A shard that TarWriter closed with no sample written: only the end-of-archive blocks."""
    paths = write_shards(tmp_path / "none", [0, 0])
    return read_webdataset(paths[0], keys=list(NAMES), names=NAMES), np.arange(0)


EMPTY_FACTORIES = [pytest.param(webdataset_zero_samples, id="webdataset-zero-samples")]
