"""HDF5 variable-length datasets: what reading them as ragged rows costs, per million rows.

One generated file (default 1 M rows of ``h5py.vlen_dtype(np.int32)``, lengths
0-31, mean ~16, chunked by 4096 rows; ``--quick``: 100 k rows), timed in one
process, best of three:

* ``h5py_read``: ``ds[a:b]`` in 64 Ki-row slices: h5py's own read, which
  makes one NumPy array (a Python object) per row; the floor;
* ``to_ragged``: ``catalog.ragged_rows`` on those reads alone (the lengths
  pass over the rows, one ``np.concatenate``);
* ``streamfeed``: ``read_hdf5(...).iter_epoch()``, the whole source path.

Reported as CPU-free wall seconds per million rows. Data is written under
``~/.cache/streamfeed/bench/`` (never in the repository).

Usage::

    python benchmarks/hdf5_vlen.py            # 1 M rows
    python benchmarks/hdf5_vlen.py --quick    # 100 k rows
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import h5py
import numpy as np

import _common as C
import streamfeed as sf
from streamfeed.sources.hdf5.catalog import ragged_rows


def _file(rows: int) -> Path:
    path = C.DEFAULT_DATA_DIR / f"vlen-{rows}.h5"
    if path.exists():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    lengths = rng.integers(0, 32, size=rows)
    values = rng.integers(0, 50_000, size=int(lengths.sum()), dtype=np.int32)
    data = np.empty(rows, dtype=object)
    data[:] = np.split(values, np.cumsum(lengths)[:-1])
    with h5py.File(path.with_suffix(".tmp"), "w") as f:
        f.create_dataset("tok", data=data, dtype=h5py.vlen_dtype(np.int32), chunks=(4096,))
    path.with_suffix(".tmp").rename(path)
    return path


def _best(run, repeats: int = 3) -> float:
    times = []
    for _ in range(repeats):
        began = time.perf_counter()
        run()
        times.append(time.perf_counter() - began)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    rows = 100_000 if args.quick else 1_000_000
    path = _file(rows)
    step = 65_536
    with h5py.File(path, "r") as f:
        ds = f["tok"]
        reads = [ds[a : a + step] for a in range(0, rows, step)]
        h5py_read = _best(lambda: [ds[a : a + step] for a in range(0, rows, step)])
    to_ragged = _best(lambda: [ragged_rows(read, np.dtype(np.int32)) for read in reads])
    whole = _best(lambda: sum(len(chunk["tok"]) for chunk in sf.read_hdf5(path).iter_epoch()))
    scale = 1_000_000 / rows
    print(
        json.dumps(
            {
                "rows": rows,
                "h5py_read_s_per_M": round(h5py_read * scale, 3),
                "to_ragged_s_per_M": round(to_ragged * scale, 3),
                "streamfeed_s_per_M": round(whole * scale, 3),
            }
        )
    )


if __name__ == "__main__":
    main()
