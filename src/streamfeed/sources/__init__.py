"""One module per format, each behind the protocol in ``streamfeed.core``.

Readers import their format's optional dependencies lazily, so importing
this package needs only pyarrow and NumPy.
"""

from .csv import CsvSource, read_csv
from .hdf5 import HDF5Source, read_hdf5
from .images import ImageSource, read_images
from .numpy import NumpySource, read_numpy
from .parquet import ParquetSource, read_parquet
from .tfrecord import TFRecordSource, read_tfrecord

__all__ = [
    "CsvSource",
    "HDF5Source",
    "ImageSource",
    "NumpySource",
    "ParquetSource",
    "TFRecordSource",
    "read_csv",
    "read_hdf5",
    "read_images",
    "read_numpy",
    "read_parquet",
    "read_tfrecord",
]
