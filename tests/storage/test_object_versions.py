"""An object overwritten while it is read: every ranged read carries the version (ETag) taken at open.

SeaweedFS honours ``If-Match`` on ranged GETs (412 PreconditionFailed when
the object changed), so the tests overwrite objects on the real server
between the open and the reads and check that the change is its own error
(``ObjectChangedError``: never "corrupt", never skipped), and that the ETag
is part of the fingerprint.
"""

from __future__ import annotations

import numpy as np
import pytest
from _storage_data import numbered_table, parquet_bytes, storage_options

import streamfeed as sf

ROWS, ROW_GROUP = 40_000, 1000
# plain, uncompressed, no statistics: two files of other values with byte-identical layouts (same ranges)
SAME_LAYOUT = {"compression": "none", "use_dictionary": False, "write_statistics": False}
KEY = "data/part-0.parquet"


def _object(start: int, **options: object) -> bytes:
    return parquet_bytes(numbered_table(start, ROWS), ROW_GROUP, **(options or SAME_LAYOUT))


def _overwritten_mid_epoch(seaweed, bucket, proxy, replacement: bytes, **read: object) -> list[int]:
    """Reads the object's ids, overwriting it with ``replacement`` after the first batch."""
    client = seaweed.client()
    client.put_object(Bucket=bucket, Key=KEY, Body=_object(0))
    data = sf.read_parquet(f"s3://{bucket}/{KEY}", storage_options=storage_options(proxy.endpoint), **read)
    ids: list[int] = []
    with data.batch(ROW_GROUP).iter_epoch(0) as stream:
        for batch in stream:
            if not ids:
                client.put_object(Bucket=bucket, Key=KEY, Body=replacement)
            ids.extend(batch["id"].tolist())
    return ids


@pytest.mark.parametrize("on_error", ["raise", "skip"])
def test_a_same_size_overwrite_mid_epoch_is_an_object_changed_error(seaweed, bucket, proxy, on_error):
    after = _object(500_000)
    assert len(after) == len(_object(0))
    with pytest.raises(sf.ObjectChangedError) as excinfo:
        _overwritten_mid_epoch(seaweed, bucket, proxy, after, on_error=on_error)
    message = str(excinfo.value)
    assert KEY in message and "Fix:" in message
    assert not isinstance(excinfo.value, sf.CorruptFileError)


@pytest.mark.parametrize("on_error", ["raise", "skip"])
def test_an_overwrite_of_another_layout_is_not_called_corrupt_nor_skipped(seaweed, bucket, proxy, on_error):
    other = _object(500_000, compression="zstd")
    with pytest.raises(sf.ObjectChangedError) as excinfo:
        _overwritten_mid_epoch(seaweed, bucket, proxy, other, on_error=on_error)
    assert not isinstance(excinfo.value, sf.CorruptFileError)
    assert KEY in str(excinfo.value)


def test_the_etag_is_in_the_fingerprint_a_same_second_overwrite_refuses_old_states(seaweed, bucket, proxy):
    client = seaweed.client()
    uri, options = f"s3://{bucket}/{KEY}", storage_options(proxy.endpoint)
    for _ in range(20):  # until both writes fall in one second: then size and time cannot tell them apart
        client.put_object(Bucket=bucket, Key=KEY, Body=_object(0))
        data = sf.read_parquet(uri, storage_options=options).batch(100)
        before = client.head_object(Bucket=bucket, Key=KEY)
        with data.iter_epoch(0) as stream:
            next(stream)
            state = stream.get_state()
        client.put_object(Bucket=bucket, Key=KEY, Body=_object(500_000))
        after = client.head_object(Bucket=bucket, Key=KEY)
        if after["LastModified"] == before["LastModified"]:
            break
    assert after["LastModified"] == before["LastModified"] and after["ETag"] != before["ETag"]
    changed = sf.read_parquet(uri, storage_options=options).batch(100)
    assert changed.fingerprint() != data.fingerprint()
    with pytest.raises(sf.StateError):
        changed.iter_epoch(state=state)


def test_bytes_fetched_after_an_overwrite_never_enter_the_cache_under_the_old_version(seaweed, bucket, proxy, tmp_path):
    """Open at v1, overwrite with v2 before the rows are read, roll back to v1: a new dataset serves v1's rows."""
    client = seaweed.client()
    first, second = _object(0), _object(500_000)
    options = storage_options(proxy.endpoint, cache={"dir": str(tmp_path / "cache"), "max_bytes": 64 << 20})
    uri = f"s3://{bucket}/{KEY}"
    client.put_object(Bucket=bucket, Key=KEY, Body=first)
    opened = sf.read_parquet(uri, storage_options=options)
    client.put_object(Bucket=bucket, Key=KEY, Body=second)
    with pytest.raises(sf.ObjectChangedError), opened.batch(ROW_GROUP).iter_epoch(0) as stream:
        for _ in stream:
            pass
    client.put_object(Bucket=bucket, Key=KEY, Body=first)  # the same bytes, so the same ETag as at open
    with sf.read_parquet(uri, storage_options=options).batch(ROW_GROUP).iter_epoch(0) as stream:
        ids = np.concatenate([batch["id"] for batch in stream])
    assert sorted(ids.tolist()) == list(range(ROWS))
