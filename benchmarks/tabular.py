"""Tabular benchmark: streamfeed vs. the pyarrow limit and the usual alternatives.

One run measures, side by side on the same generated Parquet files:

* iteration throughput (rows/s) and peak RSS of the raw pyarrow scanner,
  the "generator approach" (pyarrow -> pandas -> tf.data.from_generator),
  and streamfeed unshuffled and shuffled, each in a fresh process, on 1x
  and 4x the data (RSS growth);
* one-epoch ``model.fit`` throughput on the TensorFlow, JAX and torch
  backends for in-memory NumPy and a ``PyDataset`` serving in-memory slices
  (the model's ceiling is the faster of the two, per backend and
  ``steps_per_execution``), the generator approach (TF only), a hand-written
  row-group ``PyDataset`` and streamfeed's ``to_keras`` unshuffled and
  shuffled, at ``steps_per_execution`` 1 and 32 (torch: 1 only), each in a
  fresh process, with the process CPU seconds per million rows.

Usage::

    python benchmarks/tabular.py --out results.json          # full: 2 M rows (+ 8 M for memory)
    python benchmarks/tabular.py --quick --out quick.json    # smoke run: 200 k rows

Data is generated once and cached outside the repository
(``~/.cache/streamfeed/bench/``, or ``--data-dir``). Internally the script
re-runs itself with ``--worker`` for every measured approach.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import statistics
import sys
import time
from pathlib import Path

import _common as C

SCRIPT = str(Path(__file__).resolve())
ITER_APPROACHES = {
    "scanner": "pyarrow scanner -> NumPy per column (limit)",
    "scanner_b1024": "pyarrow scanner(batch_size=1024) -> NumPy",
    "generator": "pyarrow -> pandas -> tf.data.from_generator",
    "streamfeed": "streamfeed, unshuffled",
    "streamfeed_shuffled": "streamfeed, shuffle(seed=1)",
    "streamfeed_keras_unshuffled": "streamfeed to_keras batches, unshuffled, no model",
    "streamfeed_keras": "streamfeed to_keras batches, shuffled, no model",
}
# Shuffled / unshuffled CPU per row (issue 11's target: <= 1.5): the plain pipeline and the Keras path.
SHUFFLE_CPU_PAIRS = {
    "pipeline": ("streamfeed", "streamfeed_shuffled"),
    "to_keras batches": ("streamfeed_keras_unshuffled", "streamfeed_keras"),
}
FIT_APPROACHES = {
    "numpy": "in-memory NumPy",
    "pydataset_mem": "PyDataset serving in-memory slices",
    "generator": "generator approach (tf.data)",
    "pydataset": "PyDataset reading row groups",
    "streamfeed": "streamfeed to_keras, unshuffled",
    "streamfeed_shuffled": "streamfeed to_keras, shuffle(seed=1)",
}
TARGETS = {"iteration": 0.9, "fit": 0.9, "rss_growth": 0.10, "shuffle_cpu": 1.5}
# The model's ceiling, per backend and steps_per_execution: the faster of these.
CEILING_APPROACHES = ("numpy", "pydataset_mem")
FIT_SPES = (1, 32)
BACKEND_SPES = {"torch": (1,)}  # torch has no compiled multi-step execution worth a row set
BACKEND_SHORT = {"tensorflow": "TF", "jax": "JAX", "torch": "torch"}


# =============================================================== the approaches
def _dataset(path):
    import pyarrow.dataset as pads

    return pads.dataset(C.files(path), format="parquet")


def scanner_batches(path, batch_size=C.BATCH):
    """The limit: scanner record batches -> NumPy per column, served as 1024-row views."""
    import numpy as np

    held: list[dict] = []
    count = 0
    for record_batch in _dataset(path).to_batches(columns=C.COLUMNS):
        columns = {name: record_batch.column(i).to_numpy() for i, name in enumerate(record_batch.schema.names)}
        rows, start = record_batch.num_rows, 0
        if held:  # finish the batch that spans two record batches
            take = min(batch_size - count, rows)
            held.append({k: v[:take] for k, v in columns.items()})
            count += take
            start = take
            if count == batch_size:
                yield {k: np.concatenate([h[k] for h in held]) for k in columns}
                held, count = [], 0
        while start + batch_size <= rows:
            yield {k: v[start : start + batch_size] for k, v in columns.items()}
            start += batch_size
        if start < rows:
            held, count = [{k: v[start:] for k, v in columns.items()}], rows - start
    if held:
        yield {k: np.concatenate([h[k] for h in held]) for k in held[0]}


def scanner_b1024_batches(path, batch_size=C.BATCH):
    """The scanner asked for 1024-row record batches directly (one to_numpy per column per batch)."""
    for record_batch in _dataset(path).to_batches(columns=C.COLUMNS, batch_size=batch_size):
        yield {name: record_batch.column(i).to_numpy() for i, name in enumerate(record_batch.schema.names)}


def generator_tf_dataset(path, batch_size=C.BATCH):
    """The common recipe: pyarrow batches -> to_pandas() -> from_generator -> unbatch/batch."""
    import numpy as np
    import tensorflow as tf

    files = C.files(path)

    def generate():
        import pyarrow.dataset as pads

        for record_batch in pads.dataset(files, format="parquet").to_batches(columns=C.COLUMNS):
            frame = record_batch.to_pandas()
            yield frame[C.FEATURES].to_numpy(np.float32), frame[C.LABEL].to_numpy(np.float32)

    signature = (tf.TensorSpec((None, C.N_FEATURES), tf.float32), tf.TensorSpec((None,), tf.float32))
    return (
        tf.data.Dataset.from_generator(generate, output_signature=signature)
        .unbatch()
        .batch(batch_size)
        .prefetch(tf.data.AUTOTUNE)
    )


def streamfeed_dataset(path, shuffled, batch_size=C.BATCH):
    import streamfeed as sf

    dataset = sf.read_parquet(str(path), columns=C.COLUMNS)
    if shuffled:
        dataset = dataset.shuffle(seed=1)
    return dataset.batch(batch_size)


def load_numpy(path):
    """The whole data set in memory: (rows, 32) float32 features and float32 labels."""
    import numpy as np
    import pyarrow.parquet as pq

    table = pq.read_table(C.files(path), columns=C.COLUMNS)
    x = np.empty((table.num_rows, C.N_FEATURES), dtype=np.float32)
    for i, name in enumerate(C.FEATURES):
        x[:, i] = table[name].to_numpy()
    y = table[C.LABEL].to_numpy()
    del table
    return x, y


def make_pydatasets():
    """PyDataset classes (defined after keras is imported, in the fit worker)."""
    import bisect

    import keras
    import numpy as np
    import pyarrow.parquet as pq

    class RowGroupPyDataset(keras.utils.PyDataset):
        """Batch i = global rows [i*B, (i+1)*B), read with ParquetFile.read_row_group.

        Keeps the last decoded row group (as a stacked float32 matrix), so a
        sequential epoch decodes each row group once.
        """

        def __init__(self, path, batch_size=C.BATCH):
            super().__init__()
            self.batch_size = batch_size
            self.files = [pq.ParquetFile(name) for name in C.files(path)]
            self.groups, self.starts, total = [], [], 0
            for f in self.files:
                for g in range(f.metadata.num_row_groups):
                    self.groups.append((f, g))
                    self.starts.append(total)
                    total += f.metadata.row_group(g).num_rows
            self.rows = total
            self._cached = (-1, None, None)

        def __len__(self):
            return -(-self.rows // self.batch_size)

        def _group(self, index):
            if self._cached[0] != index:
                f, g = self.groups[index]
                table = f.read_row_group(g, columns=C.COLUMNS)
                x = np.empty((table.num_rows, C.N_FEATURES), dtype=np.float32)
                for i, name in enumerate(C.FEATURES):
                    x[:, i] = table[name].to_numpy()
                self._cached = (index, x, table[C.LABEL].to_numpy())
            return self._cached[1], self._cached[2]

        def __getitem__(self, i):
            start, stop = i * self.batch_size, min((i + 1) * self.batch_size, self.rows)
            xs, ys = [], []
            while start < stop:
                index = bisect.bisect_right(self.starts, start) - 1
                x, y = self._group(index)
                offset = start - self.starts[index]
                take = min(stop - start, len(y) - offset)
                xs.append(x[offset : offset + take])
                ys.append(y[offset : offset + take])
                start += take
            if len(xs) == 1:
                return xs[0], ys[0]
            return np.concatenate(xs), np.concatenate(ys)

    class MemoryPyDataset(keras.utils.PyDataset):
        """Slices of in-memory arrays: the cost of Keras's PyDataset path itself."""

        def __init__(self, x, y, batch_size=C.BATCH):
            super().__init__()
            self.x, self.y, self.batch_size = x, y, batch_size

        def __len__(self):
            return -(-len(self.y) // self.batch_size)

        def __getitem__(self, i):
            s = slice(i * self.batch_size, (i + 1) * self.batch_size)
            return self.x[s], self.y[s]

    return RowGroupPyDataset, MemoryPyDataset


# ==================================================================== workers
def iter_worker(args) -> dict:
    """One approach, one data size: warm-up, then whole epochs for >= min_seconds."""
    import numpy as np

    path = Path(args.path)
    base_rss = None
    if args.approach == "generator":
        import tensorflow as tf  # noqa: F401

        dataset = generator_tf_dataset(path)
        base_rss = C.rss()

        def epoch(_e):
            return iter(dataset.as_numpy_iterator())

        def close(_it):
            pass

        def label(batch):
            return batch[1]

    elif args.approach.startswith("scanner"):
        import pyarrow  # noqa: F401

        make = scanner_batches if args.approach == "scanner" else scanner_b1024_batches
        base_rss = C.rss()

        def epoch(_e):
            return make(path)

        def close(it):
            it.close()

        def label(batch):
            return batch[C.LABEL]

    elif args.approach.startswith("streamfeed_keras"):
        dataset = streamfeed_dataset(path, shuffled=args.approach == "streamfeed_keras")
        keras_data = dataset.to_keras(label=C.LABEL)  # the worker runs with KERAS_BACKEND=jax
        base_rss = C.rss()

        def epoch(_e):
            def served():
                keras_data.on_epoch_begin()
                for i in range(len(keras_data)):
                    yield keras_data[i]
                keras_data.on_epoch_end()

            return served()

        def close(it):
            it.close()
            keras_data.close()

        def label(batch):
            return batch[1]

    else:
        dataset = streamfeed_dataset(path, shuffled=args.approach == "streamfeed_shuffled")
        base_rss = C.rss()

        def epoch(e):
            return dataset.iter_epoch(e)

        def close(it):
            it.close()

        def label(batch):
            return batch[C.LABEL]

    # warm-up: a partial epoch (imports, thread pools, first decode)
    it = epoch(0)
    for _, _batch in zip(range(64), it):
        pass
    close(it)

    times, cpus, sums, rows_seen = [], [], [], []
    started = C.now()
    e = 0
    while e < args.max_epochs and (e < args.min_epochs or C.now() - started < args.min_seconds):
        t0, c0 = C.now(), time.process_time()
        it = epoch(e)
        rows, checksum = 0, 0.0
        for batch in it:
            y = label(batch)
            rows += len(y)
            checksum += float(np.sum(y, dtype=np.float64))
        close(it)
        times.append(C.now() - t0)
        cpus.append(time.process_time() - c0)
        sums.append(checksum)
        rows_seen.append(rows)
        e += 1
    rates = [r / t for r, t in zip(rows_seen, times)]
    result = {
        "approach": args.approach,
        "rows": rows_seen[0],
        "epochs": e,
        "rows_per_s": statistics.median(rates),
        "rows_per_s_best": max(rates),
        "rows_per_s_all": rates,
        "cpu_s_per_mrow": statistics.median(c / r * 1e6 for c, r in zip(cpus, rows_seen)),
        "label_sum": sums[0],
        "base_rss": base_rss,
        "peak_rss": C.peak_rss(),
    }
    if args.approach.startswith("streamfeed"):
        keras_path = args.approach.startswith("streamfeed_keras")
        result["layout"] = (keras_data.dataset if keras_path else dataset).layout().to_dict()
    return result


def fit_worker(args) -> dict:
    """One backend, one approach, one steps_per_execution: warm-up fit, then one timed epoch."""
    import keras

    assert keras.backend.backend() == args.backend, keras.backend.backend()
    path = Path(args.path)
    keras.utils.set_random_seed(0)
    RowGroupPyDataset, MemoryPyDataset = make_pydatasets()
    base_rss = C.rss()
    fit_kwargs: dict = {}
    if args.approach == "numpy":
        x, y = load_numpy(path)
        rows = len(y)
        inputs = (x, y)
        fit_kwargs = {"batch_size": C.BATCH}
    elif args.approach == "pydataset_mem":
        x, y = load_numpy(path)
        rows = len(y)
        inputs = (MemoryPyDataset(x, y),)
        fit_kwargs = {"shuffle": False}
    elif args.approach == "generator":
        inputs = (generator_tf_dataset(path),)
        rows = None
    elif args.approach == "pydataset":
        data = RowGroupPyDataset(path)
        rows = data.rows
        inputs = (data,)
        fit_kwargs = {"shuffle": False}  # shuffled indices would decode a row group per batch
    else:
        dataset = streamfeed_dataset(path, shuffled=args.approach == "streamfeed_shuffled")
        rows = dataset.num_rows()
        inputs = (dataset.to_keras(label=C.LABEL),)
    data_rss = C.rss()

    model = keras.Sequential(
        [keras.Input((C.N_FEATURES,)), keras.layers.Dense(16, activation="relu"), keras.layers.Dense(1)]
    )
    model.compile(optimizer="adam", loss="mse", steps_per_execution=args.spe)

    class EpochTimer(keras.callbacks.Callback):
        def __init__(self):
            super().__init__()
            self.seconds = []
            self.cpu = []
            self.threads = []  # per epoch: CPU seconds per thread group (C.ThreadCPU)
            self.waits = []  # per epoch, streamfeed only: the model's wait for data
            self._profile, self._calls = C.ThreadCPU(), 0

        def _waited(self):
            return inputs[0].input_wait_seconds if args.approach.startswith("streamfeed") else 0.0

        def on_epoch_begin(self, epoch, logs=None):
            self._threads0, self._w0 = self._profile.sample(), self._waited()
            self._t0, self._c0 = C.now(), time.process_time()

        def on_train_batch_end(self, batch, logs=None):
            self._calls += 1
            if self._calls % max(1, 50 // args.spe) == 0:  # threads ending between samples keep their last time
                self._profile.sample()

        def on_epoch_end(self, epoch, logs=None):
            self.seconds.append(C.now() - self._t0)
            self.cpu.append(time.process_time() - self._c0)
            self.threads.append(C.ThreadCPU.between(self._threads0, self._profile.sample()))
            self.waits.append(self._waited() - self._w0)

    # Warm-up: a short fit traces/compiles the full-batch step. Then
    # `fit(epochs=E)` (E=3 by default): its first epoch also compiles the
    # shapes of the short last batch (a recompile on JAX) and is reported
    # separately as `first_epoch_s`; the result is the best of the later
    # epochs (the machine is shared: interference only ever slows down).
    warmup_steps = max(64, 2 * args.spe)
    t0 = C.now()
    model.fit(*inputs, epochs=1, steps_per_epoch=warmup_steps, verbose=0, **fit_kwargs)
    warmup_s = C.now() - t0
    timer = EpochTimer()
    t0 = C.now()
    history = model.fit(*inputs, epochs=args.fit_epochs, verbose=0, callbacks=[timer], **fit_kwargs)
    fit_s = C.now() - t0
    steady = timer.seconds[1:] or timer.seconds
    seconds = min(steady)
    best = timer.seconds.index(seconds)
    cpu_s = timer.cpu[best]
    if rows is None:  # the generator approach: count what one epoch holds
        rows = _count_rows(path)
    result = {
        "backend": args.backend,
        "approach": args.approach,
        "spe": args.spe,
        "rows": rows,
        "seconds": seconds,
        "rows_per_s": rows / seconds,
        "warmup_s": warmup_s,
        "first_epoch_s": timer.seconds[0],
        "epoch_s_all": timer.seconds,
        "cpu_s": cpu_s,
        "cpu_s_per_mrow": cpu_s / rows * 1e6,
        "cores_busy": cpu_s / seconds,
        "thread_cpu_s_per_mrow": {group: spent / rows * 1e6 for group, spent in timer.threads[best].items()},
        "fit_call_s": fit_s,
        "epochs": args.fit_epochs,
        "loss": float(history.history["loss"][-1]),
        "base_rss": base_rss,
        "data_rss": data_rss,
        "peak_rss": C.peak_rss(),
    }
    if args.approach.startswith("streamfeed"):
        result["input_wait_s"] = inputs[0].input_wait_seconds  # summed over all fit epochs
        result["input_wait_share"] = timer.waits[best] / seconds  # of the reported epoch
    return result


def _count_rows(path) -> int:
    import pyarrow.parquet as pq

    return sum(pq.ParquetFile(name).metadata.num_rows for name in C.files(path))


# =================================================================== driver
def parse(argv=None):
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--rows", type=int, default=2_000_000, help="rows of the 1x data set (default 2 000 000)")
    p.add_argument("--quick", action="store_true", help="smoke run: 200 000 rows, fewer timed epochs")
    p.add_argument(
        "--backends", default="tensorflow,jax", help="Keras backends for the fit section (comma-separated; '' to skip)"
    )
    p.add_argument(
        "--data-dir", type=Path, default=C.DEFAULT_DATA_DIR, help=f"data cache (default {C.DEFAULT_DATA_DIR})"
    )
    p.add_argument("--out", type=Path, help="write the results as JSON here")
    p.add_argument(
        "--scale", type=int, default=4, help="the memory section's large data set is SCALE x rows (default 4)"
    )
    p.add_argument("--skip-memory", action="store_true", help="skip the SCALE x data set")
    p.add_argument("--sections", default="iteration,fit", help="which sections to run (default: iteration,fit)")
    p.add_argument("--min-seconds", type=float, default=3.0, help="time whole iteration epochs for at least this long")
    p.add_argument("--timeout", type=float, default=1800, help="per-worker timeout, seconds")
    # worker mode (internal)
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--mode", help=argparse.SUPPRESS)
    p.add_argument("--approach", help=argparse.SUPPRESS)
    p.add_argument("--backend", help=argparse.SUPPRESS)
    p.add_argument("--spe", type=int, default=1, help=argparse.SUPPRESS)
    p.add_argument("--path", help=argparse.SUPPRESS)
    p.add_argument("--min-epochs", type=int, default=3, help=argparse.SUPPRESS)
    p.add_argument("--max-epochs", type=int, default=30, help=argparse.SUPPRESS)
    p.add_argument("--fit-epochs", type=int, default=3, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.quick:
        args.rows = 200_000
        args.min_seconds = min(args.min_seconds, 1.0)
    return args


def environment() -> dict:
    import numpy
    import pyarrow

    env = {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpu_count": os.cpu_count(),
        "numpy": numpy.__version__,
        "pyarrow": pyarrow.__version__,
        "pyarrow_cpu_count": pyarrow.cpu_count(),
        "pyarrow_io_threads": pyarrow.io_thread_count(),
        "loadavg_start": os.getloadavg(),
    }
    try:
        import subprocess

        root = Path(__file__).resolve().parent.parent
        head = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--", "src"], capture_output=True, text=True
        ).stdout.strip()
        env["streamfeed_commit"] = head + (" + uncommitted changes in src/" if dirty else "")
    except Exception:
        env["streamfeed_commit"] = None
    try:
        from importlib.metadata import version

        for name in ("keras", "tensorflow-cpu", "jax", "pandas", "streamfeed"):
            try:
                env[name] = version(name)
            except Exception:
                env[name] = None
    except Exception:
        pass
    return env


def log(message: str) -> None:
    print(message, flush=True)


def run_iteration(args, paths: dict[str, Path]) -> list[dict]:
    results = []
    for size, path in paths.items():
        for approach in ITER_APPROACHES:
            C.warm_cache(path)
            result = C.run_worker(
                SCRIPT,
                ["--mode", "iter", "--approach", approach, "--path", str(path), "--min-seconds", str(args.min_seconds)],
                args.timeout,
                env={"KERAS_BACKEND": "jax", "JAX_PLATFORMS": "cpu"},
            )
            result.update(size=size, approach=approach)
            results.append(result)
            if "error" in result:
                log(f"  iter {size:>3} {approach:20s} ERROR {result['error']}")
            else:
                log(
                    f"  iter {size:>3} {approach:20s} {C.rate(result['rows_per_s']):>12} rows/s "
                    f"(best {C.rate(result['rows_per_s_best'])}, {result['epochs']} epochs)  "
                    f"peak RSS {C.mib(result['peak_rss'])} MiB (base {C.mib(result['base_rss'])})"
                )
    return results


def run_fit(
    args,
    path: Path,
    backends: list[str],
    size: str = "1x",
    only: list[str] | None = None,
    spes=FIT_SPES,
    epochs: int = 3,
) -> list[dict]:
    results = []
    for backend in backends:
        for approach in only or FIT_APPROACHES:
            if approach == "generator" and backend != "tensorflow":
                continue
            for spe in [s for s in spes if s in BACKEND_SPES.get(backend, FIT_SPES)]:
                C.warm_cache(path)
                result = C.run_worker(
                    SCRIPT,
                    [
                        "--mode",
                        "fit",
                        "--backend",
                        backend,
                        "--approach",
                        approach,
                        "--spe",
                        str(spe),
                        "--path",
                        str(path),
                        "--fit-epochs",
                        str(epochs),
                    ],
                    args.timeout,
                    env={"KERAS_BACKEND": backend, "JAX_PLATFORMS": "cpu"},
                )
                result.update(size=size, backend=backend, approach=approach, spe=spe)
                results.append(result)
                if "error" in result:
                    log(f"  fit {size:>3} {backend:10s} {approach:20s} spe={spe:<2} ERROR {result['error']}")
                else:
                    log(
                        f"  fit {size:>3} {backend:10s} {approach:20s} spe={spe:<2} "
                        f"{C.rate(result['rows_per_s']):>10} rows/s "
                        f"({result['seconds']:.2f} s, {result['cpu_s_per_mrow']:.2f} CPU s/Mrow, "
                        f"loss {result['loss']:.3f})  peak RSS {C.mib(result['peak_rss'])} MiB"
                    )
    return results


def _find(results, **match):
    for r in results:
        if all(r.get(k) == v for k, v in match.items()) and "error" not in r:
            return r
    return None


def summarize(args, iteration, fits, fit_memory) -> tuple[str, dict]:
    lines, ratios = [], {}
    sizes = sorted({r["size"] for r in iteration}, key=lambda s: int(s.rstrip("x"))) or ["1x"]
    # ------------------------------------------------------------- iteration
    limit = _find(iteration, size="1x", approach="scanner")
    rows = []
    for approach, label in ITER_APPROACHES.items():
        if not any(r["approach"] == approach for r in iteration):
            continue
        row = [label]
        for i, size in enumerate(sizes):
            r = _find(iteration, size=size, approach=approach)
            row += [C.rate(r and r["rows_per_s"])]
            if i == 0:
                row += [C.rate(r and r["rows_per_s_best"]), f"{r['cpu_s_per_mrow']:.3f}" if r else "-"]
            row += [C.mib(r and r["peak_rss"]), C.mib(r and (r["peak_rss"] - r["base_rss"]))]
        one = _find(iteration, size="1x", approach=approach)
        row.append(f"{one['rows_per_s'] / limit['rows_per_s']:.2f}" if one and limit else "-")
        big = _find(iteration, size=sizes[-1], approach=approach) if len(sizes) > 1 else None
        row.append(f"{(big['peak_rss'] / one['peak_rss'] - 1) * 100:+.1f}%" if big and one else "-")
        rows.append(row)
    headers = ["iteration (batches of 1024)"]
    for i, size in enumerate(sizes):
        headers += [f"rows/s {size}"]
        if i == 0:
            headers += [f"best {size}", "CPU s/Mrow"]
        headers += [f"peakRSS {size}", f"Δ{size}"]
    headers += ["vs limit", f"RSS 1x→{sizes[-1]}"]
    lines.append(C.table(headers, rows))
    lines.append(
        "  rows/s = median over whole epochs (>= 3, >= --min-seconds), best = fastest epoch; "
        "CPU s/Mrow = process CPU time\n"
        "  per million rows (all threads); peakRSS in MiB; ΔN = peak RSS minus RSS after imports and setup\n"
        "  (the pipeline's own memory); vs limit = median rows/s / the scanner's median rows/s at 1x."
    )
    sums = {r["label_sum"] for r in iteration if r.get("size") == "1x" and "label_sum" in r}
    if sums:
        spread = max(sums) - min(sums)
        lines.append(
            f"  checksum: sum(y) over one epoch agrees across approaches to {spread:.2e} (rows: "
            f"{sorted({r['rows'] for r in iteration if r.get('size') == '1x' and 'rows' in r})})"
        )
    for approach in ("streamfeed", "streamfeed_shuffled"):
        one = _find(iteration, size="1x", approach=approach)
        if one and limit:
            ratios[f"iteration/{approach}_vs_scanner"] = one["rows_per_s"] / limit["rows_per_s"]
        big = _find(iteration, size=sizes[-1], approach=approach) if len(sizes) > 1 else None
        if one and big:
            ratios[f"rss_growth/{approach}"] = big["peak_rss"] / one["peak_rss"] - 1
            ratios[f"rss_delta_growth/{approach}"] = (big["peak_rss"] - big["base_rss"]) / max(
                1, one["peak_rss"] - one["base_rss"]
            ) - 1
        if one and "layout" in one:
            lines.append(
                f"  {approach}: layout estimate {C.mib(one['layout']['estimated_bytes'])} MiB "
                f"(window {one['layout']['window']}, read-ahead {one['layout']['read_ahead']}, "
                f"prefetch {one['layout']['prefetch']}); "
                f"measured Δ {C.mib(one['peak_rss'] - one['base_rss'])} MiB"
            )
    for name, (plain, shuffled) in SHUFFLE_CPU_PAIRS.items():
        base, other = (_find(iteration, size="1x", approach=a) for a in (plain, shuffled))
        if base and other:
            ratios[f"shuffle_cpu/{name}"] = other["cpu_s_per_mrow"] / base["cpu_s_per_mrow"]
            lines.append(
                f"  shuffled / unshuffled CPU per row, {name}: {ratios[f'shuffle_cpu/{name}']:.2f} "
                f"({other['cpu_s_per_mrow']:.3f} / {base['cpu_s_per_mrow']:.3f}; target <= {TARGETS['shuffle_cpu']})"
            )
    # ------------------------------------------------------------------- fit
    if fits:
        lines.append("")
        backends = list(dict.fromkeys(r["backend"] for r in fits))
        columns = [
            (b, spe) for b in backends for spe in FIT_SPES if any(r["backend"] == b and r["spe"] == spe for r in fits)
        ]
        names = [f"{BACKEND_SHORT.get(b, b)} spe={spe}" for b, spe in columns]
        ceilings = {}
        for backend, spe in columns:
            found = [_find(fits, backend=backend, approach=a, spe=spe) for a in CEILING_APPROACHES]
            found = [r for r in found if r]
            ceilings[backend, spe] = max(found, key=lambda r: r["rows_per_s"]) if found else None
        present = [a for a in FIT_APPROACHES if any(r["approach"] == a for r in fits)]
        cells = {(a, col): _find(fits, backend=col[0], approach=a, spe=col[1]) for a in present for col in columns}

        def grid(title, show):
            rows = [[FIT_APPROACHES[a]] + [show(cells[a, col], col) for col in columns] for a in present]
            return C.table([title] + names, rows)

        def ratio(r, col):
            ceiling = ceilings[col]
            return f"{r['rows_per_s'] / ceiling['rows_per_s']:.2f}" if r and ceiling else "-"

        lines.append(grid("model.fit rows/s", lambda r, col: C.rate(r and r["rows_per_s"])))
        lines.append(
            "  ceiling = "
            + "; ".join(
                f"{name}: {FIT_APPROACHES[c['approach']]}" if c else f"{name}: -"
                for name, c in zip(names, ceilings.values())
            )
        )
        lines.append("")
        lines.append(grid("fit / the model's ceiling", ratio))
        lines.append("")
        lines.append(grid("fit CPU s per M rows", lambda r, col: f"{r['cpu_s_per_mrow']:.2f}" if r else "-"))
        lines.append("")
        lines.append(grid("fit peak RSS MiB", lambda r, col: C.mib(r and r["peak_rss"])))
        lines.append(
            "  rows/s = best of the epochs after the first of fit(epochs=3), after a 64-step warm-up fit;\n"
            "  ceiling = the faster of in-memory NumPy and a PyDataset serving in-memory slices, on the same\n"
            "  backend and steps_per_execution; CPU s per M rows = process CPU time of that epoch (model +\n"
            "  input pipeline, all threads; on 2 shared cores the pipeline's CPU is taken from the model)."
        )
        lines.append("")
        lines.append(profile_table(fits, columns, names, present))
        for a in present:
            if not a.startswith("streamfeed"):
                continue
            for col in columns:
                r, ceiling = cells[a, col], ceilings[col]
                if r and ceiling:
                    ratios[f"fit/{col[0]}/spe{col[1]}/{a}_vs_ceiling"] = r["rows_per_s"] / ceiling["rows_per_s"]
    if fit_memory:
        lines.append("")
        sizes_f = sorted({r["size"] for r in fit_memory}, key=lambda s: int(s.rstrip("x")))
        rows = []
        for approach, label in FIT_APPROACHES.items():
            cells = [_find(fit_memory, approach=approach, size=s) for s in sizes_f]
            if not any(cells):
                continue
            row = [label] + [C.mib(c and c["peak_rss"]) for c in cells]
            row.append(
                f"{(cells[-1]['peak_rss'] / cells[0]['peak_rss'] - 1) * 100:+.1f}%" if cells[0] and cells[-1] else "-"
            )
            rows.append(row)
            if cells[0] and cells[-1] and approach.startswith("streamfeed"):
                ratios[f"rss_growth_fit/{approach}"] = cells[-1]["peak_rss"] / cells[0]["peak_rss"] - 1
        backend = fit_memory[0]["backend"]
        lines.append(C.table([f"fit peak RSS MiB ({backend}, spe=32)"] + sizes_f + ["growth"], rows))
    # ---------------------------------------------------------------- ratios
    lines.append("")
    rows = []
    for key, value in ratios.items():
        kind = key.split("/")[0]
        if kind.startswith("rss"):
            target, ok = f"< {TARGETS['rss_growth']:.0%}", value < TARGETS["rss_growth"]
            shown = f"{value * 100:+.1f}%"
        elif kind == "shuffle_cpu":
            target, ok, shown = f"<= {TARGETS[kind]:.2f}", value <= TARGETS[kind], f"{value:.2f}"
        else:
            target = f">= {TARGETS[kind]:.2f}"
            ok = value >= TARGETS[kind]
            shown = f"{value:.2f}"
        rows.append([key, shown, target, "ok" if ok else "MISS"])
    lines.append(C.table(["ratio", "value", "target", ""], rows))
    return "\n".join(lines), ratios


def profile_table(fits, columns, names, present) -> str:
    """Where each fit cell's CPU went, by thread group (the same epoch as its rows/s): the profile of a miss."""
    groups = [g for _, g in C.THREAD_GROUPS] + [C.NATIVE_GROUP, "other Python threads"]
    found = {g for r in fits for g in r.get("thread_cpu_s_per_mrow", {})}
    shown = [g for g in dict.fromkeys(groups) if g in found]
    rows = []
    for col, name in zip(columns, names):
        for a in present:
            r = _find(fits, backend=col[0], approach=a, spe=col[1])
            if not r or "thread_cpu_s_per_mrow" not in r:
                continue
            wait = r.get("input_wait_share")
            row = [f"{name} {FIT_APPROACHES[a]}", f"{r['cores_busy']:.2f}", "-" if wait is None else f"{wait:.1%}"]
            rows.append(row + [f"{r['thread_cpu_s_per_mrow'].get(g, 0.0):.3f}" for g in shown])
    text = C.table(["fit profile: CPU s per M rows by thread", "cores busy", "model waits"] + shown, rows)
    return text + (
        "\n  cores busy = the epoch's process CPU / its wall time (2 = both cores); model waits = the share of the"
        "\n  epoch the model's thread (TF: TensorFlow's pull of a block) waited for streamfeed's next batch."
    )


def main(argv=None) -> int:
    args = parse(argv)
    if args.worker:
        if args.mode == "iter":
            C.emit(iter_worker(args))
        else:
            C.emit(fit_worker(args))
        return 0
    command = " ".join(shlex.quote(a) for a in [Path(sys.executable).name, *sys.argv])
    log(f"$ {command}")
    env = environment()
    log(
        f"# {env['platform']}, {env['cpu_count']} cores, python {env['python']}, pyarrow {env['pyarrow']}, "
        f"keras {env.get('keras')}, tensorflow {env.get('tensorflow-cpu')}, jax {env.get('jax')}; "
        f"streamfeed at {env.get('streamfeed_commit')}; "
        f"load average at start {env['loadavg_start'][0]:.2f} (numbers are noisy if other processes use the CPU)"
    )
    backends = [b for b in args.backends.split(",") if b]
    started = time.perf_counter()
    paths = {"1x": C.generate(args.data_dir, args.rows)}
    if not args.skip_memory:
        paths[f"{args.scale}x"] = C.generate(args.data_dir, args.scale * args.rows)
    log(
        f"# data: {', '.join(f'{k} = {v}' for k, v in paths.items())} "
        f"(row groups of {C.ROW_GROUP}, {len(C.files(paths['1x']))} files at 1x)"
    )
    sections = set(args.sections.split(","))
    iteration = []
    if "iteration" in sections:
        log("# iteration (one fresh process per approach and size)")
        iteration = run_iteration(args, paths)
    if "fit" not in sections:
        backends = []
    if backends:
        log("# model.fit (one fresh process per backend, approach and steps_per_execution)")
    fits = run_fit(args, paths["1x"], backends)
    fit_memory = []
    if not args.skip_memory and backends:
        log(f"# model.fit peak RSS on 1x and {args.scale}x ({backends[0]}, steps_per_execution=32)")
        fit_memory = [
            r for r in fits if r["backend"] == backends[0] and r["spe"] == 32 and r["approach"] != "pydataset_mem"
        ]
        fit_memory += run_fit(
            args,
            paths[f"{args.scale}x"],
            backends[:1],
            size=f"{args.scale}x",
            only=[a for a in FIT_APPROACHES if a != "pydataset_mem"],
            spes=(32,),
            epochs=1,
        )
    text, ratios = summarize(args, iteration, fits, fit_memory)
    log("")
    log(text)
    env["loadavg_end"] = os.getloadavg()
    log(f"\n# total {time.perf_counter() - started:.0f} s; load average at end {env['loadavg_end'][0]:.2f}")
    if args.out:
        args.out.write_text(
            json.dumps(
                {
                    "command": command,
                    "environment": env,
                    "rows": args.rows,
                    "iteration": iteration,
                    "fit": fits,
                    "fit_memory": fit_memory,
                    "ratios": ratios,
                    "table": text,
                },
                indent=2,
            )
        )
        log(f"# wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
