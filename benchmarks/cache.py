"""Conversion cache benchmark: an epoch without the cache, writing it, and reading it.

Three cases (``--parquet``, ``--images`` for the others), each a full pass in batches:

* CSV (default): the file of ``benchmarks/csv_read.py`` (32 float32 features +
  a float32 label; 2 M rows, ``--quick`` 200 k), batches of 1024;
* Parquet (``--parquet``): the files of ``benchmarks/tabular.py`` (the same
  columns, 2 M rows in 4 files, row groups of 65 536), batches of 1024;
* images (``--images``): the JPEG class folders of ``benchmarks/images.py``
  (10 000 JPEGs of 256x256, ``--quick`` 1 000; its generator), decoded and
  resized to 224x224 ``uint8``, batches of 64.

One process measures in turn:

* ``plain``: the source, epoch 1 (no cache);
* ``writing``: ``.cache(dir)``, epoch 1 (reads the source and writes the
  Parquet cache as it goes: CSV parts by the cache's writer thread, decoded
  images by the read threads);
* ``writing_inline`` (``--inline``): the same with the writer thread off
  (``cache.writer.WRITE_QUEUE = 0``: each read thread writes its own part, as
  before the writer thread; for images the same as ``writing``);
* ``reading``: the cached dataset's epoch 2 (reads the cache only);
* ``content_hash``: ``cache.content_digest`` of the source, the one pass
  that ``verify="content"`` adds per run (files warm in the page cache, as
  the epochs read them), reported against ``writing`` (the first epoch of
  a cached dataset: the rule for the default is under 5 %) and ``reading``.

Each is run ``--repeat`` times (default 3), alternated, and the median
run of each is reported (every run's rows/s is listed too). It reports
rows/s and CPU seconds per million rows, the first epoch's slowdown
(``writing`` vs ``plain``, medians; target <= 15 %; also the median of
each repeat's slowdown against its own plain run, and the extra CPU)
and the later epochs' speed-up
(``reading`` vs ``plain``), with ``uptime`` at start and end. The cache
goes to a fresh temporary directory beside the data and is deleted after
the run. Opening (the CSV row-count scan, the image listing) is not timed.

Usage::

    python benchmarks/cache.py                    # 2 M CSV rows
    python benchmarks/cache.py --parquet          # 2 M Parquet rows
    python benchmarks/cache.py --images           # 10 000 JPEGs
    python benchmarks/cache.py --quick --inline   # 200 k rows, with the inline-writes variant
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import _common as C
import csv_read as CSV  # its data generator: the same 2 M-row file
import images as IMAGES  # its generator: the same JPEG folders

IMAGE_SIDE, IMAGE_OUT, IMAGE_BATCH = 256, 224, 64


def _uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()


def _epoch(ds, epoch: int, column: str) -> dict:
    """One timed pass: rows, wall seconds, process CPU seconds."""
    rows = 0
    wall, cpu = time.perf_counter(), time.process_time()
    with ds.iter_epoch(epoch) as stream:
        for batch in stream:
            rows += len(batch[column])
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    return {
        "rows": rows,
        "seconds": round(wall, 3),
        "rows_per_s": round(rows / wall),
        "cpu_s_per_m_rows": round(cpu / rows * 1e6, 3),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="200 k rows (1 000 images) instead of 2 M (10 000)")
    parser.add_argument("--images", action="store_true", help="the JPEG folders instead of the CSV")
    parser.add_argument("--parquet", action="store_true", help="the Parquet files instead of the CSV")
    parser.add_argument("--inline", action="store_true", help="also measure writing without the writer thread")
    parser.add_argument("--data-dir", type=Path, default=C.DEFAULT_DATA_DIR)
    parser.add_argument("--repeat", type=int, default=3, help="alternated runs of each; the median of each")
    args = parser.parse_args(argv)
    load_start = _uptime()

    from streamfeed.cache import content_digest
    from streamfeed.cache import parts as cache_parts
    from streamfeed.cache import writer as caching

    if args.images:
        from streamfeed.readers import read_images

        rows = 1_000 if args.quick else 10_000
        path = IMAGES.generate(args.data_dir / "images", rows, IMAGE_SIDE)
        C.warm_files(IMAGES.list_files(path)[0])
        column, data_bytes = "label", sum(p.stat().st_size for p in path.glob("*/*.jpg"))

        def open_data():
            return read_images(path, size=(IMAGE_OUT, IMAGE_OUT)).batch(IMAGE_BATCH)

    elif args.parquet:
        from streamfeed.readers import read_parquet

        rows = 200_000 if args.quick else 2_000_000
        path = C.generate(args.data_dir, rows)
        C.warm_files(C.files(path))
        column, data_bytes = C.LABEL, sum(Path(name).stat().st_size for name in C.files(path))

        def open_data():
            return read_parquet(path).batch(C.BATCH)

    else:
        from streamfeed.readers import read_csv

        rows = 200_000 if args.quick else 2_000_000
        path = CSV.generate(args.data_dir, rows)
        C.warm_files([str(path)])
        column, data_bytes = C.LABEL, path.stat().st_size

        def open_data():
            return read_csv(path, count_cache=False).batch(C.BATCH)

    def cached_pass(scratch: str, inline: bool) -> tuple[dict, object]:
        queue = caching.WRITE_QUEUE
        caching.WRITE_QUEUE = 0 if inline else queue
        try:
            cached = open_data().cache(scratch)
            return _epoch(cached, 0, column), cached
        finally:
            caching.WRITE_QUEUE = queue

    def hash_pass() -> dict:
        source = open_data().source  # opening (the CSV's row-count scan) not timed, as for the epochs
        wall = time.perf_counter()
        content_digest(source)
        return {"seconds": round(time.perf_counter() - wall, 3)}

    names = ["plain", "writing"] + (["writing_inline"] if args.inline else []) + ["reading", "content_hash"]
    runs: dict[str, list[dict]] = {name: [] for name in names}
    cache_bytes = 0
    for _ in range(args.repeat):  # alternated, so that a load change on the shared machine hits all of them
        runs["plain"].append(_epoch(open_data(), 0, column))
        runs["content_hash"].append(hash_pass())
        for inline in [False, True] if args.inline else [False]:
            scratch = tempfile.mkdtemp(prefix="cache-bench-", dir=args.data_dir)
            try:
                result, cached = cached_pass(scratch, inline)
                runs["writing_inline" if inline else "writing"].append(result)
                published = Path(cached.source.store.published)
                cache_bytes = sum(part.stat().st_size for part in published.glob("part-*"))
                if not inline:
                    runs["reading"].append(_epoch(cached, 1, column))
                    assert cached.source.store.source_reads == len(cached.source.fragments)  # epoch 2: the cache
            finally:
                shutil.rmtree(scratch, ignore_errors=True)
    # The median run of each (by wall time): the machine is shared, and one quiet or busy run is no measure.
    results = {name: sorted(found, key=lambda run: run["seconds"])[len(found) // 2] for name, found in runs.items()}
    speed = {name: results[name]["rows_per_s"] for name in names if name != "content_hash"}
    hashing = results["content_hash"]["seconds"]
    summary = {
        "case": "images" if args.images else "parquet" if args.parquet else "csv",
        "rows": rows,
        "repeat": args.repeat,
        "part_compression": cache_parts.PART_COMPRESSION,
        "write_queue": caching.WRITE_QUEUE,
        "data_bytes": data_bytes,
        "cache_bytes": cache_bytes,
        "median": results,
        "all_rows_per_s": {name: [run["rows_per_s"] for run in found] for name, found in runs.items() if name in speed},
        # verify="content": the hash pass per run, against the first cached epoch and a later run's epoch
        "content_hash_seconds_all": [run["seconds"] for run in runs["content_hash"]],
        "content_hash_vs_writing_pct": round(100 * hashing / results["writing"]["seconds"], 1),
        "content_hash_vs_reading_pct": round(100 * hashing / results["reading"]["seconds"], 1),
        "first_epoch_slowdown_pct": round(100 * (speed["plain"] / speed["writing"] - 1), 1),
        "target_slowdown_pct": 15,
        # Two views less moved by the shared machine's load: the median over the repeats of each run's
        # slowdown against the plain run just before it, and the extra CPU per row (median runs).
        "first_epoch_slowdown_paired_pct": round(
            100 * (statistics.median(w["seconds"] / p["seconds"] for p, w in zip(runs["plain"], runs["writing"])) - 1),
            1,
        ),
        "first_epoch_extra_cpu_pct": round(
            100 * (results["writing"]["cpu_s_per_m_rows"] / results["plain"]["cpu_s_per_m_rows"] - 1), 1
        ),
        "later_epoch_speedup": round(speed["reading"] / speed["plain"], 2),
        "uptime_start": load_start,
        "uptime_end": _uptime(),
    }
    if args.inline:
        summary["first_epoch_slowdown_inline_pct"] = round(100 * (speed["plain"] / speed["writing_inline"] - 1), 1)
    print(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
