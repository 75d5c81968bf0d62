"""CSV files: the source (``source.py``), file access and the row-count index (``files.py``), the quote-aware
scan (``scan.py``), dialect and type options (``options.py``), and one byte range read as a fragment
(``fragment.py``).
"""

from .source import CsvSource

__all__ = ["CsvSource"]
