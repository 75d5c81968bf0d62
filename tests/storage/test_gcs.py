"""gs:// URIs with ``storage_options`` for the file readers, against a GCS emulator on loopback (``_gcs_emulator.py``).

gcsfs talks real HTTP (GCS's JSON API) to ``gcp-storage-emulator`` through a
loopback proxy (``_tcp_proxy.py``) that keeps the request lines and can
take the network down. Every reader that takes URIs reads a gs:// prefix
as it reads the same local files; every ranged GET asks for the generation
taken at open (``generation=``, ``ifGenerationMatch=``), which real GCS
answers with 404 or 412 once the object was overwritten. The emulator
ignores both, so an overwrite of another size is what is told here (by the
answer's ``Content-Range``); a same-size one changes the fingerprint.
"""

from __future__ import annotations

import re
import socket

import numpy as np
import pytest
from _gcs_emulator import BUCKET
from gcsfs.core import GCSFileSystem
from test_http import READERS, ROW_GROUP, ROWS, _epoch, _write

import streamfeed as sf
from streamfeed.files.storage import object_version


def _client(gcs) -> GCSFileSystem:
    return GCSFileSystem(endpoint_url=gcs.endpoint, token="anon", project="test", skip_instance_cache=True)


def _options(endpoint: str, **extra: object) -> dict:
    return {"endpoint_url": endpoint, "anon": True, "project": "test", **extra}


_prefixes = iter(range(10**6))


def _upload(gcs, tmp_path, kind: str) -> tuple[str, str]:
    """Files of ``kind`` written locally and put in the bucket: (local directory, gs:// prefix)."""
    local = tmp_path / kind
    local.mkdir()
    prefix = f"{BUCKET}/d{next(_prefixes)}/{kind}"
    client = _client(gcs)
    for name in _write(kind, local):
        client.pipe(f"{prefix}/{name}", (local / name).read_bytes())
    return str(local), f"gs://{prefix}/"


@pytest.mark.parametrize("kind", sorted(READERS))
def test_each_reader_reads_a_gs_prefix_as_the_local_files_shuffled(gcs, gcs_proxy, tmp_path, kind):
    local, uri = _upload(gcs, tmp_path, kind)
    read = READERS[kind]
    expected = _epoch(read(local))
    remote = read(uri, storage_options=_options(gcs_proxy.endpoint))
    assert remote.num_rows() == ROWS
    found = _epoch(remote)
    assert sorted(found["id"].tolist()) == list(range(ROWS))
    for name in expected:
        np.testing.assert_array_equal(found[name], expected[name], err_msg=name)


def test_every_ranged_get_asks_for_the_generation_taken_at_open(gcs, gcs_proxy, tmp_path):
    _, uri = _upload(gcs, tmp_path, "parquet")
    data = sf.read_parquet(uri, storage_options=_options(gcs_proxy.endpoint))
    gcs_proxy.reset_counts()
    _epoch(data)
    downloads = [line for line in gcs_proxy.request_lines if line.startswith("GET /download/")]
    assert len(downloads) >= ROWS // ROW_GROUP  # one a row group at least
    generations = {
        name: _client(gcs).info(f"{uri[5:]}{name}")["generation"] for name in ("part-0.parquet", "part-1.parquet")
    }
    for line in downloads:
        asked = dict(re.findall(r"[?&](generation|ifGenerationMatch)=(\d+)", line))
        name = "part-0.parquet" if "part-0.parquet" in line else "part-1.parquet"
        assert asked == {"generation": generations[name], "ifGenerationMatch": generations[name]}, line
    version = object_version(data.source.info.filesystem, f"{uri[5:]}part-0.parquet")
    assert version is not None and version.endswith("@" + generations["part-0.parquet"])


@pytest.mark.parametrize("on_error", ["raise", "skip"])
def test_an_object_overwritten_mid_epoch_by_another_size_is_an_object_changed_error(gcs, gcs_proxy, tmp_path, on_error):
    _, uri = _upload(gcs, tmp_path, "parquet")
    data = sf.read_parquet(uri, storage_options=_options(gcs_proxy.endpoint), on_error=on_error)
    client = _client(gcs)
    ids: list[int] = []
    with pytest.raises(sf.ObjectChangedError) as raised, data.batch(ROW_GROUP).iter_epoch(0) as stream:
        for batch in stream:
            if not ids:
                for name in ("part-0.parquet", "part-1.parquet"):
                    client.pipe(f"{uri[5:]}{name}", client.cat_file(f"{uri[5:]}{name}") + b"longer")
            ids.extend(batch["id"].tolist())
    assert "part-" in str(raised.value) and "generation" in str(raised.value)
    assert data.report.entries == []


def test_a_same_size_overwrite_changes_the_fingerprint_and_refuses_old_states(gcs, gcs_proxy, tmp_path):
    _, uri = _upload(gcs, tmp_path, "parquet")
    options = _options(gcs_proxy.endpoint)
    data = sf.read_parquet(uri, storage_options=options).batch(100)
    with data.iter_epoch(0) as stream:
        next(stream)
        state = stream.get_state()
    client = _client(gcs)
    path = f"{uri[5:]}part-0.parquet"
    client.pipe(path, client.cat_file(path))  # the same bytes, a new generation
    changed = sf.read_parquet(uri, storage_options=options).batch(100)
    assert changed.fingerprint() != data.fingerprint()
    with pytest.raises(sf.StateError):
        changed.iter_epoch(state=state)


@pytest.mark.parametrize("on_error", ["raise", "skip"])
def test_an_outage_shorter_than_the_deadline_gives_the_exact_epoch(gcs, gcs_proxy, tmp_path, on_error):
    local, uri = _upload(gcs, tmp_path, "parquet")
    expected = _epoch(sf.read_parquet(local))
    data = sf.read_parquet(uri, storage_options=_options(gcs_proxy.endpoint, deadline=30), on_error=on_error)
    gcs_proxy.outage_at(get_number=5, seconds=2)
    found = _epoch(data)
    assert gcs_proxy.outages == 1
    np.testing.assert_array_equal(found["id"], expected["id"])
    assert data.report.entries == []


@pytest.mark.parametrize("on_error", ["raise", "skip"])
def test_an_outage_longer_than_the_deadline_is_a_network_error_never_skipped(gcs, gcs_proxy, tmp_path, on_error):
    _, uri = _upload(gcs, tmp_path, "parquet")
    data = sf.read_parquet(uri, storage_options=_options(gcs_proxy.endpoint, deadline=1.5), on_error=on_error)
    gcs_proxy.outage_at(get_number=3, seconds=30)
    with pytest.raises(sf.NetworkError) as raised:
        _epoch(data)
    message = str(raised.value)
    assert "part-" in message and "deadline of 1.5 s" in message
    assert data.report.entries == []


def test_an_unreachable_endpoint_at_open_names_the_uri_the_endpoint_and_the_fix():
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        endpoint = f"http://127.0.0.1:{held.getsockname()[1]}"
        with pytest.raises(sf.NetworkError) as raised:
            sf.read_parquet("gs://bucket/clicks/", storage_options=_options(endpoint, deadline=0.5))
    message = str(raised.value)
    assert "gs://bucket/clicks" in message and endpoint in message and "deadline of 0.5 s" in message
    assert "endpoint_url" in message.rsplit("Fix: ", 1)[1]


def test_s3_options_do_not_apply_to_gs():
    with pytest.raises(sf.ArgumentError, match="'secret'.*gs://"):
        sf.read_parquet("gs://bucket/clicks/", storage_options={"secret": "s"})
