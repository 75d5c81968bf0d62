"""CSV list columns (``list_columns``): what splitting them into ragged rows costs, per million rows.

One generated file (default 1 M rows: an id and a space-separated token list
of lengths 0-31, mean ~16; ``--quick``: 100 k rows), read one epoch in one
process, best of three:

* ``as_text``: ``read_csv(..., column_types={"tok": "string"})``: the parse,
  the list served as one Python ``str`` per row;
* ``as_lists``: ``read_csv(..., list_columns={"tok": (" ", "int32")})``: the
  parse, then ``split_pattern`` and one ``cast`` per fragment, served as a
  Ragged.

Reported as wall seconds per million rows; data is written under
``~/.cache/streamfeed/bench/`` (never in the repository).

Usage::

    python benchmarks/csv_lists.py            # 1 M rows
    python benchmarks/csv_lists.py --quick    # 100 k rows
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

import _common as C
import streamfeed as sf


def _file(rows: int) -> Path:
    path = C.DEFAULT_DATA_DIR / f"lists-{rows}.csv"
    if path.exists():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    with open(path.with_suffix(".tmp"), "w") as handle:
        handle.write("id,tok\n")
        for index in range(rows):
            tokens = rng.integers(0, 50_000, size=int(rng.integers(0, 32)))
            handle.write(f"{index},{' '.join(map(str, tokens.tolist()))}\n")
    path.with_suffix(".tmp").rename(path)
    return path


def _best(run, repeats: int = 3) -> float:
    times = []
    for _ in range(repeats):
        began = time.perf_counter()
        run()
        times.append(time.perf_counter() - began)
    return min(times)


def _epoch(dataset) -> int:
    return sum(len(chunk["id"]) for chunk in dataset.iter_epoch())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    rows = 100_000 if args.quick else 1_000_000
    path = _file(rows)
    as_text = _best(lambda: _epoch(sf.read_csv(path, column_types={"tok": "string"})))
    as_lists = _best(lambda: _epoch(sf.read_csv(path, list_columns={"tok": (" ", "int32")})))
    scale = 1_000_000 / rows
    print(
        json.dumps(
            {"rows": rows, "as_text_s_per_M": round(as_text * scale, 3), "as_lists_s_per_M": round(as_lists * scale, 3)}
        )
    )


if __name__ == "__main__":
    main()
