"""The ``.npy`` member decoder: the arrays ``np.save`` writes, strange bytes refused, and no ``ast``.

``np.load`` parses its header with ``ast.literal_eval``, which races between
threads on CPython 3.11 (gh-106905): CI failed with ``SystemError: AST
constructor recursion depth mismatch`` in a sharded webdataset's read threads.
"""

from __future__ import annotations

import ast
import io
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from streamfeed.readers import read_numpy
from streamfeed.sources.webdataset.decode import DecodeError, decode_value
from streamfeed.sources.webdataset.npy import NpyError, load_npy

SRC = Path(__file__).resolve().parents[3] / "src"

ARRAYS = [
    np.float64(3.5).reshape(()),
    np.arange(12, dtype=np.float32).reshape(3, 4),
    np.asfortranarray(np.arange(24, dtype=">i4").reshape(2, 3, 4)),
    np.array([True, False, True]),
    np.zeros((0, 5), dtype=np.uint8),
    np.array(["ab", "cde"], dtype="<U3"),
    np.array([b"x", b"yz"], dtype="S2"),
    np.arange(7, dtype=np.int64),
    np.arange(6, dtype=np.complex64).reshape(2, 3),
    np.arange(4, dtype=np.float16).reshape(4, 1, 1),
]


def _saved(array: np.ndarray, version: tuple[int, int] | None = None) -> bytes:
    buffer = io.BytesIO()
    np.lib.format.write_array(buffer, array, version=version)
    return buffer.getvalue()


@pytest.mark.parametrize("version", [None, (1, 0), (2, 0), (3, 0)])
@pytest.mark.parametrize("index", range(len(ARRAYS)))
def test_reads_what_numpy_writes(index: int, version: tuple[int, int] | None) -> None:
    array = ARRAYS[index]
    if version == (1, 0) and array.dtype.kind == "U":
        version = (3, 0)  # a str dtype's header is written as version 3 by numpy itself
    data = _saved(array, version)
    got = load_npy(data)
    want = np.load(io.BytesIO(data), allow_pickle=False)
    assert got.dtype == want.dtype and got.shape == want.shape
    assert np.array_equal(got, want)
    assert got.flags.f_contiguous == want.flags.f_contiguous


def test_headers_in_any_key_order_and_quoting() -> None:
    body = np.arange(6, dtype="<i2").tobytes()
    for header in (
        "{'shape': (2, 3), 'fortran_order': False, 'descr': '<i2'}",
        '{"descr": "<i2", "fortran_order": False, "shape": (2,3,),}',
    ):
        text = header.encode("latin1") + b"\n"
        data = b"\x93NUMPY\x01\x00" + len(text).to_bytes(2, "little") + text + body
        assert np.array_equal(load_npy(data), np.arange(6, dtype="<i2").reshape(2, 3))


def _with_header(header: str, body: bytes = b"") -> bytes:
    text = header.encode("latin1") + b"\n"
    return b"\x93NUMPY\x01\x00" + len(text).to_bytes(2, "little") + text + body


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        (b"not an array", "magic"),
        (b"\x93NUMPY\x07\x00\x10\x00", "version 7"),
        (_saved(np.arange(4.0))[:-1], "needs 32 data bytes, the member has 31"),
        (_saved(np.arange(4.0)) + b"\x00", "the member has 33"),
        (_saved(np.arange(4.0))[:20], "cut off"),
        (_saved(np.array([{"a": 1}], dtype=object)), "not a plain"),
        (_saved(np.zeros(2, dtype=[("a", "<i4"), ("b", "<f8")])), "structured"),
        (_with_header("{'descr': '<f8', 'fortran_order': False, 'shape': (1,), 'x': 1}", bytes(8)), "'x'"),
        (_with_header("{'descr': '<f8', 'descr': '<f8', 'fortran_order': False, 'shape': ()}", bytes(8)), "twice"),
        (_with_header("{'descr': '<f8', 'shape': ()}", bytes(8)), "lacks ['fortran_order']"),
        (_with_header("{'descr': '<f8', 'fortran_order': 0, 'shape': ()}", bytes(8)), "not True or False"),
        (_with_header("{'descr': '<f8', 'fortran_order': False, 'shape': (-1,)}"), "no .npy writer makes"),
        (_with_header("{'descr': '<f8', 'fortran_order': False, 'shape': (2**8,)}"), "no .npy writer makes"),
        (_with_header("{'descr': '<f8', 'fortran_order': False, 'shape': (2, 3)} 1"), "after its closing brace"),
        (_with_header("{'descr': 'nonsense', 'fortran_order': False, 'shape': ()}"), "not a dtype"),
        (_with_header("{'descr': '<f8', 'fortran_order': False, 'shape': (4294967296, 4294967296)}"), "needs"),
    ],
)
def test_strange_bytes_are_refused_saying_what_is_wrong(data: bytes, problem: str) -> None:
    with pytest.raises(NpyError) as caught:
        load_npy(data)
    assert problem in str(caught.value)
    with pytest.raises(DecodeError, match="does not decode as npy"):
        decode_value(data, "npy", None)


def test_npy_headers_are_read_without_parsing_python_source(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The webdataset decoder and the NumPy source; fails on ``np.load`` and ``np.lib.format``'s readers."""
    calls: list[str] = []
    real_literal_eval, real_parse = ast.literal_eval, ast.parse

    def literal_eval(*args: object, **kwargs: object) -> object:
        calls.append("literal_eval")
        return real_literal_eval(*args, **kwargs)  # type: ignore[arg-type]

    def parse(*args: object, **kwargs: object) -> object:
        calls.append("parse")
        return real_parse(*args, **kwargs)  # type: ignore[arg-type]

    data = _saved(np.arange(6.0).reshape(2, 3))
    (tmp_path / "x.npy").write_bytes(data)
    np.savez(tmp_path / "d.npz", x=np.arange(6.0).reshape(2, 3))
    np.savez_compressed(tmp_path / "c.npz", x=np.arange(6.0).reshape(2, 3))
    with monkeypatch.context() as patch:
        patch.setattr(ast, "literal_eval", literal_eval)
        patch.setattr(ast, "parse", parse)
        value = decode_value(data, "npy", None)
        opened = [read_numpy(spec) for spec in (tmp_path / "x.npy", f"{tmp_path}/d.npz:x", f"{tmp_path}/c.npz:x")]
    assert calls == []
    assert np.array_equal(value, np.arange(6.0).reshape(2, 3))
    assert [ds.num_rows() for ds in opened] == [2, 2, 2]


def test_threads_decoding_beside_ast_users_never_fail() -> None:
    """The CI failure, made likely: read threads decode while the main thread parses source.

    A gc callback (streamfeed registers one, ``runtime/background``) lets a
    thread switch land inside the AST constructor; with ``np.load`` this run
    fails with the SystemError in about a second on CPython 3.11.7.
    """
    script = textwrap.dedent(
        f"""
        import ast, gc, io, sys, threading
        sys.path.insert(0, {str(SRC)!r})
        import numpy as np
        from streamfeed.sources.webdataset.decode import decode_value
        buffer = io.BytesIO()
        np.save(buffer, np.arange(12.0).reshape(3, 4))
        data = buffer.getvalue()
        gc.set_threshold(5)
        gc.callbacks.append(lambda phase, info: sum(range(50)))
        errors = []
        def decode():
            try:
                for _ in range(15000):
                    decode_value(data, "npy", None)
            except Exception as exc:
                errors.append(repr(exc))
        threads = [threading.Thread(target=decode) for _ in range(3)]
        for thread in threads:
            thread.start()
        source = "x = " + "[" * 30 + "]" * 30
        try:
            for _ in range(15000):
                ast.parse(source)
        except Exception as exc:
            errors.append(repr(exc))
        for thread in threads:
            thread.join()
        print("ERRORS", errors[:3])
        sys.exit(1 if errors else 0)
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
