"""Every file streamfeed writes is written whole, under its name, never through a planted link (issue 22, item 6).

Each public writer runs with symlinks to a victim file planted at the
destination and at every temporary name the writers used before
``files/atomic.py`` (``<dest>.tmp``, ``.<dest>.<pid>.tmp``): the victim stays
as it was and the destination is a regular file with the writer's content.
A second test reads the package's source and fails when a file write
appears outside the helper and outside the listed exceptions.
"""

from __future__ import annotations

import ast
import json
import os
import stat
from pathlib import Path
from typing import Callable

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import streamfeed as sf
from streamfeed.files.atomic import atomic_open, write_atomic

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "streamfeed"
VICTIM = b"precious: must never be overwritten\n"


def old_temporary_names(destination: Path) -> list[Path]:
    """The names the writers' temporary files had before the helper: all predictable from the destination."""
    pid = os.getpid()
    return [
        destination.with_name(destination.name + ".tmp"),  # Stats.save
        destination.with_name(f".{destination.name}.{pid}.tmp"),  # write_suspects, write_suspects_html
        destination.with_suffix(f".{pid}.tmp"),  # the CSV row-count index (plus an id(), by the same pid)
    ]


def plant(destination: Path, victims: Path) -> dict[Path, Path]:
    """A symlink to its own victim file at the destination and each old temporary name; returns link -> victim."""
    victims.mkdir(exist_ok=True)
    planted = {}
    for index, link in enumerate([destination, *old_temporary_names(destination)]):
        victim = victims / f"victim-{index}"
        victim.write_bytes(VICTIM)
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(victim)
        planted[link] = victim
    return planted


def assert_not_followed(destination: Path, planted: dict[Path, Path]) -> None:
    for link, victim in planted.items():
        assert victim.read_bytes() == VICTIM, f"{victim} was written through the link {link}"
    assert stat.S_ISREG(os.lstat(destination).st_mode), f"{destination} is not a regular file"
    # Nothing left of the write but the destination (and the links planted at the old names).
    left = {path.name for path in destination.parent.iterdir()} - {link.name for link in planted if link != destination}
    assert left == {destination.name}, left


@pytest.fixture
def parquet(tmp_path) -> Path:
    path = tmp_path / "data" / "d.parquet"
    path.parent.mkdir()
    ids = np.arange(40, dtype=np.int64)
    pq.write_table(pa.table({"id": ids, "x": ids / 2.0, "label": ids % 2}), path, row_group_size=10)
    return path


SUSPECTS = [
    {"id": 3, "rank": 1, "mean_margin": -0.5, "last_margin": -0.4, "mean_loss": 1.2, "times_trained": 4, "label": 1}
]


def write_stats(parquet: Path, destination: Path) -> Callable[[], None]:
    stats = sf.compute_stats(sf.read_parquet(parquet))

    def check() -> None:
        assert sf.Stats.load(destination).rows == 40

    stats.save(destination)
    return check


def write_label_map(parquet: Path, destination: Path) -> Callable[[], None]:
    from streamfeed.sources.labels import write_label_map

    write_label_map({"cat": 0, "dog": 1}, destination)
    return lambda: json.loads(destination.read_text(encoding="utf-8")) == {"cat": 0, "dog": 1} or pytest.fail()


def write_inspect_html(parquet: Path, destination: Path) -> Callable[[], None]:
    from streamfeed.inspect import inspect
    from streamfeed.inspect.html import write_html

    write_html(inspect(str(parquet)), destination)
    return lambda: None if "<html" in destination.read_text(encoding="utf-8") else pytest.fail()


def write_inspect_html_cli(parquet: Path, destination: Path) -> Callable[[], None]:
    import io

    from streamfeed.cli import main

    out = io.StringIO()
    import contextlib

    with contextlib.redirect_stdout(out):
        assert main(["inspect", str(parquet), "--html", str(destination), "--json", "--quiet"]) == 0
    return lambda: None if "<html" in destination.read_text(encoding="utf-8") else pytest.fail()


def write_suspects_page(parquet: Path, destination: Path) -> Callable[[], None]:
    from streamfeed.inspect.suspects_html import write_suspects_html

    assert write_suspects_html(destination, SUSPECTS) == 1
    return lambda: None if "Suspects" in destination.read_text(encoding="utf-8") else pytest.fail()


def _monitor(parquet: Path):
    from streamfeed.keras.quality_monitor import DataQualityMonitor

    train = sf.read_parquet(parquet).batch(10).to_keras(label="label", ids="id")
    monitor = DataQualityMonitor(train)
    ids = np.arange(10, dtype=np.int64)
    monitor.ledger.add(ids, ids % 2, np.linspace(-1, 1, 10), np.ones(10))
    return monitor


def write_monitor_suspects(parquet: Path, destination: Path) -> Callable[[], None]:
    monitor = _monitor(parquet)
    count = monitor.write_suspects(destination)
    assert count > 0

    def check() -> None:
        rows = [json.loads(line) for line in destination.read_text(encoding="utf-8").splitlines()]
        assert len(rows) == count and rows == monitor.suspects()

    return check


def write_monitor_suspects_html(parquet: Path, destination: Path) -> Callable[[], None]:
    assert _monitor(parquet).write_suspects_html(destination) > 0
    return lambda: None if "Suspects" in destination.read_text(encoding="utf-8") else pytest.fail()


WRITERS = {
    "Stats.save": write_stats,
    "write_label_map": write_label_map,
    "inspect.html.write_html": write_inspect_html,
    "streamfeed inspect --html": write_inspect_html_cli,
    "suspects_html.write_suspects_html": write_suspects_page,
    "DataQualityMonitor.write_suspects": write_monitor_suspects,
    "DataQualityMonitor.write_suspects_html": write_monitor_suspects_html,
}


@pytest.mark.parametrize("writer", sorted(WRITERS))
def test_a_writer_never_writes_through_a_link_planted_at_its_destination_or_temporary_names(tmp_path, parquet, writer):
    destination = tmp_path / "out" / "result.out"
    planted = plant(destination, tmp_path / "victims")
    check = WRITERS[writer](parquet, destination)
    assert_not_followed(destination, planted)
    check()


def test_the_csv_row_count_index_is_written_without_following_links(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    csv = tmp_path / "d.csv"
    csv.write_text("a,b\n" + "".join(f"{i},{i * 2}\n" for i in range(50)))
    assert len(list(sf.read_csv(csv).iter_epoch(0))) > 0  # writes the index
    (index,) = (tmp_path / "cache" / "streamfeed" / "csv-counts").iterdir()
    index.unlink()  # its name is a digest of the file's path, size and mtime: predictable
    planted = plant(index, tmp_path / "victims")
    assert sum(len(b["a"]) for b in sf.read_csv(csv).batch(10).iter_epoch(0)) == 50
    assert_not_followed(index, planted)
    assert json.loads(index.read_text())["key"]


# ------------------------------------------------------------------ the helper
def test_an_error_while_writing_leaves_the_destination_untouched_and_no_temporary_file(tmp_path):
    destination = tmp_path / "result.json"
    destination.write_text("old")

    def half(out) -> None:
        out.write("half of the new")
        raise KeyboardInterrupt("killed mid-write")

    with pytest.raises(KeyboardInterrupt):
        write_atomic(destination, half)
    assert destination.read_text() == "old"
    assert [path.name for path in tmp_path.iterdir()] == ["result.json"]


def test_the_helper_writes_text_bytes_and_callbacks_with_the_permissions_open_gives(tmp_path):
    write_atomic(tmp_path / "t", "é")
    write_atomic(tmp_path / "b", b"\x00\x01")
    write_atomic(tmp_path / "c", lambda out: out.write("called"))
    with atomic_open(tmp_path / "d", "wb", durable=True) as out:
        out.write(b"durable")
    assert (tmp_path / "t").read_text(encoding="utf-8") == "é"
    assert (tmp_path / "b").read_bytes() == b"\x00\x01"
    assert (tmp_path / "c").read_text() == "called" and (tmp_path / "d").read_bytes() == b"durable"
    umask = os.umask(0o022)
    os.umask(umask)
    with open(tmp_path / "by-open", "w"):
        pass
    assert stat.S_IMODE(os.stat(tmp_path / "t").st_mode) == stat.S_IMODE(os.stat(tmp_path / "by-open").st_mode)


# ------------------------------------------------------------------ the census
WRITE_CALLS = {
    "write_text", "write_bytes", "mkstemp", "NamedTemporaryFile", "ParquetWriter", "write_table",
    "open_output_stream", "open_append_stream", "save_weights", "savez", "save",
}  # fmt: skip
MOVES = {"replace", "rename", "move"}  # os.replace, os.rename, shutil.move, Path.replace(target), Path.rename(target)
# Every file write outside files/atomic.py, by (module, enclosing function, call): each with its reason.
NOT_THE_HELPER = {
    # Owned by other engineers (issue 22): whole directories published, or the S3 byte cache (cache/ is skipped too).
    ("files/publish.py", "write_manifest", "open"): "the manifest, written last inside a fresh hidden sibling",
    ("files/publish.py", "write_manifest", "open_output_stream"): "the manifest, on object storage",
    ("files/publish.py", "_rename", "rename"): "a directory published whole with one rename",
    # Files written inside a directory made fresh and private for them: nothing can be planted there.
    ("convert.py", "convert_to_parquet", "ParquetWriter"): "shards inside the Publication's fresh hidden sibling",
    ("convert.py", "convert_to_parquet", "write_table"): "shards inside the Publication's fresh hidden sibling",
    ("writers/tfrecord.py", "write_tfrecord.open_next", "open_output_stream"): "shards inside the Publication",
    ("keras/checkpoint.py", "commit_checkpoint", "save_weights"): "weights into a fresh mkdtemp directory (0700)",
    ("keras/checkpoint.py", "DataCheckpoint._save", "save_weights"): "a worker's weights into a TemporaryDirectory",
    ("keras/checkpoint.py", "_move_in_place", "replace"): "committed weights renamed out of their mkdtemp directory",
    ("keras/checkpoint.py", "_try_lock", "open"): "the checkpoint directory's lock file (O_NOFOLLOW, flock, its pid)",
    # Not a whole-file write.
    ("errors.py", "_append_line", "open"): "appends a line to the report (O_NOFOLLOW: a link there is refused)",
    ("errors.py", "_append_line", "fdopen"): "the descriptor opened O_NOFOLLOW above",
    ("commands/_backend.py", "_stderr_silenced", "open"): "os.open(os.devnull) to silence a backend's output",
    ("commands/stats.py", "run", "save"): "Stats.save, which uses the helper",
    ("inspect/figures.py", "_jpeg", "save"): "a JPEG into an in-memory buffer",
    ("memory.py", "reset_peak_rss", "open"): "'5' to /proc/self/clear_refs: resets the peak RSS, no file",
    ("demo.py", "generate", "ParquetWriter"): "demo data written into an atomic_open stream",
    ("demo.py", "generate", "write_table"): "rows written through that ParquetWriter",
}


def _writes(path: Path, root: Path = PACKAGE) -> list[tuple[str, str, str]]:
    """(module, function, call) of each call in ``path`` that can create or replace a file."""
    found: list[tuple[str, str, str]] = []
    relative = str(path.relative_to(root))

    def visit(node: ast.AST, scope: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                visit(child, f"{scope}.{child.name}" if scope else child.name)
                continue
            if isinstance(child, ast.Call):
                func = child.func
                name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
                if name in WRITE_CALLS or (name in ("open", "fdopen") and _writing(child)) or _moving(child, name):
                    found.append((relative, scope, name))
            visit(child, scope)

    visit(ast.parse(path.read_text(encoding="utf-8")), "")
    return found


def _writing(call: ast.Call) -> bool:
    """An ``open``/``os.open``/``fdopen`` whose mode or flags can write."""
    for argument in [*call.args[1:2], *(k.value for k in call.keywords if k.arg in ("mode", "flags"))]:
        text = ast.unparse(argument)
        if isinstance(argument, ast.Constant) and isinstance(argument.value, str):
            return any(letter in argument.value for letter in "wax+")
        if any(flag in text for flag in ("O_WRONLY", "O_RDWR", "O_CREAT")):
            return True
    return False


def _moving(call: ast.Call, name: str) -> bool:
    """A rename of a file (not ``str.replace`` or ``dataclasses.replace``, which take other arguments)."""
    if name not in MOVES or not isinstance(call.func, ast.Attribute):
        return False
    owner = call.func.value
    if isinstance(owner, ast.Name) and owner.id in ("os", "shutil"):
        return True
    return len(call.args) == 1 and not call.keywords  # Path.replace(target), Path.rename(target)


def _allowed(write: tuple[str, str, str]) -> bool:
    module, scope, call = write
    return (module, scope, call) in NOT_THE_HELPER or (module, "*", call) in NOT_THE_HELPER


USES_THE_HELPER = {"atomic_open", "write_atomic"}


def test_every_file_write_in_the_package_goes_through_the_helper_or_is_listed_with_its_reason():
    unlisted = []
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = str(path.relative_to(PACKAGE))
        if relative == "files/atomic.py" or relative.startswith("cache/"):  # cache/: another engineer's (item 5)
            continue
        unlisted += [write for write in _writes(path) if not _allowed(write)]
    assert unlisted == [], (
        "file writes that do not use streamfeed.files.atomic (atomic_open / write_atomic): "
        f"{unlisted}; use the helper, or list the write in NOT_THE_HELPER with the reason it need not"
    )


def test_the_census_sees_the_writes_the_helper_replaced(tmp_path):
    """The census is not blind: it finds the kinds of write the old code made."""
    sample = tmp_path / "sample.py"
    sample.write_text(
        "import os\n"
        "def save(path, text):\n"
        "    with open(path + '.tmp', 'w') as out:\n"
        "        out.write(text)\n"
        "    os.replace(path + '.tmp', path)\n"
        "class Index:\n"
        "    def put(self, path):\n"
        "        path.write_text('x')\n"
        "def append(path):\n"
        "    return os.open(path, os.O_WRONLY | os.O_APPEND)\n"
        "def read(path):\n"
        "    return open(path).read(), open(path, 'rb').read()\n"
    )
    found = [(scope, call) for _, scope, call in _writes(sample, tmp_path)]
    assert found == [("save", "open"), ("save", "replace"), ("Index.put", "write_text"), ("append", "open")]


def test_the_bad_input_report_is_not_appended_through_a_link_planted_at_its_name(tmp_path):
    from streamfeed.errors import ArgumentError, ErrorPolicy, SkippedUnit

    victim, link = tmp_path / "victim", tmp_path / "report.jsonl"
    victim.write_bytes(VICTIM)
    link.symlink_to(victim)
    report = ErrorPolicy(on_error="skip", report_path=link).new_report()
    with pytest.raises(ArgumentError, match="symbolic link") as info:
        report.add(SkippedUnit("a.parquet", "row group 1", "bad", 10))
    assert str(link) in str(info.value) and str(victim) in str(info.value)
    assert victim.read_bytes() == VICTIM
    link.unlink()
    for number in range(2):  # without the link: appended, a line per entry
        report.add(SkippedUnit("a.parquet", f"row group {number + 2}", "bad", 10))
    assert [json.loads(line)["location"] for line in link.read_text().splitlines()] == ["row group 2", "row group 3"]


def test_the_demo_data_is_not_written_through_a_link_planted_at_its_name(tmp_path):
    from streamfeed.demo import dataset_path, generate

    target = dataset_path(tmp_path / "demo", 1000, 2)
    target.mkdir(parents=True)
    victim = tmp_path / "victim"
    victim.write_text("keep me")
    (target / "part-00000.parquet").symlink_to(victim)
    generate(tmp_path / "demo", 1000, 2, progress=False)
    assert victim.read_text() == "keep me"
    part = target / "part-00000.parquet"
    assert part.is_file() and not part.is_symlink() and (target / "_COMPLETE").is_file()
