"""Tabular benchmark: streamfeed vs. the pyarrow limit and the usual alternatives.

One run measures, side by side on the same generated Parquet files:

* the decode floor (issue 27): pyarrow ``ParquetFile.iter_batches(65536)``
  on one thread, building ``x (n, 32)`` and ``y`` (``np.column_stack``, and
  a preallocated matrix), and the CPU per row of every streamfeed path
  against the faster of the two;
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
import shlex
import sys
import time
from pathlib import Path

import _common as C
import tabular_workers as W
from tabular_approaches import FIT_APPROACHES, ITER_APPROACHES
from tabular_approaches import make_pydatasets as make_pydatasets  # larger_than_memory.py imports it from here
from tabular_summary import summarize

SCRIPT = str(Path(__file__).resolve())
log = W.log


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
    W.add_worker_args(p)  # worker mode (internal)
    args = p.parse_args(argv)
    if args.quick:
        args.rows = 200_000
        args.min_seconds = min(args.min_seconds, 1.0)
    return args


def main(argv=None) -> int:
    args = parse(argv)
    if args.worker:
        if args.mode == "iter":
            C.emit(W.iter_worker(args))
        else:
            C.emit(W.fit_worker(args))
        return 0
    command = " ".join(shlex.quote(a) for a in [Path(sys.executable).name, *sys.argv])
    log(f"$ {command}")
    env = C.environment()
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
        iteration = W.run_iter_cells(SCRIPT, args, paths, ITER_APPROACHES)
    if "fit" not in sections:
        backends = []
    if backends:
        log("# model.fit (one fresh process per backend, approach and steps_per_execution)")
    fits = W.run_fit_cells(SCRIPT, args, paths["1x"], backends, FIT_APPROACHES)
    fit_memory = []
    if not args.skip_memory and backends:
        log(f"# model.fit peak RSS on 1x and {args.scale}x ({backends[0]}, steps_per_execution=32)")
        fit_memory = [
            r for r in fits if r["backend"] == backends[0] and r["spe"] == 32 and r["approach"] != "pydataset_mem"
        ]
        fit_memory += W.run_fit_cells(
            SCRIPT,
            args,
            paths[f"{args.scale}x"],
            backends[:1],
            [a for a in FIT_APPROACHES if a != "pydataset_mem"],
            size=f"{args.scale}x",
            spes=(32,),
            epochs=1,
        )
    text, ratios = summarize(iteration, fits, fit_memory)
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
