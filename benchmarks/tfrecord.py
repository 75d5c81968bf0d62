"""TFRecord benchmark: streamfeed ``read_tfrecord`` vs. tf.data ``parse_example``, side by side.

One run measures, on the same generated file (200 k ``tf.train.Example``
records of 34 features: ``f0..f31`` one float32 each, an int64 ``label`` in
0..9 and an int64 ``id``; written by ``tf.io.TFRecordWriter``, so the map
entries come in protobuf's own order), one full pass in batches of 1024,
each approach in a fresh process, all 34 features decoded to NumPy:

* ``tf_data``: ``TFRecordDataset -> batch(1024) -> map(tf.io.parse_example,
  AUTOTUNE) -> prefetch``, every batch converted with ``.numpy()``;
* ``tf_framing``: ``TFRecordDataset -> batch(1024)``, no parsing: what
  reading and checking the framing costs tf.data (a lower bound, diagnostic);
* ``streamfeed``: ``read_tfrecord(path).batch(1024)`` in a process that has
  imported TensorFlow (``KERAS_BACKEND=tensorflow``), default options;
* ``streamfeed_tf_free``: the same with ``KERAS_BACKEND=jax``, TensorFlow
  never imported (the worker checks): what JAX and torch users get;
* ``streamfeed_general``: the TensorFlow-free general parser only (the
  record-by-record-layout-free lockstep walk; the parser before the fast
  path), diagnostic.

streamfeed's time includes opening the file (the framing scan that gives
exact counts; it is cached per process, and every worker is a new process);
``open s`` shows that part. Every approach reports the sum of ``id`` and of
``f0`` so that the table shows they read the same records.

The approaches run ``--rounds`` times, alternating (A B C ..., A B C ...),
because the machine is shared: the table shows the median and best records/s,
the median CPU seconds per million records (process CPU time, all threads)
and the peak RSS (``ru_maxrss``; "Δ" subtracts the RSS after imports).
The load average is printed at the start and the end.

Target (issue 10): streamfeed >= 1.0x tf_data.

Usage::

    python benchmarks/tfrecord.py                  # 200 k records, 3 rounds
    python benchmarks/tfrecord.py --rounds 1 --only tf_data streamfeed_tf_free

Data is generated once and cached outside the repository
(``~/.cache/streamfeed/bench/``, or ``--data-dir``).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

import _common as C

SCRIPT = str(Path(__file__).resolve())
N_FEATURES, BATCH = C.N_FEATURES, C.BATCH
FEATURES = [f"f{i}" for i in range(N_FEATURES)]
APPROACHES = {
    "tf_data": "tf.data TFRecordDataset -> batch -> map(parse_example) -> prefetch",
    "tf_framing": "tf.data TFRecordDataset -> batch, no parsing (diagnostic)",
    "streamfeed": "read_tfrecord().batch(1024), TensorFlow imported, defaults",
    "streamfeed_tf_free": "read_tfrecord().batch(1024), KERAS_BACKEND=jax, no TensorFlow",
    "streamfeed_general": "TF-free general parser only (diagnostic)",
    "streamfeed_baseline": "read_tfrecord().batch(1024) from --baseline-src, KERAS_BACKEND=jax",
}
ENV = {
    "streamfeed": {"KERAS_BACKEND": "tensorflow"},
    "streamfeed_tf_free": {"KERAS_BACKEND": "jax", "JAX_PLATFORMS": "cpu"},
    "streamfeed_general": {"KERAS_BACKEND": "jax", "JAX_PLATFORMS": "cpu"},
    "streamfeed_baseline": {"KERAS_BACKEND": "jax", "JAX_PLATFORMS": "cpu"},  # + PYTHONPATH=--baseline-src
}
TARGET = 1.0


def generate(data_dir: Path, records: int, seed: int = 0) -> Path:
    """Writes ``records`` Examples with ``tf.io.TFRecordWriter``, cached; returns the path.

    Written by a child process: the workers are started from this process,
    and Linux carries a parent's peak RSS (TensorFlow's, here) into its
    children's ``ru_maxrss``.
    """
    path = Path(data_dir) / f"tfrecord-{records}rec-34f.tfrecord"
    done = path.with_suffix(".done")
    if not (done.exists() and path.exists()):
        subprocess.run([sys.executable, SCRIPT, "--write", str(path), str(records), str(seed)], check=True)
    return path


def write(path: Path, records: int, seed: int) -> None:
    import tensorflow as tf

    done = path.with_suffix(".done")
    path.parent.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    temporary = path.with_suffix(".tmp")
    with tf.io.TFRecordWriter(str(temporary)) as writer:
        for start in range(0, records, 10_000):
            n = min(10_000, records - start)
            x = rng.standard_normal((n, N_FEATURES), dtype=np.float32).tolist()
            labels = rng.integers(0, 10, n).tolist()
            for row in range(n):
                feature = {
                    name: tf.train.Feature(float_list=tf.train.FloatList(value=[value]))
                    for name, value in zip(FEATURES, x[row])
                }
                feature["label"] = tf.train.Feature(int64_list=tf.train.Int64List(value=[labels[row]]))
                feature["id"] = tf.train.Feature(int64_list=tf.train.Int64List(value=[start + row]))
                writer.write(tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString())
    os.replace(temporary, path)
    done.write_text(json.dumps({"records": records, "seed": seed, "writer": "tf.io.TFRecordWriter"}))


# =============================================================== the approaches
class Tally:
    """Records seen and the checksums every approach reports."""

    def __init__(self) -> None:
        self.rows = 0
        self.id_sum = 0
        self.f0_sum = 0.0

    def add(self, columns: dict) -> None:
        self.rows += len(columns["id"])
        self.id_sum += int(columns["id"].sum())
        self.f0_sum += float(columns["f0"].astype(np.float64).sum())


def _tf_spec():
    import tensorflow as tf

    spec = {name: tf.io.FixedLenFeature([], tf.float32) for name in FEATURES}
    spec["label"] = tf.io.FixedLenFeature([], tf.int64)
    spec["id"] = tf.io.FixedLenFeature([], tf.int64)
    return spec


def setup_tf_data(path: str):
    import tensorflow as tf

    spec = _tf_spec()

    def run(tally: Tally) -> float | None:
        dataset = tf.data.TFRecordDataset(path).batch(BATCH)
        dataset = dataset.map(lambda s: tf.io.parse_example(s, spec), num_parallel_calls=tf.data.AUTOTUNE)
        for batch in dataset.prefetch(tf.data.AUTOTUNE):
            tally.add({name: value.numpy() for name, value in batch.items()})
        return None

    return run


def setup_tf_framing(path: str):
    import tensorflow as tf

    def run(tally: Tally) -> float | None:
        for batch in tf.data.TFRecordDataset(path).batch(BATCH).prefetch(tf.data.AUTOTUNE):
            tally.rows += int(batch.shape[0])
        tally.id_sum = tally.f0_sum = None  # type: ignore[assignment]  # nothing decoded
        return None

    return run


def _streamfeed(path: str, parser: str | None):
    from streamfeed.readers import read_tfrecord

    def run(tally: Tally) -> float:
        started = C.now()
        if parser is None:
            ds = read_tfrecord(path).batch(BATCH)
        else:  # a TFRecordSource option for tests and benchmarks that read_tfrecord does not pass on
            from streamfeed.pipeline import Dataset
            from streamfeed.sources.tfrecord.source import TFRecordSource

            source = TFRecordSource(path, parser=parser)
            ds = Dataset(source, report=source.report).batch(BATCH)
        opened = C.now() - started
        with ds.iter_epoch(0) as it:
            for batch in it:
                tally.add(batch)
        return opened

    return run


def setup_streamfeed(path: str):
    import tensorflow as tf  # noqa: F401  # a TensorFlow user's process

    return _streamfeed(path, None)


def setup_streamfeed_tf_free(path: str):
    return _streamfeed(path, None)


def setup_streamfeed_general(path: str):
    return _streamfeed(path, "general")


SETUPS = {
    "tf_data": setup_tf_data,
    "tf_framing": setup_tf_framing,
    "streamfeed": setup_streamfeed,
    "streamfeed_tf_free": setup_streamfeed_tf_free,
    "streamfeed_general": setup_streamfeed_general,
    "streamfeed_baseline": setup_streamfeed_tf_free,
}


def worker(approach: str, path: str) -> dict:
    run = SETUPS[approach](path)
    rss_ready = C.rss()
    tally = Tally()
    started, cpu = C.now(), time.process_time()
    opened = run(tally)
    seconds, cpu = C.now() - started, time.process_time() - cpu
    return {
        "rows": tally.rows,
        "seconds": seconds,
        "open_s": opened,
        "cpu_s": cpu,
        "rows_per_s": tally.rows / seconds,
        "cpu_s_per_mrow": cpu / tally.rows * 1e6,
        "peak_rss": C.peak_rss(),
        "rss_ready": rss_ready,
        "id_sum": tally.id_sum,
        "f0_sum": tally.f0_sum,
        "tensorflow_imported": "tensorflow" in sys.modules,
        "streamfeed_from": getattr(sys.modules.get("streamfeed"), "__file__", None),
    }


def _commit() -> str | None:
    root = Path(__file__).resolve().parent.parent
    try:
        head = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--", "src"], capture_output=True, text=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None
    return head + (" + uncommitted changes in src/" if dirty else "")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=3, help="alternating runs of every approach")
    parser.add_argument("--data-dir", type=Path, default=C.DEFAULT_DATA_DIR)
    parser.add_argument("--only", nargs="*", choices=list(APPROACHES), default=None)
    parser.add_argument("--timeout", type=float, default=900)
    parser.add_argument("--out", type=Path, default=None, help="also write the results as JSON")
    parser.add_argument(
        "--baseline-src",
        type=Path,
        default=None,
        help="a src/ directory of another streamfeed version (git archive REV src | tar -x -C DIR): "
        "adds streamfeed_baseline, run with PYTHONPATH=DIR/src",
    )
    parser.add_argument("--worker", nargs=2, metavar=("APPROACH", "PATH"), help=argparse.SUPPRESS)
    parser.add_argument("--write", nargs=3, metavar=("PATH", "RECORDS", "SEED"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.write:
        write(Path(args.write[0]), int(args.write[1]), int(args.write[2]))
        return 0
    if args.worker:
        C.emit(worker(*args.worker))
        return 0
    print("command: " + C.command_line(), flush=True)
    path = generate(args.data_dir, args.records)
    size = path.stat().st_size
    C.warm_files([path])  # warm the page cache for every approach alike
    load_start = os.getloadavg()
    print(
        f"data: {path} ({args.records:,} records x 34 features, {size / 2**20:,.0f} MiB); python "
        f"{platform.python_version()}, numpy {np.__version__}, {os.cpu_count()} CPUs; streamfeed at {_commit()}",
        flush=True,
    )
    print(f"load average at start: {' '.join(f'{x:.2f}' for x in load_start)}", flush=True)
    approaches = args.only or [a for a in APPROACHES if a != "streamfeed_baseline" or args.baseline_src]
    if "streamfeed_baseline" in approaches:
        if args.baseline_src is None:
            parser.error("streamfeed_baseline needs --baseline-src")
        ENV["streamfeed_baseline"]["PYTHONPATH"] = str(args.baseline_src.resolve())
        print(f"baseline: streamfeed from {args.baseline_src.resolve()}", flush=True)
    runs: dict[str, list[dict]] = {approach: [] for approach in approaches}
    for round_number in range(args.rounds):
        for approach in approaches:
            result = C.run_worker(SCRIPT, [approach, str(path)], args.timeout, env=ENV.get(approach))
            result["loadavg"] = os.getloadavg()[0]
            runs[approach].append(result)
            shown = result.get("error") or (
                f"{result['rows_per_s']:,.0f} records/s, {result['cpu_s_per_mrow']:.2f} CPU s/M, "
                f"peak RSS {C.mib(result['peak_rss'])} MiB"
            )
            print(f"  round {round_number + 1} {approach:20s} {shown} (load {result['loadavg']:.2f})", flush=True)
            if "rows" in result and result["rows"] != args.records:
                print(f"    WARNING: {result['rows']} records read, {args.records} expected")
            if approach == "streamfeed_tf_free" and result.get("tensorflow_imported"):
                print("    WARNING: the TensorFlow-free run imported TensorFlow")
            if approach == "streamfeed_baseline" and not str(result.get("streamfeed_from")).startswith(
                str(args.baseline_src.resolve())
            ):
                print(f"    WARNING: the baseline run imported streamfeed from {result.get('streamfeed_from')}")

    summary: dict[str, dict] = {}
    for approach, results in runs.items():
        good = [r for r in results if "error" not in r]
        if not good:
            summary[approach] = {"error": results[0]["error"]}
            continue
        summary[approach] = {
            "median": statistics.median(r["rows_per_s"] for r in good),
            "best": max(r["rows_per_s"] for r in good),
            "cpu": statistics.median(r["cpu_s_per_mrow"] for r in good),
            "open": statistics.median(r["open_s"] for r in good) if good[0]["open_s"] is not None else None,
            "peak": max(r["peak_rss"] for r in good),
            "delta": max(r["peak_rss"] - r["rss_ready"] for r in good),
            "sums": (good[0]["id_sum"], good[0]["f0_sum"]),
        }
    reference = summary.get("tf_data", {}).get("median")
    headers = ["approach", "records/s (median)", "best", "x tf_data", "CPU s/M rec", "open s", "peak RSS MiB", "Δ MiB"]
    rows = []
    for approach, s in summary.items():
        if "error" in s:
            rows.append([approach, "error: " + s["error"][:60], "", "", "", "", "", ""])
            continue
        rows.append(
            [
                approach,
                C.rate(s["median"]),
                C.rate(s["best"]),
                f"{s['median'] / reference:.2f}" if reference else "-",
                f"{s['cpu']:.2f}",
                "-" if s["open"] is None else f"{s['open']:.2f}",
                C.mib(s["peak"]),
                C.mib(s["delta"]),
            ]
        )
    load_end = os.getloadavg()
    print()
    print(C.table(headers, rows))
    print()
    for approach in approaches:
        print(f"  {approach:20s} {APPROACHES[approach]}")
    sums = {s["sums"] for a, s in summary.items() if "sums" in s and s["sums"][0] is not None}
    print(f"checksums (sum of id, sum of f0): {'all equal' if len(sums) == 1 else sorted(sums)}")
    for approach in ("streamfeed", "streamfeed_tf_free"):
        ours = summary.get(approach, {}).get("median")
        if ours and reference:
            ratio = ours / reference
            print(f"{approach} / tf_data: {ratio:.2f}x (target >= {TARGET}x) {'MET' if ratio >= TARGET else 'MISSED'}")
    print(f"load average at end: {' '.join(f'{x:.2f}' for x in load_end)}")
    if args.out:
        args.out.write_text(
            json.dumps(
                {"records": args.records, "bytes": size, "loadavg": [load_start, load_end], "runs": runs}, indent=2
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
