"""Run-time autotuning benchmark: fixed default settings vs ``with_options(autotune=True)``, side by side.

Two sources whose decoding sets the pace, each read for two full epochs
(shuffled in units of 8 fragments, batches of 1024, a consumer that takes
batches as fast as they come), once with the layout's fixed settings and once autotuned:

* ``slow-decode``: Parquet, 400 row groups of 2 000 rows x 8 float32
  columns, with a per-fragment ``map`` that sleeps 20 ms (sleeping releases
  the GIL as I/O and C decoders do: the injected slow decode of the tests);
* ``gzip-csv``: a real slow source, 32 gzip CSV files of 30 000 rows x 16
  float columns (written by pyarrow); decompressing and parsing need the
  CPU, so on few cores more threads are not expected to help (the tuner
  must then not make it slower).

Two epochs per run: the first starts from the layout's settings and
climbs; the second starts from where the first ended (``Autotune`` carries
the settings from epoch to epoch), which is what later epochs of a
training run see.

Each (source, mode) run is a fresh process (``--worker``), so that peak RSS
is the run's own; the modes alternate, ``--repeat`` times (default 3), and
medians are reported with every run's rows/s. Per run: rows/s, CPU seconds
per million rows (the process's), peak RSS, the settings the tuner
converged to and its number of changes; ``uptime`` at start and end. Data
goes to a temporary directory, deleted after the run; opening (the CSV
count pass) is not timed.

Usage::

    flock /tmp/bench.lock python benchmarks/autotune.py [--repeat 3] [--cases slow-decode,gzip-csv]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np

import _common as C

SLOW_SECONDS = 0.02
FRAGMENTS, FRAGMENT_ROWS, PARQUET_COLUMNS = 400, 2_000, 8
CSV_FILES, CSV_ROWS, CSV_COLUMNS = 32, 30_000, 16  # rows per file
EPOCHS = 2
WINDOW = 8  # fragments per shuffled read unit: a steady stream (one 32-fragment unit would come in one burst)
BATCH = 1024
CASES = ("slow-decode", "gzip-csv")
MODES = ("fixed", "autotune")


def slow_decode(chunk: dict) -> dict:
    """The injected slow decode: 20 ms per fragment, without holding the GIL."""
    time.sleep(SLOW_SECONDS)
    return chunk


def _uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()


def generate(directory: Path) -> dict[str, Path]:
    import pyarrow as pa
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq

    rng = np.random.default_rng(0)
    parquet = directory / "slow.parquet"
    rows = FRAGMENTS * FRAGMENT_ROWS
    table = pa.table({f"f{i}": rng.standard_normal(rows, dtype=np.float32) for i in range(PARQUET_COLUMNS)})
    pq.write_table(table, parquet, row_group_size=FRAGMENT_ROWS)
    csv = directory / "csv"
    csv.mkdir()
    for number in range(CSV_FILES):
        table = pa.table({f"c{i}": rng.standard_normal(CSV_ROWS, dtype=np.float32) for i in range(CSV_COLUMNS)})
        with pa.CompressedOutputStream(str(csv / f"part-{number:02d}.csv.gz"), "gzip") as stream:
            pacsv.write_csv(table, stream)
    return {"slow-decode": parquet, "gzip-csv": csv}


def _dataset(case: str, path: str):
    import streamfeed as sf

    if case == "slow-decode":
        dataset = sf.read_parquet(path).map(slow_decode, name="slow_decode")
    else:
        dataset = sf.read_csv(path)
    return dataset.shuffle(seed=0, window=WINDOW).batch(BATCH)


def worker(case: str, mode: str, path: str) -> None:
    dataset = _dataset(case, path)
    fragments = len(dataset.source.fragments)  # opened (CSV: counted) before the clock starts
    if mode == "autotune":
        dataset = dataset.with_options(autotune=True)
    layout = dataset.layout()
    epochs = []
    for epoch in range(EPOCHS):
        rows = 0
        cpu, started = time.process_time(), time.perf_counter()
        with dataset.iter_epoch(epoch) as stream:
            for batch in stream:
                rows += len(next(iter(batch.values())))
            tuning = stream.tuning()
        seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
        epochs.append(
            {
                "rows": rows,
                "seconds": seconds,
                "rows_per_second": rows / seconds,
                "cpu_s_per_m_rows": cpu / rows * 1e6,
                "initial": tuning.initial.to_dict() if tuning else None,
                "final": tuning.final.to_dict() if tuning else None,
                "changes": sum(d.old != d.new for d in tuning.decisions) if tuning else 0,
                "held_by_memory": tuning.held_by_memory if tuning else False,
            }
        )
    C.emit({"epochs": epochs, "peak_rss": C.peak_rss(), "fragments": fragments, "layout": layout.to_dict()})


def _settings(settings: dict) -> str:
    return f"{settings['read_threads']} threads / {settings['read_ahead']} ahead / {settings['prefetch']} queued"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--cases", default=",".join(CASES))
    parser.add_argument("--worker", nargs=3, metavar=("CASE", "MODE", "PATH"))
    args = parser.parse_args()
    if args.worker:
        worker(*args.worker)
        return
    cases = [case for case in args.cases.split(",") if case]
    print(f"command: {C.command_line()}")
    print(f"uptime at start: {_uptime()}  ({os.cpu_count()} cores)")
    directory = Path(tempfile.mkdtemp(prefix="streamfeed-autotune-bench-"))
    try:
        paths = generate(directory)
        results: dict[tuple[str, str], list[dict]] = {(c, m): [] for c in cases for m in MODES}
        for _ in range(args.repeat):
            for case in cases:
                for mode in MODES:
                    result = C.run_worker(__file__, [case, mode, str(paths[case])], timeout=900)
                    if "error" in result:
                        raise SystemExit(f"{case} {mode}: {result['error']}")
                    results[(case, mode)].append(result)
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    rows = []
    for case in cases:
        for epoch in range(EPOCHS):
            medians = {}
            for mode in MODES:
                runs = results[(case, mode)]
                ran = [run["epochs"][epoch] for run in runs]
                median = sorted(ran, key=lambda run: run["rows_per_second"])[len(ran) // 2]
                medians[mode] = median["rows_per_second"]
                if median["final"] is None:
                    settings = _settings(runs[0]["layout"])
                else:
                    settings = f"{_settings(median['initial'])} -> {_settings(median['final'])}"
                    settings += (
                        f" ({median['changes']} changes{', held by memory' if median['held_by_memory'] else ''})"
                    )
                rows.append(
                    [
                        f"{case} ({runs[0]['fragments']} fragments)",
                        f"{epoch + 1}",
                        mode,
                        C.rate(median["rows_per_second"]),
                        "; ".join(C.rate(run["rows_per_second"]) for run in ran),
                        f"{statistics.median(run['cpu_s_per_m_rows'] for run in ran):.2f}",
                        C.mib(statistics.median(run["peak_rss"] for run in runs)),
                        settings,
                    ]
                )
            rows.append([case, f"{epoch + 1}", "ratio", f"{medians['autotune'] / medians['fixed']:.2f}x"] + [""] * 4)
    headers = ["source", "epoch", "mode", "rows/s (median)", "rows/s (all runs)", "CPU s/M rows", "peak RSS MiB"]
    headers.append("settings (median run; autotune: start -> end of the epoch)")
    print(C.table(headers, rows))
    print(f"uptime at end: {_uptime()}")


if __name__ == "__main__":
    main()
