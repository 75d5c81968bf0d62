"""Every command on tar shards in the WebDataset layout, through the real ``streamfeed`` script (issue 26).

Shards are written by the ``webdataset`` library's ``TarWriter`` (a PNG, a
``.cls`` label and a ``.json`` member per sample); a shard with a ``../``
member is written by :mod:`tarfile`, which writes such names as given. The
tests check the values each command reports: samples, columns, image
shapes, the converted rows.
"""

from __future__ import annotations

import io
import json
import shutil
import subprocess
import tarfile
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from _console import assert_fails_naming, streamfeed
from PIL import Image

wds = pytest.importorskip("webdataset")

SHARDS, SAMPLES = 2, 5


def _png(value: int) -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(np.full((12, 16, 3), value, np.uint8)).save(buffer, format="PNG")
    return buffer.getvalue()


@pytest.fixture
def shards(tmp_path: Path) -> Path:
    """Two shards of five samples ``s{shard}_{i}``: an image of value ``10 * i``, ``cls = i % 2``, JSON ``{"i": i}``."""
    directory = tmp_path / "shards"
    directory.mkdir()
    for shard in range(SHARDS):
        with wds.TarWriter(str(directory / f"shard-{shard:03d}.tar")) as out:
            for i in range(SAMPLES):
                out.write({"__key__": f"s{shard}_{i:03d}", "png": _png(10 * i), "cls": i % 2, "json": {"i": i}})
    return directory


def ok(*args: object) -> subprocess.CompletedProcess:
    proc = streamfeed(*args)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    return proc


def inspected(*args: object) -> dict:
    return json.loads(ok("inspect", *args, "--json", "--quiet").stdout)


def test_inspect_a_directory_of_shards_gives_exact_samples_and_columns(shards):
    report = inspected(shards)
    assert report["format"] == "webdataset" and report["rows"] == 10 and report["rows_exact"]
    assert report["file_count"] == 2
    assert report["details"]["samples_per_shard"] == {str(shards / f"shard-{s:03d}.tar"): 5 for s in range(SHARDS)}
    columns = {column["name"]: column for column in report["columns"]}
    assert list(columns) == ["__key__", "cls", "json", "png"]
    assert columns["png"]["shape"] == [12, 16, 3] and columns["png"]["type"] == "image uint8"
    assert columns["cls"]["samples"] == [0, 1, 0, 1, 0]
    assert columns["json"]["samples"][:2] == [{"i": 0}, {"i": 1}]
    assert columns["__key__"]["samples"][:2] == ["s0_000", "s0_001"]
    text = ok("inspect", shards / "shard-001.tar", "--quiet").stdout
    assert "webdataset" in text and "s1_000" in text


def test_a_shard_without_the_suffix_is_told_by_its_bytes_and_format_webdataset_reads_it(shards, tmp_path):
    unnamed = tmp_path / "shard-000.data"
    shutil.copyfile(shards / "shard-000.tar", unnamed)
    assert inspected(unnamed)["rows"] == 5
    assert inspected(unnamed, "--format", "webdataset")["format"] == "webdataset"


def test_convert_stats_bench_and_doctor_read_shards(shards, tmp_path):
    ok("convert", shards, tmp_path / "out", "--quiet")
    table = pq.read_table(sorted((tmp_path / "out").glob("part-*.parquet"))[0]).to_pydict()
    assert table["__key__"] == [f"s{s}_{i:03d}" for s in range(SHARDS) for i in range(SAMPLES)]
    assert table["cls"] == [i % 2 for _ in range(SHARDS) for i in range(SAMPLES)]
    back = json.loads(ok("inspect", tmp_path / "out", "--json", "--quiet").stdout)
    assert back["rows"] == 10
    out = tmp_path / "stats.json"
    ok("stats", shards, "-o", out, "--label", "cls", "--quiet")
    stats = json.loads(out.read_text())
    assert stats["rows"] == 10 and stats["label_counts"] == [[0, 6], [1, 4]]
    bench = json.loads(
        ok("bench", shards, "--json", "--max-batches", "2", "--batch-size", "4", "--seconds", "2").stdout
    )
    assert bench["batches"] == 2 and bench["rows"] == 8
    doctor = json.loads(ok("doctor", shards, "--json", "--seconds", "2").stdout)
    assert (doctor["format"], doctor["files"], doctor["rows"], doctor["rows_exact"]) == ("webdataset", 2, 10, True)


def test_inspect_quality_of_shards_counts_every_sample_and_the_page_shows_the_images(shards, tmp_path):
    page = tmp_path / "report.html"
    quality = inspected(shards, "--quality", "--html", page)["quality"]
    assert quality["rows"] == 10 and set(quality["columns"]) == {"__key__", "cls", "json", "png"}
    html = page.read_text()
    assert html.count('<img class="thumb array-thumb" src="data:image/jpeg;base64,') >= 5  # the png column's rows


def test_a_truncated_shard_fails_naming_the_shard_and_the_member(shards, tmp_path):
    cut = tmp_path / "cut.tar"
    data = (shards / "shard-000.tar").read_bytes()
    with tarfile.open(shards / "shard-000.tar") as stored:
        member = stored.getmember("s0_003.png")
    cut.write_bytes(data[: member.offset_data + 10])  # inside s0_003.png's data
    for command in (("inspect", cut), ("convert", cut, tmp_path / "out"), ("stats", cut, "-o", tmp_path / "s.json")):
        assert_fails_naming(streamfeed(*command, "--quiet"), str(cut), "s0_003.png")
    assert not (tmp_path / "out").exists()


def test_a_member_climbing_out_with_dotdot_fails_naming_the_shard_and_the_member(tmp_path):
    evil = tmp_path / "evil.tar"
    with tarfile.open(evil, "w", format=tarfile.USTAR_FORMAT) as out:
        for name, data in (("a.png", _png(1)), ("a.cls", b"0"), ("../up/b.png", _png(2)), ("../up/b.cls", b"1")):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            out.addfile(info, io.BytesIO(data))
    for command in (("inspect", evil), ("convert", evil, tmp_path / "out"), ("doctor", evil, "--seconds", "1")):
        assert_fails_naming(streamfeed(*command, "--quiet"), str(evil), "../up/b.png")
    assert not (tmp_path / "up").exists() and not (tmp_path / "out").exists()
