"""The README's commands and snippets run verbatim.

Every fenced ``python`` block runs as it is written, in a fresh interpreter
per Keras backend installed, in a temporary working directory holding the
files it reads (written by the real writers: pyarrow, h5py, Pillow; one small
table per file name the README uses, in :data:`FIXTURES`), unless the line
just before it says why it cannot: ``<!-- not run: REASON -->``. A new block
that is neither fails here. Every ``bash`` block's commands are ones this
test knows: the test command must be the one ``.ci/run`` runs, line for line
(running the whole suite inside the suite is not possible); a ``pip install``
of this checkout must name extras that exist; ``streamfeed demo`` runs with
small sizes appended (its defaults take minutes).
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Callable

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
NOT_RUN = re.compile(r"^<!--\s*not run:\s*(?P<reason>\S.*?)\s*-->$")
READS = re.compile(r"""read_\w+\(\s*["']([^"']+)["']""")
BACKENDS = [name for name in ("tensorflow", "jax", "torch") if importlib.util.find_spec(name) is not None]
# the demo's defaults (2 M rows, 2 epochs) take minutes: the same command with small sizes
DEMO_SMALL = ["--rows", "6000", "--features", "4", "--epochs", "1"]


def _blocks(text: str) -> list[dict]:
    """Each fenced block: its language, body, first line number and the ``not run`` reason just before it."""
    blocks, lines, index = [], text.splitlines(), 0
    while index < len(lines):
        fence = re.match(r"^```(\w*)\s*$", lines[index])
        if not fence:
            index += 1
            continue
        start = index + 1
        end = next(i for i in range(start, len(lines)) if lines[i].startswith("```"))
        before = next((lines[i].strip() for i in range(index - 1, -1, -1) if lines[i].strip()), "")
        marked = NOT_RUN.match(before)
        blocks.append(
            {
                "lang": fence.group(1),
                "body": "\n".join(lines[start:end]) + "\n",
                "line": start,
                "not_run": marked.group("reason") if marked else None,
            }
        )
        index = end + 1
    return blocks


BLOCKS = _blocks(README.read_text(encoding="utf-8"))
PYTHON = [block for block in BLOCKS if block["lang"] == "python"]
SHELL = [block for block in BLOCKS if block["lang"] in ("bash", "sh", "shell", "console")]


# ------------------------------------------------------------------ the files the README reads, by its names
def _sales(cwd: Path) -> None:
    """``sales.csv``: price, city, day, sold (a number, a string category, a date, a 0/1 label)."""
    rng = np.random.default_rng(0)
    n = 600
    table = pa.table(
        {
            "price": rng.uniform(1, 100, n).round(2),
            "city": rng.choice(["paris", "lima", "oslo", "pune"], n),
            "day": pa.array(np.datetime64("2024-01-01") + rng.integers(0, 365, n).astype("timedelta64[D]")),
            "sold": rng.integers(0, 2, n),
        }
    )
    pacsv.write_csv(table, cwd / "sales.csv")


def _clicks(cwd: Path) -> None:
    """``clicks/``: a Parquet folder of two files, f0..f2, a country and a rare 0/1 ``clicked``."""
    rng = np.random.default_rng(1)
    (cwd / "clicks").mkdir()
    for part in range(2):
        n = 1500
        columns = {f"f{i}": rng.normal(size=n).astype(np.float32) for i in range(3)}
        columns["country"] = rng.choice(["NZ", "FR", "JP"], n)
        columns["clicked"] = (rng.random(n) < 0.1).astype(np.int64)
        pq.write_table(pa.table(columns), cwd / "clicks" / f"part-{part}.parquet", row_group_size=500)


def _photos(cwd: Path) -> None:
    """``photos/``: an image folder, one sub-folder per class, JPEG and PNG of several sizes (Pillow)."""
    from PIL import Image

    rng = np.random.default_rng(2)
    for label, name in enumerate(("cat", "dog", "fox")):
        folder = cwd / "photos" / name
        folder.mkdir(parents=True)
        for i in range(8):
            pixels = rng.integers(0, 256, (40 + 8 * i, 48, 3), dtype=np.uint8)
            pixels[..., label] = 255
            Image.fromarray(pixels).save(folder / f"{i}.{'jpg' if i % 2 else 'png'}")


def _digits(cwd: Path) -> None:
    """``digits.h5``: ``/images`` (N, 28, 28) uint8 in chunks and ``/labels`` (N,) int64 (h5py)."""
    import h5py

    rng = np.random.default_rng(3)
    n = 1000
    with h5py.File(cwd / "digits.h5", "w") as f:
        f.create_dataset("images", data=rng.integers(0, 256, (n, 28, 28), dtype=np.uint8), chunks=(100, 28, 28))
        f.create_dataset("labels", data=rng.integers(0, 10, n).astype(np.int64))


FIXTURES: dict[str, Callable[[Path], None]] = {
    "sales.csv": _sales,
    "clicks/": _clicks,
    "photos/": _photos,
    "digits.h5": _digits,
}


# One interpreter per backend runs every block, each in its own directory and namespace, as ``python block.py``
# would: Keras and its backend load once (6-8 s each here), not once per block.
_DRIVER = """
import json, os, sys, traceback
failed = []
for directory, line in json.loads(sys.argv[1]):
    os.chdir(directory)
    code = compile(open("snippet.py", encoding="utf-8").read(), f"README.md, the block at line {line}", "exec")
    try:
        exec(code, {"__name__": "__main__"})
    except BaseException:
        traceback.print_exc()
        failed.append(line)
print(json.dumps(failed))
"""


def _pythonpath() -> str:
    """This checkout's package first (the one under test), then whatever the caller's PYTHONPATH held."""
    return os.pathsep.join(filter(None, [str(ROOT / "src"), os.environ.get("PYTHONPATH")]))


def _prepare(block: dict, cwd: Path) -> None:
    """The block as ``snippet.py`` in ``cwd``, beside the files it reads."""
    cwd.mkdir()
    for name in READS.findall(block["body"]):
        assert name in FIXTURES, (
            f"README line {block['line']} reads {name!r}, which this test cannot write: add a writer to FIXTURES "
            "or mark the block <!-- not run: REASON -->"
        )
        FIXTURES[name](cwd)
    (cwd / "snippet.py").write_text(block["body"], encoding="utf-8")


def test_every_python_block_runs_or_says_why_not():
    assert PYTHON, "no python block found in the README"
    for block in PYTHON:
        if block["not_run"] is None:
            continue
        assert len(block["not_run"]) > 10, f"README line {block['line']}: say why the block is not run"


@pytest.mark.parametrize("backend", BACKENDS)
def test_python_blocks_run_verbatim(backend, tmp_path):
    runnable = [block for block in PYTHON if block["not_run"] is None]
    assert runnable, "no runnable python block in the README"
    plan = []
    for block in runnable:
        _prepare(block, tmp_path / f"line{block['line']}")
        plan.append([str(tmp_path / f"line{block['line']}"), block["line"]])
    env = dict(os.environ, KERAS_BACKEND=backend, PYTHONPATH=_pythonpath())
    proc = subprocess.run(
        [sys.executable, "-c", _DRIVER, json.dumps(plan)], env=env, capture_output=True, text=True, timeout=900
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    failed = json.loads(proc.stdout.strip().splitlines()[-1])
    assert failed == [], f"README blocks at lines {failed} fail on {backend}:\n{proc.stderr[-6000:]}"


def _ci_lines() -> list[str]:
    return [line.strip() for line in (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()]


def _extras() -> set[str]:
    """The extras ``pyproject.toml`` defines (read by hand: ``tomllib`` is Python 3.11+, the package 3.10+)."""
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    section = text.split("[project.optional-dependencies]", 1)[1].split("\n[", 1)[0]
    return set(re.findall(r"^([A-Za-z0-9_-]+)\s*=", section, re.MULTILINE))


def _script() -> str:
    beside = Path(sys.executable).with_name("streamfeed")
    return str(beside) if beside.exists() else "streamfeed"


def test_every_shell_command_is_what_ci_runs_or_runs_here(tmp_path):
    assert SHELL, "no shell block found in the README"
    extras = _extras()
    ran_demo = False
    for block in SHELL:
        for line in filter(None, (text.strip() for text in block["body"].splitlines())):
            if "pytest" in line:
                # the whole suite cannot run inside itself: the README's test command is .ci/run's, verbatim
                assert line in _ci_lines(), f"README line {block['line']}: {line!r} is not what .ci/run runs"
                continue
            for command in (part.strip() for part in line.split("&&")):
                words = shlex.split(command)
                if words[:2] in (["pip", "install"], ["python3", "-m"]) and "install" in words[:4]:
                    for spec in (word for word in words if word.startswith(".[")):
                        named = set(spec[2:-1].split(","))
                        assert named <= extras, (command, named - extras)
                elif words[:2] == ["streamfeed", "demo"]:
                    env = dict(os.environ, PYTHONPATH=_pythonpath())
                    args = [_script(), *words[1:], *DEMO_SMALL, "--data-dir", str(tmp_path)]
                    proc = subprocess.run(args, capture_output=True, text=True, timeout=600, env=env)
                    assert proc.returncode == 0, (command, proc.stderr[-3000:])
                    assert "streamfeed demo summary" in proc.stdout, proc.stdout
                    ran_demo = True
                else:
                    pytest.fail(f"README line {block['line']}: a shell command this test does not know: {command!r}")
    assert ran_demo, "the README's quick start no longer runs streamfeed demo"
