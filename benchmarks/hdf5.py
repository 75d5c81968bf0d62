"""HDF5 benchmark: streamfeed iteration vs. the h5py slicing limit, side by side.

On one generated file (default 2 M rows x 32 float32 features + a float32
label, chunked along rows; ``--quick``: 200 k rows), each approach runs in a
fresh process and reports rows/s and peak RSS:

* ``h5py_slices``: the limit, ``ds[i:i+chunk]`` contiguous reads in a loop
  (features and label), chunk = the dataset's chunk rows;
* ``streamfeed``: ``read_hdf5(...).batch(1024)``, read threads (default);
* ``streamfeed_reads``: the fragment reads of that epoch alone, in the same
  read pool (``OrderedReader``, no batching, no prefetch thread): what the
  reads cost; the gap to ``streamfeed`` is the per-batch path;
* ``streamfeed_p2``: ``read_hdf5(..., processes=2).batch(1024)`` (worker
  processes + shared memory), to see whether processes pay for HDF5 decoding.

Each approach also reports its process CPU seconds per million rows (on
shared cores the pipeline's CPU is taken from the model; for
``processes=2`` the workers' CPU is not counted).

Both an uncompressed and a gzip-compressed file are measured (the gzip one
is where decoding, serialised by h5py's lock in threads, could gain from
processes). Data is cached under ``~/.cache/streamfeed/bench/`` (never in
the repository).

Usage::

    python benchmarks/hdf5.py            # 2 M rows
    python benchmarks/hdf5.py --quick    # 200 k rows, smoke run
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import _common as C

SCRIPT = str(Path(__file__).resolve())
N_FEATURES, CHUNK_ROWS, BATCH = C.N_FEATURES, 65_536, C.BATCH
APPROACHES = {
    "h5py_slices": "h5py ds[i:i+chunk] loop (limit)",
    "streamfeed": "streamfeed read_hdf5, threads",
    "streamfeed_reads": "  its fragment reads alone (read pool)",
    "streamfeed_p2": "streamfeed read_hdf5, processes=2",
}
TARGET = 0.9  # issue 11: uncompressed HDF5 >= 0.9x the h5py limit


def generate(rows: int, compression: str | None) -> Path:
    import h5py
    import numpy as np

    path = C.DEFAULT_DATA_DIR / f"hdf5-{rows}rows-c{CHUNK_ROWS}-{compression or 'none'}.h5"
    if path.exists():
        return path
    C.DEFAULT_DATA_DIR.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".partial")
    rng = np.random.default_rng(0)
    weights = rng.standard_normal(N_FEATURES).astype(np.float32)
    with h5py.File(partial, "w") as f:
        x = f.create_dataset(
            "x", (rows, N_FEATURES), np.float32, chunks=(CHUNK_ROWS, N_FEATURES), compression=compression
        )
        y = f.create_dataset("y", (rows,), np.float32, chunks=(CHUNK_ROWS,), compression=compression)
        for start in range(0, rows, CHUNK_ROWS):
            n = min(CHUNK_ROWS, rows - start)
            block = rng.standard_normal((n, N_FEATURES), dtype=np.float32)
            x[start : start + n] = block
            y[start : start + n] = block @ weights
    partial.rename(path)  # a half-written file is never used
    return path


def worker(approach: str, path: str) -> dict:
    import h5py  # imports are not timed: streamfeed's (pyarrow) would dominate a quick run

    if approach != "h5py_slices":
        from streamfeed.readers import read_hdf5
    started, cpu_started = C.now(), time.process_time()
    rows = 0
    if approach == "h5py_slices":
        with h5py.File(path, "r") as f:
            x, y = f["x"], f["y"]
            step = x.chunks[0]
            for i in range(0, x.shape[0], step):
                _, ys = x[i : i + step], y[i : i + step]
                rows += len(ys)
    elif approach == "streamfeed_reads":
        import threading

        from streamfeed.runtime.reader import OrderedReader

        ds = read_hdf5(path, columns={"x": "/x", "y": "/y"})
        spec = ds.batch(BATCH).epoch_spec(0)
        reader = OrderedReader(
            spec.fragments,
            [index for unit in spec.plan.units for index in unit],
            row_ops=spec.row_ops,
            threads=spec.layout.read_threads,
            ahead=spec.layout.read_ahead,
            report=spec.report,
            stop=threading.Event(),
        )
        try:
            for chunk in reader:
                rows += len(chunk["y"]) if chunk is not None else 0
        finally:
            reader.close()
    else:
        ds = read_hdf5(path, columns={"x": "/x", "y": "/y"}, processes=2 if approach == "streamfeed_p2" else None)
        with ds.batch(BATCH).iter_epoch(0) as it:
            for batch in it:
                rows += len(batch["y"])
        ds.source.close()
    seconds, cpu = C.now() - started, time.process_time() - cpu_started
    return {
        "rows": rows,
        "seconds": seconds,
        "rows_per_s": rows / seconds,
        "cpu_s_per_m_rows": cpu / rows * 1e6,
        "peak_rss": C.peak_rss(),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="200 k rows instead of 2 M")
    parser.add_argument("--rows", type=int, default=None)
    parser.add_argument("--repeat", type=int, default=2, help="runs per approach (best is kept)")
    parser.add_argument("--out", type=Path, default=None, help="write results as JSON")
    parser.add_argument("--worker", nargs=2, metavar=("APPROACH", "PATH"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        C.emit(worker(*args.worker))
        return 0
    rows = args.rows or (200_000 if args.quick else 2_000_000)
    print("command:", C.command_line())
    results = {}
    for compression in (None, "gzip"):
        path = generate(rows, compression)
        C.warm_files([path])  # warm the page cache for every approach alike
        label = compression or "uncompressed"
        results[label] = {}
        print(
            f"\n{label}: {path} ({path.stat().st_size / 2**20:,.0f} MiB, "
            f"{rows:,} rows x {N_FEATURES} float32 + label, chunks of {CHUNK_ROWS} rows)"
        )
        print(f"{'approach':40s} {'rows/s':>12s} {'vs limit':>9s} {'CPU s/M rows':>13s} {'peak RSS MiB':>13s}")
        for approach, title in APPROACHES.items():
            runs = [C.run_worker(SCRIPT, [approach, str(path)], timeout=1800) for _ in range(args.repeat)]
            good = [r for r in runs if "error" not in r]
            best = max(good, key=lambda r: r["rows_per_s"]) if good else runs[0]
            results[label][approach] = best
            if "error" in best:
                print(f"{title:40s} ERROR {best['error']}")
                continue
            limit = results[label]["h5py_slices"].get("rows_per_s")
            ratio = best["rows_per_s"] / limit if limit else float("nan")
            print(
                f"{title:40s} {best['rows_per_s']:12,.0f} {ratio:8.2f}x {best['cpu_s_per_m_rows']:13.3f} "
                f"{best['peak_rss'] / 2**20:13,.0f}"
            )
        ratio = results[label]["streamfeed"].get("rows_per_s", 0) / results[label]["h5py_slices"].get("rows_per_s", 1)
        print(
            f"target streamfeed >= {TARGET}x the h5py limit: {'met' if ratio >= TARGET else 'NOT met'} ({ratio:.2f}x)"
        )
    if args.out:
        args.out.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
