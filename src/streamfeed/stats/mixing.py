"""splitmix64 for the statistics' sketches: it lives in ``runtime/mixing.py``, where ``random_map`` uses it too."""

from __future__ import annotations

from ..runtime.mixing import GOLDEN, mix64, splitmix64

__all__ = ["GOLDEN", "mix64", "splitmix64"]
