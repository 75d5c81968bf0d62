"""Every command on a zip archive of class folders, through the real ``streamfeed`` script (issue 26).

Archives are written by Python's :mod:`zipfile` (``factories/zip.py``)
from folders Pillow wrote; each test checks the values the command reports
(rows, classes, image sizes, the converted table), not only its exit code.
A damaged archive and one with a ``../`` member fail with exit 1 naming the
archive and the member; the ``--html`` report is rendered in headless
Chromium and shows a thumbnail per image; an archive behind a loopback
HTTP server is inspected with range requests, never downloaded whole.
"""

from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
import sys
import zipfile
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from _console import assert_fails_naming, assert_short_failure, streamfeed
from PIL import Image

from factories.zip import zip_folder

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "storage"))
from _http_server import HttpServer  # noqa: E402 - the storage tests' loopback range server, by path

SIZES = {"cat": (8, 8), "dog": (10, 6)}  # (width, height) of each class's images
COUNTS = {"cat": 3, "dog": 2}
BROWSERS = ("chromium-headless-shell", "/usr/lib/chromium/chromium-headless-shell", "chromium", "chromium-browser")


def write_folder(root: Path) -> Path:
    """Five PNGs in two class folders, each image's pixels its own (no duplicates), and a note that is no image."""
    rng = np.random.default_rng(0)
    for name, count in COUNTS.items():
        (root / name).mkdir(parents=True)
        width, height = SIZES[name]
        for index in range(count):
            pixels = rng.integers(0, 255, (height, width, 3), dtype=np.uint8)
            Image.fromarray(pixels).save(root / name / f"{index}.png")
    (root / "dog" / "notes.txt").write_text("not an image")
    return root


@pytest.fixture
def archive(tmp_path: Path) -> Path:
    return zip_folder(write_folder(tmp_path / "folder"), tmp_path / "images.zip")


def ok(*args: object) -> subprocess.CompletedProcess:
    proc = streamfeed(*args)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    return proc


def inspected(*args: object) -> dict:
    return json.loads(ok("inspect", *args, "--json", "--quiet").stdout)


def test_inspect_a_zip_gives_rows_classes_and_image_sizes_from_its_members(archive, tmp_path):
    report = inspected(archive)
    assert report["format"] == "zip" and report["rows"] == 5 and report["rows_exact"]
    assert report["file_count"] == 1 and report["total_bytes"] == archive.stat().st_size
    assert report["details"]["classes"] == COUNTS
    assert report["details"]["image_sizes"] == {"8x8": 3, "10x6": 2}
    assert report["details"]["formats"] == {"PNG": 5} and report["details"]["not_images"] == ["dog/notes.txt"]
    assert report["columns"][0]["samples"] == ["cat/0.png", "cat/1.png", "cat/2.png", "dog/0.png", "dog/1.png"]
    text = ok("inspect", archive, "--quiet").stdout
    assert "zip" in text and '"cat": 3' in text and '"10x6": 2' in text


def test_inspect_of_a_zip_reads_a_sample_of_members_and_extracts_nothing(tmp_path):
    root = tmp_path / "many" / "cls"
    root.mkdir(parents=True)
    for index in range(600):  # more than inspect's sample of headers (512)
        Image.fromarray(np.full((4, 4, 3), index % 256, np.uint8)).save(root / f"{index:03d}.png")
    big = zip_folder(tmp_path / "many", tmp_path / "many.zip")
    work = tmp_path / "cwd"
    work.mkdir()
    proc = streamfeed("inspect", big, "--json", "--quiet", cwd=work)  # nothing may be written there, or beside it
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout)
    assert report["details"]["archive"] == {"members": 600, "headers_read": 512}
    assert report["rows"] == 600 and not report["rows_exact"]  # 88 headers unread: the count is the directory's
    assert list(work.iterdir()) == [] and sorted(p.name for p in tmp_path.iterdir()) == ["cwd", "many", "many.zip"]
    full = inspected(big, "--full")
    assert full["rows"] == 600 and full["rows_exact"] and full["details"]["archive"]["headers_read"] == 600


def test_a_zip_without_the_suffix_is_told_by_its_bytes_and_format_zip_reads_it(archive, tmp_path):
    unnamed = tmp_path / "images.data"
    shutil.copyfile(archive, unnamed)
    assert inspected(unnamed)["format"] == "zip"
    assert inspected(unnamed, "--format", "zip")["details"]["classes"] == COUNTS
    stats = tmp_path / "stats.json"
    ok("stats", unnamed, "--format", "zip", "-o", stats, "--label", "label", "--quiet")
    assert json.loads(stats.read_text())["rows"] == 5
    prefixed = tmp_path / "images.sfx"  # a self-extracting archive: a stub before the zip, so no PK at byte 0
    prefixed.write_bytes(b"#!stub\n" * 20 + archive.read_bytes())
    assert "pass --format" in assert_short_failure(streamfeed("inspect", prefixed), 2)
    assert inspected(prefixed, "--format", "zip")["details"]["classes"] == COUNTS
    ok("convert", prefixed, tmp_path / "out", "--format", "zip", "--quiet")
    assert _table(tmp_path / "out")["rows"]["label"] == [0, 0, 0, 1, 1]


def test_inspect_quality_of_a_zip_measures_every_member(archive):
    report = inspected(archive, "--quality")
    images = report["quality"]["images"]
    assert images["files"] == 5 and images["counts"]["undecodable"] == 0
    assert images["modes"] == {"RGB": 5} and report["quality"]["duplicates"]["estimated"] == 0
    names = sorted(os.path.basename(m["path"]) for m in images["per_image"])
    assert names == ["0.png", "0.png", "1.png", "1.png", "2.png"]
    assert all(m["path"].startswith(f"{archive}/") for m in images["per_image"])


def _table(directory: Path) -> dict:
    parts = sorted(directory.glob("part-*.parquet"))
    table = pq.read_table(parts[0]) if len(parts) == 1 else None
    assert table is not None, parts
    meta = json.loads(table.schema.metadata[b"streamfeed"])
    return {"rows": table.to_pydict(), "label_map": meta["label_map"], "class_names": meta["class_names"]}


def test_convert_of_a_zip_writes_the_table_convert_of_its_folder_writes(archive, tmp_path):
    ok("convert", archive, tmp_path / "from-zip", "--quiet")
    ok("convert", tmp_path / "folder", tmp_path / "from-folder", "--quiet")
    zipped, folder = _table(tmp_path / "from-zip"), _table(tmp_path / "from-folder")
    assert zipped["rows"]["path"] == ["cat/0.png", "cat/1.png", "cat/2.png", "dog/0.png", "dog/1.png"]
    assert zipped["rows"]["label"] == [0, 0, 0, 1, 1]
    assert zipped == folder  # row for row: the encoded bytes, labels, paths; and the label map
    with zipfile.ZipFile(archive) as stored:
        assert zipped["rows"]["image_bytes"][3] == stored.read("dog/0.png")


def test_stats_bench_and_doctor_read_a_zip(archive, tmp_path):
    out = tmp_path / "stats.json"
    ok("stats", archive, "-o", out, "--label", "label", "--quiet")
    stats = json.loads(out.read_text())
    assert stats["rows"] == 5 and stats["label_counts"] == [[0, 3], [1, 2]]
    bench = json.loads(
        ok("bench", archive, "--json", "--max-batches", "3", "--seconds", "2", "--batch-size", "2").stdout
    )
    assert bench["batches"] == 3 and bench["rows"] == 5  # 2 + 2 + the epoch's last, short batch
    doctor = json.loads(ok("doctor", archive, "--json", "--seconds", "2", "--label", "label").stdout)
    assert (doctor["format"], doctor["rows"], doctor["rows_exact"]) == ("zip", 5, True)
    quality = [finding for finding in doctor["findings"] if finding["kind"] == "quality"]
    assert quality and "images in 5 of 5" in quality[-1]["summary"]  # the image quality pass, over the members


def test_a_truncated_zip_fails_naming_the_archive(archive, tmp_path):
    cut = tmp_path / "cut.zip"
    cut.write_bytes(archive.read_bytes()[: archive.stat().st_size // 2])
    for command in (("inspect", cut), ("convert", cut, tmp_path / "out"), ("stats", cut, "-o", tmp_path / "s.json")):
        assert_fails_naming(streamfeed(*command, "--quiet"), str(cut), "central directory")
    assert not (tmp_path / "out").exists()


def test_a_damaged_member_is_named_by_inspect_and_fails_convert(archive, tmp_path):
    """As for a folder's damaged file: ``inspect`` reports it (naming the member), ``convert`` refuses to copy it."""
    damaged = tmp_path / "damaged.zip"
    data = bytearray(archive.read_bytes())
    with zipfile.ZipFile(archive) as stored:
        info = stored.getinfo("dog/1.png")
    start = info.header_offset + 30 + len(info.filename) + len(info.extra)
    data[start + 20 : start + 40] = bytes(20)  # the bytes change, the CRC does not
    damaged.write_bytes(bytes(data))
    report = inspected(damaged, "--full")
    assert report["rows"] == 4 and report["details"]["classes"] == {"cat": 3, "dog": 1}
    (bad,) = report["details"]["undecodable"]
    assert bad["path"] == f"{damaged}/dog/1.png" and "CRC" in bad["error"]
    assert "unreadable_files" in [warning["code"] for warning in report["warnings"]]
    assert_fails_naming(streamfeed("convert", damaged, tmp_path / "out", "--quiet"), str(damaged), "dog/1.png")


def test_a_member_climbing_out_with_dotdot_fails_naming_the_archive_and_the_member(archive, tmp_path):
    evil = tmp_path / "evil.zip"
    shutil.copyfile(archive, evil)
    with zipfile.ZipFile(evil, "a") as out:
        out.writestr("../outside/x.png", (tmp_path / "folder" / "cat" / "0.png").read_bytes())
    for command in (
        ("inspect", evil),
        ("inspect", evil, "--html", tmp_path / "r.html"),
        ("convert", evil, tmp_path / "out"),
        ("stats", evil, "-o", tmp_path / "s.json"),
        ("doctor", evil, "--seconds", "1"),
        ("bench", evil, "--seconds", "1"),
    ):
        assert_fails_naming(streamfeed(*command, "--quiet"), str(evil), "../outside/x.png")
    assert not (tmp_path / "outside").exists() and not (tmp_path / "out").exists()
    skipped = json.loads(ok("convert", evil, tmp_path / "out", "--on-error", "skip", "--json", "--quiet").stdout)
    assert skipped["rows"] == 5 and skipped["skipped"]["skipped_rows"] == 1
    (entry,) = skipped["skipped"]["entries"]
    assert entry["path"] == str(evil) and "../outside/x.png" in entry["location"]


def _central_entry(data: bytes, name: str) -> int:
    """The byte offset of ``name``'s entry in the central directory (46 fixed bytes before its name)."""
    return data.index(name.encode(), data.index(b"PK\x01\x02")) - 46


@pytest.mark.parametrize(
    ("kind", "member", "said"),
    [("encrypted", "dog/1.png", "encrypted"), ("bomb", "cat/0.png", "zip bomb")],
)
def test_an_encrypted_member_or_a_zip_bomb_fails_every_command_naming_the_member(archive, tmp_path, kind, member, said):
    """The bytes ``zipfile`` wrote, rewritten where an encrypted member or a bomb differs: a flag, a declared size."""
    bad = tmp_path / f"{kind}.zip"
    data = bytearray(archive.read_bytes())
    with zipfile.ZipFile(archive) as stored:
        info = stored.getinfo(member)
    entry = _central_entry(bytes(data), member)
    if kind == "encrypted":
        data[info.header_offset + 6] |= 1  # general purpose flag bit 0, in the local header and the central entry
        data[entry + 8] |= 1
    else:
        assert info.compress_type == zipfile.ZIP_DEFLATED
        data[entry + 24 : entry + 28] = struct.pack("<I", 2**31)  # declares 2 GiB inflated from a few bytes
    bad.write_bytes(bytes(data))
    for command in (("inspect", bad), ("convert", bad, tmp_path / "out"), ("stats", bad, "-o", tmp_path / "s.json")):
        assert_fails_naming(streamfeed(*command, "--quiet"), str(bad), member, said)
    assert not (tmp_path / "out").exists()


class _Tags(HTMLParser):
    def __init__(self, document: str) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str]]] = []
        self.feed(document)

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, {key: value or "" for key, value in attrs}))


def _browser() -> str:
    for candidate in [os.environ.get("STREAMFEED_CHROMIUM") or "", *BROWSERS]:
        if candidate and shutil.which(candidate):
            return str(shutil.which(candidate))
    pytest.fail("No headless Chromium: apt-get install chromium-headless-shell (.ci/run does)", pytrace=False)


def test_the_html_report_of_a_zip_renders_thumbnails_per_class_in_chromium(archive, tmp_path):
    page = tmp_path / "report.html"
    ok("inspect", archive, "--html", page, "--quality", "--quiet")
    common = [_browser(), "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--window-size=1280,2000"]
    shot = tmp_path / "shot.png"
    for arguments in ([f"--screenshot={shot}"], ["--dump-dom"]):
        profile = f"--user-data-dir={tmp_path / ('profile' + str(len(arguments[0])))}"
        done = subprocess.run(
            [*common, profile, *arguments, page.as_uri()], capture_output=True, text=True, timeout=180
        )
        assert done.returncode == 0, done.stderr[-2000:]
    thumbs = [
        attrs for tag, attrs in _Tags(done.stdout).tags if tag == "img" and "class-thumb" in attrs.get("class", "")
    ]
    assert sorted(t["data-class"] for t in thumbs) == ["cat", "cat", "cat", "dog", "dog"]
    assert all(t["src"].startswith("data:image/jpeg;base64,") for t in thumbs)
    assert sorted(t["alt"] for t in thumbs) == ["cat/0.png", "cat/1.png", "cat/2.png", "dog/0.png", "dog/1.png"]
    picture = Image.open(shot).convert("RGB")
    colours = picture.getcolors(maxcolors=1 << 20)
    assert picture.size == (1280, 2000) and colours is not None and len(colours) > 200  # not a blank page


def test_a_zip_behind_https_is_inspected_and_converted_with_range_requests(archive, tmp_path):
    served = tmp_path / "www"
    served.mkdir()
    shutil.copyfile(archive, served / "images.zip")
    with HttpServer(served) as server:
        url = f"{server.url}/images.zip"
        report = inspected(url)
        log = server.log()
        ok("convert", url, tmp_path / "from-url", "--quiet")
    assert report["rows"] == 5 and report["details"]["classes"] == COUNTS
    gets = [entry for entry in log if entry.get("method") == "GET"]
    assert gets and all(entry.get("range") for entry in gets)  # byte ranges: the archive is never fetched whole
    ok("convert", archive, tmp_path / "from-zip", "--quiet")
    assert _table(tmp_path / "from-url")["rows"] == _table(tmp_path / "from-zip")["rows"]
