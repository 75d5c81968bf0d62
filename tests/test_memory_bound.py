"""The memory bound: the estimate is reported, and RSS does not grow with the data."""

import subprocess
import sys
import textwrap

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

import streamfeed as sf


def _write(directory, files, rows_per_file=100_000, group=10_000):
    directory.mkdir()
    rng = np.random.default_rng(0)
    for index in range(files):
        columns = {f"f{i}": rng.random(rows_per_file, dtype=np.float32) for i in range(16)}
        pq.write_table(pa.table(columns), directory / f"part-{index}.parquet", row_group_size=group)
    return directory


def test_iterator_reports_estimate_and_measured_rss(tmp_path):
    data = sf.read_parquet(_write(tmp_path / "d", 1)).shuffle(seed=0).batch(1000).with_options(memory_limit=64 * 2**20)
    with data.iter_epoch(0) as epoch:
        next(epoch)
        report = epoch.memory()
    assert 0 < report["estimated_pipeline_bytes"] <= report["memory_limit_bytes"] == 64 * 2**20
    assert report["peak_rss_bytes"] >= report["rss_bytes"] > 0


_MEASURE = textwrap.dedent(
    """
    import sys, resource, streamfeed as sf
    # window=16 (10 MiB of row groups): the default window is the data's (128 MiB, at most 64 row groups: 40 MiB
    # here), and a 48 MiB limit too small for it is refused (tests/test_order_is_the_datas.py)
    data = sf.read_parquet(sys.argv[1]).shuffle(seed=0, window=16).batch(1000).with_options(memory_limit=48 * 2**20)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    rows = 0
    with data.iter_epoch(0) as epoch:
        for batch in epoch:
            rows += len(batch["f0"])
    print(rows, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before)
    """
)


def test_peak_memory_does_not_grow_with_the_data(tmp_path):
    """Each size in a fresh process: 4x the rows must not cost 4x the memory."""
    small = _write(tmp_path / "small", 2)
    large = _write(tmp_path / "large", 8)
    grown = {}
    for name, path in (("small", small), ("large", large)):
        out = subprocess.run([sys.executable, "-c", _MEASURE, str(path)], capture_output=True, text=True, check=True)
        rows, kib = map(int, out.stdout.split())
        grown[name] = (rows, kib)
    assert grown["small"][0] == 200_000 and grown["large"][0] == 800_000
    # 800k rows x 64 B = 51 MB of data; the pipeline is bounded at 48 MiB of buffers
    assert grown["large"][1] < grown["small"][1] + 16 * 1024, grown


def test_one_fragment_larger_than_the_limit_is_refused_naming_its_size(tmp_path):
    directory = tmp_path / "uneven"
    directory.mkdir()
    rng = np.random.default_rng(0)
    for index, rows in enumerate([1_000, 1_000, 1_000, 200_000]):  # the mean fits, the largest does not
        pq.write_table(
            pa.table({f"f{i}": rng.random(rows, dtype=np.float32) for i in range(8)}),
            directory / f"p{index}.parquet",
            row_group_size=rows,
        )
    data = sf.read_parquet(directory).with_options(memory_limit=8 * 2**20)
    try:
        data.layout()
    except MemoryError as error:
        assert "200000 rows" in str(error) and "8 MiB" in str(error)
    else:
        raise AssertionError("a 6 MiB fragment fit in an 8 MiB limit that needs twice its size")
