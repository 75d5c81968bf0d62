"""DataQualityMonitor benchmark: its cost inside ``fit`` and its label-noise accuracy, per backend.

Each backend runs in a fresh process (``KERAS_BACKEND`` set before Keras is
imported) on a synthetic classification set written with pyarrow into a
temporary directory: ``FEATURES`` Gaussian features around one centre per
class (centres ~ N(0, spread²), unit noise), 4 classes, ``--flip`` of the
labels changed to another class at seeded ids.

* ``cost``: ``fit`` of Dense(32, relu) → Dense(4) (``--hidden`` sets the
  hidden widths; Adam, logits) for 4
  epochs, without the monitor, with it (``every=1``) and sampling one batch
  in four (``every=4``), interleaved ``--repeat`` times; the figure is the
  median epoch time of epochs 2–4 (epoch 1 compiles), and the monitor's own
  time per measured batch.
* ``accuracy``: 5 epochs per seed and spread, 10 % flipped and clean: the
  estimate, its error and the precision of the top-k suspects (k = flipped).
* ``length``: scikit-learn's bundled digits (1 797 rows, 64 features, 10
  classes; needs ``scikit-learn``), clean and 10 % flipped, Dense(64, relu)
  → Dense(10), 30 epochs, three seeds: after 5, 10, 20 and 30 epochs the
  estimate (rows misranked in each of their last 3 measurements) beside
  the share of rows with AUM < 0 it replaced, and the training accuracy.

Usage::

    python benchmarks/quality_monitor.py                          # tensorflow, jax, torch
    python benchmarks/quality_monitor.py --backends jax --sections cost
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path

import numpy as np

import _common as C

SCRIPT = str(Path(__file__).resolve())
FEATURES, CLASSES = 6, 4


def write_table(path: Path, rows: int, seed: int, flip: float, spread: float) -> set[int]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(CLASSES, FEATURES)) * spread
    truth = rng.integers(0, CLASSES, rows)
    x = centres[truth] + rng.normal(size=(rows, FEATURES))
    flipped = rng.choice(rows, int(round(flip * rows)), replace=False)
    given = truth.copy()
    given[flipped] = (truth[flipped] + rng.integers(1, CLASSES, len(flipped))) % CLASSES
    columns = {"id": np.arange(rows, dtype=np.int64), "label": given}
    columns.update({f"f{i}": x[:, i].astype("float32") for i in range(FEATURES)})
    pq.write_table(pa.table(columns), path, row_group_size=10_000)
    return set(flipped.tolist())


def fit(path: Path, *, seed: int, batch: int, epochs: int, every: int | None, hidden: tuple[int, ...] = (32,)) -> dict:
    """One fit; epoch wall times, and the monitor (when ``every`` is set) with its own time."""
    import keras

    import streamfeed as sf

    keras.utils.set_random_seed(seed)
    train = sf.read_parquet(path).shuffle(seed=seed).batch(batch).to_keras(label="label", ids="id")
    model = keras.Sequential(
        [
            keras.Input((FEATURES,)),
            *(keras.layers.Dense(width, activation="relu") for width in hidden),
            keras.layers.Dense(CLASSES),
        ]
    )
    model.compile(keras.optimizers.Adam(0.01), keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    times: list[float] = []

    class Clock(keras.callbacks.Callback):
        def on_epoch_begin(self, epoch, logs=None):
            self.started = C.now()

        def on_epoch_end(self, epoch, logs=None):
            times.append(C.now() - self.started)

    callbacks: list = [Clock()]
    monitor = None
    if every is not None:
        monitor = sf.keras.DataQualityMonitor(train, every=every)
        callbacks.insert(0, monitor)
    with train:
        model.fit(train, epochs=epochs, verbose=0, callbacks=callbacks)
    return {"epochs": times, "monitor": monitor, "batches": len(train)}


def worker(section: str, rows: int, repeat: int, flip: float, hidden: tuple[int, ...]) -> dict:
    import keras

    out: dict = {"backend": keras.backend.backend()}
    with tempfile.TemporaryDirectory() as directory:
        if section == "cost":
            path = Path(directory) / "cost.parquet"
            write_table(path, rows, 0, flip, 4.0)
            for batch in (128, 1024):
                runs: dict[str, list[float]] = {"none": [], "every=1": [], "every=4": []}
                own: dict[str, list[float]] = {"every=1": [], "every=4": []}
                for _ in range(repeat):  # interleaved: a noisy neighbour hits every variant alike
                    for name in runs:
                        every = None if name == "none" else int(name.split("=")[1])
                        result = fit(path, seed=0, batch=batch, epochs=4, every=every, hidden=hidden)
                        runs[name].append(statistics.median(result["epochs"][1:]))
                        if result["monitor"] is not None:
                            history = result["monitor"].history[1:]
                            measured = sum(h["rows_measured"] for h in history) / batch
                            own[name].append(1e3 * sum(h["measure_seconds"] for h in history) / measured)
                out[f"batch {batch}"] = {
                    "epoch_s": {name: min(values) for name, values in runs.items()},
                    "monitor_ms_per_measured_batch": {name: statistics.median(v) for name, v in own.items()},
                    "batches_per_epoch": -(-rows // batch),
                }
        elif section == "length":
            out["length"] = length_section(Path(directory), flip)
        else:
            out["accuracy"] = []
            for spread in (3.0, 4.0):
                for seed in (0, 1, 2):
                    for noise in (flip, 0.0):
                        path = Path(directory) / f"acc-{spread}-{seed}-{noise}.parquet"
                        flipped = write_table(path, rows, seed, noise, spread)
                        monitor = fit(path, seed=seed, batch=128, epochs=5, every=1)["monitor"]
                        top = monitor.suspects(top=len(flipped)) if flipped else []
                        precision = float(np.mean([row["id"] in flipped for row in top])) if flipped else None
                        out["accuracy"].append(
                            {
                                "spread": spread,
                                "seed": seed,
                                "true": noise,
                                "estimate": monitor.noise_rate(),
                                "precision_top_k": precision,
                            }
                        )
    return out


def write_digits(path: Path, seed: int, flip: float) -> np.ndarray:
    """scikit-learn's digits as Parquet (features scaled to [0, 1], ``id``), ``flip`` of labels moved; the flips."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    from sklearn.datasets import load_digits

    digits = load_digits()
    x, y = (digits.data / 16.0).astype("float32"), digits.target.astype("int64")
    rng = np.random.default_rng(seed)
    flipped = rng.random(len(y)) < flip
    y[flipped] = (y[flipped] + rng.integers(1, 10, int(flipped.sum()))) % 10
    columns = {f"f{i}": x[:, i] for i in range(x.shape[1])} | {"label": y, "id": np.arange(len(y))}
    pq.write_table(pa.table(columns), path, row_group_size=400)
    return flipped


def length_section(directory: Path, flip: float, epochs: int = 30, at: tuple[int, ...] = (5, 10, 20, 30)) -> list:
    """The estimate and the AUM share after ``at`` epochs of one fit, clean and flipped, three seeds."""
    import keras

    import streamfeed as sf

    found = []
    for noise in (0.0, flip):
        for seed in (0, 1, 2):
            path = directory / f"digits-{seed}-{noise}.parquet"
            flipped = write_digits(path, seed, noise)
            keras.utils.set_random_seed(seed)
            train = sf.read_parquet(path).shuffle(seed=seed).batch(64).to_keras(label="label", ids="id")
            model = keras.Sequential(
                [keras.Input((64,)), keras.layers.Dense(64, activation="relu"), keras.layers.Dense(10)]
            )
            model.compile(
                keras.optimizers.Adam(0.003),
                keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                metrics=["accuracy"],
            )
            monitor = sf.keras.DataQualityMonitor(train)
            readings: dict[int, dict] = {}

            class Read(keras.callbacks.Callback):
                def on_epoch_end(self, epoch, logs=None, monitor=monitor, readings=readings):
                    if epoch + 1 in at:
                        ledger = monitor.ledger
                        readings[epoch + 1] = {
                            "estimate": ledger.noise_rate(),
                            "aum_share": float(np.mean(ledger.mean_margins() < 0)),
                            "train_accuracy": float(logs["accuracy"]),
                        }

            with train:
                model.fit(train, epochs=epochs, verbose=0, callbacks=[monitor, Read()])
            found.append({"seed": seed, "true": float(flipped.mean()), "readings": readings})
    return found


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--backends", default="tensorflow,jax,torch")
    p.add_argument("--sections", default="cost,accuracy")
    p.add_argument("--rows", type=int, default=None, help="cost: 60 000 rows; accuracy: 6 000 (the test's size)")
    p.add_argument("--flip", type=float, default=0.10)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--hidden", default="32", help="cost: the model's hidden Dense widths, e.g. 1024,1024")
    p.add_argument("--out", type=Path, default=None, help="also write the results as JSON")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--section", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        rows = args.rows or (60_000 if args.section == "cost" else 6_000)  # length: the digits' 1 797
        C.emit(worker(args.section, rows, args.repeat, args.flip, tuple(int(w) for w in args.hidden.split(","))))
        return 0
    print(f"$ {C.command_line()}\nload average before: {os.getloadavg()}")
    results: dict = {}
    for section in args.sections.split(","):
        for backend in args.backends.split(","):
            extra = (["--rows", str(args.rows)] if args.rows else []) + ["--hidden", args.hidden]
            result = C.run_worker(
                SCRIPT,
                ["--section", section, "--repeat", str(args.repeat), "--flip", str(args.flip), *extra],
                timeout=1800,
                env={"KERAS_BACKEND": backend},
            )
            results[(section, backend)] = result
            if "error" in result:
                print(f"{section} {backend}: {result['error']}")
            elif section == "cost":
                for key in ("batch 128", "batch 1024"):
                    r = result[key]
                    base = r["epoch_s"]["none"]
                    cells = [f"{name} {s:.3f} s ({s / base - 1:+.0%})" for name, s in r["epoch_s"].items()]
                    own = ", ".join(f"{n} {ms:.2f} ms" for n, ms in r["monitor_ms_per_measured_batch"].items())
                    print(f"cost {backend} hidden {args.hidden} {key} ({r['batches_per_epoch']} batches/epoch):")
                    print(f"     epoch: {'; '.join(cells)}")
                    print(f"     monitor time per measured batch: {own}")
            elif section == "length":
                rows = [
                    [str(run["seed"]), f"{100 * run['true']:.1f} %"]
                    + [
                        f"{100 * r['estimate']:.1f} / {100 * r['aum_share']:.1f} ({r['train_accuracy']:.3f})"
                        for r in run["readings"].values()
                    ]
                    for run in result["length"]
                ]
                epochs_read = list(result["length"][0]["readings"])
                print(f"length {backend}: estimate % / AUM < 0 share % (training accuracy) after N epochs")
                print(C.table(["seed", "true", *(f"{n} epochs" for n in epochs_read)], rows))
            else:
                rows = [
                    [
                        f"{a['spread']:g}",
                        str(a["seed"]),
                        f"{a['true']:.0%}",
                        f"{100 * a['estimate']:.2f} %",
                        f"{100 * (a['estimate'] - a['true']):+.2f}",
                        "-" if a["precision_top_k"] is None else f"{a['precision_top_k']:.3f}",
                    ]
                    for a in result["accuracy"]
                ]
                print(f"accuracy {backend}:")
                print(C.table(["spread", "seed", "true", "estimate", "error pp", "precision@k"], rows))
    print(f"load average after: {os.getloadavg()}")
    if args.out:
        args.out.write_text(json.dumps({f"{s} {b}": r for (s, b), r in results.items()}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
