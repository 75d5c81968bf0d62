"""Zip archives of images, one folder per class: the source (``source.py``), the central directory index with
its guards (``index.py``) and the fragment's ranged reads (``fragment.py``)."""

from .source import ZipImageSource, is_zip_archive

__all__ = ["ZipImageSource", "is_zip_archive"]
