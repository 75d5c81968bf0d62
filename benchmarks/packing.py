"""Sequence packing: streamfeed's first-fit decreasing per fragment against Grain's ``FirstFitPackIterDataset``.

```
python benchmarks/packing.py                       # 200 000 sequences, lognormal lengths 1..512, rows of 1024
python benchmarks/packing.py --sequences 50000 --no-grain
```

The same synthetic token data for every approach: lengths
``clip(round(lognormal(4.5, 1.0)), 1, 512)`` (median 90), ids 1..29 999,
written once to Parquet in a temporary directory. Each approach runs in a
process of its own, so that its peak RSS is its own, one after the other:

- ``streamfeed`` ``read_parquet(...).pack_sequences(1024).batch(64)``, one
  epoch through ``iter_epoch``, at two fragment sizes (row groups of 10 000
  and 1 000 sequences: packing is per fragment, so a smaller fragment leaves
  more padding). The counting pass that makes the steps known (``len``) is
  timed apart from the epoch.
- ``grain`` ``FirstFitPackIterDataset(length_struct={"tok": 1024},
  num_packing_bins=B, shuffle_bins=False)`` over ``MapDataset.source`` of
  the same rows as NumPy arrays, held in memory (loaded from the same
  Parquet before the clock starts), at B = 64 and 256 bins.

Reported per approach: packed rows, packed rows/s and sequences/s over the
epoch, CPU seconds per million tokens (the process's, every thread), the
share of pad tokens among the packed rows' tokens, and peak RSS
(``VmHWM``), beside the peak after the imports alone. ``--no-grain`` leaves Grain out (it is installed with
``pip install grain==0.2.18 array-record==0.8.6``).
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

LENGTH, BATCH = 1024, 64


def write(path: Path, sequences: int, row_group: int) -> int:
    """The token lists as one Parquet file; returns the tokens written."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(0)
    lengths = np.clip(np.round(rng.lognormal(4.5, 1.0, sequences)), 1, 512).astype(np.int64)
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    values = rng.integers(1, 30_000, size=int(offsets[-1]), dtype=np.int32)
    tok = pa.LargeListArray.from_arrays(pa.array(offsets), pa.array(values))
    table = pa.table({"tok": tok, "id": np.arange(sequences, dtype=np.int64)})
    pq.write_table(table, path, row_group_size=row_group)
    return int(offsets[-1])


def peak_rss_mib() -> float:
    """This process's peak RSS: ``VmHWM``, which starts afresh at ``exec`` (``ru_maxrss`` keeps the parent's)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def run_streamfeed(path: str) -> dict:
    import streamfeed as sf

    imported = peak_rss_mib()
    dataset = sf.read_parquet(path, columns=["tok"]).pack_sequences(LENGTH).batch(BATCH)  # what Grain is given
    started, cpu = time.perf_counter(), time.process_time()
    steps = len(dataset)
    count = {"count_seconds": time.perf_counter() - started, "count_cpu": time.process_time() - cpu}
    rows = pads = segments = 0
    started, cpu = time.perf_counter(), time.process_time()
    with dataset.iter_epoch(0) as epoch:
        for batch in epoch:
            ids = batch["tok_segment_ids"]
            rows += len(ids)
            pads += int(np.count_nonzero(ids == 0))
            segments += int(ids.max(axis=1).sum())
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
    out = {"steps": steps, "rows": rows, "pads": pads, "segments": segments, "seconds": seconds, "cpu": cpu}
    return {**out, **count, "imported_rss_mib": imported}


def run_grain(path: str, bins: int) -> dict:
    import grain
    import pyarrow.parquet as pq

    imported = peak_rss_mib()
    column = pq.read_table(path, columns=["tok"]).column("tok").combine_chunks()
    offsets, values = column.offsets.to_numpy(), column.values.to_numpy()
    source = [{"tok": values[offsets[i] : offsets[i + 1]]} for i in range(len(offsets) - 1)]
    packed = grain.experimental.FirstFitPackIterDataset(
        grain.MapDataset.source(source).to_iter_dataset(),
        length_struct={"tok": LENGTH},
        num_packing_bins=bins,
        shuffle_bins=False,
    )
    rows = pads = segments = 0
    started, cpu = time.perf_counter(), time.process_time()
    for row in packed:
        ids = row["tok_segment_ids"]
        rows += 1
        pads += int(np.count_nonzero(ids == 0))
        segments += int(ids.max())
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
    return {
        "rows": rows,
        "pads": pads,
        "segments": segments,
        "seconds": seconds,
        "cpu": cpu,
        "imported_rss_mib": imported,
    }


def worker(args: argparse.Namespace) -> None:
    result = run_grain(args.path, args.bins) if args.worker == "grain" else run_streamfeed(args.path)
    print("RESULT " + json.dumps({**result, "peak_rss_mib": peak_rss_mib()}))


def spawn(*argv: str) -> dict:
    proc = subprocess.run([sys.executable, __file__, *argv], capture_output=True, text=True, check=False)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    if proc.returncode or not lines:
        raise SystemExit(f"worker {argv} failed:\n{proc.stderr[-3000:]}")
    return json.loads(lines[-1][len("RESULT ") :])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sequences", type=int, default=200_000)
    parser.add_argument("--no-grain", action="store_true")
    parser.add_argument("--worker", choices=["streamfeed", "grain"], help=argparse.SUPPRESS)
    parser.add_argument("--path", help=argparse.SUPPRESS)
    parser.add_argument("--bins", type=int, default=64, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        return worker(args)
    print(f"load average before: {Path('/proc/loadavg').read_text().split()[:3]}")
    with tempfile.TemporaryDirectory() as directory:
        runs = []
        for row_group in (10_000, 1_000):
            path = Path(directory) / f"tokens-rg{row_group}.parquet"
            tokens = write(path, args.sequences, row_group)
            runs.append((f"streamfeed, fragments of {row_group}", spawn("--worker", "streamfeed", "--path", str(path))))
        if not args.no_grain:
            for bins in (64, 256):
                name = f"grain FirstFitPack, {bins} bins"
                runs.append((name, spawn("--worker", "grain", "--path", str(path), "--bins", str(bins))))
    print(f"{args.sequences} sequences, {tokens} tokens (mean {tokens / args.sequences:.1f}), rows of {LENGTH}")
    header = f"{'approach':34} {'rows':>7} {'rows/s':>9} {'seq/s':>10} {'CPU s/Mtok':>10} {'pad %':>6}"
    header += f" {'RSS MiB':>8} {'imports':>8}"
    print(header)
    for name, run in runs:
        assert run["segments"] == args.sequences, (name, run["segments"])  # every sequence packed, once
        print(
            f"{name:34} {run['rows']:>7} {run['rows'] / run['seconds']:>9.0f} "
            f"{args.sequences / run['seconds']:>10.0f} {run['cpu'] / tokens * 1e6:>10.3f} "
            f"{100 * run['pads'] / (run['rows'] * LENGTH):>6.2f} "
            f"{run['peak_rss_mib']:>8.0f} {run['imported_rss_mib']:>8.0f}"
        )
        if "count_seconds" in run:
            print(
                f"{'':34} counting pass for len(): {run['count_seconds']:.2f} s wall, "
                f"{run['count_cpu'] / tokens * 1e6:.3f} CPU s/Mtok (once per dataset)"
            )
    print(f"load average after: {Path('/proc/loadavg').read_text().split()[:3]}")


if __name__ == "__main__":
    main()
