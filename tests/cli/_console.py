"""Running the real ``streamfeed`` console script, as a user's shell does, and checking how it failed.

Tests call :func:`streamfeed` (a subprocess of the installed entry point,
not ``cli.main`` in-process), so what they see is what a user sees: the exit
code, and stdout and stderr as separate streams.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import streamfeed as streamfeed_package

# the entry point installed beside this interpreter (a pyenv shim on PATH would add a shell and a second lookup)
_BESIDE = Path(sys.executable).with_name("streamfeed")
SCRIPT = str(_BESIDE) if _BESIDE.exists() else (shutil.which("streamfeed") or "streamfeed")


# the source tree of the streamfeed these tests import: the script must run it, not an installed copy elsewhere
SOURCE = str(Path(streamfeed_package.__file__).resolve().parents[1])


def environment(**extra: str) -> dict[str, str]:
    """The test's environment without anything that changes the CLI's error output, importing the code under test.

    ``PYTHONPATH`` starts with the source tree the tests imported
    ``streamfeed`` from, so that the console script (installed from another
    checkout) runs this tree's code.
    """
    env = {key: value for key, value in os.environ.items() if key not in ("STREAMFEED_DEBUG", "TF_CPP_MIN_LOG_LEVEL")}
    env["PYTHONPATH"] = os.pathsep.join(
        [SOURCE] + [part for part in env.get("PYTHONPATH", "").split(os.pathsep) if part]
    )
    env.update(extra)
    return env


def streamfeed(
    *args: object, timeout: float = 300, env: dict[str, str] | None = None, cwd: str | os.PathLike | None = None
) -> subprocess.CompletedProcess:
    """Runs ``streamfeed ARGS...`` (in ``cwd`` if given); stdout and stderr captured apart, as text."""
    return subprocess.run(
        [SCRIPT, *map(str, args)],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env or environment(),
        stdin=subprocess.DEVNULL,
        cwd=cwd,
    )


def assert_short_failure(proc: subprocess.CompletedProcess, code: int) -> str:
    """A user's mistake: exit ``code``, no traceback, one or two lines on stderr and nothing on stdout."""
    assert proc.returncode == code, (proc.returncode, proc.stderr[-3000:])
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    lines = proc.stderr.strip().splitlines()
    assert 1 <= len(lines) <= 2, proc.stderr
    assert proc.stdout == ""
    return proc.stderr


def assert_fails_naming(proc: subprocess.CompletedProcess, *names: str) -> None:
    """Bad data: exit 1, no traceback, nothing on stdout, and every one of ``names`` in the error."""
    assert proc.returncode == 1, (proc.returncode, proc.stderr[-3000:])
    assert "Traceback" not in proc.stderr and proc.stdout == ""
    for name in names:
        assert name in proc.stderr, (name, proc.stderr)
