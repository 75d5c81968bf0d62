"""The external-storage guard: nothing outside the data is ever read.

A dataset may keep its bytes in *another* file: external raw storage
(``h5py``'s ``external=``, any file such as ``/etc/passwd``) or a virtual
dataset mapping datasets of other files. Reading it would serve whatever
that file holds, and where HDF5 looks for a relative name depends on
``HDF5_EXTFILE_PREFIX``/``HDF5_VDS_PREFIX``, the working directory and the
file's folder, so "inside the data folder" cannot be decided from the name.
Such datasets are refused when the source opens (and again before a
read of a file that is not the version checked, see :class:`CheckedFiles`),
naming the file, the dataset and what it points at, unless
``allow_external=True``; a virtual dataset whose sources are in the same
file (``"."``) is read like any other, once its sources pass the same
check (:func:`outside_data`). Its own module because the source, the read
threads, the worker processes and ``inspect`` all apply this one check.
"""

from __future__ import annotations

import os
import posixpath
import time
from dataclasses import dataclass
from typing import Any

from ...errors import CorruptFileError, describe
from .catalog import as_text, load_h5py


@dataclass(frozen=True)
class OutsideData:
    """One place outside its own file that reading a dataset would take bytes from."""

    dataset: str  # the dataset that points outside (the one asked for, or a virtual source in the same file)
    kind: str  # "external" (raw storage in a file) or "virtual" (a mapped dataset of a file)
    file: str  # the file name as HDF5 stores it

    def __str__(self) -> str:
        if self.kind == "external":
            return f"{self.dataset} stores its raw bytes in external file {self.file!r}"
        if self.file == ".":
            return f"{self.dataset} maps {self.file!r} (this file), which is not a dataset reachable without links"
        return f"{self.dataset} is a virtual dataset mapping file {self.file!r}"


_MAX_LINK_DEPTH = 8  # soft links and same-file virtual sources followed while checking; deeper is refused


def _local_dataset(handle: Any, name: str, depth: int) -> Any | None:
    """The dataset at ``name`` in this file, reached through hard and soft links only; None otherwise."""
    h5py = load_h5py()
    current = handle["/"]
    for part in (p for p in name.split("/") if p):
        if not isinstance(current, h5py.Group):
            return None
        link = current.get(part, getlink=True)
        if isinstance(link, h5py.HardLink):
            current = current[part]
        elif isinstance(link, h5py.SoftLink) and depth < _MAX_LINK_DEPTH:
            target = link.path if link.path.startswith("/") else posixpath.join(current.name, link.path)
            current = _local_dataset(handle, posixpath.normpath(target), depth + 1)
        else:
            return None  # an external link, a user-defined link, missing, or too deep
    return current if isinstance(current, h5py.Dataset) else None


def outside_data(handle: Any, name: str, depth: int = 0) -> list[OutsideData]:
    """Every file other than this one whose bytes reading dataset ``name`` would return.

    Reads the dataset's creation properties only, never its data. A virtual
    dataset's sources in this same file (``"."``) are checked in turn (they
    may be external or virtual themselves).
    """
    dataset = handle[name]
    found = [OutsideData(name, "external", as_text(file)) for file, _offset, _size in dataset.external or ()]
    if not dataset.is_virtual:
        return found
    for mapping in dataset.virtual_sources():
        file, source = as_text(mapping.file_name), as_text(mapping.dset_name)
        if file != ".":
            found.append(OutsideData(name, "virtual", file))
            continue
        local = _local_dataset(handle, source, depth)
        if local is None or depth >= _MAX_LINK_DEPTH:
            found.append(OutsideData(source, "virtual", "."))
        else:
            found.extend(outside_data(handle, local.name, depth + 1))
    return list(dict.fromkeys(found))


def refuse_outside_data(handle: Any, name: str, path: str) -> None:
    """Raises :class:`CorruptFileError` if dataset ``name`` of the file at ``path`` reads another file."""
    outside = outside_data(handle, name)
    if outside:
        raise CorruptFileError(
            describe(
                f"Dataset {name} keeps its data in another file, which streamfeed does not read by default",
                where=f"{path}, dataset {name}",
                expected="datasets whose bytes are stored in the file itself",
                found="; ".join(str(item) for item in outside),
                fix=(
                    "pass allow_external=True if you trust the files it names (HDF5 resolves relative names "
                    "against HDF5_EXTFILE_PREFIX/HDF5_VDS_PREFIX, the working directory or the file's folder), "
                    "copy the data into the file, or pass on_error='skip' to leave this file out and report it"
                ),
            )
        )


_SETTLED_SECONDS = 1.0
"""A file changed this recently is checked again at every read: its change
time may not yet tell a later rewrite apart (file times tick by the
kernel's clock, milliseconds)."""


class CheckedFiles:
    """The files whose datasets passed the outside-data check, with the identity of the file checked.

    The check reads each dataset's creation properties (~0.1 ms per
    dataset, measured). A read repeats it only when the file it opened is
    not the one checked: another device or inode (replaced), or another
    size, modification or change time (rewritten in place; the change time
    cannot be set back). Shared by a source's fragments and read threads
    (a dict's get and set are atomic).
    """

    def __init__(self) -> None:
        self._checked: dict[tuple[str, str], tuple[int, ...]] = {}

    def refuse_outside_data(self, handle: Any, name: str, path: str, identity: tuple[int, ...] | None) -> None:
        """:func:`refuse_outside_data`, unless this very file (``identity``) passed it for dataset ``name``."""
        if identity is not None and self._checked.get((path, name)) == identity:
            return
        refuse_outside_data(handle, name, path)
        if identity is not None and time.time_ns() - identity[-1] > _SETTLED_SECONDS * 1e9:
            self._checked[(path, name)] = identity


def file_identity(stat: os.stat_result) -> tuple[int, ...]:
    """Device, inode, size, modification and change time (ns): which file, and which version of it."""
    return (stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns)


def open_identity(handle: Any) -> tuple[int, ...] | None:
    """The identity of the file h5py has open; None for a driver without a file descriptor."""
    try:
        return file_identity(os.fstat(handle.id.get_vfd_handle()))
    except (TypeError, ValueError, OSError, RuntimeError):
        return None
