"""Hard-example sampling against uniform and ``balance()``: accuracy on a hard minority, per epoch.

The data is scikit-learn's bundled digits (1 797 rows, 64 pixels, 10
classes; needs ``scikit-learn``), split 70/30 per seed, with a hard
minority made (``--minority``):

* ``classes`` (the default): classes 8 and 9 keep a quarter of their
  training rows (rare), and every 8 and 9, in training and test, gets
  Gaussian pixel noise of ``--noise`` (harder): a minority that is a class,
  which ``balance()`` can name;
* ``rows``: a random 10 % of the rows of every class get the noise, and
  every row is kept: a minority no class names. Each approach trains the same
Dense(64, relu) → Dense(10) (Adam 0.003, logits, batch 64) for
``--epochs`` epochs of the same number of rows (the training rows):

* ``uniform``: ``shuffle()``, every row once an epoch;
* ``balance``: ``balance("label", stats=...)``, every class equally often;
* ``hard``: ``hard_examples("id", floor=--floor)`` with a
  ``HardExampleMiner`` (each epoch drawn by the losses of the one before).

After each epoch the test accuracy on the hard classes and on all classes
is measured (``model.predict`` on the in-memory test rows). The table
gives, per approach and seed, the hard accuracy after 5, 10 and all
epochs, the epochs to reach ``--target`` hard accuracy (``-`` if never),
the overall accuracy at the end and the seconds per epoch; the median of
the seeds last. Each backend runs in a fresh process.

Usage::

    python benchmarks/hard_examples.py                       # jax, seeds 0,1,2
    python benchmarks/hard_examples.py --backends tensorflow,jax,torch --epochs 30
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import _common as C

SCRIPT = str(Path(__file__).resolve())
HARD_CLASSES = (8, 9)
APPROACHES = ("uniform", "balance", "hard")


def split_digits(seed: int, noise: float, keep: float, minority: str, share: float = 0.1) -> dict[str, np.ndarray]:
    """Train and test arrays with the hard minority made (module doc); ``hard_test`` marks it in the test rows."""
    from sklearn.datasets import load_digits

    digits = load_digits()
    x, y = (digits.data / 16.0).astype("float32"), digits.target.astype("int64")
    rng = np.random.default_rng(seed)
    hard = np.isin(y, HARD_CLASSES) if minority == "classes" else rng.random(len(y)) < share
    x[hard] = np.clip(x[hard] + rng.normal(scale=noise, size=x[hard].shape), 0.0, 1.0).astype("float32")
    test = rng.random(len(y)) < 0.3
    kept = rng.random(len(y)) < keep
    train = ~test & (~hard | kept) if minority == "classes" else ~test
    return {
        "x_train": x[train],
        "y_train": y[train],
        "x_test": x[test],
        "y_test": y[test],
        "hard_train": hard[train],
        "hard_test": hard[test],
    }


def write_train(path: Path, x: np.ndarray, y: np.ndarray) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    columns = {f"f{i}": x[:, i] for i in range(x.shape[1])} | {"label": y, "id": np.arange(len(y))}
    pq.write_table(pa.table(columns), path, row_group_size=100)


def train_once(approach: str, data: dict, path: Path, *, seed: int, epochs: int, floor: float, rule: str) -> dict:
    """One fit; the hard and overall test accuracy after each epoch, and the epoch times."""
    import keras

    import streamfeed as sf

    keras.utils.set_random_seed(seed)
    plain = sf.read_parquet(path)
    shuffled = plain.shuffle(seed=seed, window=8)
    callbacks: list = []
    if approach == "balance":
        dataset = shuffled.balance("label", stats=sf.compute_stats(plain, label="label"), seed=seed)
    elif approach == "hard":
        dataset = shuffled.hard_examples("id", rule=rule, floor=floor, seed=seed)  # type: ignore[arg-type]
    else:
        dataset = shuffled
    features = [f"f{i}" for i in range(64)]
    train = dataset.batch(64).to_keras(features=features, label="label", ids="id")
    if approach == "hard":
        callbacks.append(sf.keras.HardExampleMiner(train))
    model = keras.Sequential([keras.Input((64,)), keras.layers.Dense(64, activation="relu"), keras.layers.Dense(10)])
    model.compile(keras.optimizers.Adam(0.003), keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    hard_test = data["hard_test"]
    readings: list[dict] = []
    times: list[float] = []

    class Measure(keras.callbacks.Callback):
        def on_epoch_begin(self, epoch, logs=None):
            self.started = time.perf_counter()

        def on_epoch_end(self, epoch, logs=None):
            times.append(time.perf_counter() - self.started)
            predicted = np.argmax(model.predict(data["x_test"], verbose=0, batch_size=512), axis=1)
            right = predicted == data["y_test"]
            readings.append({"hard": float(right[hard_test].mean()), "all": float(right.mean())})

    with train:
        model.fit(train, epochs=epochs, verbose=0, callbacks=[*callbacks, Measure()])
    return {"readings": readings, "epoch_s": statistics.median(times[1:]) if len(times) > 1 else times[0]}


def worker(
    seeds: list[int],
    epochs: int,
    floor: float,
    rule: str,
    noise: float,
    keep: float,
    minority: str,
    approaches: list[str],
) -> dict:
    import keras

    out: dict = {"backend": keras.backend.backend(), "runs": []}
    with tempfile.TemporaryDirectory(prefix="streamfeed-hard-") as scratch:
        for seed in seeds:
            data = split_digits(seed, noise, keep, minority)
            path = Path(scratch) / f"train-{seed}.parquet"
            write_train(path, data["x_train"], data["y_train"])
            hard_rows = int(data["hard_train"].sum())
            for approach in approaches:
                run = train_once(approach, data, path, seed=seed, epochs=epochs, floor=floor, rule=rule)
                out["runs"].append(
                    {"seed": seed, "approach": approach, "train_rows": len(data["y_train"]), "hard_rows": hard_rows}
                    | run
                )
    return out


def epochs_to(readings: list[dict], target: float) -> int | None:
    return next((i + 1 for i, r in enumerate(readings) if r["hard"] >= target), None)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--backends", default="jax")
    p.add_argument("--seeds", default="0,1,2")
    p.add_argument("--epochs", type=int, default=20)
    p.add_argument("--floor", type=float, default=0.2)
    p.add_argument("--rule", default="loss", help="hard_examples(rule=): loss, quantile or temperature")
    p.add_argument("--approaches", default=",".join(APPROACHES))
    p.add_argument("--noise", type=float, default=0.35, help="pixel noise on classes 8 and 9 (pixels in [0, 1])")
    p.add_argument("--keep", type=float, default=0.25, help="share of the hard training rows kept")
    p.add_argument(
        "--minority",
        default="classes",
        choices=("classes", "rows"),
        help="classes: 8 and 9 are rare (--keep) and noisy; rows: a random 10 %% of every class is noisy",
    )
    p.add_argument("--target", type=float, default=0.85, help="the hard accuracy 'epochs to' counts to")
    p.add_argument("--out", type=Path, default=None, help="also write the results as JSON")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    if args.worker:
        C.emit(
            worker(
                seeds,
                args.epochs,
                args.floor,
                args.rule,
                args.noise,
                args.keep,
                args.minority,
                args.approaches.split(","),
            )
        )
        return 0
    print(f"$ {C.command_line()}\nload average before: {os.getloadavg()}")
    results = {}
    for backend in args.backends.split(","):
        extra = ["--seeds", args.seeds, "--epochs", str(args.epochs), "--floor", str(args.floor), "--rule", args.rule]
        extra += ["--approaches", args.approaches]
        extra += ["--noise", str(args.noise), "--keep", str(args.keep), "--minority", args.minority]
        result = C.run_worker(SCRIPT, extra, timeout=3600, env={"KERAS_BACKEND": backend})
        results[backend] = result
        if "error" in result:
            print(f"{backend}: {result['error']}")
            continue
        first = result["runs"][0]
        print(
            f"\n{backend}: {first['train_rows']} training rows, {first['hard_rows']} of them hard ({args.minority}); "
            f"test accuracy on the hard rows after N epochs, epochs to {args.target:.2f}"
        )
        at = [n for n in (5, 10) if n < args.epochs] + [args.epochs]
        rows = []
        for approach in args.approaches.split(","):
            runs = [r for r in result["runs"] if r["approach"] == approach]
            for run in runs:
                readings = run["readings"]
                rows.append(
                    [approach, str(run["seed"])]
                    + [f"{readings[n - 1]['hard']:.3f}" for n in at]
                    + [str(epochs_to(readings, args.target) or "-"), f"{readings[-1]['all']:.3f}"]
                    + [f"{run['epoch_s']:.2f}"]
                )
            rows.append(
                [approach, "median"]
                + [f"{statistics.median(r['readings'][n - 1]['hard'] for r in runs):.3f}" for n in at]
                + ["", f"{statistics.median(r['readings'][-1]['all'] for r in runs):.3f}", ""]
            )
        headers = ["approach", "seed", *(f"hard @{n}" for n in at), "epochs to", "all @end", "s/epoch"]
        print(C.table(headers, rows))
    print(f"load average after: {os.getloadavg()}")
    if args.out:
        args.out.write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
