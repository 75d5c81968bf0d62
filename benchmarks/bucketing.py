"""Bucketing by length against padding per batch and padding to one length: shapes, padding, speed.

```
python benchmarks/bucketing.py                 # 200 000 rows of token lists, lengths 1..256 (long tail)
python benchmarks/bucketing.py --rows 1000000
```

For each way of making rectangular batches of a shuffled epoch, reports
the distinct batch shapes (each one an XLA compilation, keras#20369), the
share of pad values among the values served, the counting pass that
bucketing runs once for its steps (``len``), and the epoch's CPU and wall
seconds per million rows through ``iter_epoch``. The data is generated
into a temporary directory and removed.

Beside them, in the same process and on the same rows, tf.data's own
answers fed from memory (the whole column as one ``tf.RaggedTensor``,
``from_tensor_slices``, ``shuffle(20_000)``): ``padded_batch(64)`` and
``bucket_by_sequence_length`` with the same buckets padded to their
boundaries (tf.data's boundaries are exclusive: ``17, 33, ...``). Their
CPU is the process's over the epoch, TF's threads included, as for
streamfeed. ``--no-tf`` leaves them out.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

import streamfeed as sf

BOUNDARIES = (16, 32, 64, 128, 256)


def write(path: Path, rows: int) -> None:
    rng = np.random.default_rng(0)
    lengths = np.minimum(1 + (rng.pareto(1.5, rows) * 20).astype(np.int64), 256)
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    values = rng.integers(1, 30_000, size=int(offsets[-1]), dtype=np.int32)
    tok = pa.LargeListArray.from_arrays(pa.array(offsets), pa.array(values))
    pq.write_table(pa.table({"tok": tok, "y": rng.random(rows).astype(np.float32)}), path, row_group_size=20_000)


def measure(name: str, dataset: sf.Dataset) -> dict:
    started, cpu = time.perf_counter(), time.process_time()
    steps = len(dataset)
    count_wall = time.perf_counter() - started
    shapes: set[tuple[int, ...]] = set()
    rows = values = real = 0
    started, cpu = time.perf_counter(), time.process_time()
    with dataset.iter_epoch(0) as epoch:
        for batch in epoch:
            shapes.add(batch["tok"].shape)
            rows += len(batch["tok"])
            values += batch["tok"].size
            real += int(batch["tok_length"].sum())
    wall, cpu = time.perf_counter() - started, time.process_time() - cpu
    return {
        "variant": name,
        "steps": steps,
        "shapes": len(shapes),
        "pad_share": round(1 - real / values, 3),
        "count_pass_s": round(count_wall, 2),
        "epoch_cpu_s_per_mrow": round(cpu / rows * 1e6, 2),
        "epoch_wall_s_per_mrow": round(wall / rows * 1e6, 2),
    }


def measure_tf(name: str, path: Path) -> dict:
    """One shuffled epoch of a tf.data pipeline over the file's rows held in memory (see the module doc)."""
    import os

    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import tensorflow as tf

    table = pq.read_table(path)
    column = table["tok"].combine_chunks()
    lengths = np.diff(column.offsets.to_numpy())
    tokens = tf.RaggedTensor.from_row_lengths(column.values.to_numpy(), lengths)
    data = tf.data.Dataset.from_tensor_slices((tokens, table["y"].to_numpy())).shuffle(20_000, seed=0)
    data = data.map(lambda tok, y: (tf.identity(tok), y))  # a row of a ragged_rank-1 tensor is a dense 1-D tensor
    if name.startswith("tf.data padded_batch"):
        data = data.padded_batch(64)
    else:
        data = data.bucket_by_sequence_length(
            lambda tok, y: tf.shape(tok)[0],
            bucket_boundaries=[b + 1 for b in BOUNDARIES],
            bucket_batch_sizes=[64] * (len(BOUNDARIES) + 1),
            pad_to_bucket_boundary=True,
        )
    shapes: set[tuple[int, ...]] = set()
    rows = values = real = 0
    started, cpu = time.perf_counter(), time.process_time()
    for tok, _ in data.as_numpy_iterator():
        shapes.add(tok.shape)
        rows += len(tok)
        values += tok.size
        real += int(np.count_nonzero(tok))  # token ids are >= 1: the non-zeros are the values
    wall, cpu = time.perf_counter() - started, time.process_time() - cpu
    return {
        "variant": name,
        "steps": None,
        "shapes": len(shapes),
        "pad_share": round(1 - real / values, 3),
        "count_pass_s": None,
        "epoch_cpu_s_per_mrow": round(cpu / rows * 1e6, 2),
        "epoch_wall_s_per_mrow": round(wall / rows * 1e6, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--no-tf", action="store_true", help="leave out the tf.data pipelines")
    args = parser.parse_args()
    import os

    print(json.dumps({"command": "python benchmarks/bucketing.py", "rows": args.rows, "load": os.getloadavg()[0]}))
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "tokens.parquet"
        write(path, args.rows)
        base = sf.read_parquet(path).shuffle(0)
        variants = {
            "pad to each batch's longest": base.batch(64, pad=sf.Pad()),
            "pad to 256": base.batch(64, pad=sf.Pad(length=256)),
            "bucket, 64 rows each": base.batch(bucket=sf.Bucket("tok", BOUNDARIES, (64,) * 5)),
            "bucket, ~2048 tokens each": base.batch(bucket=sf.Bucket("tok", BOUNDARIES, (128, 64, 32, 16, 8))),
        }
        for name, dataset in variants.items():
            print(json.dumps(measure(name, dataset)))
        if not args.no_tf:
            for name in ("tf.data padded_batch(64)", "tf.data bucket_by_sequence_length, 64 rows each"):
                print(json.dumps(measure_tf(name, path)))
        print(json.dumps({"load_at_end": os.getloadavg()[0]}))


if __name__ == "__main__":
    main()
