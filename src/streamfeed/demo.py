"""The main job: generate a Parquet dataset once, train a Keras model on it.

The data is written in bounded pieces, so ``--rows`` can be far larger
than memory; it is cached by size under ``~/.cache/streamfeed/demo``.
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

logger = logging.getLogger("streamfeed")

ROWS_PER_FILE = 1_048_576
ROW_GROUP_ROWS = 65_536


def default_cache_dir() -> Path:
    return Path(os.environ.get("STREAMFEED_CACHE", Path.home() / ".cache" / "streamfeed"))


def data_directory(data_dir: Path | None) -> Path:
    """Where the demo keeps its datasets: ``data_dir``, or ``~/.cache/streamfeed/demo`` (``$STREAMFEED_CACHE``)."""
    return Path(data_dir) if data_dir is not None else default_cache_dir() / "demo"


def dataset_path(directory: Path, rows: int, features: int) -> Path:
    """The dataset of this size under ``directory`` (generated or not)."""
    return Path(directory) / f"synthetic-{rows}x{features}"


def is_generated(target: Path) -> bool:
    return (target / "_COMPLETE").exists()


def estimated_bytes(rows: int, features: int) -> int:
    """About the bytes the dataset takes on disk.

    Random float32 values do not compress, and the writer's dictionary
    pages (filled, then abandoned for plain encoding) add to them: measured
    1.36x (8 features) to 1.45x (32) the raw bytes of ``id``, features and label.
    """
    return int(rows * (8 + 4 * features + 4) * 1.45)


def generate(directory: Path, rows: int, features: int, seed: int = 0, progress: bool | None = None) -> Path:
    """Writes ``rows`` rows of float32 features and a noisy linear label (once).

    ``progress``: a bar of rows written (None: on a terminal; see ``inspect.progress``).
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    from .files.atomic import atomic_open, write_atomic
    from .inspect.progress import progress as progress_bar

    target = dataset_path(directory, rows, features)
    done = target / "_COMPLETE"
    if done.exists():
        return target
    target.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    weights = rng.normal(size=features).astype(np.float32)
    written = 0
    with progress_bar(rows, "generating", unit="rows", enabled=progress) as advance:
        for index in range(-(-rows // ROWS_PER_FILE)):
            count = min(ROWS_PER_FILE, rows - written)
            path = target / f"part-{index:05d}.parquet"
            # each file written whole or not at all, never through a link planted at its name (files/atomic.py)
            with atomic_open(path, "wb") as out, pq.ParquetWriter(out, _schema(features)) as writer:
                for start in range(0, count, ROW_GROUP_ROWS):
                    n = min(ROW_GROUP_ROWS, count - start)
                    x = rng.normal(size=(n, features)).astype(np.float32)
                    y = x @ weights + rng.normal(scale=0.1, size=n).astype(np.float32)
                    first = written + start
                    columns: dict[str, np.ndarray] = {"id": np.arange(first, first + n, dtype=np.int64)}
                    columns.update({f"f{i}": x[:, i] for i in range(features)})
                    columns["y"] = y.astype(np.float32)
                    writer.write_table(pa.table(columns, schema=_schema(features)))
                    advance(n)
            written += count
    write_atomic(done, f"{rows} rows\n")
    return target


def _schema(features: int):
    import pyarrow as pa

    return pa.schema([("id", pa.int64()), *[(f"f{i}", pa.float32()) for i in range(features)], ("y", pa.float32())])


@dataclass
class DemoResult:
    backend: str
    rows: int
    epochs: int
    bytes_on_disk: int
    seconds: float
    rows_per_second: float
    peak_rss_bytes: int
    estimated_pipeline_bytes: int
    input_wait_share: float
    final_loss: float


def build_model(features: int):
    """The demo's model: Dense(16, relu) -> Dense(1), Adam, MSE (``streamfeed bench --model demo`` uses it too)."""
    import keras

    model = keras.Sequential(
        [keras.Input((features,)), keras.layers.Dense(16, activation="relu"), keras.layers.Dense(1)]
    )
    model.compile(optimizer="adam", loss="mse")
    return model


def run(
    *,
    rows: int,
    features: int,
    epochs: int,
    batch_size: int,
    data_dir: Path | None,
    memory_limit: int | None,
    verbose: int = 1,
) -> DemoResult:
    """Generates (or reuses) the data and trains for ``epochs`` epochs."""
    import keras

    import streamfeed as sf
    from streamfeed.memory import peak_rss_bytes

    directory = generate(data_directory(data_dir), rows, features)
    size = sum(path.stat().st_size for path in directory.glob("*.parquet"))
    dataset = sf.read_parquet(directory, columns=[f"f{i}" for i in range(features)] + ["y"]).shuffle(seed=0)
    dataset = dataset.batch(batch_size).with_options(memory_limit=memory_limit)
    model = build_model(features)
    train = dataset.to_keras(label="y", model=model)
    logger.info("%d rows, %d batches per epoch, layout %s", dataset.num_rows(), len(train), dataset.layout())
    started = time.perf_counter()
    with train:
        history = model.fit(train, epochs=epochs, verbose=verbose)
    seconds = time.perf_counter() - started
    return DemoResult(
        backend=keras.backend.backend(),
        rows=dataset.num_rows(),
        epochs=epochs,
        bytes_on_disk=size,
        seconds=seconds,
        rows_per_second=dataset.num_rows() * epochs / seconds,
        peak_rss_bytes=peak_rss_bytes(),
        estimated_pipeline_bytes=dataset.layout().estimated_bytes,
        input_wait_share=train.input_wait_seconds / seconds,
        final_loss=float(history.history["loss"][-1]),
    )


def summary(result: DemoResult) -> str:
    mib = 2**20
    return "\n".join(
        [
            "streamfeed demo summary",
            f"  backend               {result.backend}",
            f"  dataset               {result.rows:,} rows, {result.bytes_on_disk / mib:,.0f} MiB on disk",
            f"  trained               {result.epochs} epochs in {result.seconds:,.1f} s "
            f"= {result.rows_per_second:,.0f} rows/s",
            f"  peak RSS              {result.peak_rss_bytes / mib:,.0f} MiB "
            f"(pipeline buffers estimated {result.estimated_pipeline_bytes / mib:,.0f} MiB)",
            f"  waiting for data      {result.input_wait_share:.1%} of training time",
            f"  final loss            {result.final_loss:.4f}",
        ]
    )
