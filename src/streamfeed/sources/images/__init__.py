"""Image folders: the source (``source.py``) and the decoders it shares with transforms and inspect (``decode.py``)."""

from .source import ImageSource

__all__ = ["ImageSource"]
