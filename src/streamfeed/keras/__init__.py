"""The Keras boundary: the dataset adapter and the callbacks."""

from .adapter import KerasDataset
from .checkpoint import DataCheckpoint

__all__ = ["DataCheckpoint", "KerasDataset"]
