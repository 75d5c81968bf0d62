"""One module per format, each behind the ``Source`` protocol in ``streamfeed.core``.

This package imports nothing on its own: a source module loads its
format's dependencies only when imported, so reading Parquet never loads
h5py, Pillow or the TFRecord parser. The ``read_*`` functions that wrap a
source into a :class:`streamfeed.Dataset` live one layer up, in
``streamfeed.readers``.
"""
