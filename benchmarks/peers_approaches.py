"""The peers of ``peers.py``: Grain over ArrayRecord, webdataset over tar shards, and the plain row-group PyDataset.

Each peer reads a copy of ``_common.generate``'s Parquet data written in
its own format, the way its users store tabular data: blocks of
``BLOCK_ROWS`` rows per record or sample (a record per row costs each
library a Python call per row), in shards of ``SHARD_ROWS`` rows. A block
holds ``x`` (rows, 32) float32 and ``y`` (rows,) float32; every peer
serves ``(x (1024, 32), y (1024,))`` batches, as streamfeed's ``to_keras``
does. The copies are written once, cached beside the Parquet files.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import numpy as np

import _common as C
import tabular_workers as W

BLOCK_ROWS = 128  # rows per ArrayRecord record / webdataset sample; 8 blocks make a batch of 1024
SHARD_ROWS = 65_536  # rows per ArrayRecord file / tar shard (as many as a Parquet row group)
WDS_SHUFFLE_BLOCKS = 1000  # webdataset's .shuffle(buffer), in blocks (its docs' usual 1000): 128 000 rows
SEED = 1
SHUFFLE_SEMANTICS = {
    "streamfeed": (
        "shuffle(seed=1): a fresh fragment order each epoch, and the rows of a window of fragments (default "
        "128 MiB of the data) permuted together; rows mix across fragments; exact, resumable"
    ),
    "grain": (
        f"MapDataset.shuffle(seed=1).repeat(): a global permutation of the {BLOCK_ROWS}-row records, fresh each "
        f"epoch; a batch is {C.BATCH // BLOCK_ROWS} random records, the rows of a record stay adjacent and in order"
    ),
    "webdataset": (
        f"shardshuffle=100 (shard order) + .shuffle({WDS_SHUFFLE_BLOCKS}) over {BLOCK_ROWS}-row blocks (a buffer of "
        f"{WDS_SHUFFLE_BLOCKS * BLOCK_ROWS:,} rows), re-batched at block level ({C.BATCH // BLOCK_ROWS} blocks a "
        "batch, not unbatched to rows); seeded by Python's random, not reproducible"
    ),
    "pydataset": (
        "a fresh row-group order each epoch and the rows of each decoded row group permuted; rows never mix across "
        "row groups (65 536 rows)"
    ),
}


def peer_path(path: Path, kind: str) -> Path:
    return Path(path).with_name(f"{Path(path).name}-{kind}-b{BLOCK_ROWS}")


def _blocks(path: Path):
    """The Parquet data's rows, in order, as (x, y) blocks of BLOCK_ROWS rows (the last may be shorter)."""
    import tabular_approaches as A

    # A fresh matrix per row group (not the preallocated one): blocks are views of it, kept until written.
    for x, y in A.floor_batches(path, preallocated=False):
        for start in range(0, len(y), BLOCK_ROWS):
            yield x[start : start + BLOCK_ROWS], y[start : start + BLOCK_ROWS]


def write_peer_data(path: Path) -> dict[str, Path]:
    """Writes (once) the ArrayRecord and tar copies of the Parquet data at ``path``; returns their directories."""
    out = {}
    for kind, write in (("arrayrecord", _write_arrayrecord), ("wds", _write_wds)):
        target = peer_path(path, kind)
        if not (target / "_DONE").exists():
            target.mkdir(parents=True, exist_ok=True)
            for stale in target.iterdir():
                stale.unlink()
            write(path, target)
            (target / "_DONE").write_text(json.dumps({"block_rows": BLOCK_ROWS, "shard_rows": SHARD_ROWS}))
        out[kind] = target
    return out


def _shards(path: Path):
    """(shard index, blocks of that shard): SHARD_ROWS // BLOCK_ROWS blocks a shard."""
    per_shard = SHARD_ROWS // BLOCK_ROWS
    blocks = _blocks(path)
    for index in itertools.count():
        chunk = list(itertools.islice(blocks, per_shard))
        if not chunk:
            return
        yield index, chunk


def _write_arrayrecord(path: Path, target: Path) -> None:
    from array_record.python.array_record_module import ArrayRecordWriter

    for index, chunk in _shards(path):
        # group_size:1 is ArrayRecord's setting for random access (a record is read without its neighbours);
        # uncompressed: random floats do not compress, and Parquet's copy is snappy (no gain on them either).
        writer = ArrayRecordWriter(str(target / f"part-{index:05d}.array_record"), "group_size:1,uncompressed")
        for x, y in chunk:
            writer.write(x.tobytes() + y.tobytes())
        writer.close()


def _write_wds(path: Path, target: Path) -> None:
    import webdataset as wds

    key = 0
    for index, chunk in _shards(path):
        with wds.TarWriter(str(target / f"shard-{index:05d}.tar")) as writer:
            for x, y in chunk:
                writer.write({"__key__": f"{key:09d}", "x.npy": np.ascontiguousarray(x), "y.npy": y.copy()})
                key += 1


def warm_all(path: Path) -> int:
    """Warms the page cache for the Parquet files and both peer copies."""
    total = C.warm_cache(path)
    for kind in ("arrayrecord", "wds"):
        total += C.warm_files(sorted(str(p) for p in peer_path(path, kind).glob("*") if p.name != "_DONE"))
    return total


def _decode_record(record: bytes) -> tuple[np.ndarray, np.ndarray]:
    rows = len(record) // ((C.N_FEATURES + 1) * 4)
    x = np.frombuffer(record, np.float32, rows * C.N_FEATURES).reshape(rows, C.N_FEATURES)
    return x, np.frombuffer(record, np.float32, rows, offset=rows * C.N_FEATURES * 4)


def _concat(blocks) -> tuple[np.ndarray, np.ndarray]:
    return np.concatenate([b[0] for b in blocks]), np.concatenate([b[1] for b in blocks])


def grain_dataset(path: Path, shuffled: bool) -> tuple[Any, int]:
    """Grain's own path: ArrayRecordDataSource -> MapDataset [.shuffle] .repeat() .map .batch.

    Repeated (a fresh permutation each epoch, as Grain's docs train), so
    epoch e is batches ``[e * steps, (e + 1) * steps)`` of the endless
    MapDataset; returns it and steps. Callers make it an IterDataset with
    Grain's default ReadOptions (16 threads, a 500-element prefetch).
    """
    import grain

    files = sorted(str(p) for p in peer_path(path, "arrayrecord").glob("*.array_record"))
    source = grain.sources.ArrayRecordDataSource(files)
    data = grain.MapDataset.source(source)
    if shuffled:
        data = data.shuffle(seed=SEED)
    per_batch = C.BATCH // BLOCK_ROWS
    data = data.repeat().map(_decode_record).batch(per_batch, batch_fn=_concat)
    return data, -(-len(source) // per_batch)


def webdataset_dataset(path: Path, shuffled: bool) -> Any:
    """webdataset's path: WebDataset(shards) [.shuffle] .decode() .to_tuple .batched (block level), one epoch."""
    import webdataset as wds

    urls = sorted(str(p) for p in peer_path(path, "wds").glob("*.tar"))
    data = wds.WebDataset(urls, shardshuffle=100 if shuffled else False, empty_check=False)
    if shuffled:
        data = data.shuffle(WDS_SHUFFLE_BLOCKS)
    per_batch = C.BATCH // BLOCK_ROWS
    return data.decode().to_tuple("x.npy", "y.npy").batched(per_batch, collation_fn=_concat, partial=True)


def peers_served(approach: str, path: Path) -> W.Served:
    """Builds one iteration approach of ``peers.py``."""
    import keras  # noqa: F401  (first, in every worker: training has it loaded, so peak RSS compares pipelines)

    shuffled = approach.endswith("_shuffled")
    if approach.startswith("streamfeed"):
        return W.tabular_served("streamfeed_keras" if shuffled else "streamfeed_keras_unshuffled", path)
    if approach.startswith("grain"):
        data, steps = grain_dataset(path, shuffled)
        # A fresh iterator per epoch (epoch e's slice of the endless dataset), so that an epoch's time holds
        # its own prefetch, not a backlog read ahead during the one before (500 batches is half an epoch at 1 M rows).
        return W.Served(epoch=lambda e: iter(data[e * steps : (e + 1) * steps].to_iter_dataset()), label=lambda b: b[1])
    if approach.startswith("webdataset"):
        wds_data = webdataset_dataset(path, shuffled)
        return W.Served(epoch=lambda _e: iter(wds_data), label=lambda b: b[1], close=lambda _it: None)
    import tabular_approaches as A

    RowGroupPyDataset, _ = A.make_pydatasets()
    return W.keras_batches(RowGroupPyDataset(path, seed=SEED if shuffled else None))


def peers_fit_inputs(approach: str, path: Path, pydatasets: tuple) -> W.FitInputs:
    """Builds one fit approach of ``peers.py``: Grain's IterDataset (Keras's Grain adapter), webdataset in a
    torch DataLoader (Keras's DataLoader adapter, in-process: ``num_workers=0``), or tabular.py's approaches."""
    shuffled = approach.endswith("_shuffled")
    rows = sum(_parquet_rows(name) for name in C.files(path))
    if approach.startswith("grain"):
        data, steps = grain_dataset(path, shuffled)
        return (data.to_iter_dataset(),), rows, {"steps_per_epoch": steps}
    if approach.startswith("webdataset"):
        import torch.utils.data

        loader = torch.utils.data.DataLoader(webdataset_dataset(path, shuffled), batch_size=None, num_workers=0)
        return (loader,), rows, {}
    return W.tabular_fit_inputs(approach, path, pydatasets)


def _parquet_rows(name: str) -> int:
    import pyarrow.parquet as pq

    return pq.ParquetFile(name).metadata.num_rows
