"""The Keras boundary: the dataset adapter, the callbacks, and layers built from stats."""

from .adapter import KerasDataset
from .checkpoint import DataCheckpoint
from .hard_examples import HardExampleMiner
from .layers import discretization_layer, integer_lookup_layer, normalization_layer, string_lookup_layer
from .monitor import InputStallMonitor
from .quality_monitor import DataQualityMonitor
from .tf_distributed import WorkerCheckpoint, WorkerFeed

__all__ = [
    "DataCheckpoint",
    "DataQualityMonitor",
    "HardExampleMiner",
    "InputStallMonitor",
    "KerasDataset",
    "WorkerCheckpoint",
    "WorkerFeed",
    "discretization_layer",
    "integer_lookup_layer",
    "normalization_layer",
    "string_lookup_layer",
]
