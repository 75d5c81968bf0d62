"""The pipeline: the fluent ``Dataset`` (``dataset.py``) over its frozen settings (``settings.py``), their one
resolution into sizes, plans and states (``resolve.py``), user ops (``ops.py``), the one fragment pass
(``passes.py``) and the running epoch (``iterator.py``).
"""

from ..plan import Remainder
from .dataset import Dataset
from .iterator import EpochIterator

__all__ = ["Dataset", "EpochIterator", "Remainder"]
