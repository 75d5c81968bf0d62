"""Image folders: the source (``source.py``), the listing of class folders and the label map (``listing.py``),
the fragment and header probe (``fragment.py``), and the decoders shared with transforms and inspect (``decode.py``)."""

from .source import ImageSource

__all__ = ["ImageSource"]
