"""Defaults that work on files a laptop holds many times over, and refusals that name the setting to change.

Issue 23, item 2: a 112 MiB click-log CSV was refused by the default
memory limit (an unbatched pass counted its fragments as batches three
times over), the hint said to rewrite row groups (a CSV has none) and never
named ``fragment_bytes``; ``compute_stats`` meanwhile read fragments with no
regard for the limit at all (770 MB of RSS under an 8 MiB limit).
"""

import subprocess
import sys
import textwrap

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest

import streamfeed as sf
from streamfeed.errors import MemoryLimitError


def _narrow_csv(path, rows):
    """Three one-digit integer columns: 6 bytes of text decode to 24 (the widest decoding a CSV has)."""
    rng = np.random.default_rng(0)
    table = pa.table({name: rng.integers(0, 10, rows) for name in "abc"})
    pacsv.write_csv(table, path, pacsv.WriteOptions(quoting_style="none"))
    return path


@pytest.fixture(scope="module")
def narrow_csv(tmp_path_factory):
    """72 MB of text in 16 MiB fragments (the default), each 55-67 MiB decoded."""
    return _narrow_csv(tmp_path_factory.mktemp("narrow") / "clicks.csv", 12_000_000)


def test_an_unbatched_epoch_of_a_narrow_csv_fits_the_default_limit(narrow_csv):
    """Unbatched, the chunks served are the fragments read: one copy each, not a batch, its packing and a queue."""
    data = sf.read_csv(narrow_csv)
    layout = data.layout()
    assert layout.estimated_bytes <= 512 * 2**20
    assert data.num_rows() == 12_000_000


_UNBATCHED = textwrap.dedent(
    """
    import sys, streamfeed as sf
    from streamfeed.memory import high_water_bytes, reset_peak_rss, rss_bytes
    data = sf.read_csv(sys.argv[1], fragment_bytes=2**20).with_options(memory_limit=40 * 2**20)
    data.num_rows()
    assert reset_peak_rss()
    before = rss_bytes()
    rows = sum(len(chunk["a"]) for chunk in data.iter_epoch(0))
    grown = high_water_bytes() - before
    print(rows, grown, data.layout().estimated_bytes)
    """
)


def test_the_unbatched_estimate_still_bounds_what_the_epoch_holds(tmp_path):
    """The smaller estimate is still an upper bound: peak RSS grows by less than the limit it was planned for."""
    path = _narrow_csv(tmp_path / "narrow.csv", 3_000_000)
    out = subprocess.run([sys.executable, "-c", _UNBATCHED, str(path)], capture_output=True, text=True, check=True)
    rows, grown, estimated = map(int, out.stdout.split())
    assert rows == 3_000_000
    assert estimated <= 40 * 2**20
    assert grown <= 40 * 2**20, (grown, estimated)


_STATS = textwrap.dedent(
    """
    import sys, streamfeed as sf
    from streamfeed.memory import high_water_bytes, reset_peak_rss, rss_bytes
    data = sf.read_csv(sys.argv[1], fragment_bytes=2**20).with_options(memory_limit=int(sys.argv[2]))
    data.num_rows()
    assert reset_peak_rss()
    before = rss_bytes()
    stats = sf.compute_stats(data, threads=2)
    print(stats.rows, high_water_bytes() - before)
    """
)


def test_a_statistics_pass_holds_no_more_fragments_than_its_limit_allows(tmp_path):
    """Two threads were asked for; a limit with room for one fragment in decoding gets one (the result is the same)."""
    path = _narrow_csv(tmp_path / "narrow.csv", 3_000_000)
    grown = {}
    for limit in (32 * 2**20, 512 * 2**20):
        out = subprocess.run(
            [sys.executable, "-c", _STATS, str(path), str(limit)], capture_output=True, text=True, check=True
        )
        rows, grown[limit] = map(int, out.stdout.split())
        assert rows == 3_000_000
    assert grown[32 * 2**20] <= 32 * 2**20, grown
    assert grown[32 * 2**20] < grown[512 * 2**20], grown


def test_a_statistics_pass_refuses_a_fragment_its_limit_cannot_read(narrow_csv):
    """Not 770 MB of RSS under an 8 MiB limit: the refusal names the CSV's own setting."""
    data = sf.read_csv(narrow_csv).with_options(memory_limit=8 * 2**20)
    with pytest.raises(MemoryLimitError) as refusal:
        sf.compute_stats(data)
    message = str(refusal.value)
    assert "fragment_bytes=" in message and "row group" not in message, message


def test_a_csv_refusal_names_fragment_bytes_and_not_row_groups(narrow_csv):
    data = sf.read_csv(narrow_csv).shuffle(seed=0).batch(1024).with_options(memory_limit=64 * 2**20)
    with pytest.raises(MemoryLimitError) as refusal:
        data.layout()
    message = str(refusal.value)
    assert "fragment_bytes=" in message, message
    assert "row group" not in message and "fragment_size" not in message, message


def test_a_parquet_refusal_names_row_groups_and_not_reader_keywords(tmp_path):
    rng = np.random.default_rng(0)
    pq.write_table(
        pa.table({f"f{i}": rng.random(200_000, dtype=np.float32) for i in range(8)}),
        tmp_path / "d.parquet",
        row_group_size=100_000,
    )
    data = sf.read_parquet(tmp_path / "d.parquet").with_options(memory_limit=4 * 2**20)
    with pytest.raises(MemoryLimitError) as refusal:
        data.layout()
    message = str(refusal.value)
    assert "row group" in message, message
    assert "fragment_bytes" not in message and "fragment_size" not in message, message


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "streamfeed.cli", *args], capture_output=True, text=True, timeout=300)


def test_the_command_line_refusal_names_the_flag_and_the_flag_works(tmp_path):
    path = _narrow_csv(tmp_path / "narrow.csv", 3_000_000)
    refused = _cli("stats", str(path), "-o", str(tmp_path / "s.json"), "--memory-limit", "8MiB")
    assert refused.returncode != 0
    assert "--fragment-bytes SIZE" in refused.stderr and "fragment_bytes=" not in refused.stderr, refused.stderr
    done = _cli(
        "stats", str(path), "-o", str(tmp_path / "s.json"), "--memory-limit", "8MiB", "--fragment-bytes", "256KiB"
    )
    assert done.returncode == 0, done.stderr
    assert "3,000,000 rows" in done.stdout


def test_fragment_bytes_is_refused_for_a_format_without_it(tmp_path):
    pq.write_table(pa.table({"a": [1, 2, 3]}), tmp_path / "d.parquet")
    refused = _cli("stats", str(tmp_path / "d.parquet"), "-o", str(tmp_path / "s.json"), "--fragment-bytes", "1MiB")
    assert refused.returncode == 2 or refused.returncode == 1
    assert "--fragment-bytes" in refused.stderr and "csv" in refused.stderr.lower(), refused.stderr
