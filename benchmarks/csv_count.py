"""Counting a CSV's rows at open against the disk: ``wc -l`` and a raw read of the same file, in one run.

Opening a CSV counts its records (quote-aware, ``sources/csv/scan.py``)
before the first batch; issue 27 asks for the count at the disk's speed.
Side by side on one generated file (the click log of ``stats_csv.py``,
its body repeated to ``--gb`` GB, about 3.7 by default; each line quotes
its string), each approach in a fresh process, interleaved ``--repeat``
times:

* ``read``: the file read whole in 16 MiB ``readinto`` calls (the disk, or
  the page cache, and nothing else);
* ``wc``: ``wc -l`` (a newline count, no quotes);
* ``sequential``: the source's scan fed by one reading thread
  (``scan_stream``, the open's path before issue 27);
* ``parallel``: ``CsvSource`` as it opens the file (``scan_ranges``:
  threads read and index blocks, the count cache off).

``--before-src DIR`` adds ``before``: ``CsvSource`` opened from another
checkout's ``src`` (the code before a change), in the same run.
``--cold`` drops the page cache before each approach (``echo 1 >
/proc/sys/vm/drop_caches``, as root). Printed per approach: the best and
median wall seconds, GB/s, CPU seconds per GB (all threads, and children
for ``wc``), and wall × the raw read's.

Usage::

    python benchmarks/csv_count.py --cold      # as root: cold cache
    python benchmarks/csv_count.py --gb 1      # a smaller file, warm
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
from pathlib import Path

import _common as C
import stats_csv

SCRIPT = str(Path(__file__).resolve())
APPROACHES = {
    "read": "raw read, 16 MiB readinto",
    "wc": "wc -l",
    "sequential": "scan_stream (one read thread)",
    "parallel": "CsvSource open (scan_ranges)",
    "before": "CsvSource open, from --before-src (e.g. main's src)",
}


def generate(data_dir: Path, gb: float) -> tuple[Path, int]:
    """The click log of ``stats_csv.py`` with its body repeated to about ``gb`` GB; its path and data rows."""
    base = stats_csv.generate(data_dir, 2_500_000)
    with open(base, "rb") as handle:
        header, body = handle.readline(), handle.read()
    copies = max(1, round(gb * 1e9 / len(body)))
    rows = copies * body.count(b"\n")
    path = Path(data_dir) / f"clicks-{rows}rows.csv"
    if not path.exists():
        partial = path.with_name(path.name + f".{os.getpid()}.partial")
        with open(partial, "wb") as out:
            out.write(header)
            for _ in range(copies):
                out.write(body)
        partial.rename(path)
    return path, rows


def _cpu(who: int = resource.RUSAGE_SELF) -> float:
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


def worker(approach: str, path: str) -> dict:
    started, cpu, children = C.now(), _cpu(), _cpu(resource.RUSAGE_CHILDREN)
    if approach == "read":
        buffer = bytearray(16 << 20)
        rows = 0
        with open(path, "rb", buffering=0) as handle:
            while handle.readinto(buffer):
                pass
    elif approach == "wc":
        rows = int(subprocess.run(["wc", "-l", path], capture_output=True, text=True, check=True).stdout.split()[0]) - 1
    elif approach == "sequential":
        from streamfeed.sources.csv.scan import Scanner, scan_stream

        scanner = Scanner(quote=ord('"'), delimiter=ord(","), split_bytes=16 << 20, collect=True, longer_than=8 << 20)
        with open(path, "rb") as handle:
            rows = scan_stream(handle.read, scanner).rows
    else:  # parallel, or before (the same call from another src)
        from streamfeed.sources.csv.source import CsvSource

        rows = CsvSource(path, count_cache=False).report.total_rows
    seconds = C.now() - started
    cpu_seconds = _cpu() - cpu + _cpu(resource.RUSAGE_CHILDREN) - children
    return {"rows": rows, "seconds": seconds, "cpu_seconds": cpu_seconds, "peak_rss": C.peak_rss()}


def _drop_caches() -> None:
    subprocess.run(["sync"], check=True)
    Path("/proc/sys/vm/drop_caches").write_text("1\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gb", type=float, default=3.7, help="file size to generate (GB)")
    parser.add_argument("--cold", action="store_true", help="drop the page cache before each approach (root)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--only", nargs="*", choices=sorted(APPROACHES), default=None)
    parser.add_argument("--data-dir", type=Path, default=C.DEFAULT_DATA_DIR)
    parser.add_argument("--before-src", type=Path, default=None, help="a src directory to open the file from too")
    parser.add_argument("--out", type=Path, default=None, help="also write the results as JSON")
    parser.add_argument("--worker", nargs=2, metavar=("APPROACH", "PATH"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        C.emit(worker(*args.worker))
        return 0
    print("command: " + C.command_line(), flush=True)
    path, rows = generate(args.data_dir, args.gb)
    size = path.stat().st_size
    print(f"data: {path} ({size / 1e9:.2f} GB, {rows:,} rows); {'cold' if args.cold else 'warm'} cache", flush=True)
    if not args.cold:
        C.warm_files([path])
    approaches = args.only or [approach for approach in APPROACHES if approach != "before" or args.before_src]
    runs: dict[str, list[dict]] = {approach: [] for approach in approaches}
    for round_ in range(max(1, args.repeat)):
        for approach in approaches:
            if args.cold:
                _drop_caches()
            env = {"PYTHONPATH": str(args.before_src)} if approach == "before" else None
            result = C.run_worker(SCRIPT, [approach, str(path)], 3600, env=env)
            if "error" in result:
                print(f"  {approach}: {result['error']}", flush=True)
                continue
            if approach != "read" and result["rows"] != rows:
                print(f"  WARNING: {approach} counted {result['rows']} rows, {rows} expected", flush=True)
            runs[approach].append(result)
            print(f"  round {round_ + 1} {approach:10s} {result['seconds']:.2f} s", flush=True)
    best = {approach: min(r["seconds"] for r in results) for approach, results in runs.items() if results}
    table = []
    for approach, results in runs.items():
        if not results:
            continue
        seconds = [r["seconds"] for r in results]
        cpu = min(r["cpu_seconds"] for r in results)
        versus = f"{best[approach] / best['read']:.2f}" if "read" in best else "-"
        table.append(
            [
                approach,
                f"{min(seconds):.2f}",
                f"{statistics.median(seconds):.2f}",
                f"{size / 1e9 / min(seconds):.2f}",
                f"{cpu / (size / 1e9):.2f}",
                versus,
                C.mib(max(r["peak_rss"] for r in results)),
                APPROACHES[approach],
            ]
        )
    headers = ["approach", "best s", "median s", "GB/s", "CPU s/GB", "x read", "peak RSS", "what"]
    print("\n" + C.table(headers, table))
    if args.out:
        args.out.write_text(json.dumps({"path": str(path), "bytes": size, "cold": args.cold, "runs": runs}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
