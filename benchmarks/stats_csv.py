"""CSV statistics benchmark: one ``compute_stats`` pass against one iteration epoch and pyarrow's reader.

The pass reads what an epoch reads and adds the statistics' own work
(moments, quantile samples, distinct counts, vocabularies), so its target
is the iteration's speed. Side by side on one generated click-log CSV
(a timestamp, an integer user id, a 1 000-value string category, two
floats and a 0/1 label), each approach in a fresh process, interleaved:

* ``read``: ``pyarrow.csv.open_csv`` streaming every column to NumPy;
* ``iterate``: one unbatched ``iter_epoch`` of ``streamfeed.read_csv``;
* ``stats``: ``streamfeed.compute_stats`` of the same, with its defaults.

Printed: rows/s, CPU seconds per million rows, peak RSS, and each
approach's CPU against ``iterate``'s. ``--also SRC`` adds ``compute_stats``
from another source tree (``PYTHONPATH=SRC``: main's, or one with a change
to the pass) to the same interleaved run, and every statistics row says
whether its JSON (less the source record) is the same as this tree's.
Usage::

    python benchmarks/stats_csv.py              # 2.5 M rows (about 150 MB)
    python benchmarks/stats_csv.py --quick      # 400 000 rows
    python benchmarks/stats_csv.py --also /work/main/src   # against main's implementation
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import sys
from pathlib import Path

import numpy as np

import _common as C

SCRIPT = str(Path(__file__).resolve())
APPROACHES = {
    "read": "pyarrow open_csv -> NumPy",
    "iterate": "streamfeed iter_epoch (unbatched)",
    "stats": "streamfeed compute_stats (defaults)",
}


def generate(data_dir: Path, rows: int) -> Path:
    """The click log, cached under ``data_dir`` (written to a temporary name, then renamed)."""
    import pyarrow as pa
    import pyarrow.csv as pacsv

    path = Path(data_dir) / f"clicks-{rows}rows.csv"
    if path.exists():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    table = pa.table(
        {
            "ts": pa.array(np.arange(rows, dtype=np.int64) * 1000 + 1_700_000_000_000, pa.timestamp("ms")),
            "user": rng.integers(0, 100_000, rows),
            "category": pa.array([f"cat{i}" for i in rng.integers(0, 1000, rows)]),
            "price": rng.random(rows).astype(np.float32),
            "dwell": rng.random(rows).astype(np.float32) * 100,
            "label": rng.integers(0, 2, rows),
        }
    )
    partial = path.with_name(path.name + f".{os.getpid()}.partial")
    pacsv.write_csv(table, partial)
    partial.rename(path)
    return path


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def worker(approach: str, path: str) -> dict:
    C.warm_files([path])
    if approach == "read":
        import pyarrow.csv as pacsv

        started, cpu = C.now(), _cpu()
        count = 0
        for batch in pacsv.open_csv(path):
            columns = [batch.column(i).to_numpy(zero_copy_only=False) for i in range(batch.num_columns)]
            count += len(columns[0])
    else:
        import streamfeed as sf

        data = sf.read_csv(path)
        data.num_rows()  # the open (record boundaries, counts) is the same for both; not timed
        started, cpu = C.now(), _cpu()
        if approach == "iterate":
            count = sum(len(chunk["user"]) for chunk in data.iter_epoch(0))
        else:
            stats = sf.compute_stats(data)
            count = stats.rows
    seconds, cpu_seconds = C.now() - started, _cpu() - cpu
    result = {
        "rows": count,
        "seconds": seconds,
        "cpu_seconds": cpu_seconds,
        "rows_per_s": count / seconds,
        "peak_rss": C.peak_rss(),
    }
    if approach == "stats":  # after the timing: what the statistics are, to compare trees
        record = stats.to_dict()
        record.pop("source")
        result["digest"] = hashlib.sha256(json.dumps(record, sort_keys=True, default=str).encode()).hexdigest()
    return result


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="smoke run: 400 000 rows")
    p.add_argument("--rows", type=int, default=None)
    p.add_argument("--data-dir", type=Path, default=C.DEFAULT_DATA_DIR)
    p.add_argument("--repeat", type=int, default=3, help="interleaved runs; each approach's least CPU is kept")
    p.add_argument("--out", type=Path, default=None, help="also write the results as JSON")
    p.add_argument(
        "--also",
        action="append",
        default=[],
        metavar="SRC",
        help="also run compute_stats from this source tree (PYTHONPATH=SRC); repeatable",
    )
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--approach", help=argparse.SUPPRESS)
    p.add_argument("--path", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        C.emit(worker(args.approach, args.path))
        return 0
    rows = args.rows or (400_000 if args.quick else 2_500_000)
    path = generate(args.data_dir, rows)
    runs = {approach: (approach, label, None) for approach, label in APPROACHES.items()}
    for src in args.also:
        runs[f"stats@{src}"] = ("stats", f"compute_stats from {src}", {"PYTHONPATH": str(Path(src).resolve())})
    load_start = os.getloadavg()[0]
    results: dict[str, dict] = {}
    for _ in range(max(1, args.repeat)):  # interleaved: a noisy neighbour hits every approach alike
        for key, (approach, _, env) in runs.items():
            result = C.run_worker(SCRIPT, ["--approach", approach, "--path", str(path)], timeout=1800, env=env)
            print(f"  {key}: {result}", file=sys.stderr, flush=True)
            best = results.get(key)
            if "error" not in result and (best is None or result["cpu_seconds"] < best["cpu_seconds"]):
                results[key] = result
    base = results.get("iterate", {}).get("cpu_seconds")
    digest = results.get("stats", {}).get("digest")
    table = []
    for key, result in results.items():
        per_million = result["cpu_seconds"] / result["rows"] * 1e6
        same = "-" if "digest" not in result else "yes" if result["digest"] == digest else "NO"
        table.append(
            [
                runs[key][1],
                C.rate(result["rows_per_s"]),
                f"{per_million:.2f}",
                C.mib(result["peak_rss"]),
                f"{result['cpu_seconds'] / base:.2f}x" if base else "-",
                same,
            ]
        )
    print(f"{rows:,} rows x 6 columns, CSV ({path}, {path.stat().st_size / 2**20:.0f} MiB)")
    print(f"command: {C.command_line()}; load average {load_start:.2f} at start, {os.getloadavg()[0]:.2f} at end")
    headers = ["approach", "rows/s", "CPU s/Mrow", "peak RSS MiB", "CPU / iterate", "same stats JSON"]
    print(C.table(headers, table))
    if args.out:
        args.out.write_text(json.dumps({"rows": rows, "results": results}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
