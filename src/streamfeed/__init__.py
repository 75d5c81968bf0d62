"""streamfeed: stream datasets far larger than memory into Keras 3 training.

    import streamfeed as sf
    train = sf.read_parquet("clicks/").shuffle(seed=1).batch(1024).to_keras(label="y")
    model.fit(train, epochs=3)
"""

from .core import Chunk, Fragment, Position, Source
from .errors import (
    BadInputReport,
    CorruptFileError,
    DataError,
    ErrorBudgetExceeded,
    SchemaError,
    StateError,
    StreamfeedError,
)
from .pipeline import Dataset, EpochIterator
from .runtime.metrics import StageMetrics
from .diagnostics import BenchReport, bench
from .inspect import InspectReport, inspect
from .quality import QualityReport, quality_report
from .sampling import class_weights, with_class_weights
from .stats import ColumnStats, StaleStatsError, Stats, compute_stats
from .sources import read_csv, read_hdf5, read_images, read_numpy, read_parquet, read_tfrecord
from .writers.tfrecord import write_tfrecord

__version__ = "0.1.0"


def __getattr__(name: str):
    # ``sf.keras`` imports Keras only when asked for: reading data needs no backend.
    if name == "keras":
        import importlib

        return importlib.import_module(".keras", __name__)
    raise AttributeError(f"module 'streamfeed' has no attribute {name!r}")


__all__ = [
    "BadInputReport",
    "BenchReport",
    "ColumnStats",
    "Chunk",
    "CorruptFileError",
    "DataError",
    "Dataset",
    "EpochIterator",
    "ErrorBudgetExceeded",
    "Fragment",
    "InspectReport",
    "Position",
    "QualityReport",
    "SchemaError",
    "StaleStatsError",
    "Source",
    "StageMetrics",
    "bench",
    "class_weights",
    "compute_stats",
    "inspect",
    "quality_report",
    "StateError",
    "Stats",
    "StreamfeedError",
    "read_csv",
    "read_hdf5",
    "read_images",
    "read_numpy",
    "read_parquet",
    "read_tfrecord",
    "with_class_weights",
    "write_tfrecord",
]
