"""``inspect`` decodes a bounded sample: a small NumPy or HDF5 file that inflates to 1 GiB costs no 1 GiB.

The memory bound is measured as the peak RSS of a fresh process running
the CLI, against the same process on a tiny file: a correctness property,
not a timing.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import zipfile

import h5py
import numpy as np
import pytest

from streamfeed.inspect import inspect

BOMB_ROWS = 1 << 28  # float32: 1 GiB once inflated
MAX_GROWTH_KIB = 200 * 1024

_RUN = textwrap.dedent(
    """
    import resource, sys
    from streamfeed.cli import main
    code = main(["inspect", *sys.argv[1:]])
    sys.stdout.flush()
    print("MAXRSS", code, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr)
    """
)


def _write_zeros_npz(path, rows: int) -> None:
    """What ``np.savez_compressed(path, x=np.zeros(rows, np.float32))`` writes, without holding the array."""
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=1) as archive:
        with archive.open("x.npy", "w", force_zip64=True) as member:
            np.lib.format.write_array_header_1_0(member, {"descr": "<f4", "fortran_order": False, "shape": (rows,)})
            block = bytes(min(rows * 4, 1 << 20))
            for start in range(0, rows * 4, len(block)):
                member.write(block[: rows * 4 - start])


def _write_zeros_h5(path, rows: int) -> None:
    """A gzip-compressed float32 dataset of zeros in 4 MiB chunks, written a few chunks at a time."""
    chunk = min(rows, 1 << 20)
    with h5py.File(path, "w") as handle:
        data = handle.create_dataset("x", (rows,), "f4", chunks=(chunk,), compression="gzip", compression_opts=1)
        for start in range(0, rows, 4 * chunk):
            data[start : start + 4 * chunk] = np.zeros(min(4 * chunk, rows - start), np.float32)


@pytest.fixture(scope="module")
def bomb(tmp_path_factory):
    directory = tmp_path_factory.mktemp("bomb")
    _write_zeros_npz(directory / "bomb.npz", BOMB_ROWS)
    _write_zeros_npz(directory / "tiny.npz", 10)
    return directory / "bomb.npz", directory / "tiny.npz"


@pytest.fixture(scope="module")
def h5_bomb(tmp_path_factory):
    directory = tmp_path_factory.mktemp("h5bomb")
    _write_zeros_h5(directory / "bomb.h5", BOMB_ROWS)
    _write_zeros_h5(directory / "tiny.h5", 10)
    return directory / "bomb.h5", directory / "tiny.h5"


def _inspect_in_process(path, *args: str) -> tuple[dict, int]:
    """The JSON report and the peak RSS (KiB) of a fresh process running ``streamfeed inspect --json``."""
    out = subprocess.run(
        [sys.executable, "-c", _RUN, str(path), "--json", "--quiet", *args], capture_output=True, text=True
    )
    lines = [line for line in out.stderr.splitlines() if line.startswith("MAXRSS ")]
    assert lines and out.returncode == 0, out.stderr[-3000:]
    _, code, kib = lines[-1].split()
    assert code == "0", out.stderr[-3000:]
    return json.loads(out.stdout), int(kib)


@pytest.mark.parametrize("full", [False, True], ids=["sample", "full"])
def test_inspect_of_a_deflate_bomb_stays_bounded_and_shows_the_first_rows(bomb, full):
    big, tiny = bomb
    args = ("--full",) if full else ()
    _, baseline = _inspect_in_process(tiny, *args)
    report, peak = _inspect_in_process(big, *args)
    assert peak - baseline < MAX_GROWTH_KIB, f"peak RSS grew by {(peak - baseline) // 1024} MiB"
    (array,) = report["details"]["arrays"]
    assert (array["dtype"], array["shape"], array["compressed"]) == ("float32", [BOMB_ROWS], True)
    (column,) = report["columns"]
    assert (column["name"], column["type"], column["samples"]) == ("x", "float32", [0.0] * 5)
    assert report["rows"] == BOMB_ROWS
    if full:  # the NaN count streams over every row
        assert (column["nulls"], column["nulls_exact"]) == (0, True)


@pytest.mark.parametrize("full", [False, True], ids=["sample", "full"])
def test_inspect_of_a_compressed_hdf5_dataset_stays_bounded(h5_bomb, full):
    big, tiny = h5_bomb
    args = ("--full",) if full else ()
    _, baseline = _inspect_in_process(tiny, *args)
    report, peak = _inspect_in_process(big, *args)
    assert peak - baseline < MAX_GROWTH_KIB, f"peak RSS grew by {(peak - baseline) // 1024} MiB"
    (column,) = report["columns"]
    assert (column["name"], column["type"], column["samples"]) == ("x", "float32", [0.0] * 5)
    if full:
        assert (column["nulls"], column["nulls_exact"]) == (0, True)


def test_hdf5_chunks_over_the_budget_are_not_decoded(tmp_path):
    values = np.arange(4000, dtype=np.float64)
    values[[5, 3000]] = np.nan
    with h5py.File(tmp_path / "c.h5", "w") as handle:
        handle.create_dataset("x", data=values, chunks=(1000,), compression="gzip")  # 8000-byte chunks
    report = inspect(tmp_path / "c.h5", memory_limit=4 * 4096, full=True)  # 4096 bytes per read
    assert report.columns[0].samples == [] and "/x" in report.details["not_sampled"][0]
    report = inspect(tmp_path / "c.h5", memory_limit=4 * 16_000, full=True)  # two chunks per read
    assert report.columns[0].samples == [0.0, 1.0, 2.0, 3.0, 4.0]
    assert (report.columns[0].nulls, report.columns[0].nulls_exact) == (2, True)


def _layouts(tmp_path) -> dict:
    """The same 2-D and 1-D arrays in every layout the NumPy inspector reads."""
    matrix = np.arange(600, dtype=np.float64).reshape(200, 3)
    matrix[[4, 150], [1, 2]] = np.nan
    vector = np.arange(200, dtype=np.int32) * 7
    np.save(tmp_path / "c.npy", matrix)
    np.save(tmp_path / "f.npy", np.asfortranarray(matrix))
    np.savez(tmp_path / "stored.npz", m=matrix, f=np.asfortranarray(matrix), v=vector)
    np.savez_compressed(tmp_path / "deflated.npz", m=matrix, f=np.asfortranarray(matrix), v=vector)
    return {"matrix": matrix, "vector": vector}


@pytest.mark.parametrize("file", ["c.npy", "f.npy", "stored.npz", "deflated.npz"])
def test_samples_are_the_first_rows_and_full_counts_every_nan(tmp_path, file):
    truth = _layouts(tmp_path)
    report = inspect(tmp_path / file, sample_rows=3, full=True)
    for column in report.columns:
        expected = truth["vector" if column.name == "v" else "matrix"]
        assert column.samples == [np.asarray(row).tolist() for row in expected[:3]], column.name
        if expected.dtype.kind == "f":
            assert (column.nulls, column.nulls_exact) == (2, True), column.name


def test_rows_wider_than_the_sample_budget_are_not_decoded(tmp_path):
    """A row larger than the memory limit allows for a sample is shown by its shape, never allocated."""
    np.savez_compressed(tmp_path / "wide.npz", x=np.ones((3, 1 << 18), dtype=np.float32))  # 1 MiB rows
    report = inspect(tmp_path / "wide.npz", memory_limit=1 << 20)
    (column,) = report.columns
    assert column.type == "float32" and column.shape == [1 << 18]
    assert column.samples == []
    assert "x" in report.details["not_sampled"][0]
    report = inspect(tmp_path / "wide.npz")  # the default limit allows a few such rows
    assert report.columns[0].samples == [f"array[{1 << 18}]"] * 3


def test_a_corrupt_compressed_member_is_reported_not_raised(tmp_path):
    np.savez_compressed(tmp_path / "bad.npz", x=np.random.default_rng(0).random(50_000))
    data = bytearray((tmp_path / "bad.npz").read_bytes())
    data[len(data) // 2 : len(data) // 2 + 64] = bytes(64)  # damage in the middle of the deflate stream
    (tmp_path / "bad.npz").write_bytes(bytes(data))
    report = inspect(tmp_path / "bad.npz", full=True)
    assert "unreadable_files" in report.warning_codes
    assert any("bad.npz" in warning.message for warning in report.warnings)
