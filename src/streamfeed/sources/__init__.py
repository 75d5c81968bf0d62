"""One module per format, each behind the protocol in ``streamfeed.core``."""

from .parquet import ParquetSource, read_parquet

__all__ = ["ParquetSource", "read_parquet"]
