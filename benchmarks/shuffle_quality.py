"""How close streamfeed's shuffle comes to a global shuffle, on a sorted file.

The file's ``id`` column equals the row's position, so the output order of
ids shows how far rows moved. For each method we report, over one epoch:

- ``spearman``: rank correlation between output position and source
  position (0 for a uniform shuffle, 1 for none);
- ``mean_move``: mean |output position - source position| / rows
  (1/3 for a uniform shuffle);
- ``batch_spread``: mean over batches of std(ids in batch) / std(all ids)
  (1 for a uniform shuffle; near 0 when a batch holds neighbours);
- ``sources_per_batch``: mean number of distinct row groups a batch draws
  from.

Methods: no shuffle; streamfeed at several windows; tf.data's
``shuffle(buffer)`` with as many rows of buffer as streamfeed's window
holds (same memory); a global permutation (the ideal).

    python benchmarks/shuffle_quality.py [--rows 1000000] [--row-group 16384]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

import streamfeed as sf


def metrics(order: np.ndarray, batch: int, row_group: int) -> dict:
    n = len(order)
    positions = np.arange(n)
    spearman = float(np.corrcoef(positions, order)[0, 1])  # ids are ranks already
    usable = n - n % batch
    batches = order[:usable].reshape(-1, batch)
    spread = float(np.mean(batches.std(axis=1)) / order.std())
    sources = float(np.mean([len(np.unique(b // row_group)) for b in batches]))
    return {
        "spearman": spearman,
        "mean_move": float(np.mean(np.abs(order - positions)) / n),
        "batch_spread": spread,
        "sources_per_batch": sources,
    }


def streamfeed_order(path: Path, window: int | None, batch: int) -> tuple[np.ndarray, int]:
    data = sf.read_parquet(path, columns=["id"])
    if window != 0:
        data = data.shuffle(seed=7, window=window)
    data = data.batch(batch)
    with data.iter_epoch(0) as epoch:
        order = np.concatenate([b["id"] for b in epoch])
    return order, data.layout().window


def tfdata_order(rows: int, buffer: int, batch: int) -> np.ndarray:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import tensorflow as tf

    stream = tf.data.Dataset.range(rows).shuffle(buffer, seed=7).batch(65536)
    return np.concatenate([b.numpy() for b in stream])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--row-group", type=int, default=16_384)
    parser.add_argument("--batch", type=int, default=1024)
    args = parser.parse_args(argv)
    print("command: python " + " ".join(sys.argv))
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "sorted.parquet"
        pq.write_table(pa.table({"id": np.arange(args.rows)}), path, row_group_size=args.row_group)
        rows = []
        for window in (0, 1, 4, 16, 64):
            order, used = streamfeed_order(path, window, args.batch)
            name = "no shuffle" if window == 0 else f"streamfeed window={used} row groups"
            rows.append((name, metrics(order, args.batch, args.row_group)))
            if window in (4, 16, 64):
                buffer = used * args.row_group
                rows.append(
                    (
                        f"tf.data shuffle(buffer={buffer})",
                        metrics(tfdata_order(args.rows, buffer, args.batch), args.batch, args.row_group),
                    )
                )
        ideal = np.random.default_rng(7).permutation(args.rows)
        rows.append(("global permutation (ideal)", metrics(ideal, args.batch, args.row_group)))
    print(f"\n{args.rows:,} rows sorted by id, row groups of {args.row_group:,}, batch {args.batch}\n")
    print("| method | spearman | mean_move | batch_spread | sources_per_batch |")
    print("|---|---:|---:|---:|---:|")
    for name, m in rows:
        print(
            f"| {name} | {m['spearman']:.3f} | {m['mean_move']:.3f} | {m['batch_spread']:.3f} "
            f"| {m['sources_per_batch']:.1f} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
