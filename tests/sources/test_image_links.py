"""Symbolic links in image folders: every file is resolved to its real path.

A file (or folder) reachable under two classes is an error naming both
paths; a link whose target is outside the root is not followed unless
``follow_links="all"``; a file reached twice in one class is read once.
The link to ``/`` is created inside ``tmp_path`` and never followed: the
tests only check that nothing behind it is listed.
"""

from __future__ import annotations

import inspect as inspect_module
import json
import logging
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
from PIL import Image

import streamfeed as sf
from streamfeed.inspect import inspect
from streamfeed.readers import read_images
from streamfeed.sources.images.listing import list_images


def _png(path: Path, value: int = 0) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("L", (2, 2), value).save(path, "PNG")


def _classes(root: Path) -> Path:
    for name, count in (("cat", 2), ("dog", 3)):
        for number in range(count):
            _png(root / name / f"{name}{number}.png", number)
    return root


def test_a_folder_aliased_into_another_class_is_an_error_naming_both_paths(tmp_path):
    root = _classes(tmp_path / "root")
    (root / "cat" / "dogalias").symlink_to(Path("..") / "dog", target_is_directory=True)
    with pytest.raises(sf.SchemaError) as excinfo:
        read_images(root, size=(2, 2))
    text = str(excinfo.value)
    assert str(root / "cat" / "dogalias") in text and str(root / "dog") in text
    assert "'cat'" in text and "'dog'" in text


def test_a_file_linked_into_another_class_is_an_error_naming_both_paths(tmp_path):
    root = _classes(tmp_path / "root")
    (root / "cat" / "not-a-cat.png").symlink_to(root / "dog" / "dog1.png")
    with pytest.raises(sf.SchemaError) as excinfo:
        read_images(root, size=(2, 2), follow_links="all")
    text = str(excinfo.value)
    assert str(root / "cat" / "not-a-cat.png") in text and str(root / "dog" / "dog1.png") in text


def test_a_link_to_the_filesystem_root_is_not_followed(tmp_path, caplog):
    # Checked first, so that a reader that follows every link never starts walking "/".
    assert inspect_module.signature(read_images).parameters["follow_links"].default == "inside"
    assert inspect_module.signature(list_images).parameters["follow_links"].default == "inside"
    root = _classes(tmp_path / "root")
    (root / "dog" / "slash").symlink_to("/", target_is_directory=True)
    (root / "bird").symlink_to("/", target_is_directory=True)  # a whole "class" outside the root
    with caplog.at_level(logging.WARNING, logger="streamfeed"):
        ds = read_images(root, size=(2, 2))
    assert ds.source.class_counts == {"cat": 2, "dog": 3}
    assert all(str(tmp_path / "root") in path and "slash" not in path for path in ds.source.files)
    assert ds.source.summary()["links"] == {"outside_root": 2, "repeated_file": 0, "unreadable": 0}
    said = [record.getMessage() for record in caplog.records if "not followed" in record.getMessage()]
    assert len(said) == 1 and "2 folder links" in said[0] and str(root) in said[0]
    listing = list_images(str(root), "inferred")
    assert listing.links["outside_root"] == [str(root / "bird"), str(root / "dog" / "slash")]
    report = inspect(root)
    assert "links_outside_root" in report.warning_codes and report.details["classes"] == {"cat": 2, "dog": 3}


def _jpeg(path: Path, value: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", (4, 4), (value, value, value)).save(path, "JPEG", quality=95)


def test_file_links_out_of_the_root_are_followed_wherever_they_point(tmp_path, caplog):
    # Splits cut out of one pool: train/cat/x.jpg -> ../../pool/x.jpg, the usual layout.
    pool = tmp_path / "pool"
    for number in range(6):
        _jpeg(pool / f"x{number}.jpg", 40 * number)
    _png(pool / "p.png", 7)
    train = tmp_path / "train"
    for number, name in enumerate(["cat", "cat", "dog", "dog", "dog", "cat"]):
        (train / name).mkdir(parents=True, exist_ok=True)
        (train / name / f"x{number}.jpg").symlink_to(Path("..") / ".." / "pool" / f"x{number}.jpg")
    (train / "dog" / "p.png").symlink_to(pool / "p.png")  # an absolute link
    _png(train / "cat" / "own.png", 1)  # a real file next to the links
    with caplog.at_level(logging.WARNING, logger="streamfeed"):
        ds = read_images(train, size=(4, 4))
    assert not [record for record in caplog.records if "not followed" in record.getMessage()]
    assert ds.source.class_counts == {"cat": 4, "dog": 4}
    assert ds.source.summary()["links"] == {"outside_root": 0, "repeated_file": 0, "unreadable": 0}
    rows: dict[str, int] = {}
    for batch in ds.batch(3):
        for path, label in zip(batch["path"], batch["label"]):
            name = os.path.relpath(str(path), train)
            assert name not in rows
            rows[name] = int(label)
    expected = {f"{name}/x{number}.jpg": name for number, name in enumerate(["cat", "cat", "dog", "dog", "dog", "cat"])}
    expected.update({"dog/p.png": "dog", "cat/own.png": "cat"})
    assert rows == {name: ds.source.label_map[label] for name, label in expected.items()}


def _as_another_user(work) -> dict:
    """Runs ``work()`` in a forked child as a real unprivileged user (created with ``useradd``); returns its dict.

    The child is forked after the parent imported and used everything it
    needs: the unprivileged user cannot read this interpreter's packages.
    """
    name = "sf-test-other"
    if subprocess.run(["id", "-u", name], capture_output=True).returncode != 0:
        subprocess.run(["useradd", "--no-create-home", "--shell", "/usr/sbin/nologin", name], check=True)
    uid = int(subprocess.run(["id", "-u", name], capture_output=True, check=True, text=True).stdout)
    gid = int(subprocess.run(["id", "-g", name], capture_output=True, check=True, text=True).stdout)
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover (the child)
        os.close(read_end)
        try:
            os.setgroups([])
            os.setgid(gid)
            os.setuid(uid)
            result = work()
        except BaseException as exc:
            result = {"raised": type(exc).__name__, "text": str(exc)}
        os.write(write_end, json.dumps(result).encode())
        os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as reading:
        data = reading.read()
    os.waitpid(pid, 0)
    return json.loads(data)


@pytest.fixture
def shared_dir():
    """A folder the other user may read (pytest's tmp_path is root's alone)."""
    path = Path(tempfile.mkdtemp(prefix="sf-links-"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path)


def test_a_link_the_reader_may_not_resolve_is_bad_input_named_under_the_error_policy(shared_dir):
    root = _classes(shared_dir / "root")
    for folder, _, files in os.walk(shared_dir):
        os.chmod(folder, 0o755)
        for file in files:
            os.chmod(os.path.join(folder, file), 0o644)
    (root / "cat" / "planted.png").symlink_to("/proc/1/cwd/etc/planted.png")  # pid 1 is root's: EACCES
    (root / "dog" / "planted").symlink_to("/proc/1/cwd", target_is_directory=True)
    _png(shared_dir / "warm" / "a.png")
    read_images(shared_dir / "warm", size=(2, 2), labels=None)  # every import warmed before the fork

    def strict() -> dict:
        try:
            read_images(root, size=(2, 2))
        except sf.CorruptFileError as exc:
            return {"raised": "CorruptFileError", "text": str(exc)}
        return {"raised": None}

    def skipping() -> dict:
        ds = read_images(root, size=(2, 2), on_error="skip")
        paths = sorted(os.path.relpath(str(p), root) for batch in ds.batch(2) for p in batch["path"])
        return {
            "paths": paths,
            "reported": [entry.path for entry in ds.report.entries],
            "links": ds.source.summary()["links"],
        }

    raised = _as_another_user(strict)
    assert raised["raised"] == "CorruptFileError", raised
    assert str(root / "cat" / "planted.png") in raised["text"] and "Permission" in raised["text"]
    skipped = _as_another_user(skipping)
    assert skipped["paths"] == ["cat/cat0.png", "cat/cat1.png", "dog/dog0.png", "dog/dog1.png", "dog/dog2.png"]
    assert skipped["reported"] == [str(root / "cat" / "planted.png")]
    assert skipped["links"]["unreadable"] == 1  # dog/planted: a folder link that cannot be resolved, counted


def test_follow_links_all_reads_outside_the_root_when_asked(tmp_path):
    root = _classes(tmp_path / "root")
    _png(tmp_path / "outside" / "bird" / "b.png")
    (root / "bird").symlink_to(tmp_path / "outside" / "bird", target_is_directory=True)
    assert read_images(root, size=(2, 2)).source.class_counts == {"cat": 2, "dog": 3}
    ds = read_images(root, size=(2, 2), follow_links="all")
    assert ds.source.class_counts == {"bird": 1, "cat": 2, "dog": 3}
    with pytest.raises(sf.ArgumentError):
        read_images(root, size=(2, 2), follow_links="none")  # type: ignore[arg-type]


def test_links_inside_one_class_read_each_file_once(tmp_path):
    root = _classes(tmp_path / "root")
    (root / "dog" / "again.png").symlink_to("dog0.png")
    (root / "dog" / "sub").mkdir()
    (root / "dog" / "sub" / "up").symlink_to(Path(".."), target_is_directory=True)  # a cycle
    (root / "dog" / "mirror").symlink_to(Path("sub"), target_is_directory=True)
    ds = read_images(root, size=(2, 2))
    assert ds.source.class_counts == {"cat": 2, "dog": 3}
    assert sorted(os.path.basename(path) for path in ds.source.files) == sorted(
        ["cat0.png", "cat1.png", "dog0.png", "dog1.png", "dog2.png"]
    )
    summary = ds.source.summary()
    assert summary["links"] == {"outside_root": 0, "repeated_file": 1, "unreadable": 0}
    assert summary["ignored"]["repeated_directory"] == 2  # sub/up (the cycle) and mirror (sub again)


def test_a_root_that_is_itself_a_link_is_inside_itself(tmp_path):
    real = _classes(tmp_path / "real")
    (real / "dog" / "also.png").symlink_to(real / "dog" / "dog0.png")
    (tmp_path / "alias").symlink_to(real, target_is_directory=True)
    ds = read_images(tmp_path / "alias", size=(2, 2))
    assert ds.source.class_counts == {"cat": 2, "dog": 3}
    assert ds.source.summary()["links"] == {"outside_root": 0, "repeated_file": 1, "unreadable": 0}


def test_without_labels_a_file_reached_twice_is_read_once(tmp_path):
    root = tmp_path / "flat"
    _png(root / "a" / "x.png")
    (root / "b").mkdir()
    (root / "b" / "y.png").symlink_to(root / "a" / "x.png")
    ds = read_images(root, size=(2, 2), labels=None)
    assert [os.path.relpath(path, root) for path in ds.source.files] == [os.path.join("a", "x.png")]


def test_a_file_link_to_a_fifo_or_a_device_is_a_bad_file_never_opened(tmp_path):
    # File links are followed wherever they point: to a FIFO (opening it would block) or /dev/zero (no end).
    root = _classes(tmp_path / "root")
    os.mkfifo(tmp_path / "pipe")
    (root / "cat" / "pipe.png").symlink_to(tmp_path / "pipe")
    (root / "dog" / "zero.png").symlink_to("/dev/zero")
    with pytest.raises(sf.CorruptFileError) as excinfo:
        read_images(root, size=(2, 2))
    assert str(root / "cat" / "pipe.png") in str(excinfo.value) and "not a regular file" in str(excinfo.value)
    ds = read_images(root, size=(2, 2), on_error="skip")
    assert ds.source.class_counts == {"cat": 2, "dog": 3}
    assert sorted(entry.path for entry in ds.report.entries) == [
        str(root / "cat" / "pipe.png"),
        str(root / "dog" / "zero.png"),
    ]
    unprobed = read_images(root, size=(2, 2), on_error="skip", verify_headers=False)  # the read refuses them
    assert sum(len(batch["path"]) for batch in unprobed.batch(4)) == 5
