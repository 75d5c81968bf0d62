"""A folder of images, one sub-folder per class, as fixed-size image batches.

Layout (the same as ``keras.utils.image_dataset_from_directory``)::

    root/
      cat/   a.jpg  b.png  more/c.webp     # nested folders belong to "cat"
      dog/   d.jpg ...

* **Labels.** With ``labels="inferred"`` (default) every top-level folder is
  a class; its label is its index among the sorted folder names (or the
  index a given ``label_map`` assigns). Images in nested sub-folders belong
  to their top-level folder; images directly in ``root`` are ignored (and
  counted). ``source.label_map``, ``source.class_names`` and
  ``source.class_counts`` are known when the source opens, before training;
  ``source.save_label_map(path)`` writes the map as JSON, and passing that
  file as ``label_map=`` reuses it (for a validation set whose folders may
  be a subset). A given map is checked when the source opens: every label
  an ``int`` with ``0 <= label < 2**31`` (a sparse class index; gaps are
  allowed, bools, floats and strings are not), no two alike.
  ``labels=None`` reads every image below ``root`` without a label column.
* **Files and links.** Only the suffixes of the supported formats are
  listed; hidden entries and other extensions are ignored and counted in
  ``source.ignored``; a folder or file reachable under two classes through
  a link is a :class:`SchemaError`, and folder links out of the root are
  not followed unless ``follow_links="all"`` (file links always are). See ``listing.py`` for the rules.
  Only local directories are supported here; a zip archive of such a folder, local or remote, is
  ``sources/zip``'s (``read_images`` routes it there).
* **Columns.** ``image`` ``(n, height, width, channels)`` of ``uint8`` or
  ``float32`` (0..1), ``label`` (int64), ``path`` (str). See ``decode.py``
  for orientation, bit depth, channel and resize rules.
* **Fragments** are slices of the sorted file list (``fragment_size``
  files); each is decoded in the pipeline's read threads (``fragment.py``).
* **Bad files.** With ``verify_headers=True`` (default) every file's header
  is opened when the source opens (in threads): empty files, non-images and
  unsupported formats are found before training. Truncated or corrupt image
  data shows only when decoding. Under ``on_error="raise"`` the first bad
  file raises a :class:`CorruptFileError` naming it. Under ``"skip"`` each
  bad file is left out and recorded in ``dataset.report`` (location
  ``"file"``, one row) — and because decoding is the only certain check,
  the dataset counts its rows with one decoding pass before the first
  epoch (``row_count_known=False``; done once, cached), so steps per epoch
  are exact and ``yielded + reported == files``.
* **Bombs.** An image whose header declares more than ``max_image_bytes``
  decoded (``DecodeSpec``; see ``decode.py``) is a bad file like a
  corrupt one: found by the header probe at open, or when decoding.
"""

from __future__ import annotations

import concurrent.futures
import functools
import os
from typing import Any, Mapping

import numpy as np

from ...core import AlikeRows, SourceInfo, fragmenting_digest, records_settings
from ...errors import ArgumentError, BadInputReport, CorruptFileError, NotFoundError, SchemaError, describe
from ...files.paths import file_digest
from ..labels import class_names, write_label_map
from .decode import DecodeSpec, image_byte_limit, read_scratch, resolve_decoder
from .fragment import PROBE_FILES, ImageFragment, corrupt, probe_files
from .listing import FollowLinks, Labels, Listing, list_images, load_label_map, no_images


class ImageSource(AlikeRows):
    """Lists an image folder, assigns labels and splits it into fragments."""

    settings: dict[str, Any]  # every constructor argument but core.NOT_ROW_SETTINGS (records_settings)

    @records_settings
    def __init__(
        self,
        root: str | os.PathLike,
        *,
        spec: DecodeSpec,
        labels: Labels | None = "inferred",
        label_map: Mapping[str, int] | str | os.PathLike | None = None,
        fragment_size: int = 128,
        verify_headers: bool = True,
        decode: bool = True,
        follow_links: FollowLinks = "inside",
        report: BadInputReport | None = None,
        threads: int = 8,
    ) -> None:
        if labels not in ("inferred", None):
            raise ArgumentError(describe("Invalid labels", expected="'inferred' or None", found=f"{labels!r}"))
        if fragment_size < 1:
            raise ArgumentError(describe("Invalid fragment_size", expected=">= 1", found=f"{fragment_size}"))
        self.root = os.path.abspath(os.fspath(root))
        if not os.path.isdir(self.root):
            raise NotFoundError(
                describe(
                    "No such directory",
                    where=self.root,
                    expected="a folder with one sub-folder per class",
                    fix="check the path",
                )
            )
        self.spec = spec
        self.decode = decode
        self.decoder = resolve_decoder(spec.decoder)
        self.report = report or BadInputReport()
        self.bad_files: dict[str, CorruptFileError] = {}
        listing = list_images(self.root, labels, follow_links)
        if not listing.files:
            raise no_images(self.root, listing, labels)
        self.ignored = listing.ignored
        self.links = listing.links
        self.label_map = self._label_map(self.root, listing, labels, label_map)

        files, classes, sizes, stamps = listing.files, listing.classes, listing.sizes, listing.stamps
        largest_decode = 0  # the most bytes one good file's header declares decoded
        if verify_headers:
            with concurrent.futures.ThreadPoolExecutor(threads, thread_name_prefix="streamfeed-probe") as pool:
                probe = functools.partial(probe_files, spec=spec if decode else None)
                parts = [files[start : start + PROBE_FILES] for start in range(0, len(files), PROBE_FILES)]
                probed = [found for part in pool.map(probe, parts) for found in part]
            good = []
            for index, (problem, decoded) in enumerate(probed):
                if problem is None:
                    good.append(index)
                    largest_decode = max(largest_decode, decoded)
                    continue
                error = corrupt(files[index], problem)
                self.report.reject(error, path=files[index], rows=1, cause=problem)
                self.bad_files[files[index]] = error
            files, classes, sizes = [files[i] for i in good], [classes[i] for i in good], [sizes[i] for i in good]
            stamps = [stamps[i] for i in good]
        self.files = tuple(files)
        self._stamps = tuple(stamps)
        label_array = (
            np.array([self.label_map[str(c)] for c in classes], dtype=np.int64) if labels == "inferred" else None
        )
        self.fragments = [
            ImageFragment(
                key=f"{self.root}#files={start}-{min(start + fragment_size, len(files)) - 1}",
                num_rows=min(fragment_size, len(files) - start),
                paths=self.files[start : start + fragment_size],
                labels=None if label_array is None else label_array[start : start + fragment_size],
                _source=self,
                stamps=self._stamps[start : start + fragment_size],
            )
            for start in range(0, len(files), fragment_size)
        ]
        self.class_counts: dict[str, int] = dict.fromkeys(self.class_names, 0) if labels == "inferred" else {}
        for name in classes:
            if name is not None:
                self.class_counts[name] += 1
        self.report.total_rows = len(listing.files)
        self.report.total_files = len(listing.files)
        self.report.check_budget()
        pixels = float(np.prod(spec.shape) * np.dtype(spec.dtype).itemsize)
        self.row_bytes = (pixels if decode else float(np.mean(sizes or [0]))) + 8 + 64
        self._columns = ["image" if decode else "image_bytes"] + (["label"] if labels == "inferred" else []) + ["path"]
        self._fingerprint: dict | None = None
        # Decoding can fail past the header probe; undecoded, nothing can fail after it.
        self.exact_counts = self.report.on_error == "raise" or not decode
        self.read_parallelism: int | None = None  # reads run in parallel (core.Source)
        # A read decodes each image into its row of the fragment's array; beyond it, it holds one file and
        # its decode (decode.read_scratch), sized by the probe; without the probe, the library's figure.
        known = verify_headers and decode and bool(files)
        self.read_scratch = (
            read_scratch(largest_decode, max(sizes), len(files), len(self.fragments), self.row_bytes) if known else None
        )

    @staticmethod
    def _label_map(root: str, listing: Listing, labels: Labels | None, given: Any) -> dict[str, int]:
        if labels is None:
            return {}
        if given is None:
            return {name: index for index, name in enumerate(sorted(listing.folders))}
        mapping = load_label_map(given)
        unknown = [name for name in listing.folders if name not in mapping]
        if unknown:
            raise SchemaError(
                describe(
                    f"Class folders {unknown} are not in the label map",
                    where=", ".join(os.path.join(root, name) for name in unknown),
                    expected=f"folders among {sorted(mapping)}",
                    fix="add them to label_map, or remove those folders",
                )
            )
        return mapping

    @property
    def class_names(self) -> list[str]:
        """Class names in label order."""
        return class_names(self.label_map)

    def save_label_map(self, path: str | os.PathLike) -> None:
        """Writes ``{"class name": label, ...}`` as JSON (reuse it with ``label_map=path``)."""
        write_label_map(self.label_map, path)

    def summary(self) -> dict:
        """Counts of what was read, ignored and found bad when the source opened."""
        return {
            "images": len(self.files),
            "classes": dict(self.class_counts),
            "ignored": {reason: len(paths) for reason, paths in self.ignored.items()},
            "links": {reason: len(paths) for reason, paths in self.links.items()},
            "bad_at_open": len(self.bad_files),
        }

    @property
    def column_names(self) -> list[str]:
        return list(self._columns)

    @property
    def info(self) -> SourceInfo:
        """Format, classes (``core.SourceInfo``): what layers that see only the protocol read."""
        return SourceInfo("images", label_map=self.label_map, root=self.root, fragment_setting="fragment_size")

    def fingerprint(self) -> dict:
        if self._fingerprint is None:
            spec = self.spec
            self._fingerprint = {
                "format": "images",
                "files": len(self.files),
                "digest": file_digest(  # (path, size, mtime_ns) as files.paths.file_stats gives them, from the stamps
                    (os.path.relpath(path, self.root), *((0, -1) if stamp is None else (stamp.size, stamp.mtime_ns)))
                    for path, stamp in zip(self.files, self._stamps)
                ),
                "columns": self.column_names,
                "image": [spec.height, spec.width, spec.channels, spec.dtype, spec.resize]
                if self.decode
                else "encoded",
                "label_map": self.label_map,
                "settings": self.settings,  # every constructor argument (core.records_settings)
                "fragmenting": fragmenting_digest(self.fragments, root=self.root),
            }
        return self._fingerprint


def decode_spec(
    size: tuple[int, int],
    channels: int,
    dtype: str,
    resize: str,
    decoder: str,
    max_image_bytes: int | None = None,
) -> DecodeSpec:
    """Checks ``read_images``'s decoding options and bundles them (``max_image_bytes=None``: the default bound)."""
    choices = {
        "dtype": (dtype, ("uint8", "float32")),
        "channels": (channels, (1, 3, 4)),
        "resize": (resize, ("stretch", "crop", "pad")),
    }
    for option, (value, allowed) in choices.items():
        if value not in allowed:
            raise ArgumentError(describe(f"Unknown {option}", expected=f"one of {list(allowed)}", found=repr(value)))
    height, width = (int(v) for v in size)
    if height < 1 or width < 1:
        raise ArgumentError(
            describe("Image size must be positive", expected="(height, width) >= (1, 1)", found=repr(size))
        )
    limit = image_byte_limit(max_image_bytes)
    return DecodeSpec(height, width, int(channels), dtype, resize, decoder, limit)  # type: ignore[arg-type]
