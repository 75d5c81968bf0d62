"""The ``.npy`` header, read without parsing Python source.

``np.load`` and ``np.lib.format``'s header readers parse the header dict
with ``ast.literal_eval``. On CPython 3.11 the AST constructor keeps its
recursion depth in state shared by all threads (cpython gh-106905), so two
threads reading headers at once, or one beside TensorFlow's autograph or
pytest, fail at random with ``SystemError: AST constructor recursion depth
mismatch`` (seen in CI, in a sharded webdataset's read threads). This reads
the header's one documented form, a dict of ``descr`` (a dtype string),
``fortran_order`` (``True``/``False``) and ``shape`` (a tuple of ints), with
a tokenizer of its own: no ``ast``, no ``eval``, nothing a file could run.
A structured (list) ``descr`` is refused. Shared by the NumPy source
(``sources/numpy.py``, at open) and the webdataset ``.npy`` decoder
(``sources/webdataset/npy.py``, in the read threads).
"""

from __future__ import annotations

import re
import struct
from collections.abc import Iterator
from typing import BinaryIO, cast

import numpy as np

MAGIC = b"\x93NUMPY"
# Version -> (bytes of the header-length field, its struct format, the header's encoding).
_VERSIONS = {1: (2, "<H", "latin1"), 2: (4, "<I", "latin1"), 3: (4, "<I", "utf8")}
_TOKEN = re.compile(r"\s*(?:'([^'\\]*)'|\"([^\"\\]*)\"|(True|False)|(\d+)|([{}():,\[\]]))")
_KEYS = frozenset({"descr", "fortran_order", "shape"})
# A token: punctuation as itself, a value as (kind, value) with kind "str", "bool" or "int".
Token = str | tuple[str, object]


class NpyError(ValueError):
    """The bytes are not a ``.npy`` header this reader serves (the message says what is wrong)."""


def read_header(handle: BinaryIO) -> tuple[np.dtype, tuple[int, ...], bool]:
    """(dtype, shape, Fortran order) of the ``.npy`` header at the handle's position, left at the data."""
    lead = handle.read(len(MAGIC) + 2)
    if len(lead) < len(MAGIC) + 2 or not lead.startswith(MAGIC):
        raise NpyError("no .npy magic string at the start")
    major = lead[len(MAGIC)]
    if major not in _VERSIONS:
        raise NpyError(f"format version {major} is not one of 1, 2, 3")
    width, layout, encoding = _VERSIONS[major]
    field = handle.read(width)
    if len(field) < width:
        raise NpyError("the header length is cut off")
    (length,) = struct.unpack(layout, field)
    raw = handle.read(length)
    if len(raw) < length:
        raise NpyError(f"the header ({length} bytes) is cut off at {len(raw)}")
    try:
        header = parse_header(raw.decode(encoding))
    except UnicodeDecodeError as exc:
        raise NpyError(f"the header is not {encoding} text") from exc
    try:
        dtype = np.dtype(str(header["descr"]))
    except TypeError as exc:
        raise NpyError(f"descr {header['descr']!r} is not a dtype") from exc
    return dtype, header["shape"], header["fortran_order"]  # type: ignore[return-value]


def parse_header(text: str) -> dict[str, object]:
    """The header dict: exactly the keys ``descr``, ``fortran_order`` and ``shape``, each once."""
    tokens = _tokens(text)
    result: dict[str, object] = {}
    _expect(tokens, "{")
    while True:
        token = next(tokens, None)
        if token == "}":
            break
        key = token[1] if isinstance(token, tuple) and token[0] == "str" else None
        if key not in _KEYS or key in result:
            raise NpyError(f"the header has a key {token!r} that is not descr, fortran_order or shape, or twice")
        _expect(tokens, ":")
        result[key] = _value(key, tokens)
        token = next(tokens, None)
        if token == "}":
            break
        if token != ",":
            raise NpyError(f"the header has {token!r} where a comma belongs")
    if next(tokens, None) is not None:
        raise NpyError("the header goes on after its closing brace")
    if set(result) != _KEYS:
        raise NpyError(f"the header lacks {sorted(_KEYS - set(result))}")
    return result


def _value(key: str, tokens: Iterator[Token]) -> object:
    token = next(tokens, None)
    if key == "descr":
        if not (isinstance(token, tuple) and token[0] == "str"):
            raise NpyError(f"descr is {token!r}, not a dtype string (a structured dtype is not served)")
        return token[1]
    if key == "fortran_order":
        if not (isinstance(token, tuple) and token[0] == "bool"):
            raise NpyError(f"fortran_order is {token!r}, not True or False")
        return token[1]
    if token != "(":
        raise NpyError(f"shape is {token!r}, not a tuple")
    dims: list[int] = []
    while True:
        token = next(tokens, None)
        if token == ")":
            return tuple(dims)
        if not (isinstance(token, tuple) and token[0] == "int"):
            raise NpyError(f"shape has {token!r} where a dimension belongs")
        dims.append(cast(int, token[1]))
        token = next(tokens, None)
        if token == ")":
            return tuple(dims)
        if token != ",":
            raise NpyError(f"shape has {token!r} where a comma belongs")


def _expect(tokens: Iterator[Token], wanted: str) -> None:
    token = next(tokens, None)
    if token != wanted:
        raise NpyError(f"the header has {token!r} where {wanted!r} belongs")


def _tokens(text: str) -> Iterator[Token]:
    """Strings as ("str", s), booleans as ("bool", b), integers as ("int", n), punctuation as itself."""
    position, end = 0, len(text.rstrip())
    while position < end:
        match = _TOKEN.match(text, position)
        if match is None:
            raise NpyError(f"the header has text no .npy writer makes at character {position}")
        position = match.end()
        single, double, boolean, number, punctuation = match.groups()
        if single is not None or double is not None:
            yield ("str", single if single is not None else double)
        elif boolean is not None:
            yield ("bool", boolean == "True")
        elif number is not None:
            yield ("int", int(number))
        else:
            yield punctuation
