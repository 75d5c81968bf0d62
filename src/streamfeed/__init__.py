"""streamfeed: stream datasets far larger than memory into Keras 3 training.

    import streamfeed as sf
    train = sf.read_parquet("clicks/").shuffle(seed=1).batch(1024).to_keras(label="y")
    model.fit(train, epochs=3)

Names load on first use (PEP 562): ``import streamfeed`` imports no source
module, no Keras and no framework, so ``import streamfeed.pipeline`` costs
only the pipeline's own layers, and ``sf.keras`` loads Keras when asked for.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

# public name -> the module (relative to this package) that defines it
_EXPORTS = {
    "Chunk": ".core",
    "Fragment": ".core",
    "Position": ".core",
    "Source": ".core",
    "ArgumentError": ".errors",
    "BadInputReport": ".errors",
    "CorruptFileError": ".errors",
    "DataError": ".errors",
    "ErrorBudgetExceeded": ".errors",
    "ErrorPolicy": ".errors",
    "MemoryLimitError": ".errors",
    "UserFunctionError": ".errors",
    "BackendError": ".errors",
    "ManifestMismatchError": ".errors",
    "MissingDependencyError": ".errors",
    "NotFoundError": ".errors",
    "NetworkError": ".errors",
    "ObjectChangedError": ".errors",
    "OutputExistsError": ".errors",
    "PublishError": ".errors",
    "StorageError": ".errors",
    "UnknownNameError": ".errors",
    "SchemaError": ".errors",
    "StateError": ".errors",
    "StreamfeedError": ".errors",
    "Dataset": ".pipeline",
    "EpochIterator": ".pipeline",
    "MixedDataset": ".pipeline.mix",
    "mix": ".pipeline.mix",
    "RowRandom": ".runtime.row_random",
    "StageMetrics": ".runtime.metrics",
    "Pad": ".runtime.padding",
    "Bucket": ".runtime.bucketing",
    "Ragged": ".core_ragged",
    "BenchReport": ".diagnostics",
    "bench": ".diagnostics",
    "InspectReport": ".inspect",
    "inspect": ".inspect",
    "QualityReport": ".inspect.quality",
    "quality_report": ".inspect.quality",
    "class_weights": ".sampling",
    "with_class_weights": ".sampling",
    "ColumnStats": ".stats",
    "StaleStatsError": ".stats",
    "Stats": ".stats",
    "compute_stats": ".stats",
    "read_csv": ".readers",
    "read_hdf5": ".readers",
    "read_images": ".readers",
    "read_numpy": ".readers",
    "read_parquet": ".readers",
    "read_ray": ".readers",
    "read_tfrecord": ".readers",
    "read_webdataset": ".readers",
    "read_sql": ".readers_sql",
    "write_tfrecord": ".writers.tfrecord",
}

__all__ = sorted(_EXPORTS)

if TYPE_CHECKING:  # what type checkers and IDEs see; at run time __getattr__ loads the same names
    from .core import Chunk, Fragment, Position, Source
    from .core_ragged import Ragged
    from .diagnostics import BenchReport, bench
    from .errors import (
        ArgumentError,
        BackendError,
        BadInputReport,
        CorruptFileError,
        DataError,
        ErrorBudgetExceeded,
        ErrorPolicy,
        ManifestMismatchError,
        MemoryLimitError,
        MissingDependencyError,
        NetworkError,
        NotFoundError,
        ObjectChangedError,
        OutputExistsError,
        PublishError,
        SchemaError,
        StateError,
        StorageError,
        StreamfeedError,
        UnknownNameError,
        UserFunctionError,
    )
    from .inspect import InspectReport, inspect
    from .inspect.quality import QualityReport, quality_report
    from .pipeline import Dataset, EpochIterator
    from .pipeline.mix import MixedDataset, mix
    from .readers import (
        read_csv,
        read_hdf5,
        read_images,
        read_numpy,
        read_parquet,
        read_ray,
        read_tfrecord,
        read_webdataset,
    )
    from .readers_sql import read_sql
    from .runtime.bucketing import Bucket
    from .runtime.metrics import StageMetrics
    from .runtime.padding import Pad
    from .sampling import class_weights, with_class_weights
    from .stats import ColumnStats, StaleStatsError, Stats, compute_stats
    from .writers.tfrecord import write_tfrecord


def __getattr__(name: str) -> Any:
    if name == "keras":  # ``sf.keras`` imports Keras only when asked for: reading data needs no backend
        return import_module(".keras", __name__)
    if name not in _EXPORTS:
        raise AttributeError(f"module 'streamfeed' has no attribute {name!r}")
    value = getattr(import_module(_EXPORTS[name], __name__), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS) | {"keras"})
