"""Member bytes to column values, by decoder kind, and the column a kind makes.

Kinds: ``"image"`` (JPEG, PNG and the other formats of the image source,
through its decoder, ``sources/images/decode.py``: EXIF orientation,
resize, the declared-size check against image bombs), ``"npy"``
(``npy.load_npy``: plain dtypes only, a shard never runs code, and no
``ast``, which is not thread-safe on CPython 3.11),
``"json"``, ``"int"`` (a ``.cls`` label: decimal text), ``"str"`` (UTF-8
text, a ``.txt`` label) and ``"bytes"`` (the member as it is). A column
has one shape and dtype, learnt from the first sample when the source
opens; a sample that decodes to another is a bad sample, as a corrupt one is.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from ..images import decode as _images
from .npy import load_npy

Kind = Literal["image", "npy", "json", "int", "str", "bytes"]
KINDS: tuple[str, ...] = ("image", "npy", "json", "int", "str", "bytes")
_BY_EXTENSION: dict[str, Kind] = {
    "jpg": "image",
    "jpeg": "image",
    "png": "image",
    "npy": "npy",
    "json": "json",
    "cls": "int",
    "txt": "str",
}


def default_kind(extension: str) -> Kind:
    """The decoder for an extension by its last part (``seg.png`` is an image): raw bytes for any other."""
    return _BY_EXTENSION.get(extension.rsplit(".", 1)[-1].lower(), "bytes")


@dataclass(frozen=True)
class Column:
    """A served column: its name, the extension it comes from, how it is decoded, each value's shape and dtype."""

    name: str
    extension: str
    kind: Kind
    shape: tuple[int, ...] = ()
    dtype: str = "object"


class DecodeError(ValueError):
    """One member's bytes do not decode as its column's kind (the fragment makes it a described error)."""


def decode_value(data: bytes, kind: Kind, image_size: tuple[int, ...] | None) -> Any:
    """One member's value; :class:`DecodeError` naming what is wrong when it does not decode."""
    try:
        if kind == "image":
            if image_size is not None:
                spec = _images.DecodeSpec(*image_size[:3])  # type: ignore[arg-type]  # (height, width[, channels])
                return _images.decode(data, spec, _images.resolve_decoder(spec.decoder))
            with _images.open_header(data) as image:
                _images.check_size(image, _images.image_byte_limit(None), channels=3)
                return np.asarray(image.convert("RGB"))
        if kind == "npy":
            return load_npy(data)
        if kind == "json":
            return json.loads(data)
        if kind == "int":
            return int(data.decode("ascii").strip())
        if kind == "str":
            return data.decode("utf-8")
        return bytes(data)
    except (OSError, ValueError, SyntaxError, EOFError, UnicodeDecodeError) as exc:
        raise DecodeError(f"does not decode as {kind} ({type(exc).__name__}: {exc})") from exc


def column_for(name: str, extension: str, kind: Kind, value: Any) -> Column:
    """The column that ``value`` (the first sample's) makes: arrays keep their shape and dtype."""
    if kind in ("image", "npy"):
        array = np.asarray(value)
        return Column(name, extension, kind, tuple(array.shape), array.dtype.str)
    if kind == "int":
        return Column(name, extension, kind, (), np.dtype(np.int64).str)
    return Column(name, extension, kind)


def fits(column: Column, value: Any) -> str | None:
    """Why ``value`` cannot sit in ``column`` (another shape or dtype), or None."""
    if column.kind in ("image", "npy"):
        array = np.asarray(value)
        if tuple(array.shape) != column.shape or array.dtype.str != column.dtype:
            return (
                f"decodes to shape {tuple(array.shape)} {array.dtype}, the column is {column.shape} "
                f"{np.dtype(column.dtype)} (as the first sample's"
                + (": give image_size=(height, width) to resize)" if column.kind == "image" else ")")
            )
    return None


def empty(column: Column, rows: int) -> np.ndarray:
    """The column's array for ``rows`` values, to be filled."""
    return np.zeros((rows, *column.shape), dtype=np.dtype(column.dtype))
