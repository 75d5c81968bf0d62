"""Every keyword of every ``read_*`` function is in the fingerprint and the cache's key, or excluded on purpose.

The keywords are enumerated from the functions' signatures, so a keyword
added later is covered by default: it must either change the fingerprint
and the cache key when it changes (a value for it is then added to
``CHANGED`` below) or be named, with its reason, in
:data:`streamfeed.core.NOT_ROW_SETTINGS`. Forgetting both fails here.
``read_ray`` is enumerated the same way in ``tests/ray/test_ray_source.py``
(it needs a Ray cluster).
"""

from __future__ import annotations

import gzip
import inspect
import io
import typing
from pathlib import Path
from typing import Any, Callable

import h5py
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from PIL import Image

import streamfeed
from streamfeed import readers
from streamfeed.cache.key import cache_key
from streamfeed.core import NOT_ROW_SETTINGS
from streamfeed.errors import ErrorOptions
from streamfeed.writers.tfrecord import write_tfrecord


def _png(value: int) -> bytes:
    out = io.BytesIO()
    Image.fromarray(np.full((6, 6, 3), value, dtype=np.uint8)).save(out, "PNG")
    return out.getvalue()


def _parquet(root: Path) -> dict:
    pq.write_table(
        pa.table({"a": np.arange(40), "v": [1.0, None] * 20, "l": [[1, 2]] * 40}), root / "d.parquet", row_group_size=10
    )
    return {"paths": root / "d.parquet", "nulls": "fill", "fill": 0.0}


def _csv(root: Path) -> dict:
    lines = [f"{i},{i / 2},NA{i % 3}" for i in range(60)]
    (root / "d.csv").write_text("a,b,s\n" + "\n".join(lines) + "\n", encoding="latin-1")
    return {"paths": root / "d.csv", "count_cache": False}


def _hdf5(root: Path) -> dict:
    with h5py.File(root / "d.h5", "w") as handle:
        handle.create_dataset("x", data=np.arange(64, dtype=np.float32), chunks=(8,))
        handle.create_dataset("y", data=np.arange(64) % 2)
    return {"paths": str(root / "d.h5")}


def _numpy(root: Path) -> dict:
    for name, values in {"x": np.arange(50.0), "x2": np.arange(50.0) + 1, "y": np.arange(50) % 3}.items():
        np.save(root / f"{name}.npy", values)
    return {"x": str(root / "x.npy")}


def _images(root: Path) -> dict:
    for label, value in (("cat", 10), ("dog", 200)):
        (root / "img" / label).mkdir(parents=True)
        for number in range(6):
            (root / "img" / label / f"{number}.png").write_bytes(_png(value + number))
    return {"root": root / "img", "size": (4, 4), "fragment_size": 4}


def _tfrecord(root: Path) -> dict:
    ids = np.arange(60)
    images = np.array([_png(int(i)) for i in ids], dtype=object)
    write_tfrecord({"id": ids, "img": images}, root / "tf" / "part", shard_rows=60)
    (path,) = sorted((root / "tf").glob("*.tfrecord"))
    (root / "tf.gz").mkdir()
    (root / "tf.gz" / "part.tfrecord.gz").write_bytes(gzip.compress(path.read_bytes()))
    return {"paths": str(root / "tf.gz" / "part.tfrecord.gz")}


def _webdataset(root: Path) -> dict:
    import webdataset as wds

    (root / "wds").mkdir()
    with wds.TarWriter(str(root / "wds" / "shard-0.tar")) as writer:
        for i in range(20):
            writer.write({"__key__": f"s{i:03d}", "png": _png(i), "cls": i % 3})
    return {"paths": str(root / "wds")}


OPEN: dict[str, Callable[[Path], dict]] = {
    "parquet": _parquet,
    "csv": _csv,
    "hdf5": _hdf5,
    "numpy": _numpy,
    "images": _images,
    "tfrecord": _tfrecord,
    "webdataset": _webdataset,
}

# Another valid value of every keyword that changes the rows (or may), by format; a callable takes the data's folder.
CHANGED: dict[str, dict[str, Any]] = {
    "parquet": {
        "columns": ["a", "v"],
        "filter": pc.field("a") > 3,
        "nulls": "drop",
        "fill": 1.0,
        "list_lengths": {"l": 3},
    },
    "csv": {
        "delimiter": ",",
        "decimal": ".",
        "header": False,
        "column_names": ["p", "q", "r"],
        "column_types": {"a": "float32"},
        "list_columns": {"a": (" ", "int64")},
        "null_values": ["NA1"],
        "strings_can_be_null": True,
        "quote_char": "'",
        "encoding": "latin-1",
        "nulls": "fill",
        "fill": 0,
        "columns": ["a", "b"],
        "fragment_bytes": 200,
    },
    "hdf5": {
        "columns": {"x": "/x"},
        "rows_per_fragment": 16,
        "allow_external": True,
    },
    "numpy": {
        "x": lambda root: str(root / "x2.npy"),
        "y": lambda root: str(root / "y.npy"),
        "arrays": lambda root: {"z": str(root / "y.npy")},
        "rows_per_fragment": 10,
    },
    "images": {
        "size": (5, 4),
        "channels": 1,
        "dtype": "float32",
        "resize": "crop",
        "labels": None,
        "label_map": {"cat": 1, "dog": 0},
        "decoder": "pillow",
        "fragment_size": 3,
        "verify_headers": False,
        "decode": False,
        "max_image_bytes": 1 << 20,
        "follow_links": "all",
    },
    "tfrecord": {
        "features": {"id": ("int64", ())},
        "compression": "GZIP",
        "decode_images": ["img"],
        "fragment_bytes": 300,
    },
    "webdataset": {
        "keys": ["cls"],
        "names": {"cls": "label"},
        "key_column": "k",
        "image_size": (3, 3),
        "fragment_samples": 3,
    },
}


def _keywords(function: Callable) -> list[str]:
    """Every parameter of a ``read_*`` function, its ``**errors`` spelled out as ``ErrorOptions``' keys."""
    names = []
    for name, parameter in inspect.signature(function).parameters.items():
        if parameter.kind is inspect.Parameter.VAR_KEYWORD:
            names += list(typing.get_type_hints(ErrorOptions))
        else:
            names.append(name)
    return names


def test_every_read_function_is_enumerated():
    found = {name[len("read_") :] for name in streamfeed.__all__ if name.startswith("read_")}
    assert found == set(OPEN) | {"ray", "sql"}  # ray: tests/ray/test_ray_source.py; sql: tests/sources/sql/


def test_every_exclusion_says_why():
    assert NOT_ROW_SETTINGS and all(isinstance(why, str) and len(why) > 20 for why in NOT_ROW_SETTINGS.values())


@pytest.mark.parametrize("format_name", sorted(OPEN))
def test_every_keyword_is_in_the_fingerprint_and_the_cache_key(tmp_path, format_name):
    function = readers.reader_for(format_name)
    base = OPEN[format_name](tmp_path)
    opened = function(**base)
    fingerprint, key = opened.source.fingerprint(), cache_key(opened.source)
    assert function(**base).source.fingerprint() == fingerprint  # opened again: the same identity
    unchanged = []
    for keyword in _keywords(function):
        if keyword in NOT_ROW_SETTINGS:
            continue
        assert keyword in CHANGED[format_name], (
            f"read_{format_name}({keyword}=) is neither given another value here nor excluded in core.NOT_ROW_SETTINGS"
        )
        value = CHANGED[format_name][keyword]
        value = value(tmp_path) if callable(value) else value
        default = inspect.signature(function).parameters[keyword].default
        assert repr(base.get(keyword, default)) != repr(value), f"{keyword}: not another value"
        changed = function(**{**base, keyword: value}).source
        if changed.fingerprint() == fingerprint or cache_key(changed) == key:
            unchanged.append(keyword)
    assert not unchanged, f"read_{format_name}: changing {unchanged} keeps the fingerprint or the cache key"
