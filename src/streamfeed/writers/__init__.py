"""Writers that turn a Dataset or chunks of NumPy arrays into files of a given format."""
