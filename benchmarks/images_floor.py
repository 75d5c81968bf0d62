"""The decode floor of the image benchmark (issue 27): CPU per image of libjpeg-turbo alone against streamfeed's.

The floor is simplejpeg decoding the same files to the same size on one
thread, the files' bytes already in memory (reading them is not the
decoder's time): ``decoder`` into a new array per image (how the decoder
is called by hand), ``decoder_buffer`` into one reused array (the least
the decode can cost). Against it, streamfeed's whole cost of an epoch:
``read_images(...)`` (listing, header probe) then every ``.batch(64)`` of
one epoch, unshuffled and shuffled, and apart the steady state: a later
epoch of the same dataset in the same process, as warm as the floor's
repeated passes. Each cell runs in a fresh process with
its imports outside the clock and reports CPU ms per image (the process's,
every thread), the best of ``repeat`` passes for the floor; ``images.py``
runs the cells alternated and prints the ratios.
"""

from __future__ import annotations

import time
from pathlib import Path

FLOOR_APPROACHES = ("decoder", "decoder_buffer", "streamfeed", "streamfeed_shuffled")
FLOOR_LABELS = {
    "decoder": "floor: simplejpeg to a new array, 1 thread",
    "decoder_buffer": "floor: simplejpeg into one buffer, 1 thread",
    "streamfeed": "streamfeed read_images().batch(64)",
    "streamfeed_shuffled": "streamfeed read_images().shuffle().batch(64)",
}
TARGET = 1.2  # streamfeed's CPU per image <= 1.2x the floor's


def floor_cell(approach: str, files: list[str], path: Path, out: int, batch: int, repeat: int = 3) -> dict:
    """One cell: CPU ms per image (and the epoch's alone for streamfeed); imports are outside the clock."""
    import numpy as np
    import simplejpeg

    import streamfeed.readers  # noqa: F401  (imported before the clock, as the decoder's import is)

    if approach.startswith("decoder"):
        datas = [Path(name).read_bytes() for name in files]
        buffer = np.empty((out, out, 3), np.uint8) if approach == "decoder_buffer" else None
        best = float("inf")
        for _ in range(repeat):
            cpu = time.process_time()
            for data in datas:
                simplejpeg.decode_jpeg(data, min_width=out, min_height=out, buffer=buffer)
            best = min(best, time.process_time() - cpu)
        return {"images": len(datas), "cpu_ms_per_image": 1e3 * best / len(datas)}
    from streamfeed.readers import read_images

    for name in files:  # into the page cache, as the floor reads them into memory: neither pays the disk
        Path(name).read_bytes()
    cpu, wall = time.process_time(), time.perf_counter()
    dataset = read_images(path, size=(out, out))
    if approach == "streamfeed_shuffled":
        dataset = dataset.shuffle(seed=0)
    batched = dataset.batch(batch)
    opened = time.process_time()
    count = _epoch_images(batched, 0)
    done, wall = time.process_time(), time.perf_counter() - wall
    # The floor is the best of ``repeat`` warm passes; streamfeed's like of it is a later epoch in the same
    # process (thread pools up, code loaded), the best of ``repeat - 1``: a first epoch swung 1.1-1.9x.
    steady = float("inf")
    for epoch in range(1, max(2, repeat)):
        before = time.process_time()
        _epoch_images(batched, epoch)
        steady = min(steady, time.process_time() - before)
    return {
        "images": count,
        "cpu_ms_per_image": 1e3 * (done - cpu) / count,
        "open_cpu_ms_per_image": 1e3 * (opened - cpu) / count,
        "epoch_cpu_ms_per_image": 1e3 * (done - opened) / count,
        "steady_cpu_ms_per_image": 1e3 * steady / count,
        "rate": count / wall,
    }


def _epoch_images(batched, epoch: int) -> int:
    """Images served by one epoch of ``batched``."""
    count = 0
    with batched.iter_epoch(epoch) as batches:
        for served in batches:
            count += len(served["label"])
    return count


def floor_summary(cells: dict[str, list[dict]]) -> list[str]:
    """Lines: each approach's best and median CPU ms per image over the rounds, and the ratios to the floors."""
    import statistics

    lines, best = [], {}
    for approach in FLOOR_APPROACHES:
        runs = [run for run in cells.get(approach, []) if "error" not in run]
        if not runs:
            errors = [run["error"] for run in cells.get(approach, [])]
            lines.append(f"  floor {FLOOR_LABELS[approach]:46s}  ERROR {errors[:1]}")
            continue
        values = sorted(run["cpu_ms_per_image"] for run in runs)
        best[approach] = values[0]
        if "steady_cpu_ms_per_image" in runs[0]:
            best[f"{approach} steady"] = min(run["steady_cpu_ms_per_image"] for run in runs)
        line = f"  floor {FLOOR_LABELS[approach]:46s}  {values[0]:.3f} best / {statistics.median(values):.3f} median"
        line += " CPU ms/img"
        if "epoch_cpu_ms_per_image" in runs[0]:
            line += (
                f"  (open {min(r['open_cpu_ms_per_image'] for r in runs):.3f}"
                f", epoch {min(r['epoch_cpu_ms_per_image'] for r in runs):.3f}"
                f", steady epoch {min(r['steady_cpu_ms_per_image'] for r in runs):.3f}"
                f"; {max(r['rate'] for r in runs):,.0f} img/s)"
            )
        lines.append(line)
    for floor in ("decoder_buffer", "decoder"):
        for approach in ("streamfeed", "streamfeed_shuffled", "streamfeed steady", "streamfeed_shuffled steady"):
            if floor in best and approach in best:
                lines.append(
                    f"  {approach} / {floor} = {best[approach] / best[floor]:.2f} (best over best; target <= {TARGET})"
                )
    return lines
