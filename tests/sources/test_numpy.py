"""The NumPy source on files written by np.save / np.savez / np.savez_compressed, and damaged copies."""

from __future__ import annotations

import numpy as np
import psutil
import pytest

from streamfeed.errors import CorruptFileError, SchemaError
from streamfeed.readers import read_numpy


def read_all(ds) -> dict[str, np.ndarray]:
    with ds.iter_epoch(0) as it:
        chunks = list(it)
    return {name: np.concatenate([c[name] for c in chunks]) for name in chunks[0]} if chunks else {}


def matrix(rows: int = 500, order: str = "C") -> np.ndarray:
    return np.array(np.arange(rows * 4, dtype=np.float32).reshape(rows, 4), order=order)


@pytest.mark.parametrize("order", ["C", "F"])
@pytest.mark.parametrize("how", ["npy", "savez", "savez_compressed"])
def test_rows_are_the_real_rows_in_either_order(tmp_path, order, how):
    x, y = matrix(500, order), np.arange(500) % 3
    if how == "npy":
        np.save(tmp_path / "x.npy", x)
        np.save(tmp_path / "y.npy", y)
        ds = read_numpy(tmp_path / "x.npy", tmp_path / "y.npy", rows_per_fragment=77)
    else:
        getattr(np, how)(tmp_path / "d.npz", features=x, labels=y)
        ds = read_numpy(f"{tmp_path}/d.npz:features", f"{tmp_path}/d.npz:labels", rows_per_fragment=77)
    # A shuffled order reads fragments out of order (compressed: from checkpoints).
    with ds.shuffle(4, window=1).iter_epoch(0) as it:
        chunks = list(it)
    assert len(chunks) == (1 if how == "savez_compressed" and order == "F" else 7)  # F compressed: one whole fragment
    for chunk in chunks:
        assert chunk["x"].flags["C_CONTIGUOUS"]
        np.testing.assert_array_equal(chunk["x"], x[(chunk["x"][:, 0] // 4).astype(int)])
        np.testing.assert_array_equal(chunk["y"], (chunk["x"][:, 0] // 4).astype(int) % 3)
    assert sum(len(c["y"]) for c in chunks) == 500


def test_whole_npz_makes_every_member_a_column(tmp_path):
    np.savez(tmp_path / "d.npz", a=np.arange(10), b=np.arange(10) * 2.0)
    got = read_all(read_numpy(tmp_path / "d.npz"))
    assert sorted(got) == ["a", "b"]
    np.testing.assert_array_equal(got["b"], np.arange(10) * 2.0)


def test_truncated_npy_names_file_and_rows(tmp_path):
    np.save(tmp_path / "x.npy", matrix(100))
    data = (tmp_path / "x.npy").read_bytes()
    (tmp_path / "x.npy").write_bytes(data[: len(data) - 10 * 16 - 5])  # 89 whole rows and a bit
    with pytest.raises(CorruptFileError) as excinfo:
        read_numpy(tmp_path / "x.npy")
    text = str(excinfo.value)
    assert str(tmp_path / "x.npy") in text and "100 rows" in text and "89 whole rows" in text


def test_zero_byte_and_not_numpy_files(tmp_path):
    (tmp_path / "zero.npy").write_bytes(b"")
    (tmp_path / "text.npy").write_text("1,2,3\n")
    (tmp_path / "zero.npz").write_bytes(b"")
    for name in ("zero.npy", "text.npy", "zero.npz"):
        with pytest.raises(CorruptFileError) as excinfo:
            read_numpy(tmp_path / name)
        assert str(tmp_path / name) in str(excinfo.value)


def test_object_arrays_are_refused_and_never_unpickled(tmp_path):
    np.save(tmp_path / "obj.npy", np.array([{"a": 1}, None], dtype=object), allow_pickle=True)
    np.savez(tmp_path / "obj.npz", x=np.array(["a", 1], dtype=object))
    for spec in (tmp_path / "obj.npy", f"{tmp_path}/obj.npz:x"):
        with pytest.raises(SchemaError) as excinfo:
            read_numpy(spec)
        assert (
            "object" in str(excinfo.value)
            and "obj.np" in str(excinfo.value)
            and "never unpickles" in str(excinfo.value)
        )


def test_length_mismatch_names_both_files_and_lengths(tmp_path):
    np.save(tmp_path / "x.npy", matrix(100))
    np.save(tmp_path / "y.npy", np.arange(99))
    with pytest.raises(SchemaError) as excinfo:
        read_numpy(tmp_path / "x.npy", tmp_path / "y.npy")
    text = str(excinfo.value)
    assert f"{tmp_path / 'x.npy'} has 100 rows" in text and f"{tmp_path / 'y.npy'} has 99 rows" in text


def test_missing_member_lists_members(tmp_path):
    np.savez(tmp_path / "d.npz", a=np.arange(3), b=np.arange(3))
    with pytest.raises(SchemaError) as excinfo:
        read_numpy(f"{tmp_path}/d.npz:c")
    assert "d.npz" in str(excinfo.value) and "['a', 'b']" in str(excinfo.value)


def test_skip_damaged_shards_reports_them_exactly(tmp_path):
    specs_x, specs_y = [], []
    for number in range(3):
        np.save(tmp_path / f"x{number}.npy", matrix(50))
        np.save(tmp_path / f"y{number}.npy", np.arange(50) + 100 * number)
        specs_x.append(tmp_path / f"x{number}.npy")
        specs_y.append(tmp_path / f"y{number}.npy")
    (tmp_path / "x1.npy").write_bytes((tmp_path / "x1.npy").read_bytes()[:200])
    np.save(tmp_path / "y2.npy", np.arange(49))
    ds = read_numpy(specs_x, specs_y, on_error="skip")
    assert [(e.path, e.location, e.rows) for e in ds.report.entries] == [
        (str(tmp_path / "x1.npy"), "file", None),
        (str(tmp_path / "x2.npy"), "file", None),
    ]
    assert "truncated" in ds.report.entries[0].reason and "different lengths" in ds.report.entries[1].reason
    np.testing.assert_array_equal(read_all(ds)["y"], np.arange(50))


def test_corrupt_compressed_member_skips_its_fragments_and_counts_add_up(tmp_path):
    np.savez_compressed(tmp_path / "d.npz", x=np.arange(32_000.0).reshape(4000, 8) % 1000, y=np.arange(4000))
    data = bytearray((tmp_path / "d.npz").read_bytes())
    middle = len(data) // 4  # inside x's deflate stream (x is written first and is the larger member)
    data[middle : middle + 400] = b"\xff" * 400
    (tmp_path / "d.npz").write_bytes(bytes(data))
    with pytest.raises(CorruptFileError) as excinfo:
        read_all(read_numpy(f"{tmp_path}/d.npz:x", f"{tmp_path}/d.npz:y", rows_per_fragment=500))
    assert f"{tmp_path / 'd.npz'}:x" in str(excinfo.value)
    ds = read_numpy(f"{tmp_path}/d.npz:x", f"{tmp_path}/d.npz:y", rows_per_fragment=500, on_error="skip")
    got = read_all(ds)
    assert ds.report.entries and all(e.path == str(tmp_path / "d.npz") and e.rows == 500 for e in ds.report.entries)
    assert len(got["y"]) + ds.report.skipped_rows == ds.report.total_rows == 4000
    np.testing.assert_array_equal(got["y"][:500], np.arange(500))  # rows before the damage are intact


def test_no_file_handles_or_mappings_left_open(tmp_path):
    np.save(tmp_path / "x.npy", matrix(300, "F"))
    np.savez_compressed(tmp_path / "y.npz", y=np.arange(300))
    ds = read_numpy(tmp_path / "x.npy", f"{tmp_path}/y.npz:y", rows_per_fragment=64)
    assert len(read_all(ds.shuffle(2, window=2))["y"]) == 300
    process = psutil.Process()
    assert [f.path for f in process.open_files() if f.path.startswith(str(tmp_path))] == []
    assert [m.path for m in process.memory_maps() if m.path.startswith(str(tmp_path))] == []


def test_a_file_that_cannot_be_opened_is_named_and_can_be_skipped(tmp_path):
    """An OSError at open (here a directory named like an array; a permission error alike) is a bad unit."""
    np.save(tmp_path / "a.npy", np.arange(10))
    (tmp_path / "b.npy").mkdir()
    with pytest.raises(CorruptFileError, match="b.npy"):
        read_numpy([str(tmp_path / "a.npy"), str(tmp_path / "b.npy")])
    data = read_numpy([str(tmp_path / "a.npy"), str(tmp_path / "b.npy")], on_error="skip")
    assert data.num_rows() == 10
    [entry] = data.report.entries
    assert entry.path.endswith("b.npy") and "IsADirectoryError" in entry.reason
