"""A failure's fix, said to a shell user: the flag to pass or the command to run, never a Python keyword.

Through the real ``streamfeed`` script. An error whose fix differs on the
command line carries that fix itself (``StreamfeedError.cli_fix``); before,
``bench --model demo`` on a string column said "pass categorical=... to
to_keras()" and ``inspect x.h5 --format csv`` said "pass quote_char=None",
neither of which a shell user can do.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import h5py
import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pytest
from _console import assert_short_failure, streamfeed

from streamfeed.errors import MissingDependencyError, require

ROOT = Path(__file__).resolve().parents[2]
# a Python keyword argument in a fix: name=value (a flag is --name VALUE)
PYTHON_KEYWORD = re.compile(r"(?<![-\w])[a-z_]+=")


def _fix(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if ": fix: " in line]
    assert len(lines) == 1, stderr
    return lines[0].split(": fix: ", 1)[1]


def test_bench_with_a_string_feature_names_the_flag(tmp_path):
    path = tmp_path / "clicks.csv"
    pacsv.write_csv(pa.table({"x": np.arange(300) * 0.5, "city": ["a", "b", "c"] * 100, "y": np.arange(300) % 2}), path)
    stderr = assert_short_failure(streamfeed("bench", path, "--model", "demo", "--label", "y", "--seconds", "5"), 1)
    assert "'city' is not numeric" in stderr
    fix = _fix(stderr)
    assert "to_keras" not in fix and not PYTHON_KEYWORD.search(fix), fix
    assert "--features" in fix, fix


@pytest.fixture
def image_h5(tmp_path) -> Path:
    """64x64 random bytes: read as CSV they hold a quote character inside a field."""
    path = tmp_path / "x.h5"
    with h5py.File(path, "w") as handle:
        images = np.random.default_rng(0).integers(0, 256, (500, 64, 64), dtype=np.uint8)
        handle.create_dataset("images", data=images, chunks=(50, 64, 64), compression="gzip")
        handle["labels"] = np.arange(500) % 10
    return path


def test_a_file_read_with_the_wrong_format_is_told_to_check_format(image_h5):
    stderr = assert_short_failure(streamfeed("inspect", image_h5, "--format", "csv"), 1)
    fix = _fix(stderr)
    assert "quote_char" not in fix and not PYTHON_KEYWORD.search(fix), fix
    assert "--format" in fix, fix


def test_a_csv_that_is_not_utf8_is_told_what_to_run(tmp_path):
    path = tmp_path / "latin.csv"
    path.write_bytes("name,y\ncaf\xe9,1\nna\xefve,0\n".encode("latin-1"))
    stderr = assert_short_failure(streamfeed("inspect", path), 1)
    fix = _fix(stderr)
    assert "encoding=" not in fix and not PYTHON_KEYWORD.search(fix), fix
    assert "iconv" in fix, fix


def test_a_missing_extra_says_both_ways_to_install_it():
    with pytest.raises(MissingDependencyError) as raised:
        require("streamfeed_no_such_module_for_tests", "images")
    message = str(raised.value)
    assert "pip install 'streamfeed[images]'" in message
    assert "pip install -e '.[images]'" in message  # from a checkout, where streamfeed is not on an index


def test_the_quick_start_install_has_what_the_next_command_needs():
    """The README's quick-start install line gives ``streamfeed stats`` (datasketches), which the README runs next."""
    readme = (ROOT / "README.md").read_text()
    quick = readme.split("## Quick start", 1)[1].split("```bash", 1)[1].split("```", 1)[0]
    installs = [shlex.split(line) for line in quick.splitlines() if "pip install" in line]
    assert installs, quick
    extras = set()
    for words in installs:
        for word in words:
            match = re.fullmatch(r"\.\[([\w,]+)\]", word)
            if match:
                extras.update(match.group(1).split(","))
    pyproject = (ROOT / "pyproject.toml").read_text()  # one line per extra (tomllib is Python 3.11+)
    declared = {
        name: re.findall(r'"([\w.-]+)', listed) for name, listed in re.findall(r"^(\w+) = \[(.*)\]$", pyproject, re.M)
    }
    installed = {requirement for extra in extras for requirement in declared[extra]}
    assert "datasketches" in installed, (extras, installed)
    assert "streamfeed stats" in readme.split("## Quick start", 1)[1]


def test_a_csv_value_of_another_type_is_not_told_to_pass_column_types(tmp_path):
    """The command line infers a CSV column's type from the first MiB and has no flag to set it: it says so."""
    path = tmp_path / "late.csv"
    path.write_text("a,b\n" + "".join(f"{i},{i % 7}\n" for i in range(300_000)) + "oops,1\n")
    stderr = assert_short_failure(streamfeed("stats", path, "-o", tmp_path / "s.json", "--quiet"), 1)
    assert "line 300002" in stderr
    fix = _fix(stderr)
    assert "column_types=" not in fix and "repair" in fix, fix
