"""Tar shards in the WebDataset layout: the source (``source.py``), the tar header index (``tarindex.py``),
samples by basename (``samples.py``), decoders by extension (``decode.py``) and the fragment (``fragment.py``)."""

from .source import WebDatasetSource

__all__ = ["WebDatasetSource"]
