"""HDF5 files read with h5py, one column per dataset: the source and fragment (``source.py``), the catalog of
datasets and text decoding (``catalog.py``), the external-storage guard (``guard.py``), and kept file handles and
the worker-process reader (``handles.py``)."""

from .source import HDF5Source

__all__ = ["HDF5Source"]
