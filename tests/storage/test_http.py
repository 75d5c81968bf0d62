"""http(s):// URLs for the file readers, against a real HTTP server on loopback (``_http_server.py``).

Every file-based reader that takes URIs (Parquet, CSV, TFRecord) reads a
list of URLs as it reads the same local files: the exact count at open,
the same shuffled epoch row for row. Each file is asked one ``HEAD`` and
then one ranged ``GET`` a read (a Parquet row group), each pinned to the
ETag the HEAD gave (``If-Match``), or to its Last-Modified where the
server gives no ETag. Before (on main) fsspec's ``HTTPFileSystem`` served
them unpinned through whole-file GETs, and turned a 503 or a refused
connection into "no such file".
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import socket

import numpy as np
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest
from _storage_data import numbered_table

import streamfeed as sf
from streamfeed.files.storage import storage_counters

ROWS, ROW_GROUP = 4000, 250
# plain, uncompressed, no statistics: files of other ids have the same size and byte ranges
SAME_LAYOUT = {"compression": "none", "use_dictionary": False, "write_statistics": False}
READERS = {"parquet": sf.read_parquet, "csv": sf.read_csv, "tfrecord": sf.read_tfrecord}


def _write(kind: str, directory, rows: int = ROWS, start: int = 0) -> list[str]:
    """Files of ``kind`` holding ids ``start..start+rows`` in ``directory``; their names."""
    table = numbered_table(start, rows)
    if kind == "parquet":
        half = rows // 2
        for part in range(2):
            pq.write_table(
                table.slice(part * half, half),
                directory / f"part-{part}.parquet",
                row_group_size=ROW_GROUP,
                **SAME_LAYOUT,
            )
    elif kind == "csv":
        pacsv.write_csv(table, directory / "rows.csv")
    else:
        staged = directory.parent / f"{directory.name}-staged"
        columns = {name: table[name].to_numpy() for name in table.column_names}
        written = sf.write_tfrecord([columns], staged / "rows", shard_rows=1500)
        for path in written:
            shutil.move(path, directory / os.path.basename(path))
        shutil.rmtree(staged)  # its manifest: HTTP cannot list, the files are named one by one
    return sorted(name for name in os.listdir(directory) if not name.startswith((".", "_")))


def _epoch(dataset: sf.Dataset, seed: int = 7) -> dict[str, np.ndarray]:
    with dataset.shuffle(seed=seed).batch(500).iter_epoch(0) as epoch:
        batches = list(epoch)
    return {name: np.concatenate([batch[name] for batch in batches]) for name in batches[0]}


def _parquet(web, rows: int = ROWS) -> tuple[list[str], str]:
    """Two Parquet files served; their URLs and the local directory's path."""
    server, directory, url = web
    names = _write("parquet", directory, rows)
    return [f"{url}/{name}" for name in names], str(directory)


@pytest.mark.parametrize("kind", sorted(READERS))
def test_each_reader_reads_a_list_of_urls_as_the_local_files_shuffled(web, kind):
    server, directory, url = web
    names = _write(kind, directory)
    read = READERS[kind]
    expected = _epoch(read([str(directory / name) for name in names]))
    remote = read([f"{url}/{name}" for name in names])
    assert remote.num_rows() == ROWS
    found = _epoch(remote)
    assert sorted(found["id"].tolist()) == list(range(ROWS))  # every row once
    for name in expected:
        np.testing.assert_array_equal(found[name], expected[name], err_msg=name)  # the same shuffled order
    assert all(entry["authorized"] for entry in server.log())


def test_each_read_is_one_ranged_get_pinned_to_the_etag_the_head_gave(web):
    server, _, _ = web
    urls, _ = _parquet(web)
    data = sf.read_parquet(urls)
    heads = [entry for entry in server.log() if entry["method"] == "HEAD"]
    assert sorted(entry["path"] for entry in heads) == sorted("/" + url.split("/", 3)[3] for url in urls)
    _epoch(data)
    gets = [entry for entry in server.log() if entry["method"] == "GET"]
    assert all(entry["range"] and entry["range"].startswith("bytes=") for entry in gets), gets
    assert len({entry["if_match"] for entry in gets}) == 2 and all(entry["if_match"] for entry in gets)
    # one GET a row group (16 of them), plus the footers read at open: never a GET of a whole file
    row_groups = ROWS // ROW_GROUP
    assert row_groups <= len(gets) <= row_groups + 2 * len(urls), len(gets)
    assert len([entry for entry in server.log() if entry["method"] == "HEAD"]) == len(urls)  # one HEAD a file
    counters = storage_counters(data.source.info.filesystem)
    assert counters is not None and counters.requests == len(server.log())


def test_without_an_etag_reads_are_pinned_to_last_modified(web):
    server, directory, url = web
    server.configure(etag=False)
    urls, _ = _parquet(web)
    data = sf.read_parquet(urls)
    os.utime(directory / "part-1.parquet", (1e9, 2e9))  # a later modification than the HEAD saw
    with pytest.raises(sf.ObjectChangedError) as raised:
        _epoch(data)
    assert "part-1.parquet" in str(raised.value) and "Last-Modified" in str(raised.value)
    gets = [entry for entry in server.log() if entry["method"] == "GET"]
    assert gets and all(entry["if_unmodified_since"] and not entry["if_match"] for entry in gets)


@pytest.mark.parametrize("on_error", ["raise", "skip"])
@pytest.mark.parametrize("ignore_conditions", [False, True])
def test_a_file_replaced_mid_epoch_is_an_object_changed_error(web, on_error, ignore_conditions):
    """Same size, same layout, other values; also from a server that ignores If-Match (the answer's ETag tells)."""
    server, directory, _ = web
    server.configure(ignore_conditions=ignore_conditions)
    urls, _ = _parquet(web)
    replacement = directory.parent / f"{directory.name}-new"
    replacement.mkdir()
    _write("parquet", replacement, start=500_000)
    assert os.path.getsize(replacement / "part-0.parquet") == os.path.getsize(directory / "part-0.parquet")
    data = sf.read_parquet(urls, on_error=on_error)
    ids: list[int] = []
    with pytest.raises(sf.ObjectChangedError) as raised, data.batch(ROW_GROUP).iter_epoch(0) as stream:
        for batch in stream:
            if not ids:
                for name in ("part-0.parquet", "part-1.parquet"):
                    os.replace(replacement / name, directory / name)
            ids.extend(batch["id"].tolist())
    assert all(value < ROWS for value in ids)  # never a row of the new version
    message = str(raised.value)
    assert "127.0.0.1" in message and ".parquet" in message and "ETag" in message and "Fix:" in message
    assert not isinstance(raised.value, sf.CorruptFileError)
    assert data.report.entries == []


def test_a_file_of_another_size_is_told_from_the_range_answer_without_any_validator_check(web):
    server, directory, _ = web
    server.configure(etag=False, ignore_conditions=True)
    urls, _ = _parquet(web)
    data = sf.read_parquet(urls)
    path = directory / "part-0.parquet"
    stat = path.stat()
    with open(path, "ab") as grown:
        grown.write(b"appended")
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # the same Last-Modified: only the size tells
    with pytest.raises(sf.ObjectChangedError, match="bytes"):
        _epoch(data)


def test_the_etag_is_in_the_fingerprint_and_an_old_state_is_refused(web):
    server, directory, _ = web
    urls, _ = _parquet(web)
    path = directory / "part-0.parquet"
    data = sf.read_parquet(urls).batch(100)
    with data.iter_epoch(0) as stream:
        next(stream)
        state = stream.get_state()
    stat = path.stat()
    other = directory.parent / f"{directory.name}-other"
    other.mkdir()
    _write("parquet", other, start=500_000)
    os.replace(other / "part-0.parquet", path)
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # same size, same Last-Modified: only the ETag differs
    changed = sf.read_parquet(urls).batch(100)
    assert changed.fingerprint() != data.fingerprint()
    with pytest.raises(sf.StateError):
        changed.iter_epoch(state=state)


@pytest.mark.parametrize("on_error", ["raise", "skip"])
def test_503s_dropped_connections_and_slow_answers_within_the_deadline_give_the_exact_epoch(web, on_error):
    server, _, _ = web
    urls, local = _parquet(web)
    expected = _epoch(sf.read_parquet(local))
    server.configure(
        faults=[
            {"kind": "503", "on": "HEAD", "count": 2},
            {"kind": "503", "on": "GET", "after": 3, "count": 3},
            {"kind": "drop", "on": "GET", "after": 6, "count": 2},
            {"kind": "slow", "on": "GET", "after": 9, "count": 1, "seconds": 3},
            {"kind": "trickle", "on": "GET", "after": 11, "count": 1, "seconds": 0.05},
            {"kind": "slow", "on": "HEAD", "count": 1, "seconds": 3},  # the second file's HEAD
        ]
    )
    data = sf.read_parquet(urls, storage_options={"deadline": 30, "read_timeout": 1}, on_error=on_error)
    found = _epoch(data)
    assert [fault.get("hits", 0) for fault in server.faults()] == [2, 3, 2, 1, 1, 1]  # each fault did happen
    np.testing.assert_array_equal(found["id"], expected["id"])
    assert data.report.entries == []
    counters = storage_counters(data.source.info.filesystem)
    # 10 faults; aiohttp itself tries a request again once when the server closed a kept-alive connection
    assert counters is not None and counters.retries >= 8


@pytest.mark.parametrize("on_error", ["raise", "skip"])
def test_an_outage_longer_than_the_deadline_is_a_network_error_never_skipped(web, on_error):
    server, _, _ = web
    urls, _ = _parquet(web)
    data = sf.read_parquet(urls, storage_options={"deadline": 1.5}, on_error=on_error)
    server.configure(faults=[{"kind": "drop", "on": "GET", "after": 2, "count": -1, "seconds": 30}])
    with pytest.raises(sf.NetworkError) as raised:
        _epoch(data)
    message = str(raised.value)
    assert "127.0.0.1" in message and ".parquet" in message and "deadline of 1.5 s" in message
    assert data.report.entries == []


def test_an_unreachable_server_at_open_is_a_network_error_naming_the_url_and_the_fix():
    with socket.socket() as held:  # bound, never listening: every connection is refused
        held.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{held.getsockname()[1]}/data/part-0.parquet"
        with pytest.raises(sf.NetworkError) as raised:
            sf.read_parquet(url, storage_options={"deadline": 0.5})
    message = str(raised.value)
    assert url in message and "deadline of 0.5 s" in message
    assert "check the URL" in message.rsplit("Fix: ", 1)[1]


def test_a_missing_file_is_not_found_naming_the_url(web):
    _, _, url = web
    with pytest.raises(sf.NotFoundError, match="missing.parquet"):
        sf.read_parquet(f"{url}/missing.parquet")


@pytest.mark.parametrize("suffix", ["/", "/*.parquet"])
def test_a_directory_url_or_a_glob_is_refused_naming_the_fix(web, suffix):
    _, _, url = web
    _parquet(web)
    with pytest.raises(sf.ArgumentError) as raised:
        sf.read_parquet(url + suffix)
    message = str(raised.value)
    assert "cannot be listed" in message and "list of the files' URLs" in message


def test_a_server_without_byte_ranges_is_refused_by_name(web):
    server, _, _ = web
    server.configure(ranges=False)
    urls, _ = _parquet(web)
    with pytest.raises(OSError, match="does not serve byte ranges"):
        _epoch(sf.read_parquet(urls))


def test_the_range_cache_serves_the_second_epoch_without_a_get(web, tmp_path):
    server, _, _ = web
    urls, _ = _parquet(web)
    options = {"cache": {"dir": str(tmp_path / "cache"), "max_bytes": 64 << 20}}
    first = _epoch(sf.read_parquet(urls, storage_options=options))
    gets = len([entry for entry in server.log() if entry["method"] == "GET"])
    again = sf.read_parquet(urls, storage_options=options)
    second = _epoch(again)
    assert len([entry for entry in server.log() if entry["method"] == "GET"]) == gets  # HEADs only
    np.testing.assert_array_equal(first["id"], second["id"])
    counters = storage_counters(again.source.info.filesystem)
    assert counters is not None and counters.cache_hits >= ROWS // ROW_GROUP


TOKEN = "sekrit-token-4242"


def test_a_token_in_the_headers_is_sent_and_never_shown(web, caplog):
    server, _, _ = web
    urls, _ = _parquet(web)
    server.configure(token=TOKEN)
    caplog.set_level(logging.DEBUG)
    data = sf.read_parquet(urls, storage_options={"headers": {"Authorization": f"Bearer {TOKEN}"}}).batch(100)
    with data.iter_epoch(0) as stream:
        next(stream)
        state = stream.get_state()
    assert all(entry["authorized"] for entry in server.log())
    shown = [data.fingerprint(), json.dumps(state, default=repr), repr(data), caplog.text]
    with pytest.raises(sf.StorageError) as refused:
        sf.read_parquet(urls, storage_options={"headers": {"Authorization": "Bearer wrong-" + TOKEN}})
    shown.append(str(refused.value))
    assert "401" in str(refused.value) and "part-0.parquet" in str(refused.value)
    server.configure(token=TOKEN, faults=[{"kind": "drop", "on": "any", "count": -1, "seconds": 30}])
    with pytest.raises(sf.NetworkError) as unreachable:
        sf.read_parquet(urls, storage_options={"deadline": 0.5, "headers": {"Authorization": f"Bearer {TOKEN}"}})
    shown += [str(unreachable.value), caplog.text]
    for text in shown:
        assert TOKEN not in text


def test_credentials_in_a_url_are_refused_without_being_shown(web):
    _, _, url = web
    with pytest.raises(sf.ArgumentError) as raised:
        sf.read_parquet(url.replace("http://", "http://user:hunter2@") + "/part-0.parquet")
    assert "hunter2" not in str(raised.value) and "headers" in str(raised.value)


def test_s3_options_do_not_apply_to_urls(web):
    _, _, url = web
    with pytest.raises(sf.ArgumentError, match="'key'.*http"):
        sf.read_parquet(f"{url}/part-0.parquet", storage_options={"key": "k"})


def test_hive_partitions_in_a_list_of_urls_are_read_as_in_the_local_directory(web):
    """``key=value`` directories below the URLs' common directory are partition columns, as on a disk."""
    _, directory, url = web
    names = []
    for city in ("oslo", "rome"):
        (directory / f"city={city}").mkdir()
        pq.write_table(numbered_table(0, 100), directory / f"city={city}" / "part-0.parquet")
        names.append(f"city={city}/part-0.parquet")
    expected = _epoch(sf.read_parquet(str(directory)))
    found = _epoch(sf.read_parquet([f"{url}/{name}" for name in names]))
    assert sorted(set(found["city"].tolist())) == sorted(set(expected["city"].tolist()))
    np.testing.assert_array_equal(found["city"], expected["city"])
