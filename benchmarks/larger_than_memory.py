"""Larger than memory: disk bytes read, rows/s, RSS and CPU of an epoch on data that cannot stay cached.

Issue 28 measured, on 32 GB of Parquet on a 24 GiB machine, that a shuffled
epoch read 1.19x the file bytes from disk while an unshuffled one read 1.00x.
This benchmark makes the same situation without writing 30 GB: every
approach runs in a fresh process inside a cgroup v1 memory controller whose
limit (default 1.5 GiB) is smaller than the data, so the page cache the
process may use (it is charged to the cgroup) cannot hold the files. The
page cache is dropped before each cold run (root only). Where no cgroup can
be made, the data must exceed the machine's RAM (``--size``) for the disk
figures to mean anything; the output says which case it measured.

For each approach it reports rows/s, disk bytes read (``/proc/self/io``
``read_bytes`` of the reading process) divided by the file bytes, peak RSS
and the cgroup's peak charge (RSS + page cache) against its limit, and CPU
seconds per million rows. ``--warm`` adds warm-cache runs (no cgroup,
files read once before): what a change costs when the data is cached.
``--baseline-src DIR`` runs every approach a second time with
``PYTHONPATH=DIR`` (e.g. an export of the previous commit's ``src``), so a
change and the code before it are measured in the same run.

Usage::

    python benchmarks/larger_than_memory.py                      # 4 GB of Parquet, 1.5 GiB cgroup
    python benchmarks/larger_than_memory.py --size 8 --cgroup-limit 2048 --warm
    git archive HEAD~1 src | tar -x -C /tmp/old && \\
        python benchmarks/larger_than_memory.py --warm --baseline-src /tmp/old/src

Data is generated once into ``~/.cache/streamfeed/bench/`` (``--data-dir``),
never the repository: ``_common.generate``'s files (32 float32 features, a
float32 label and an int64 id; row groups of 65 536 rows, 8 per file). Every
approach reads every column, so the bytes it needs are the files' column
chunks (the footers are a few KiB).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time
from pathlib import Path

import _common as C

SCRIPT = str(Path(__file__).resolve())
APPROACHES = {
    "streamfeed": "streamfeed, unshuffled",
    "streamfeed_shuffled": "streamfeed, shuffle(seed=1)",
    "fit_streamfeed": "fit, streamfeed shuffle(seed=1)",
    "fit_memory": "fit, in memory (the model's rate)",
}
FIT_APPROACHES = ("fit_streamfeed", "fit_memory")  # one epoch of the same Dense(16)->Dense(1), TensorFlow
IN_MEMORY = ("fit_memory",)  # never in the cgroup: its data is in RAM by definition (the first --memory-rows rows)
BYTES_PER_ROW = 33 * 4 + 8  # f0..f31 and y as float32, id as int64 (no dictionary, snappy barely compresses)
CGROUP_ROOT = Path("/sys/fs/cgroup/memory")


# =============================================================== the worker
def _io() -> dict[str, int]:
    with open("/proc/self/io") as handle:
        return {key: int(value) for key, value in (line.split(": ") for line in handle)}


def worker(args: argparse.Namespace) -> None:
    """One approach in this (fresh) process: joins the cgroup first, then reads one epoch."""
    if args.cgroup:
        (Path(args.cgroup) / "cgroup.procs").write_text(str(os.getpid()))
    import streamfeed as sf

    # a warm-up read of a small file pages in the libraries (the cache was dropped) before measuring
    for _ in sf.read_parquet(C.files(Path(args.warmup))).batch(C.BATCH):
        pass
    if args.approach in FIT_APPROACHES:
        fit_worker(args, sf)
        return
    io_before, cpu_before, started = _io(), resource.getrusage(resource.RUSAGE_SELF), C.now()
    ds = sf.read_parquet(C.files(Path(args.path)))
    if args.approach == "streamfeed_shuffled":
        ds = ds.shuffle(seed=1)
    ds = ds.batch(C.BATCH).with_options(memory_limit=int(args.memory_limit))
    opened = C.now()
    rows = 0
    for batch in ds:
        rows += len(batch[C.LABEL])
    ended = C.now()
    io_after, cpu_after = _io(), resource.getrusage(resource.RUSAGE_SELF)
    cpu = (cpu_after.ru_utime - cpu_before.ru_utime) + (cpu_after.ru_stime - cpu_before.ru_stime)
    C.emit(
        {
            "rows": rows,
            "open_s": opened - started,
            "epoch_s": ended - opened,
            "rows_per_s": rows / (ended - opened),
            "read_bytes": io_after["read_bytes"] - io_before["read_bytes"],
            "rchar": io_after["rchar"] - io_before["rchar"],
            "cpu_s": cpu,
            "major_faults": cpu_after.ru_majflt - cpu_before.ru_majflt,  # pages of mapped files (libraries) read
            "peak_rss": C.peak_rss(),
            "streamfeed": sf.__file__,
        }
    )


def _model():  # the model of benchmarks/tabular.py: small, so the pipeline's cost shows
    import keras

    keras.utils.set_random_seed(0)
    model = keras.Sequential(
        [keras.Input((C.N_FEATURES,)), keras.layers.Dense(16, activation="relu"), keras.layers.Dense(1)]
    )
    model.compile(optimizer="adam", loss="mse", steps_per_execution=32)
    return model


def _cpu(before, after) -> float:
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def fit_worker(args: argparse.Namespace, sf) -> None:
    """One epoch of ``fit``: over the whole data through ``to_keras`` (shuffled), or the model's in-memory rate."""
    if args.approach == "fit_memory":
        C.emit(_fit_in_memory(args, sf))
        return
    ds = sf.read_parquet(C.files(Path(args.path))).shuffle(seed=1).batch(C.BATCH)
    train = ds.with_options(memory_limit=int(args.memory_limit)).to_keras(label=C.LABEL, features=C.FEATURES)
    model = _model()
    io_before, cpu_before, started = _io(), resource.getrusage(resource.RUSAGE_SELF), C.now()
    history = model.fit(train, epochs=1, verbose=0)
    seconds = C.now() - started
    io_after = _io()
    rows = len(train) * C.BATCH
    C.emit(
        {
            "rows": rows,
            "open_s": 0.0,
            "epoch_s": seconds,
            "rows_per_s": rows / seconds,
            "read_bytes": io_after["read_bytes"] - io_before["read_bytes"],
            "rchar": io_after["rchar"] - io_before["rchar"],
            "cpu_s": _cpu(cpu_before, resource.getrusage(resource.RUSAGE_SELF)),
            "major_faults": resource.getrusage(resource.RUSAGE_SELF).ru_majflt - cpu_before.ru_majflt,
            "peak_rss": C.peak_rss(),
            "loss": float(history.history["loss"][-1]),
            "streamfeed": sf.__file__,
        }
    )


def _fit_in_memory(args: argparse.Namespace, sf) -> dict:
    """The model's ceiling as ``benchmarks/tabular.py`` takes it: the faster of NumPy and a ``PyDataset`` over memory.

    On the first ``--memory-rows`` rows, loaded before the clock starts.
    """
    import numpy as np

    from tabular import make_pydatasets

    parts, rows = [], 0
    for batch in sf.read_parquet(C.files(Path(args.path)), columns=C.FEATURES + [C.LABEL]).batch(65_536):
        parts.append(batch)
        rows += len(batch[C.LABEL])
        if rows >= args.memory_rows:
            break
    x = np.column_stack([np.concatenate([part[name] for part in parts]) for name in C.FEATURES])
    y = np.concatenate([part[C.LABEL] for part in parts])
    import keras

    class SecondEpoch(keras.callbacks.Callback):
        """Times the second epoch: the model's steady rate, its first epoch's tracing left out (4 M rows are
        a few seconds, where tracing is one; the streamed fit's 28 M rows make it small there)."""

        def on_epoch_begin(self, epoch, logs=None):
            self.cpu, self.started = resource.getrusage(resource.RUSAGE_SELF), C.now()

        def on_epoch_end(self, epoch, logs=None):
            self.seconds, self.cpu_s = C.now() - self.started, _cpu(self.cpu, resource.getrusage(resource.RUSAGE_SELF))

    _, memory_pydataset = make_pydatasets()
    best: dict = {}
    for ceiling, inputs, options in (
        ("numpy", (x, y), {"batch_size": C.BATCH, "shuffle": True}),
        ("pydataset", (memory_pydataset(x, y),), {}),
    ):
        timer = SecondEpoch()
        _model().fit(*inputs, epochs=2, verbose=0, callbacks=[timer], **options)
        if not best or timer.seconds < best["epoch_s"]:
            best = {"epoch_s": timer.seconds, "cpu_s": timer.cpu_s, "ceiling": f"{ceiling}, second epoch"}
    return {
        "rows": len(y),
        "open_s": 0.0,
        "rows_per_s": len(y) / best["epoch_s"],
        "read_bytes": 0,
        "rchar": 0,
        "major_faults": 0,
        "peak_rss": C.peak_rss(),
        "streamfeed": sf.__file__,
        **best,
    }


# =============================================================== the cgroup
def make_cgroup(name: str, limit: int) -> Path | None:
    """A fresh memory cgroup limited to ``limit`` bytes, or None where cgroup v1 is not writable."""
    path = CGROUP_ROOT / name
    try:
        if path.exists():
            path.rmdir()
        path.mkdir()
        (path / "memory.limit_in_bytes").write_text(str(limit))
        return path
    except OSError:
        return None


def remove_cgroup(path: Path | None) -> None:
    if path is None:
        return
    for _ in range(50):  # the worker's exit is seen a moment after it returns
        try:
            path.rmdir()
            return
        except OSError:
            time.sleep(0.1)
    print(f"warning: could not remove cgroup {path}", file=sys.stderr)


def cgroup_peak(path: Path) -> int:
    return int((path / "memory.max_usage_in_bytes").read_text())


def drop_caches() -> bool:
    """Drops the page cache (root only): every cold run starts from disk."""
    os.sync()
    try:
        Path("/proc/sys/vm/drop_caches").write_text("1")
        return True
    except OSError:
        return False


# =============================================================== the driver
def run(args: argparse.Namespace, approach: str, path: Path, cold: bool, src: str | None) -> dict:
    cold = cold and approach not in IN_MEMORY
    cgroup = make_cgroup(f"streamfeed-bench-{os.getpid()}", args.cgroup_limit * 2**20) if cold else None
    env = {"PYTHONPATH": src} if src else {}
    if approach in FIT_APPROACHES:
        env["KERAS_BACKEND"] = "tensorflow"
    try:
        dropped = drop_caches() if cold else False
        if not cold:
            C.warm_cache(path)
        worker_args = ["--approach", approach, "--path", str(path), "--memory-limit", str(args.memory_limit)]
        worker_args += ["--memory-rows", str(args.memory_rows)]
        worker_args += ["--warmup", str(C.generate(args.data_dir, C.ROW_GROUP))]
        if cgroup is not None:
            worker_args += ["--cgroup", str(cgroup)]
        result = C.run_worker(SCRIPT, worker_args, timeout=args.timeout, env=env)
        result["cgroup_peak"] = cgroup_peak(cgroup) if cgroup is not None and "error" not in result else None
    finally:
        remove_cgroup(cgroup)
    result.update(approach=approach, cold=cold, cgroup=cgroup is not None, dropped=dropped, src=src or "this tree")
    return result


def report(results: list[dict], file_bytes: int, chunk_bytes: int, limit: int) -> str:
    headers = ["approach", "cache", "code", "rows/s", "read/file", "read/chunks", "peak RSS MiB", "cgroup peak MiB"]
    headers += ["CPU s/Mrow"]
    rows = []
    for r in results:
        name = APPROACHES[r["approach"]]
        cache = "cold, cgroup" if r["cold"] and r["cgroup"] else ("cold" if r["cold"] else "warm")
        cache = "in RAM" if r["approach"] in IN_MEMORY else cache
        if "error" in r:
            rows.append([name, cache, r["src"], r["error"][:60]] + [""] * 5)
            continue
        rows.append(
            [
                name,
                cache,
                r["src"],
                C.rate(r["rows_per_s"]),
                f"{r['read_bytes'] / file_bytes:.3f}",
                f"{r['read_bytes'] / chunk_bytes:.3f}",
                C.mib(r["peak_rss"]),
                f"{C.mib(r['cgroup_peak'])} / {C.mib(limit)}" if r["cgroup_peak"] else "-",
                f"{r['cpu_s'] / r['rows'] * 1e6:.2f}",
            ]
        )
    return C.table(headers, rows)


def column_chunk_bytes(names: list[str]) -> int:
    """The bytes of every column chunk of the files: what reading every column needs from disk."""
    import pyarrow.parquet as pq

    total = 0
    for name in names:
        metadata = pq.ParquetFile(name).metadata
        for group in range(metadata.num_row_groups):
            total += sum(
                metadata.row_group(group).column(i).total_compressed_size
                for i in range(metadata.row_group(group).num_columns)
            )
    return total


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--size", type=float, default=4.0, help="GB of Parquet to generate (default 4)")
    p.add_argument("--cgroup-limit", type=int, default=1536, help="MiB of the memory cgroup (default 1536)")
    p.add_argument(
        "--memory-limit", default=str(512 * 2**20), help="the pipeline's memory_limit in bytes (default 512 MiB)"
    )
    p.add_argument("--approaches", default=",".join(APPROACHES), help="comma-separated, among " + ", ".join(APPROACHES))
    p.add_argument(
        "--memory-rows", type=int, default=4_000_000, help="rows fit_memory holds in RAM (default 4 000 000)"
    )
    p.add_argument("--warm", action="store_true", help="also run each approach with a warm cache (no cgroup)")
    p.add_argument("--warm-only", action="store_true", help="only the warm-cache runs (what a change costs in cache)")
    p.add_argument("--baseline-src", help="also run every approach with PYTHONPATH=this (the code before a change)")
    p.add_argument("--repeat", type=int, default=1, help="runs of each measurement")
    p.add_argument("--data-dir", type=Path, default=C.DEFAULT_DATA_DIR)
    p.add_argument("--timeout", type=float, default=3600.0)
    p.add_argument("--out", type=Path, help="write the results as JSON here")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--approach", help=argparse.SUPPRESS)
    p.add_argument("--path", help=argparse.SUPPRESS)
    p.add_argument("--cgroup", help=argparse.SUPPRESS)
    p.add_argument("--warmup", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.worker:
        worker(args)
        return 0

    print(f"# {C.command_line()}")
    print(f"# load average at start {os.getloadavg()[0]:.2f} (numbers are noisy if other processes use the CPU)")
    per_file = C.ROWS_PER_FILE * BYTES_PER_ROW
    rows = max(1, round(args.size * 1e9 / per_file)) * C.ROWS_PER_FILE
    path = C.generate(args.data_dir, rows)
    names = C.files(path)
    file_bytes = sum(os.path.getsize(name) for name in names)
    chunk_bytes = column_chunk_bytes(names)
    limit = args.cgroup_limit * 2**20
    probe = make_cgroup(f"streamfeed-bench-{os.getpid()}", limit)
    remove_cgroup(probe)
    ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    print(f"# data: {rows:,} rows, {len(names)} files, {file_bytes / 1e9:.2f} GB ({path})")
    if probe is not None:
        print(
            f"# cold runs: in a memory cgroup of {C.mib(limit)} MiB (page cache included), "
            f"{file_bytes / limit:.1f}x smaller than the data; page cache dropped before each"
        )
    else:
        print(
            f"# no memory cgroup could be made: the data must exceed RAM ({ram / 2**30:.1f} GiB) "
            f"for disk figures to mean anything; here it is {file_bytes / ram:.2f}x RAM"
        )
    sources = [None] + ([args.baseline_src] if args.baseline_src else [])
    results = []
    for _ in range(args.repeat):
        for cold in (False,) if args.warm_only else (True, False) if args.warm else (True,):
            for approach in args.approaches.split(","):
                for src in sources:
                    result = run(args, approach, path, cold, src)
                    results.append(result)
                    print(f"  {approach} {'cold' if cold else 'warm'} {src or 'this tree'}: {json.dumps(result)}")
    print()
    print(report(results, file_bytes, chunk_bytes, limit))
    print(f"\nread/file: disk bytes read (/proc/self/io read_bytes) / {file_bytes:,} file bytes; read/chunks: ")
    print(f"  / {chunk_bytes:,} column-chunk bytes (every column is read). CPU: user + system of the process.")
    fits = {r["approach"]: r["rows_per_s"] for r in results if "error" not in r and r["approach"] in FIT_APPROACHES}
    if len(fits) == 2:
        print(
            f"fit through streamfeed, shuffled, data {file_bytes / limit:.1f}x the cgroup: "
            f"{fits['fit_streamfeed'] / fits['fit_memory']:.2f}x the model's in-memory rate (last runs)"
        )
    print(f"# load average at end {os.getloadavg()[0]:.2f}")
    if args.out:
        args.out.write_text(json.dumps({"file_bytes": file_bytes, "chunk_bytes": chunk_bytes, "results": results}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
