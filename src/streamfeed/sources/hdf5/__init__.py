"""HDF5 files read with h5py, one column per dataset."""

from .source import HDF5Source

__all__ = ["HDF5Source"]
