"""What ``memory_limit`` covers: the pipeline's estimate against measured RSS, at several limits.

    python benchmarks/memory_limit.py                       # 1 M rows x 16 float32, limits 32..256 MiB
    python benchmarks/memory_limit.py --limits 64 --rows 2000000

Each (limit, shuffle) runs in a fresh process. After opening the data, the
process reads one small file through the same code (a warm-up: Arrow's
Parquet code pages, the allocator's first arenas, thread stacks), then
iterates one epoch of batches of 1024, sampling RSS after every batch:

* *cold growth*: peak RSS over the epoch minus RSS after opening, without
  the warm-up (what the hardening issue measured: 31-41 MiB over 64 MiB);
* *warm growth*: the same after the warm-up: the pipeline's own buffers
  plus what Arrow and the allocator keep while decoding;
* the layout's estimate of the pipeline's buffers (``Dataset.layout()``).

If the cold overshoot is a fixed cost, cold minus warm stays the same at
every limit while the warm growth follows the estimate: that is what the
limit can promise and what ``docs/performance.md`` quotes.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

DATA_DIR = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "streamfeed" / "bench"

_WORKER = textwrap.dedent(
    """
    import json, sys
    import psutil, pyarrow as pa, pyarrow.parquet as pq
    import streamfeed as sf

    path, tiny, limit = sys.argv[1], sys.argv[2], int(sys.argv[3])
    shuffle, warm = sys.argv[4] == "1", sys.argv[5] == "1"
    process = psutil.Process()

    def pipeline(source):
        ds = sf.read_parquet(source)
        ds = ds.shuffle(0) if shuffle else ds
        return ds.batch(1024).with_options(memory_limit=limit)

    ds = pipeline(path)
    layout = ds.layout()
    if warm:
        for _ in pipeline(tiny):
            pass
    base = process.memory_info().rss
    peak, rows = base, 0
    with ds.iter_epoch(0) as epoch:
        for batch in epoch:
            rows += len(batch["f0"])
            peak = max(peak, process.memory_info().rss)
    print(json.dumps({"rows": rows, "estimate": layout.estimated_bytes, "growth": peak - base,
                      "window": layout.window, "read_ahead": layout.read_ahead, "prefetch": layout.prefetch}))
    """
)


def _data(rows: int) -> tuple[Path, Path]:
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder = DATA_DIR / f"memory-limit-{rows}"
    path, tiny = folder / "data.parquet", folder / "tiny.parquet"
    if not (folder / "_DONE").exists():
        folder.mkdir(parents=True, exist_ok=True)
        rng = np.random.default_rng(0)
        table = pa.table({f"f{i}": rng.random(rows, dtype=np.float32) for i in range(16)})
        pq.write_table(table, path, row_group_size=65_536)
        pq.write_table(table.slice(0, 20_000), tiny, row_group_size=5_000)
        (folder / "_DONE").touch()
    return path, tiny


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--limits", default="32,64,128,256", help="MiB, comma-separated")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    path, tiny = _data(args.rows)
    results = []
    mib = 2**20
    print(f"{args.rows} rows x 16 float32 (64 B/row), row groups of 65 536; load average {os.getloadavg()[0]:.2f}")
    print(f"{'limit':>6} {'shuffle':>7} {'estimate':>9} {'cold':>7} {'warm':>7} {'cold-warm':>9}  (MiB)")
    for limit in (int(v) for v in args.limits.split(",")):
        for shuffle in (False, True):
            row = {"limit": limit * mib, "shuffle": shuffle}
            for warm in (False, True):
                argv = [sys.executable, "-c", _WORKER, str(path), str(tiny), str(limit * mib), str(int(shuffle))]
                out = subprocess.run([*argv, str(int(warm))], capture_output=True, text=True, check=True)
                measured = json.loads(out.stdout)
                row.update({k: v for k, v in measured.items() if k != "growth"})
                row["warm_growth" if warm else "cold_growth"] = measured["growth"]
            results.append(row)
            print(
                f"{limit:>6} {str(shuffle):>7} {row['estimate'] / mib:>9.1f} {row['cold_growth'] / mib:>7.1f} "
                f"{row['warm_growth'] / mib:>7.1f} {(row['cold_growth'] - row['warm_growth']) / mib:>9.1f}"
            )
    if args.out:
        args.out.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
