"""Data and options shared by the storage tests: numbered tables, Parquet bytes, ``storage_options``."""

from __future__ import annotations

import io

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from _seaweed import KEY, REGION, SECRET


def storage_options(endpoint: str, **extra: object) -> dict:
    """``storage_options`` for the loopback server (or a proxy in front of it)."""
    return {"endpoint_url": endpoint, "key": KEY, "secret": SECRET, "region": REGION, **extra}


def parquet_bytes(table: pa.Table, row_group_size: int, **options: object) -> bytes:
    buffer = io.BytesIO()
    pq.write_table(table, buffer, row_group_size=row_group_size, **options)
    return buffer.getvalue()


def numbered_table(start: int, rows: int, features: int = 4) -> pa.Table:
    """``id`` and float32 ``f0..`` derived from it, so any row can be checked."""
    ids = np.arange(start, start + rows, dtype=np.int64)
    columns = {"id": ids, **{f"f{i}": (ids * (i + 1)).astype(np.float32) for i in range(features)}}
    return pa.table(columns)
