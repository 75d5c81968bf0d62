"""Parquet row groups of local files read out of file order (a shuffled epoch's jumps).

Such a read is opened on the random-access file system (``files/advice.py``:
no kernel read-ahead past the row group, its column chunks asked for at
once), so it needs a pyarrow fragment of its own. Made afresh for every
jump, that fragment parsed the file's footer again: 0.007 CPU s per million
rows of 33 float32 (5 % of reading them; measured). Here each file's
random-access fragment is made and its footer parsed once, and each jump
reads a subset of it (0.0001 s per million rows).
"""

from __future__ import annotations

import threading
from typing import Any

import pyarrow.dataset as pads

from ..files.advice import ByteRange, ReadOrder, random_access_filesystem, will_need

_FORMAT = pads.ParquetFileFormat()
_RANDOM_ACCESS = random_access_filesystem()


class JumpedReads:
    """Which of a source's local row-group reads jump, and the fragment each jump reads (one per file).

    Shared by the source's fragments and their reading threads; a copy in
    another process starts empty (it learns the order and parses footers afresh).
    """

    def __init__(self) -> None:
        self.order = ReadOrder()
        self._lock = threading.Lock()
        self._files: dict[str, Any] = {}  # path -> its random-access pyarrow fragment, footer parsed

    def fragment(self, path: str, row_group: int, opened: Any, ranges: tuple[ByteRange, ...]) -> Any:
        """The pyarrow fragment to read ``row_group`` of ``path`` with: ``opened`` (the source's, in file
        order: it keeps the kernel's read-ahead) unless this read jumps."""
        if not self.order.note(path, row_group):
            return opened
        will_need(path, ranges)
        with self._lock:
            whole = self._files.get(path)
            if whole is None:
                whole = _FORMAT.make_fragment(path, _RANDOM_ACCESS, partition_expression=opened.partition_expression)
                whole.ensure_complete_metadata()
                self._files[path] = whole
        return whole.subset(row_group_ids=[row_group])

    def __reduce__(self) -> tuple[Any, tuple]:
        return (JumpedReads, ())
