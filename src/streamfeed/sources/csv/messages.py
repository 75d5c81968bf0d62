"""What a CSV fragment says about the records it leaves out or cannot convert.

The messages and reasons for records too long for pyarrow's parser
(``LIMIT``: what it accepts), values cut for a message, the records missing
from a fragment's table, and whether a column casts: the pieces of
``fragment.py``'s explanations that need nothing of a fragment but its path.
"""

from __future__ import annotations

from typing import Any, Sequence

import pyarrow as pa
import pyarrow.compute as pc

from ...errors import CorruptFileError, describe
from .options import PARSE_BLOCK_BYTES
from .scan import LongRecord

LIMIT = (
    f"records shorter than {2 * PARSE_BLOCK_BYTES >> 20} MiB "
    f"(two of the {PARSE_BLOCK_BYTES >> 20} MiB blocks pyarrow parses in)"
)


def too_long_error(path: str, record: LongRecord) -> CorruptFileError:
    """The error for a record pyarrow refuses, under ``on_error="raise"``."""
    return CorruptFileError(
        describe(
            "A CSV line is too long for pyarrow's CSV parser",
            where=f"{path}, line {record.line}",
            expected=LIMIT,
            found=f"a record of {record.size:,} bytes ({record.size / 2**20:.1f} MiB) starting {record.head!r}",
            fix="remove or shorten the line (a missing line break or closing quote, or a blob pasted into a "
            "field?), or pass on_error='skip' to skip such lines and report them (no setting raises the limit: "
            "it is pyarrow's)",
        )
    )


def preview(value: Any) -> str:
    """A value for a message: its first 200 characters, and its length when it is longer."""
    if isinstance(value, str) and len(value) > 200:
        return f"{value[:200]!r}... ({len(value):,} characters)"
    return repr(value)


def too_long_reason(record: LongRecord) -> str:
    """The report's reason for a record skipped as too long."""
    return f"a record of {record.size:,} bytes, too long for pyarrow ({LIMIT}): {record.head!r}"


def left_out_records(invalid: Sequence[tuple], too_long: Sequence[LongRecord]) -> list[int]:
    """0-based records of the fragment missing from its table: ragged (with a known number) and too long."""
    return sorted([number - 1 for number, *_ in invalid if number is not None] + [r.number - 1 for r in too_long])


def record_of_table_row(bad_records: Sequence[int], index: int) -> int:
    """The fragment's 0-based record of table row ``index``, the table lacking ``bad_records`` (sorted)."""
    record = index
    for bad in bad_records:
        if bad <= record:
            record += 1
    return record


def casts(column: pa.Array, kind: pa.DataType) -> bool:
    """Whether every value of ``column`` converts to ``kind``."""
    try:
        pc.cast(column, kind)
        return True
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return False
