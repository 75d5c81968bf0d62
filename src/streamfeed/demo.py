"""The main job: generate a Parquet dataset once, train a Keras model on it.

The data is written in bounded pieces, so ``--rows`` can be far larger
than memory; it is cached by size under ``~/.cache/streamfeed/demo``.
``run_bound`` (``streamfeed demo --bound``) shows the memory bound instead:
a dataset several times the memory limit streamed through the shuffled
pipeline, without a model (Keras's own memory is not the pipeline's), with
the process's RSS printed against the limit.
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

logger = logging.getLogger("streamfeed")

ROWS_PER_FILE = 1_048_576
ROW_GROUP_ROWS = 65_536
DEFAULT_ROWS = 2_000_000
BOUND_MEMORY_LIMIT = 64 * 2**20  # --bound's default limit: its dataset (8x) is then written and read in about a minute
BOUND_MULTIPLE = 8  # --bound's dataset, on disk, in memory limits

Say = Callable[[str], None]


def say_nothing(text: str) -> None:
    """A ``say`` that says nothing (``--quiet``)."""


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


def bound_rows(memory_limit: int, features: int) -> int:
    """Rows of ``--bound``'s dataset: :data:`BOUND_MULTIPLE` times ``memory_limit`` on disk."""
    return -(-BOUND_MULTIPLE * memory_limit // estimated_bytes(1, features))


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
    say: Say = say_nothing,
) -> DemoResult:
    """Generates (or reuses) the data and trains for ``epochs`` epochs.

    ``say`` is told each step as it starts (counted, first batch): a cached
    run otherwise shows nothing until Keras's first progress line.
    """
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
    say(_counted(dataset, len(train), batch_size))
    say(f"training {epochs} epoch(s) on {keras.backend.backend()}: reading the first batch")
    started = time.perf_counter()
    with train:
        history = model.fit(train, epochs=epochs, verbose=verbose, callbacks=[_FirstBatch(say, started)])
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


def _counted(dataset, batches: int, batch_size: int) -> str:
    files = len(dataset.source.files)
    return f"counted {dataset.num_rows():,} rows in {files} file(s): {batches:,} batches per epoch of {batch_size:,}"


def _FirstBatch(say: Say, started: float):
    """A Keras callback saying when the first batch has been trained (Keras's own line comes at the epoch's end)."""
    import keras

    class FirstBatch(keras.callbacks.Callback):
        def __init__(self) -> None:
            super().__init__()
            self.told = False

        def on_train_batch_end(self, batch: int, logs: dict | None = None) -> None:
            if not self.told:
                self.told = True
                say(f"first batch trained after {time.perf_counter() - started:,.1f} s")

    return FirstBatch()


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


@dataclass
class BoundResult:
    rows: int
    epochs: int
    rows_read: int
    bytes_on_disk: int
    memory_limit_bytes: int
    window: int
    estimated_pipeline_bytes: int
    rss_before_bytes: int
    peak_rss_bytes: int
    peak_measured_by: str
    seconds: float


def run_bound(
    *,
    rows: int,
    features: int,
    epochs: int,
    batch_size: int,
    data_dir: Path | None,
    memory_limit: int,
    say: Say = say_nothing,
) -> BoundResult:
    """Streams ``epochs`` shuffled epochs of the (generated or reused) data within ``memory_limit``, measuring RSS.

    No model: Keras and its backend hold hundreds of MiB of their own, which
    no data pipeline bounds. The shuffle window is the largest that fits the
    limit (a window too large for it is refused, never shrunk silently).
    """
    import streamfeed as sf
    from streamfeed.memory import high_water_bytes, reset_peak_rss, rss_bytes

    directory = generate(data_directory(data_dir), rows, features)
    size = sum(path.stat().st_size for path in directory.glob("*.parquet"))
    dataset = _within(
        sf.read_parquet(directory, columns=[f"f{i}" for i in range(features)] + ["y"]), batch_size, memory_limit
    )
    layout = dataset.layout()
    say(_counted(dataset, dataset.num_batches(), batch_size))
    say(f"reading {epochs} shuffled epoch(s) (window {layout.window} fragment(s)), no model: reading the first batch")
    before = rss_bytes()
    measured_by = "the kernel's high-water mark (VmHWM)" if reset_peak_rss() else "RSS after every batch"
    peak, read = before, 0
    started = time.perf_counter()
    for epoch in range(epochs):
        with dataset.iter_epoch(epoch) as batches:
            for batch in batches:
                if not read:
                    say(f"first batch read after {time.perf_counter() - started:,.1f} s")
                read += len(batch["y"])
                peak = max(peak, rss_bytes())
    seconds = time.perf_counter() - started
    return BoundResult(
        rows=dataset.num_rows(),
        epochs=epochs,
        rows_read=read,
        bytes_on_disk=size,
        memory_limit_bytes=memory_limit,
        window=layout.window,
        estimated_pipeline_bytes=layout.estimated_bytes,
        rss_before_bytes=before,
        peak_rss_bytes=max(peak, high_water_bytes() or 0),
        peak_measured_by=measured_by,
        seconds=seconds,
    )


def _within(dataset, batch_size: int, memory_limit: int):
    """The dataset shuffled with the largest window (at most the data's default) whose buffers fit ``memory_limit``."""
    from streamfeed.errors import MemoryLimitError

    unlimited = dataset.shuffle(seed=0).batch(batch_size).with_options(memory_limit=2**40)
    for window in range(unlimited.layout().window, 1, -1):
        candidate = dataset.shuffle(seed=0, window=window).batch(batch_size).with_options(memory_limit=memory_limit)
        try:
            candidate.layout()
        except MemoryLimitError:
            continue
        return candidate
    # window 1, or the library's own refusal naming the limit that would fit
    candidate = dataset.shuffle(seed=0, window=1).batch(batch_size).with_options(memory_limit=memory_limit)
    candidate.layout()
    return candidate


def bound_summary(result: BoundResult) -> str:
    """The bound in figures: the limit, RSS before and at its peak, and the data against the peak.

    RSS grows while reading by the pipeline's buffers (at most the limit)
    plus what the limit does not cover: the allocator's retained pages and
    the code the first read loads (``docs/performance.md``). Measured at
    the 64 MiB default: 114 MiB more (60 MiB estimated) for 77 MiB and for
    512 MiB of data, over 1 and over 3 epochs.
    """
    mib = 2**20
    limit = result.memory_limit_bytes
    grown = result.peak_rss_bytes - result.rss_before_bytes
    epochs = f"{result.epochs} epoch" + ("s" if result.epochs != 1 else "")
    return "\n".join(
        [
            "streamfeed demo --bound summary",
            f"  dataset               {result.rows:,} rows, {result.bytes_on_disk / mib:,.0f} MiB on disk "
            f"({result.bytes_on_disk / limit:,.1f}x the memory limit)",
            f"  memory limit          {limit / mib:,.0f} MiB (pipeline buffers estimated "
            f"{result.estimated_pipeline_bytes / mib:,.0f} MiB, shuffle window {result.window} fragment(s))",
            f"  read                  {result.rows_read:,} rows in {epochs} in {result.seconds:,.1f} s "
            f"= {result.rows_read / max(result.seconds, 1e-9):,.0f} rows/s, shuffled, no model",
            f"  RSS before reading    {result.rss_before_bytes / mib:,.0f} MiB (the interpreter, NumPy, pyarrow)",
            f"  peak RSS              {result.peak_rss_bytes / mib:,.0f} MiB, {grown / mib:,.0f} MiB more than before "
            f"reading: the buffers (within the limit) and what the limit does not cover",
            "                        (the allocator's retained pages, the code the first read loads; "
            f"by {result.peak_measured_by})",
            f"  data / peak RSS       {result.bytes_on_disk / max(result.peak_rss_bytes, 1):,.1f}x: "
            "the process never held the data, and its RSS does not grow with it",
        ]
    )
