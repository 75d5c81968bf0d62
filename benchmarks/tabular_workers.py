"""The tabular benchmark's worker side: time one approach's iteration or ``fit`` in a fresh process.

``tabular.py`` and ``peers.py`` share these: a driver runs
``script --worker ...`` per cell (``run_iter_cell`` / ``run_fit_cell``), and
the worker builds its approach with the script's own setup function, then
times it here. Keeping one timing loop and one fit worker is what makes the
two scripts' figures comparable.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import _common as C
import tabular_approaches as A


def _close(it: Any) -> None:
    close = getattr(it, "close", None)
    if close is not None:
        close()


@dataclass
class Served:
    """One iteration approach, built: how to start an epoch, read a batch's label, end an epoch."""

    epoch: Callable[[int], Iterator]
    label: Callable[[Any], Any]
    close: Callable[[Any], None] = _close
    layout: Callable[[], dict] | None = None  # streamfeed's memory layout, reported beside the RSS


def keras_batches(keras_data: Any) -> Served:
    """Serves a ``PyDataset``-like object (``__len__``/``__getitem__``) the way Keras's loop does, without a model."""

    def epoch(_e: int) -> Iterator:
        def served() -> Iterator:
            begin = getattr(keras_data, "on_epoch_begin", None)
            if begin is not None:
                begin()
            for i in range(len(keras_data)):
                yield keras_data[i]
            keras_data.on_epoch_end()

        return served()

    def close(it: Any) -> None:
        it.close()
        _close(keras_data)

    return Served(epoch=epoch, label=lambda batch: batch[1], close=close)


def tabular_served(approach: str, path: Path) -> Served:
    """Builds one of ``tabular_approaches.ITER_APPROACHES`` for ``iter_worker``."""
    if approach.startswith("floor"):
        return Served(
            epoch=lambda _e: A.floor_batches(path, preallocated=approach == "floor_prealloc"),
            label=lambda batch: batch[1],
        )
    if approach == "generator":
        import tensorflow as tf  # noqa: F401

        dataset = A.generator_tf_dataset(path)
        return Served(epoch=lambda _e: iter(dataset.as_numpy_iterator()), label=lambda b: b[1], close=lambda _it: None)
    if approach.startswith("scanner"):
        import pyarrow  # noqa: F401

        make = A.scanner_batches if approach == "scanner" else A.scanner_b1024_batches
        return Served(epoch=lambda _e: make(path), label=lambda batch: batch[C.LABEL])
    if approach.startswith("streamfeed_keras"):
        data = A.streamfeed_dataset(path, shuffled=approach == "streamfeed_keras")
        keras_data = data.to_keras(label=C.LABEL)  # the worker runs with KERAS_BACKEND=jax
        served = keras_batches(keras_data)
        served.layout = lambda: keras_data.dataset.layout().to_dict()
        return served
    data = A.streamfeed_dataset(path, shuffled=approach == "streamfeed_shuffled")
    return Served(epoch=data.iter_epoch, label=lambda batch: batch[C.LABEL], layout=lambda: data.layout().to_dict())


def iter_worker(args: Any, setup: Callable[[str, Path], Served] = tabular_served) -> dict:
    """One approach, one data size: a 64-batch warm-up, then whole epochs for >= min_seconds.

    CPU is ``time.process_time()`` over each whole epoch: every thread of
    the process, Arrow's and the framework's pools included.
    """
    import numpy as np

    served = setup(args.approach, Path(args.path))
    base_rss = C.rss()
    it = served.epoch(0)  # warm-up: a partial epoch (imports, thread pools, first decode)
    for _, _batch in zip(range(64), it):
        pass
    served.close(it)

    times, cpus, sums, rows_seen = [], [], [], []
    started = C.now()
    e = 0
    while e < args.max_epochs and (e < args.min_epochs or C.now() - started < args.min_seconds):
        t0, c0 = C.now(), time.process_time()
        it = served.epoch(e)
        rows, checksum = 0, 0.0
        for batch in it:
            y = served.label(batch)
            rows += len(y)
            checksum += float(np.sum(y, dtype=np.float64))
        served.close(it)
        times.append(C.now() - t0)
        cpus.append(time.process_time() - c0)
        sums.append(checksum)
        rows_seen.append(rows)
        e += 1
    threads = _profile_epochs(served, e, PROFILE_EPOCHS)
    rates = [r / t for r, t in zip(rows_seen, times)]
    cpu_per_mrow = [c / r * 1e6 for c, r in zip(cpus, rows_seen)]
    result = {
        "approach": args.approach,
        "rows": rows_seen[0],
        "epochs": e,
        "rows_per_s": statistics.median(rates),
        "rows_per_s_best": max(rates),
        "rows_per_s_all": rates,
        "cpu_s_per_mrow": statistics.median(cpu_per_mrow),
        "cpu_s_per_mrow_best": min(cpu_per_mrow),
        "cpu_s_per_mrow_all": cpu_per_mrow,
        "label_sum": sums[0],
        "thread_cpu_s_per_mrow": threads,  # of PROFILE_EPOCHS more epochs, untimed
        "base_rss": base_rss,
        "peak_rss": C.peak_rss(),
    }
    if served.layout is not None:
        result["layout"] = served.layout()
    return result


PROFILE_EPOCHS = 2
PROCESS = "process (all threads)"


def _profile_epochs(served: Served, first: int, epochs: int) -> dict[str, float]:
    """CPU s per M rows by thread group over ``epochs`` more epochs: where the CPU goes (the profile of a miss).

    Kept out of the timed epochs: sampling /proc every 16 batches costs CPU
    in the measured process (threads ending between samples keep their last time).
    """
    profile = C.ThreadCPU()
    before, rows, c0 = profile.sample(), 0, time.process_time()
    for e in range(first, first + epochs):
        it = served.epoch(e)
        for n, batch in enumerate(it):
            rows += len(served.label(batch))
            if n % 16 == 15:
                profile.sample()
        served.close(it)
    groups = C.ThreadCPU.between(before, profile.sample())
    groups[PROCESS] = time.process_time() - c0  # more than the groups' sum by what ended between samples
    return {group: spent / rows * 1e6 for group, spent in groups.items()}


FitInputs = tuple[tuple, int | None, dict]  # (fit's positional inputs, rows an epoch, fit keyword arguments)


def tabular_fit_inputs(approach: str, path: Path, pydatasets: tuple) -> FitInputs:
    """Builds one of ``tabular_approaches.FIT_APPROACHES`` for ``fit_worker``."""
    RowGroupPyDataset, MemoryPyDataset = pydatasets
    if approach in ("numpy", "pydataset_mem"):
        x, y = A.load_numpy(path)
        if approach == "numpy":
            return (x, y), len(y), {"batch_size": C.BATCH}
        return (MemoryPyDataset(x, y),), len(y), {"shuffle": False}
    if approach == "generator":
        return (A.generator_tf_dataset(path),), None, {}
    if approach.startswith("pydataset"):
        data = RowGroupPyDataset(path, seed=1 if approach == "pydataset_shuffled" else None)
        return (data,), data.rows, {"shuffle": False}  # Keras's shuffled indices would decode a row group per batch
    dataset = A.streamfeed_dataset(path, shuffled=approach == "streamfeed_shuffled")
    return (dataset.to_keras(label=C.LABEL),), dataset.num_rows(), {}


def fit_worker(args: Any, inputs_for: Callable[[str, Path, tuple], FitInputs] = tabular_fit_inputs) -> dict:
    """One backend, one approach, one steps_per_execution: a warm-up fit, then ``fit(epochs=E)``.

    ``inputs_for(approach, path, (RowGroupPyDataset, MemoryPyDataset))``
    builds what ``fit`` is given; ``rows`` is None when only an epoch can
    tell (counted from the files).
    """
    import keras

    assert keras.backend.backend() == args.backend, keras.backend.backend()
    path = Path(args.path)
    keras.utils.set_random_seed(0)
    pydatasets = A.make_pydatasets()
    base_rss = C.rss()
    inputs, rows, fit_kwargs = inputs_for(args.approach, path, pydatasets)
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
            return getattr(inputs[0], "input_wait_seconds", 0.0)  # streamfeed's KerasDataset counts it

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
    model.fit(*inputs, epochs=1, verbose=0, **{**fit_kwargs, "steps_per_epoch": warmup_steps})
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
    if hasattr(inputs[0], "input_wait_seconds"):
        result["input_wait_s"] = inputs[0].input_wait_seconds  # summed over all fit epochs
        result["input_wait_share"] = timer.waits[best] / seconds  # of the reported epoch
    return result


def _count_rows(path) -> int:
    import pyarrow.parquet as pq

    return sum(pq.ParquetFile(name).metadata.num_rows for name in C.files(path))


# ================================================================ the driver side
def log(message: str) -> None:
    print(message, flush=True)


def run_iter_cells(
    script: str, args: Any, paths: dict[str, Path], approaches, warm: Callable[[Path], Any] = C.warm_cache
) -> list[dict]:
    """Each iteration approach on each data size, each in a fresh ``script --worker`` process.

    ``warm(path)`` reads the files of the data set first (the page cache is warm for every approach).
    """
    results = []
    for size, path in paths.items():
        for approach in approaches:
            warm(path)
            result = C.run_worker(
                script,
                ["--mode", "iter", "--approach", approach, "--path", str(path), "--min-seconds", str(args.min_seconds)],
                args.timeout,
                env={"KERAS_BACKEND": "jax", "JAX_PLATFORMS": "cpu"},
            )
            result.update(size=size, approach=approach)
            results.append(result)
            if "error" in result:
                log(f"  iter {size:>3} {approach:28s} ERROR {result['error']}")
            else:
                log(
                    f"  iter {size:>3} {approach:28s} {C.rate(result['rows_per_s']):>12} rows/s "
                    f"(best {C.rate(result['rows_per_s_best'])}, {result['epochs']} epochs)  "
                    f"CPU {result['cpu_s_per_mrow_best']:.3f} / {result['cpu_s_per_mrow']:.3f} s/Mrow (best / median)  "
                    f"peak RSS {C.mib(result['peak_rss'])} MiB (base {C.mib(result['base_rss'])})"
                )
    return results


def run_fit_cells(
    script: str,
    args: Any,
    path: Path,
    backends: list[str],
    approaches,
    size: str = "1x",
    spes=A.FIT_SPES,
    epochs: int = 3,
    warm: Callable[[Path], Any] = C.warm_cache,
) -> list[dict]:
    """Each fit approach per backend and steps_per_execution (torch: 1 only), each in a fresh process."""
    results = []
    for backend in backends:
        for approach in approaches:
            if approach == "generator" and backend != "tensorflow":
                continue
            for spe in [s for s in spes if s in A.BACKEND_SPES.get(backend, A.FIT_SPES)]:
                warm(path)
                result = C.run_worker(
                    script,
                    ["--mode", "fit", "--backend", backend, "--approach", approach, "--spe", str(spe)]
                    + ["--path", str(path), "--fit-epochs", str(epochs)],
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


def add_worker_args(p: Any) -> None:
    """The hidden options a driver passes to its ``--worker`` processes (shared by tabular.py and peers.py)."""
    import argparse

    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--mode", help=argparse.SUPPRESS)
    p.add_argument("--approach", help=argparse.SUPPRESS)
    p.add_argument("--backend", help=argparse.SUPPRESS)
    p.add_argument("--spe", type=int, default=1, help=argparse.SUPPRESS)
    p.add_argument("--path", help=argparse.SUPPRESS)
    p.add_argument("--min-epochs", type=int, default=5, help=argparse.SUPPRESS)
    p.add_argument("--max-epochs", type=int, default=30, help=argparse.SUPPRESS)
    p.add_argument("--fit-epochs", type=int, default=3, help=argparse.SUPPRESS)


def find(results: list[dict], **match: Any) -> dict | None:
    """The first result (not an error) whose fields equal ``match``."""
    for r in results:
        if all(r.get(k) == v for k, v in match.items()) and "error" not in r:
            return r
    return None
