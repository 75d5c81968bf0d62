"""Output is published whole or not at all, and a reader refuses a directory that is not what was published.

``convert`` and ``write_tfrecord`` write into a hidden temporary sibling of
the destination and publish it with one rename of the directory; the
manifest (``_streamfeed_manifest.json``: every shard, its rows, bytes and
sha256) is written last, before that rename. These tests kill a real
writer process with SIGKILL at random times and at each step of the
publish sequence, then read the destination back: it is absent, or it
reads back exactly the old or the new rows, never a part of them.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import streamfeed as sf
from streamfeed.cli import main
from streamfeed.convert import convert_to_parquet, convert_to_tfrecord
from streamfeed.errors import CorruptFileError, OutputExistsError

DRIVER = Path(__file__).with_name("_convert_driver.py")
MANIFEST = "_streamfeed_manifest.json"
ROWS, ROW_GROUP, SHARD_ROWS, OLD_ROWS = 20_000, 1_000, 2_000, 700
SLOW = 0.03  # seconds per fragment: the write of 20 fragments spreads over ~0.6 s


def _source(path: Path, rows: int) -> Path:
    ids = np.arange(rows)
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table({"id": ids, "x": ids / 2}), path, row_group_size=ROW_GROUP)
    return path


def _ids(destination: Path, to: str) -> np.ndarray:
    dataset = sf.read_parquet(destination) if to == "parquet" else sf.read_tfrecord(destination)
    with dataset.iter_epoch(0) as epoch:
        parts = [np.asarray(batch["id"]).reshape(-1) for batch in epoch]
    return np.sort(np.concatenate(parts)) if parts else np.zeros(0, dtype=np.int64)


def _convert(source: Path, destination: Path, to: str, **options) -> None:
    convert = convert_to_parquet if to == "parquet" else convert_to_tfrecord
    convert(sf.read_parquet(source), destination, shard_rows=300, **options)


def _run_driver(args: dict, kill_after: float | None = None) -> tuple[int, float, str]:
    """Runs the driver; with ``kill_after``, SIGKILLs it that many seconds after it is ready."""
    proc = subprocess.Popen(
        [sys.executable, str(DRIVER), json.dumps(args)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        ready = proc.stdout.readline() if proc.stdout else ""
        started = time.perf_counter()
        if ready.strip() == "ready" and kill_after is not None:
            try:
                proc.wait(timeout=kill_after)
            except subprocess.TimeoutExpired:
                os.kill(proc.pid, signal.SIGKILL)
        _, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
    assert ready.strip() == "ready", stderr
    return proc.returncode, time.perf_counter() - started, stderr


def _only_hidden_temporaries_beside(parent: Path, known: set[str]) -> None:
    """What a crash may leave next to the destinations: clearly named hidden temporaries, nothing else."""
    for entry in os.listdir(parent):
        if entry not in known:
            assert entry.startswith(".") and ".streamfeed-" in entry, entry


@pytest.mark.parametrize("to", ["parquet", "tfrecord"])
def test_kill_9_at_random_points_leaves_no_output_or_all_of_it(tmp_path, to):
    source = _source(tmp_path / "src" / "data.parquet", ROWS)
    old_source = _source(tmp_path / "src-old" / "data.parquet", OLD_ROWS)
    out = tmp_path / "out"
    out.mkdir()
    args = {"source": str(source), "to": to, "shard_rows": SHARD_ROWS, "slow": SLOW}

    code, full_seconds, stderr = _run_driver({**args, "destination": str(out / "full")})
    assert code == 0, stderr
    assert np.array_equal(_ids(out / "full", to), np.arange(ROWS))

    rng = np.random.default_rng(9)
    for trial in range(4):
        overwrite = trial % 2 == 1
        destination = out / f"trial{trial}"
        if overwrite:
            _convert(old_source, destination, to)
        delay = float(rng.uniform(0.05, 1.1)) * full_seconds
        code, _, stderr = _run_driver({**args, "destination": str(destination), "overwrite": overwrite}, delay)
        assert code in (0, -signal.SIGKILL), stderr
        what = f"trial {trial} (overwrite={overwrite}) killed after {delay:.2f} s of {full_seconds:.2f} s"
        if not destination.exists():
            assert not overwrite, f"{what}: the old output is gone"
            continue
        ids = _ids(destination, to)
        allowed = [ROWS, OLD_ROWS] if overwrite else [ROWS]
        assert len(ids) in allowed and np.array_equal(ids, np.arange(len(ids))), f"{what}: {len(ids)} rows"
    _only_hidden_temporaries_beside(out, {"full"} | {f"trial{trial}" for trial in range(4)})


@pytest.mark.parametrize(
    "step, overwrite, expected",
    [
        ("before:write_manifest", True, "old"),
        ("after:write_manifest", True, "old"),
        ("after:_exchange", True, "new"),
        ("after:_rename", True, "new"),
        ("after:write_manifest", False, None),
        ("after:_rename", False, "new"),
    ],
)
def test_kill_9_at_each_publish_step(tmp_path, step, overwrite, expected):
    source = _source(tmp_path / "src" / "data.parquet", 3_000)
    destination = tmp_path / "out" / "data"
    if overwrite:
        _convert(_source(tmp_path / "src-old" / "data.parquet", OLD_ROWS), destination, "parquet")
    args = {"source": str(source), "destination": str(destination), "to": "parquet", "shard_rows": 1_000}
    code, _, stderr = _run_driver({**args, "overwrite": overwrite, "die_at": step})
    assert code == -signal.SIGKILL, stderr
    if expected is None:
        assert not destination.exists()
    else:
        assert len(_ids(destination, "parquet")) == {"old": OLD_ROWS, "new": 3_000}[expected]
    _only_hidden_temporaries_beside(destination.parent, {"data"})
    # the next write succeeds and clears what the dead writer left beside the destination
    _convert(source, destination, "parquet", overwrite=True)
    assert os.listdir(destination.parent) == ["data"]
    assert np.array_equal(_ids(destination, "parquet"), np.arange(3_000))


@pytest.mark.parametrize("to", ["parquet", "tfrecord"])
def test_converting_twice_is_refused_and_overwrite_replaces_the_old_shards(tmp_path, capsys, to):
    source = _source(tmp_path / "data.parquet", 500)
    out = tmp_path / "out"
    command = ["convert", str(source), str(out), "--to", to, "--quiet", "--json"]
    assert main([*command, "--shard-rows", "100"]) == 0
    before = sorted(os.listdir(out))
    with pytest.raises(OutputExistsError, match="--overwrite"):
        main([*command, "--shard-rows", "300"])
    assert sorted(os.listdir(out)) == before
    capsys.readouterr()
    assert main([*command, "--shard-rows", "300", "--overwrite"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["rows"] == 500 and len(summary["files"]) == 2
    assert np.array_equal(_ids(out, to), np.arange(500))  # exactly the source rows, not the old shards too
    assert sorted(os.listdir(out)) == sorted([MANIFEST, *(Path(path).name for path in summary["files"])])


def test_converting_into_an_unrelated_folder_is_refused_and_leaves_it_alone(tmp_path):
    source = _source(tmp_path / "data.parquet", 50)
    out = tmp_path / "mine"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    pq.write_table(pa.table({"id": [7]}), out / "other.parquet")
    for extra in ([], ["--overwrite"]):  # overwrite replaces a previous output, never a folder streamfeed did not write
        with pytest.raises(OutputExistsError, match="notes.txt|other.parquet"):
            main(["convert", str(source), str(out), "--quiet", *extra])
        assert sorted(os.listdir(out)) == ["notes.txt", "other.parquet"]
    assert sorted(os.listdir(tmp_path)) == ["data.parquet", "mine"]


def test_an_empty_existing_folder_is_filled(tmp_path):
    source = _source(tmp_path / "data.parquet", 50)
    (tmp_path / "out").mkdir()
    summary = convert_to_parquet(sf.read_parquet(source), tmp_path / "out")
    assert sorted(os.listdir(tmp_path / "out")) == [MANIFEST, "part-00000.parquet"]
    assert summary.files == [str(tmp_path / "out" / "part-00000.parquet")]


@pytest.mark.parametrize("to", ["parquet", "tfrecord"])
def test_the_manifest_lists_every_shard_with_rows_bytes_and_sha256(tmp_path, to):
    from streamfeed.files.publish import verify_output

    source = _source(tmp_path / "data.parquet", 1_000)
    _convert(source, tmp_path / "out", to)
    manifest = json.loads((tmp_path / "out" / MANIFEST).read_text())
    assert manifest["format"] == "streamfeed-manifest" and manifest["version"] == 1
    assert manifest["rows"] == 1_000 and [entry["rows"] for entry in manifest["files"]] == [300, 300, 300, 100]
    shards = sorted(name for name in os.listdir(tmp_path / "out") if name != MANIFEST)
    assert [entry["path"] for entry in manifest["files"]] == shards
    for entry in manifest["files"]:
        data = (tmp_path / "out" / entry["path"]).read_bytes()
        assert entry["bytes"] == len(data) and entry["sha256"] == hashlib.sha256(data).hexdigest()
    assert verify_output(tmp_path / "out") == manifest
    # a flipped byte keeps the size: the open does not see it (sizes only), the full check does
    shard = tmp_path / "out" / shards[1]
    data = bytearray(shard.read_bytes())
    data[len(data) // 2] ^= 0xFF
    shard.write_bytes(bytes(data))
    with pytest.raises(CorruptFileError, match=f"{shards[1]}.*sha256"):
        verify_output(tmp_path / "out")


@pytest.mark.parametrize("to", ["parquet", "tfrecord"])
def test_a_missing_shard_is_refused_on_read(tmp_path, to):
    _convert(_source(tmp_path / "data.parquet", 1_000), tmp_path / "out", to)
    victim = sorted(name for name in os.listdir(tmp_path / "out") if name != MANIFEST)[1]
    (tmp_path / "out" / victim).unlink()
    with pytest.raises(CorruptFileError, match=f"{victim}.*missing"):
        _ids(tmp_path / "out", to)


@pytest.mark.parametrize("to", ["parquet", "tfrecord"])
def test_a_leftover_shard_is_refused_on_read(tmp_path, to):
    _convert(_source(tmp_path / "data.parquet", 1_000), tmp_path / "out", to)
    first = sorted(name for name in os.listdir(tmp_path / "out") if name != MANIFEST)[0]
    leftover = first.replace("00000", "00009")
    shutil.copy(tmp_path / "out" / first, tmp_path / "out" / leftover)
    with pytest.raises(CorruptFileError, match=f"{leftover}.*not listed"):
        _ids(tmp_path / "out", to)


def test_a_shard_of_another_size_is_refused_on_read(tmp_path):
    _convert(_source(tmp_path / "data.parquet", 1_000), tmp_path / "out", "parquet")
    shard = tmp_path / "out" / "part-00002.parquet"
    size = shard.stat().st_size
    shard.write_bytes(shard.read_bytes()[:-10])
    with pytest.raises(CorruptFileError, match=f"part-00002.parquet.*{size} bytes.*{size - 10}"):
        _ids(tmp_path / "out", "parquet")


def test_a_parent_directory_read_checks_each_manifest_and_skips_crash_temporaries(tmp_path):
    source = _source(tmp_path / "src" / "data.parquet", 600)
    _convert(source, tmp_path / "sets" / "a", "parquet")
    _convert(source, tmp_path / "sets" / "b", "parquet")
    crashed = tmp_path / "sets" / ".c.streamfeed-tmp-1-0123abcd"  # what a killed writer leaves
    shutil.copytree(tmp_path / "sets" / "a", crashed)
    assert len(_ids(tmp_path / "sets", "parquet")) == 1_200
    shutil.copy(tmp_path / "sets" / "b" / "part-00000.parquet", tmp_path / "sets" / "b" / "part-00007.parquet")
    with pytest.raises(CorruptFileError, match="part-00007.parquet"):
        _ids(tmp_path / "sets", "parquet")


def test_write_tfrecord_to_a_remote_filesystem_writes_a_manifest_the_reader_checks(tmp_path):
    import fsspec
    import pyarrow.fs as pafs

    memory = fsspec.filesystem("memory")  # one store per process: this test keeps to its own bucket
    fs = pafs.PyFileSystem(pafs.FSSpecHandler(memory))
    bucket = f"/bucket-{tmp_path.name}"

    def names() -> list[str]:
        return sorted(info.base_name for info in fs.get_file_info(pafs.FileSelector(bucket, recursive=True)))

    def ids() -> np.ndarray:
        with sf.read_tfrecord(f"{bucket}/set", filesystem=fs).iter_epoch(0) as epoch:
            return np.concatenate([batch["id"] for batch in epoch])

    try:
        paths = sf.write_tfrecord({"id": np.arange(250)}, f"{bucket}/set/part", shard_rows=100, filesystem=fs)
        assert [path.rsplit("/", 1)[1] for path in paths] == [f"part-{i:05d}-of-00003.tfrecord" for i in range(3)]
        assert names() == sorted([MANIFEST, "set", *(path.rsplit("/", 1)[1] for path in paths)])  # no temporaries
        assert np.array_equal(ids(), np.arange(250))
        with pytest.raises(OutputExistsError):
            sf.write_tfrecord({"id": np.arange(250)}, f"{bucket}/set/part", filesystem=fs)
        fs.delete_file(paths[1])
        with pytest.raises(CorruptFileError, match="part-00001-of-00003.tfrecord.*missing"):
            sf.read_tfrecord(f"{bucket}/set", filesystem=fs)
        again = sf.write_tfrecord(
            {"id": np.arange(150)}, f"{bucket}/set/part", shard_rows=100, filesystem=fs, overwrite=True
        )
        assert names() == sorted([MANIFEST, "set", *(path.rsplit("/", 1)[1] for path in again)])
        assert np.array_equal(ids(), np.arange(150))
    finally:
        if memory.exists(bucket):
            memory.rm(bucket, recursive=True)


def test_overwrite_without_an_atomic_exchange_renames_the_old_output_aside_first(tmp_path, monkeypatch):
    from streamfeed.files import publish

    monkeypatch.setattr(publish, "_exchange", lambda first, second: False)  # not Linux, or a filesystem without it
    source = _source(tmp_path / "src" / "data.parquet", 900)
    _convert(_source(tmp_path / "src-old" / "data.parquet", OLD_ROWS), tmp_path / "out" / "data", "parquet")
    renames = []
    rename = publish._rename
    monkeypatch.setattr(publish, "_rename", lambda a, b: (renames.append((Path(a).name, Path(b).name)), rename(a, b)))
    _convert(source, tmp_path / "out" / "data", "parquet", overwrite=True)
    assert [target for _, target in renames][1] == "data" and ".data.streamfeed-old-" in renames[0][1]
    assert os.listdir(tmp_path / "out") == ["data"]
    assert np.array_equal(_ids(tmp_path / "out" / "data", "parquet"), np.arange(900))
