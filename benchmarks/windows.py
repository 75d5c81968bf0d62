"""Windows over a stream (issue 24, item 2): streamfeed's ``windows`` vs Keras' and tf.data's.

    python benchmarks/windows.py                       # 10 M rows for streamfeed, the first 200 k for the others
    python benchmarks/windows.py --rows 2000000 --in-memory-rows 500000 --out windows.json

Data (generated once under ``--data-dir``, never committed): one float32
series ``price`` of N rows in 100 tickers of equal length, written by
pyarrow with row groups of 65 536 rows. Every approach serves windows of
``--length`` (64) rows, stride 1, with the next row's price as target, in
batches of 1 024, shuffled, each in a fresh process (its own peak RSS):

* ``streamfeed``: ``read_parquet(...).windows(64, targets=..., by="ticker").shuffle(1).batch(1024)``,
  every batch's arrays, over all N rows (streamed: the windows never all in memory);
* ``keras``: ``keras.utils.timeseries_dataset_from_array(array, targets, 64, shuffle=True, seed=1)``
  on the first ``--in-memory-rows`` rows held in memory (one series: it cannot see ``by``), as NumPy;
* ``tf.data``: ``Dataset.window(64, shift=1).flat_map(batch)`` on the same rows (sequential, no
  shuffle: a window has no index), zipped with the targets, batched, as NumPy.

Reported: windows per second, CPU seconds per million windows (the
process's ``process_time``: every thread) and the ratios to streamfeed,
peak RSS. Speed is this file's business only; the tests assert none.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from _common import DEFAULT_DATA_DIR, command_line, emit, mib, peak_rss, run_worker, table  # noqa: E402

ROW_GROUP = 65_536
TICKERS = 100
BATCH = 1024


def data_file(data_dir: Path, rows: int) -> Path:
    """The series of ``rows`` rows, written once."""
    path = data_dir / f"windows-{rows}.parquet"
    if path.exists():
        return path
    import pyarrow as pa
    import pyarrow.parquet as pq

    data_dir.mkdir(parents=True, exist_ok=True)
    t = np.arange(rows)
    price = (np.sin(t / 50.0) + np.random.default_rng(0).normal(0, 0.05, rows)).astype(np.float32)
    ticker = (t * TICKERS // rows).astype(np.int32)
    staged = path.with_suffix(".tmp")
    pq.write_table(pa.table({"ticker": ticker, "price": price}), staged, row_group_size=ROW_GROUP)
    os.replace(staged, path)
    return path


def _streamfeed(path: Path, length: int, rows: int) -> tuple[int, float]:
    import streamfeed as sf

    windows = sf.read_parquet(path).windows(length, targets={"next": "price"}, by="ticker", columns=["price"])
    served, checksum = 0, 0.0
    with windows.shuffle(1).batch(BATCH).iter_epoch(0) as stream:
        for batch in stream:
            served += len(batch["price"])
            checksum += float(batch["price"][0, 0]) + float(batch["next"][0])
    return served, checksum


def _in_memory(path: Path, rows: int) -> tuple[np.ndarray, int]:
    import pyarrow.parquet as pq

    return pq.read_table(path, columns=["price"]).column("price").to_numpy()[:rows], rows


def _keras(path: Path, length: int, rows: int) -> tuple[int, float]:
    import keras

    price, _ = _in_memory(path, rows)
    made = keras.utils.timeseries_dataset_from_array(
        price, price[length:], length, batch_size=BATCH, shuffle=True, seed=1
    )
    served, checksum = 0, 0.0
    for x, y in made.as_numpy_iterator():
        served += len(x)
        checksum += float(x[0, 0]) + float(y[0])
    return served, checksum


def _tf_window(path: Path, length: int, rows: int) -> tuple[int, float]:
    import tensorflow as tf

    price, _ = _in_memory(path, rows)
    windows = tf.data.Dataset.from_tensor_slices(price[:-1]).window(length, shift=1, drop_remainder=True)
    windows = windows.flat_map(lambda window: window.batch(length))
    made = tf.data.Dataset.zip((windows, tf.data.Dataset.from_tensor_slices(price[length:]))).batch(BATCH)
    served, checksum = 0, 0.0
    for x, y in made.as_numpy_iterator():
        served += len(x)
        checksum += float(x[0, 0]) + float(y[0])
    return served, checksum


APPROACHES = {"streamfeed": _streamfeed, "keras": _keras, "tf.data": _tf_window}


def worker(name: str, path: Path, length: int, rows: int) -> None:
    if name == "streamfeed":  # imports are not timed: the approach is
        import streamfeed  # noqa: F401
    else:
        import keras  # noqa: F401
        import tensorflow  # noqa: F401
    started_wall, started_cpu, before = time.perf_counter(), time.process_time(), peak_rss()
    served, checksum = APPROACHES[name](path, length, rows)
    wall, cpu = time.perf_counter() - started_wall, time.process_time() - started_cpu
    emit({"windows": served, "wall": wall, "cpu": cpu, "peak_rss": peak_rss(), "rss_before": before, "sum": checksum})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--in-memory-rows", type=int, default=200_000)
    parser.add_argument("--length", type=int, default=64)
    parser.add_argument("--data-dir", type=Path, default=DEFAULT_DATA_DIR)
    parser.add_argument("--approaches", default=",".join(APPROACHES))
    parser.add_argument("--out", type=Path)
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--name", help=argparse.SUPPRESS)
    args = parser.parse_args()
    path = data_file(args.data_dir, args.rows)
    if args.worker:
        rows = args.rows if args.name == "streamfeed" else min(args.in_memory_rows, args.rows)
        worker(args.name, path, args.length, rows)
        return
    common = ["--rows", str(args.rows), "--in-memory-rows", str(args.in_memory_rows), "--length", str(args.length)]
    common += ["--data-dir", str(args.data_dir)]
    results = {}
    for name in args.approaches.split(","):
        results[name] = run_worker(__file__, ["--name", name, *common], timeout=3600)
        print(name, json.dumps(results[name]), flush=True)
    base = results.get("streamfeed", {})
    base_cpu = base["cpu"] / base["windows"] * 1e6 if "cpu" in base else None
    rows = []
    for name, result in results.items():
        if "error" in result:
            rows.append([name, result["error"][:60], "-", "-", "-", "-"])
            continue
        per_million = result["cpu"] / result["windows"] * 1e6
        rows.append(
            [
                name,
                f"{result['windows']:,}",
                f"{result['windows'] / result['wall']:,.0f}",
                f"{per_million:.2f}",
                "-" if base_cpu is None else f"{per_million / base_cpu:.2f}x",
                mib(result["peak_rss"]),
            ]
        )
    report = table(["approach", "windows", "windows/s", "CPU s/M windows", "CPU vs streamfeed", "peak RSS MiB"], rows)
    load = os.getloadavg()
    print(f"\n{command_line()}\nload average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}\n\n{report}")
    if args.out:
        args.out.write_text(json.dumps({"command": command_line(), "load": load, "results": results}, indent=2))


if __name__ == "__main__":
    main()
