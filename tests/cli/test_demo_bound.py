"""What ``streamfeed demo`` says while it works, and ``demo --bound``: a dataset several times the memory limit.

Through the real console script (``_console.streamfeed``). A cached run
used to print nothing until Keras's first progress line, seconds later: it
now says at once what it opens, what it counted and when the first batch
has been trained. The checks are on the order of the lines, never on time.
"""

from __future__ import annotations

import re

from _console import streamfeed

from streamfeed import demo

ROWS, FEATURES = 6000, 4
MIB = 2**20


def _lines(stderr: str) -> list[str]:
    return [line.strip() for line in stderr.replace("\r", "\n").splitlines() if line.strip()]


def _index(lines: list[str], pattern: str) -> int:
    found = [index for index, line in enumerate(lines) if re.search(pattern, line)]
    assert found, (pattern, lines)
    return found[0]


def test_a_cached_demo_says_what_it_opens_counts_and_reads_before_the_first_batch(tmp_path):
    demo.generate(tmp_path, ROWS, FEATURES, progress=False)  # cached: the run below generates nothing
    args = ["demo", "--rows", ROWS, "--features", FEATURES, "--epochs", "1", "--batch-size", "512"]
    proc = streamfeed(*args, "--data-dir", tmp_path)  # the backend the machine has (the CLI chooses)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    lines = _lines(proc.stderr)
    assert "generating" not in proc.stderr.lower()
    # the first thing on stderr is what it opens (before Keras loads, which takes seconds)
    assert re.search(r"opening .*synthetic-6000x4", lines[0]), lines
    counted = _index(lines, r"6,000 rows .* 12 batches per epoch")
    first = _index(lines, r"first batch")
    epoch_end = _index(lines, r"12/12")  # Keras's line at the end of the epoch
    assert 0 < counted < first < epoch_end, lines
    assert "streamfeed demo summary" in proc.stdout


def test_demo_bound_streams_a_dataset_several_times_the_limit_with_rss_below_the_data(tmp_path):
    limit = 64 * MIB
    rows = 1_500_000  # about 290 MiB on disk: 4.5x the limit, and more than the whole process holds
    proc = streamfeed(
        "demo", "--bound", "--rows", rows, "--epochs", "1", "--memory-limit", "64MiB", "--data-dir", tmp_path
    )
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    out = proc.stdout
    assert re.search(r"memory limit\s+64 MiB", out), out
    data = int(re.search(r"dataset\s+1,500,000 rows, ([\d,]+) MiB on disk", out).group(1).replace(",", ""))
    assert data * MIB > 4 * limit, out
    peak = int(re.search(r"peak RSS\s+([\d,]+) MiB", out).group(1).replace(",", ""))
    assert 0 < peak < data, out  # the whole process, interpreter and libraries included, held less than the data
    assert re.search(r"read\s+1,500,000 rows in 1 epoch", out), out
