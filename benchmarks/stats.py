"""Statistics benchmark: one streamfeed stats pass vs the read limit vs Keras ``adapt``.

Side by side on the same generated Parquet files (f0..f31 and y, float32),
each approach in a fresh process (its peak RSS is its own):

* ``read``: the pyarrow scanner reading every column to NumPy (the limit);
* ``stats``: ``streamfeed.stats.compute_stats`` with its defaults: exact
  count/NaN/min/max/mean/variance of every value, quantiles from a
  deterministic 65 536-value position-hashed sample per column (rank error
  ≤ 0.69 % for all quantiles at once, 99 %; identical for any thread
  count), HLL distinct counts on integer columns (none here: all float32);
* ``stats_all``: ``compute_stats(quantiles="kll", distinct="all")``: a KLL
  sketch and an HLL of every value of every column (the opt-ins; ~35 ns a
  value each; KLL is not bit-reproducible);
* ``adapt_tf``: ``keras.layers.Normalization.adapt`` on a ``tf.data``
  dataset of 1024-row batches read from the same files (TensorFlow backend);
* ``adapt_jax``: ``Normalization.adapt`` on a generator of 1024-row NumPy
  batches read from the same files (JAX backend).

Targets: stats >= 0.8x the read limit, >= 5x adapt.

Usage::

    python benchmarks/stats.py                 # 2 M rows
    python benchmarks/stats.py --quick         # smoke run: 262 144 rows
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import _common as C

SCRIPT = str(Path(__file__).resolve())
APPROACHES = {
    "read": ("pyarrow scanner -> NumPy (read limit)", None),
    "stats": ("streamfeed compute_stats (defaults)", None),
    "stats_all": ("compute_stats quantiles=kll distinct=all", None),
    "adapt_tf": ("Keras Normalization.adapt, tf.data", "tensorflow"),
    "adapt_jax": ("Keras Normalization.adapt, NumPy batches", "jax"),
}


def _batches(path: str):
    """1024-row float32 matrices of f0..f31, read row group by row group."""
    import numpy as np
    import pyarrow.parquet as pq

    for name in C.files(Path(path)):
        reader = pq.ParquetFile(name)
        for group in range(reader.num_row_groups):
            table = reader.read_row_group(group, columns=C.FEATURES)
            matrix = np.stack([table[c].to_numpy() for c in C.FEATURES], axis=1)
            for start in range(0, len(matrix), C.BATCH):
                yield matrix[start : start + C.BATCH]


def worker(approach: str, path: str, rows: int) -> dict:
    C.warm_cache(Path(path))
    start_rss = C.rss()
    if approach == "read":
        import pyarrow.dataset as pads

        started = C.now()
        count = 0
        for batch in pads.dataset(C.files(Path(path)), format="parquet").to_batches(columns=C.COLUMNS):
            columns = [batch.column(i).to_numpy() for i in range(batch.num_columns)]
            count += len(columns[0])
        seconds = C.now() - started
    elif approach in ("stats", "stats_all"):
        import streamfeed as sf
        from streamfeed.stats import compute_stats

        options = {"quantiles": "kll", "distinct": "all"} if approach == "stats_all" else {}
        started = C.now()
        stats = compute_stats(sf.read_parquet(path, columns=C.COLUMNS), **options)
        seconds = C.now() - started
        count = stats.rows
    else:
        import keras

        started = C.now()
        layer = keras.layers.Normalization()
        if approach == "adapt_tf":
            import tensorflow as tf

            data = tf.data.Dataset.from_generator(
                lambda: _batches(path), output_signature=tf.TensorSpec((None, C.N_FEATURES), tf.float32)
            )
            layer.adapt(data.prefetch(4))
        else:
            layer.adapt(_batches(path))
        seconds = C.now() - started
        count = rows
    return {
        "rows": count,
        "seconds": seconds,
        "rows_per_s": count / seconds,
        "peak_rss": C.peak_rss(),
        "start_rss": start_rss,
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="smoke run: 262 144 rows")
    p.add_argument("--rows", type=int, default=None)
    p.add_argument("--data-dir", type=Path, default=C.DEFAULT_DATA_DIR)
    p.add_argument("--only", default=",".join(APPROACHES), help="comma-separated approaches")
    p.add_argument(
        "--repeat", type=int, default=1, help="run the approaches this many times, interleaved; keep each one's fastest"
    )
    p.add_argument("--out", type=Path, default=None, help="also write the results as JSON")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--approach", help=argparse.SUPPRESS)
    p.add_argument("--path", help=argparse.SUPPRESS)
    args = p.parse_args()
    rows = args.rows or (262_144 if args.quick else 2_000_000)
    if args.worker:
        C.emit(worker(args.approach, args.path, rows))
        return 0
    path = C.generate(args.data_dir, rows)
    results = {}
    for _ in range(max(1, args.repeat)):  # interleaved: a noisy neighbour hits every approach alike
        for approach in args.only.split(","):
            label, backend = APPROACHES[approach]
            env = {"KERAS_BACKEND": backend} if backend else {}
            result = C.run_worker(
                SCRIPT, ["--approach", approach, "--path", str(path), "--rows", str(rows)], timeout=1800, env=env
            )
            print(f"  {approach}: {result}", file=sys.stderr, flush=True)
            if approach not in results or result.get("rows_per_s", 0) > results[approach].get("rows_per_s", 0):
                results[approach] = result
    stats = results.get("stats", {}).get("rows_per_s")
    table = []
    for approach, result in results.items():
        speed = result.get("rows_per_s")
        ratio = "-" if not (speed and stats) else f"{stats / speed:.2f}x"
        table.append(
            [
                APPROACHES[approach][0],
                C.rate(speed),
                f"{result.get('seconds', 0):.2f}",
                C.mib(result.get("peak_rss")),
                ratio if approach != "stats" else "1.00x",
            ]
        )
    print(f"{rows:,} rows x {C.N_FEATURES + 1} float32 columns, Parquet ({path})")
    print(C.table(["approach", "rows/s", "s", "peak RSS MiB", "stats speed / this"], table))
    read = results.get("read", {}).get("rows_per_s")
    adapts = [results.get(a, {}).get("rows_per_s") for a in ("adapt_tf", "adapt_jax")]
    if stats and read:
        print(f"target stats >= 0.8x read limit: {stats / read:.2f}x {'met' if stats / read >= 0.8 else 'NOT met'}")
    for name, speed in zip(("adapt_tf", "adapt_jax"), adapts):
        if stats and speed:
            print(f"target stats >= 5x {name}: {stats / speed:.1f}x {'met' if stats / speed >= 5 else 'NOT met'}")
    if args.out:
        args.out.write_text(json.dumps({"rows": rows, "results": results}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
