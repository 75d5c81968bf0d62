"""Peers benchmark: streamfeed beside Grain, webdataset and a plain row-group PyDataset, on the same data.

One run measures, each approach in a fresh process, shuffled and unshuffled,
on ``_common.generate``'s data (1 M rows x 32 float32 + a float32 label by
default) and the peers' copies of it (``peers_approaches``):

* iteration without a model, batches of 1024 ``(x, y)``: rows/s, CPU
  seconds per million rows (``time.process_time`` over whole epochs, all
  threads) and peak RSS;
* ``model.fit`` per backend (TensorFlow and JAX at ``steps_per_execution``
  1 and 32, torch at 1) against the model's ceiling, the faster of
  in-memory NumPy and a PyDataset over memory (tabular.py's fit worker).

Usage::

    python benchmarks/peers.py --out peers.json                 # 1 M rows, all backends
    python benchmarks/peers.py --quick                          # 200 k rows, TF only
    python benchmarks/peers.py --backends jax --sections fit

It ends with "streamfeed leads every peer in every cell: yes/no" and the
cells where it does not.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import _common as C
import peers_approaches as P
import tabular_workers as W
from tabular_approaches import BACKEND_SHORT, CEILING_APPROACHES, FIT_APPROACHES
from tabular_summary import fit_summary

SCRIPT = str(Path(__file__).resolve())
PEERS = {
    "streamfeed": "streamfeed to_keras",
    "grain": "Grain, ArrayRecord",
    "webdataset": "webdataset, .npy tars",
    "pydataset": "PyDataset, row groups",
}
MODES = {"": "unshuffled", "_shuffled": "shuffled"}
APPROACHES = [peer + mode for mode in MODES for peer in PEERS]
LABELS = {peer + mode: f"{label}, {MODES[mode]}" for mode in MODES for peer, label in PEERS.items()}
FIT_LABELS = {a: FIT_APPROACHES[a] for a in CEILING_APPROACHES} | LABELS
# Iteration measures: (title, result key, format, higher is better)
ITER_MEASURES = (
    ("rows/s (median epoch)", "rows_per_s", C.rate, True),
    ("CPU s per M rows (median epoch)", "cpu_s_per_mrow", lambda v: f"{v:.3f}", False),
    ("peak RSS MiB", "peak_rss", C.mib, False),
)


def parse(argv=None):
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--rows", type=int, default=1_000_000, help="rows of the data set (default 1 000 000)")
    p.add_argument("--quick", action="store_true", help="200 000 rows, fit on TensorFlow only")
    p.add_argument("--backends", default="tensorflow,jax,torch", help="Keras backends for fit ('' to skip)")
    p.add_argument("--sections", default="iteration,fit", help="which sections to run (default: iteration,fit)")
    p.add_argument("--data-dir", type=Path, default=C.DEFAULT_DATA_DIR, help=f"data cache ({C.DEFAULT_DATA_DIR})")
    p.add_argument("--min-seconds", type=float, default=3.0, help="time whole iteration epochs for at least this long")
    p.add_argument("--timeout", type=float, default=1800, help="per-worker timeout, seconds")
    p.add_argument("--out", type=Path, help="write the results as JSON here")
    W.add_worker_args(p)
    args = p.parse_args(argv)
    if args.quick:
        args.rows, args.backends = 200_000, "tensorflow"
        args.min_seconds = min(args.min_seconds, 1.0)
    return args


def iteration_tables(iteration: list[dict]) -> tuple[list[str], list[str]]:
    """One table per measure (peers x unshuffled/shuffled); returns the lines and the cells streamfeed does not lead."""
    lines: list[str] = []
    misses: list[str] = []
    if not iteration:
        return lines, misses
    for title, key, show, higher in ITER_MEASURES:
        rows = []
        for peer, label in PEERS.items():
            cells = [W.find(iteration, approach=peer + mode) for mode in MODES]
            rows.append([label] + [show(c[key]) if c else "-" for c in cells])
        lines += ["", C.table([f"iteration: {title}"] + list(MODES.values()), rows)]
        for mode, mode_name in MODES.items():
            ours = W.find(iteration, approach="streamfeed" + mode)
            for peer in list(PEERS)[1:]:
                theirs = W.find(iteration, approach=peer + mode)
                if ours and theirs and not (ours[key] > theirs[key] if higher else ours[key] < theirs[key]):
                    shown = f"{show(theirs[key])} vs {show(ours[key])}"
                    misses.append(f"iteration {title} {mode_name}: {PEERS[peer]} {shown}")
    return lines, misses


def fit_misses(fits: list[dict], ratios: dict[str, float]) -> list[str]:
    """The fit cells (backend, spe, shuffled or not) where a peer's ratio to the ceiling is not below streamfeed's."""
    misses = []
    for key, value in ratios.items():
        _, backend, spe, rest = key.split("/")
        approach = rest.removesuffix("_vs_ceiling")
        if approach not in LABELS or approach.startswith("streamfeed"):
            continue  # the ceiling's approaches, and streamfeed itself
        peer, _, shuffled = approach.partition("_")
        ours = ratios.get(f"fit/{backend}/{spe}/streamfeed{'_shuffled' if shuffled else ''}_vs_ceiling")
        if ours is None or value >= ours:
            shown = "-" if ours is None else f"{ours:.2f}"
            mode = MODES["_shuffled" if shuffled else ""]
            cell = f"{BACKEND_SHORT.get(backend, backend)} {spe.replace('spe', 'spe=')} {mode}"
            misses.append(f"fit {cell}: {PEERS[peer]} {value:.2f} vs {shown}")
    return misses


def summarize(iteration: list[dict], fits: list[dict]) -> tuple[str, dict]:
    lines, misses = iteration_tables(iteration)
    ratios: dict[str, float] = {}
    if fits:
        fit_lines, ratios = fit_summary(fits, FIT_LABELS)
        lines += [""] + fit_lines
        misses += fit_misses(fits, ratios)
    lines += ["", "shuffle semantics:"] + [f"  {peer}: {text}" for peer, text in P.SHUFFLE_SEMANTICS.items()]
    lines.append(
        f"  (blocks of {P.BLOCK_ROWS} rows per ArrayRecord record / webdataset sample, shards of {P.SHARD_ROWS} rows;"
        " Grain at its default ReadOptions, webdataset in-process: DataLoader(batch_size=None, num_workers=0))"
    )
    verdict = "yes" if not misses else "no (cells where not: " + "; ".join(misses) + ")"
    lines += ["", f"streamfeed leads every peer in every cell: {verdict}"]
    return "\n".join(lines), {"fit_vs_ceiling": ratios, "misses": misses}


def main(argv=None) -> int:
    args = parse(argv)
    if args.worker:
        if args.mode == "iter":
            C.emit(W.iter_worker(args, setup=P.peers_served))
        else:
            C.emit(W.fit_worker(args, inputs_for=P.peers_fit_inputs))
        return 0
    command = C.command_line()
    W.log(f"$ {command}")
    packages = ("keras", "tensorflow-cpu", "jax", "torch", "grain", "array-record", "webdataset", "streamfeed")
    env = C.environment(packages)
    W.log(
        f"# {env['platform']}, {env['cpu_count']} cores, python {env['python']}; "
        + ", ".join(f"{k} {env.get(k)}" for k in ("keras", "grain", "array-record", "webdataset", "pyarrow"))
        + f"; streamfeed at {env.get('streamfeed_commit')}; load average at start {env['loadavg_start'][0]:.2f}"
    )
    started = time.perf_counter()
    path = C.generate(args.data_dir, args.rows)
    copies = P.write_peer_data(path)
    W.log(f"# data: {path} and {', '.join(str(p) for p in copies.values())}")
    sections = set(args.sections.split(","))
    iteration = []
    if "iteration" in sections:
        W.log("# iteration, no model (one fresh process per approach)")
        iteration = W.run_iter_cells(SCRIPT, args, {"1x": path}, APPROACHES, warm=P.warm_all)
    backends = [b for b in args.backends.split(",") if b] if "fit" in sections else []
    fits = []
    if backends:
        W.log("# model.fit (one fresh process per backend, approach and steps_per_execution)")
        fits = W.run_fit_cells(SCRIPT, args, path, backends, [*CEILING_APPROACHES, *APPROACHES], warm=P.warm_all)
    text, ratios = summarize(iteration, fits)
    W.log("")
    W.log(text)
    env["loadavg_end"] = os.getloadavg()
    W.log(f"\n# total {time.perf_counter() - started:.0f} s; load average at end {env['loadavg_end'][0]:.2f}")
    if args.out:
        report = {
            "command": command,
            "environment": env,
            "rows": args.rows,
            "block_rows": P.BLOCK_ROWS,
            "shard_rows": P.SHARD_ROWS,
            "shuffle_semantics": P.SHUFFLE_SEMANTICS,
            "iteration": iteration,
            "fit": fits,
            **ratios,
            "table": text,
        }
        args.out.write_text(json.dumps(report, indent=2))
        W.log(f"# wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
