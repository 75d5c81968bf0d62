"""A 50 MB CSV line under a 64 MiB memory limit: refused or skipped without ever being held whole.

The issue's case (issue 22, item 16): a 50 MB line among 1 000 ordinary
rows, read with ``memory_limit=64 MiB``. Before, the row-count scan at open
held two 16 MiB blocks and a 16 MiB mask of each (+52 MiB), and the
fragment read its 50 MB range whole before pyarrow refused it, then parsed
around it (+100 MiB in all: 121 -> 222 MiB). Now the scan at open notes
where records too long for pyarrow lie, and the fragment reads the byte
ranges around them, so only the record's first bytes are ever read.

Measured in a fresh process (the peak RSS, ``VmHWM``, after the epoch minus
after the imports): the same 1 000 rows without the line grow it by about 8 MiB
(pyarrow's pools, the pipeline's threads). The bound is half the memory
limit, 32 MiB: four times that margin, and less than the line itself
(47.7 MiB), so a read that held the line whole once cannot pass.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

MIB = 1 << 20
LIMIT = 64 * MIB
BOUND = LIMIT // 2
LINE = 502  # the header is line 1, rows 0-499 lines 2-501

_MEASURE = """
import sys
import numpy as np
import streamfeed as sf
from streamfeed.readers import read_csv

def peak():  # VmHWM: ru_maxrss keeps the forking parent's peak across exec (pytest's, 200+ MiB)
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmHWM:"))

before = peak()
ds = read_csv(sys.argv[1], on_error=sys.argv[2], count_cache=False).with_options(memory_limit=int(sys.argv[3]))
try:
    with ds.iter_epoch(0) as it:
        ids = np.sort(np.concatenate([chunk["a"] for chunk in it]))
    outcome = "rows " + ",".join(map(str, ids)) + " report " + "|".join(e.location for e in ds.report.entries)
except sf.CorruptFileError as exc:
    outcome = "error " + str(exc).replace(chr(10), " ")
print(peak() - before)
print(outcome)
"""


def _write(path, size: int) -> None:
    with open(path, "wb") as out:
        out.write(b"a,b\n" + b"".join(f"{i},{i / 2}\n".encode() for i in range(500)))
        out.write(b"x" * size + b",1\n")
        out.write(b"".join(f"{i},{i / 2}\n".encode() for i in range(500, 1000)))


def _measure(path, on_error: str) -> tuple[int, str]:
    out = subprocess.run(
        [sys.executable, "-c", _MEASURE, str(path), on_error, str(LIMIT)], capture_output=True, text=True, check=True
    )
    grown, outcome = out.stdout.splitlines()
    return int(grown), outcome


@pytest.mark.parametrize("on_error", ["skip", "raise"])
def test_a_50mb_line_is_refused_or_skipped_within_the_memory_limit(tmp_path, on_error):
    path = tmp_path / "long.csv"
    _write(path, 50_000_000)
    grown, outcome = _measure(path, on_error)
    if on_error == "skip":
        assert outcome == "rows " + ",".join(map(str, range(1000))) + f" report line {LINE}"
    else:
        assert outcome.startswith("error ") and f"{path}, line {LINE}" in outcome, outcome
        assert "50,000,002 bytes" in outcome and "8 MiB" in outcome and "on_error='skip'" in outcome
    assert grown < BOUND, f"peak RSS grew by {grown / MIB:.1f} MiB reading a 47.7 MiB line (bound {BOUND / MIB:.0f})"
