"""Conversion cache benchmark: a CSV epoch without the cache, writing it, and reading it.

On the CSV of ``benchmarks/csv.py`` (32 float32 features + a float32 label;
2 M rows, ``--quick`` 200 k; its generator, data cached outside the
repository), one process measures in turn, each a full pass in batches of
1024:

* ``plain``: ``read_csv(path).batch(1024)``, epoch 1 (no cache);
* ``writing``: ``read_csv(path).cache(dir).batch(1024)``, epoch 1 (reads the
  CSV and writes the Parquet cache as it goes);
* ``reading``: the same dataset's epoch 2 (reads the cache only).

Each is run ``--repeat`` times (default 3), alternated, and the median
run of each is reported (every run's rows/s is listed too). It reports
rows/s and CPU seconds per million rows, the first
epoch's slowdown (``writing`` vs ``plain``; target <= 15 %) and the later
epochs' speed-up (``reading`` vs ``plain``), with ``uptime`` at start and
end. The cache goes to a fresh temporary directory beside the data and is
deleted after the run. Opening (the CSV row-count scan) is not timed.

Usage::

    python benchmarks/cache.py            # 2 M rows
    python benchmarks/cache.py --quick    # 200 k rows
"""

from __future__ import annotations

import sys
from pathlib import Path

# Keep this directory off sys.path: benchmarks/csv.py would shadow ``import csv``.
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]

import argparse  # noqa: E402
import importlib.util  # noqa: E402
import json  # noqa: E402
import shutil  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402


def _load(name: str, file: str):
    spec = importlib.util.spec_from_file_location(name, _HERE / file)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


C = _load("streamfeed_bench_common", "_common.py")
CSV = _load("streamfeed_bench_csv", "csv.py")  # its data generator: the same 2 M-row file


def _uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()


def _epoch(ds, epoch: int) -> dict:
    """One timed pass: rows, wall seconds, process CPU seconds."""
    rows = 0
    wall, cpu = time.perf_counter(), time.process_time()
    with ds.iter_epoch(epoch) as stream:
        for batch in stream:
            rows += len(batch[C.LABEL])
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    return {
        "rows": rows,
        "seconds": round(wall, 3),
        "rows_per_s": round(rows / wall),
        "cpu_s_per_m_rows": round(cpu / rows * 1e6, 3),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="200 k rows instead of 2 M")
    parser.add_argument("--data-dir", type=Path, default=C.DEFAULT_DATA_DIR)
    parser.add_argument("--repeat", type=int, default=3, help="alternated runs of the three; the median of each")
    args = parser.parse_args(argv)
    rows = 200_000 if args.quick else 2_000_000
    load_start = _uptime()
    path = CSV.generate(args.data_dir, rows)
    C.warm_files([str(path)])

    from streamfeed.readers import read_csv

    runs: dict[str, list[dict]] = {"plain": [], "writing": [], "reading": []}
    for _ in range(args.repeat):  # alternated, so that a load change on the shared machine hits all three
        runs["plain"].append(_epoch(read_csv(path, count_cache=False).batch(C.BATCH), 0))
        scratch = tempfile.mkdtemp(prefix="cache-bench-", dir=args.data_dir)
        try:
            cached = read_csv(path, count_cache=False).cache(scratch).batch(C.BATCH)
            runs["writing"].append(_epoch(cached, 0))
            published = Path(cached.source.store.published)
            cache_bytes = sum(part.stat().st_size for part in published.glob("part-*.parquet"))
            runs["reading"].append(_epoch(cached, 1))
            assert cached.source.store.source_reads == len(cached.source.fragments)  # epoch 2: the cache only
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
    # The median run of each (by wall time): the machine is shared, and one quiet or busy run is no measure.
    results = {name: sorted(found, key=lambda run: run["seconds"])[len(found) // 2] for name, found in runs.items()}
    plain, writing, reading = (results[name]["rows_per_s"] for name in ("plain", "writing", "reading"))
    summary = {
        "rows": rows,
        "repeat": args.repeat,
        "csv_bytes": path.stat().st_size,
        "cache_bytes": cache_bytes,
        "median": results,
        "all_rows_per_s": {name: [run["rows_per_s"] for run in found] for name, found in runs.items()},
        "first_epoch_slowdown_pct": round(100 * (plain / writing - 1), 1),
        "target_slowdown_pct": 15,
        "later_epoch_speedup": round(reading / plain, 2),
        "uptime_start": load_start,
        "uptime_end": _uptime(),
    }
    print(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
