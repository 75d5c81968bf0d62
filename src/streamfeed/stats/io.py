"""What a statistics file records about its source, and staleness checks.

Below ``result.py``: it knows the source record, never the statistics
around it (the file version is ``result.py``'s).

The record is the source's own ``fingerprint()`` (format, file count, a
digest of paths and sizes, columns) plus, for sources with local files,
every file's size and modification time taken with ``os.stat`` when the
statistics were computed. A source's fingerprint is computed once per
source object, so the check always stats the files again: rewriting a
file in place is noticed even through the same Dataset object.
"""

from __future__ import annotations

import os
from typing import Any, Mapping

from ..core import Source
from ..errors import StreamfeedError, describe


class StaleStatsError(StreamfeedError, ValueError):
    """Statistics computed from a source that has changed since."""


def file_records(source: Source) -> list[dict] | None:
    """Path, size and mtime of each local file of ``source`` (None if it has none)."""
    records = []
    for path in source.files:
        path = os.fspath(path)
        try:
            info = os.stat(path)
        except OSError:
            continue  # not a local file (object storage): the fingerprint digest covers it
        records.append({"path": path, "size": info.st_size, "mtime_ns": info.st_mtime_ns})
    return records or None


def source_record(dataset: Any) -> dict:
    return {"fingerprint": dict(dataset.fingerprint()["source"]), "files": file_records(dataset.source)}


def check_source(recorded: Mapping[str, Any], dataset: Any) -> None:
    """Raises :class:`StaleStatsError` listing the files and fields that changed."""
    now = source_record(dataset)
    changes: list[str] = []
    before = {f["path"]: f for f in recorded.get("files") or []}
    after = {f["path"]: f for f in now["files"] or []}
    for path in sorted(before.keys() - after.keys()):
        changes.append(f"{path} is gone")
    for path in sorted(after.keys() - before.keys()):
        changes.append(f"{path} is new")
    for path in sorted(before.keys() & after.keys()):
        old, new = before[path], after[path]
        if old["size"] != new["size"]:
            changes.append(f"{path} changed size from {old['size']} to {new['size']} bytes")
        elif old["mtime_ns"] != new["mtime_ns"]:
            changes.append(f"{path} was modified (mtime changed)")
    old_fp, new_fp = recorded.get("fingerprint") or {}, now["fingerprint"]
    if not changes and old_fp != new_fp:
        differing = sorted(k for k in old_fp.keys() | new_fp.keys() if old_fp.get(k) != new_fp.get(k))
        changes.append("source " + ", ".join(f"{k}: {old_fp.get(k)!r} -> {new_fp.get(k)!r}" for k in differing))
    if changes:
        shown = "; ".join(changes[:10]) + (f"; and {len(changes) - 10} more" if len(changes) > 10 else "")
        raise StaleStatsError(
            describe(
                "The statistics were computed from a source that has changed since",
                where=str(old_fp.get("format", "source")),
                found=shown,
                fix="recompute them: streamfeed stats SRC -o stats.json (or compute_stats(dataset).save(...))",
            )
        )
