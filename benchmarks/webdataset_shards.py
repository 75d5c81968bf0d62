"""WebDataset benchmark: streamfeed ``read_webdataset`` vs. the ``webdataset`` library on the same shards.

The shards (``--images`` JPEGs of ``--size`` x ``--size`` pixels, random
content, with a ``.cls`` label, cut into ``--shards`` tar files) are written
once by ``webdataset.TarWriter`` into ``--data-dir``. One pass each, both
decoding every JPEG to ``uint8`` (height, width, 3) at its stored size:

* ``webdataset``: ``WebDataset(shards, shardshuffle=False).decode("rgb8")
  .to_tuple("jpg", "cls")``, one sample at a time (its own loop; no DataLoader);
* ``streamfeed``: ``read_webdataset(shards, keys=["jpg", "cls"]).batch(64)``
  (opening included: the header index that gives the exact count).

The approaches alternate for ``--rounds`` rounds in one process; the table
shows the best images/s and the CPU milliseconds per image (process CPU
time, all threads) of that run. The load average is printed at the start
and at the end: the machine is shared.

Usage::

    python benchmarks/webdataset_shards.py                       # 10 000 images of 64x64, 2 rounds
    python benchmarks/webdataset_shards.py --images 2000 --rounds 1
    python benchmarks/webdataset_shards.py --http                # the same shards over loopback HTTP

Over HTTP, webdataset reads each shard through ``curl`` (its ``gopen``); the
CPU column counts child processes too, so curl's CPU is webdataset's.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

import numpy as np


def write_shards(root: Path, images: int, size: int, shards: int) -> list[str]:
    """The shards, written once (kept when they exist for these settings)."""
    import webdataset as wds

    folder = root / f"wds-{images}-{size}-{shards}"
    paths = [str(folder / f"shard-{number:04d}.tar") for number in range(shards)]
    if all(os.path.exists(path) for path in paths):
        return paths
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    per = -(-images // shards)
    for number, path in enumerate(paths):
        with wds.TarWriter(path) as writer:
            for i in range(number * per, min(images, (number + 1) * per)):
                image = rng.integers(0, 256, (size, size, 3), dtype=np.uint8)
                writer.write({"__key__": f"img{i:07d}", "jpg": image, "cls": i % 10})
    return paths


def run_webdataset(paths: list[str]) -> tuple[int, int]:
    import webdataset as wds

    count = total = 0
    for image, label in (
        wds.WebDataset(paths, shardshuffle=False, empty_check=False).decode("rgb8").to_tuple("jpg", "cls")
    ):
        count += 1
        total += int(label) + int(image[0, 0, 0])
    return count, total


def run_streamfeed(paths: list[str]) -> tuple[int, int]:
    import streamfeed as sf

    count = total = 0
    with sf.read_webdataset(paths, keys=["jpg", "cls"]).batch(64).iter_epoch(0) as stream:
        for batch in stream:
            count += len(batch["cls"])
            total += int(batch["cls"].sum()) + int(batch["jpg"][:, 0, 0, 0].astype(np.int64).sum())
    return count, total


def _children_cpu() -> float:
    """CPU seconds of the waited-for child processes: webdataset reads an ``http://`` shard through ``curl``."""
    import resource

    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def measure(function: Callable[[list[str]], tuple[int, int]], paths: list[str]) -> tuple[float, float, int]:
    """Images per second, CPU ms per image (the process's and its children's), and a checksum of what was read."""
    wall, cpu = time.perf_counter(), time.process_time() + _children_cpu()
    count, total = function(paths)
    wall, cpu = time.perf_counter() - wall, time.process_time() + _children_cpu() - cpu
    return count / wall, 1000 * cpu / count, total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=10_000)
    parser.add_argument("--size", type=int, default=64)
    parser.add_argument("--shards", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--data-dir", type=Path, default=Path(tempfile.gettempdir()) / "streamfeed-bench")
    parser.add_argument(
        "--http", action="store_true", help="read the shards over loopback HTTP (the storage tests' range server)"
    )
    args = parser.parse_args()
    paths = write_shards(args.data_dir, args.images, args.size, args.shards)
    server = None
    if args.http:  # the server is its own process: its CPU is counted for neither approach
        sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "storage"))
        from _http_server import HttpServer

        server = HttpServer(Path(paths[0]).parent)
        server.__enter__()
        paths = [f"{server.url}/{Path(path).name}" for path in paths]
    try:
        run_rounds(args, paths)
    finally:
        if server is not None:
            server.__exit__(None, None, None)


def run_rounds(args: argparse.Namespace, paths: list[str]) -> None:
    """The interleaved rounds and the table (the module doc)."""
    print(f"load average at start: {os.getloadavg()}; shards {'over HTTP' if args.http else 'local'}")
    results: dict[str, list[tuple[float, float, int]]] = {"webdataset": [], "streamfeed": []}
    for _ in range(args.rounds):
        results["webdataset"].append(measure(run_webdataset, paths))
        results["streamfeed"].append(measure(run_streamfeed, paths))
    sums = {name: {checksum for _, _, checksum in runs} for name, runs in results.items()}
    assert sums["webdataset"] == sums["streamfeed"] and len(sums["streamfeed"]) == 1, f"not the same samples: {sums}"
    print(f"{args.images} JPEGs of {args.size}x{args.size} in {args.shards} shards, {args.rounds} rounds")
    print(f"{'approach':<12} {'best images/s':>14} {'CPU ms/image':>13}")
    for name, runs in results.items():
        best = max(runs)
        print(f"{name:<12} {best[0]:>14.0f} {min(run[1] for run in runs):>13.3f}")
    print(f"load average at end: {os.getloadavg()}")


if __name__ == "__main__":
    main()
