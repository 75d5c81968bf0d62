"""Quantile and distinct-count sketches for numeric columns.

Quantiles come from Apache DataSketches' KLL sketch (``datasketches`` on
PyPI), fed whole NumPy arrays at once: ``kll_floats_sketch`` for values
that are exact in float32 (float32, float16, small integers), otherwise
``kll_doubles_sketch``. Its normalized rank error (``k=200``: 1.33 %) is a
bound that holds with high probability for any quantile asked later, and
the sketch is stored (base64 of its serialisation) so that quantiles work
after reloading the JSON without the data.

DataSketches draws the coin of each KLL compaction from a process-global
random generator that Python cannot seed: two passes over the same data
may return quantiles that differ, each within the bound. Everything else
in the statistics is bit-identical between runs and thread counts.

Distinct counts of numeric columns use a HyperLogLog written with NumPy:
DataSketches' ``hll_sketch`` takes one value per Python call (~130 ns,
8 s for 64 M values), which would dominate the pass. Values are hashed by
their float64 bit pattern (so 1, 1.0 and 1.0f are one value) with
splitmix64; ``2**12`` registers give a relative standard error of ~1.6 %.
Registers merge by maximum, which is exact and order-independent.
"""

from __future__ import annotations

import base64

import numpy as np

from ..errors import require

FLOAT_EXACT = {np.dtype(t) for t in ("float16", "float32", "int8", "int16", "uint8", "uint16", "bool")}


def _datasketches():
    return require("datasketches", "stats")


def new_kll(dtype: np.dtype, k: int):
    """An empty KLL sketch for values of ``dtype``."""
    ds = _datasketches()
    return ds.kll_floats_sketch(k) if np.dtype(dtype) in FLOAT_EXACT else ds.kll_doubles_sketch(k)


def kll_kind(sketch) -> str:
    return "floats" if type(sketch).__name__ == "kll_floats_sketch" else "doubles"


def update_kll(sketch, values: np.ndarray) -> None:
    """Feeds all ``values`` (no NaN) in one call."""
    if values.size == 0:
        return
    target = np.float32 if kll_kind(sketch) == "floats" else np.float64
    flat = np.ascontiguousarray(values.reshape(-1), dtype=target)
    if not flat.flags.writeable:  # the binding refuses read-only (e.g. Arrow-backed) arrays
        flat = flat.copy()
    sketch.update(flat)


def kll_to_text(sketch) -> str:
    return base64.b64encode(sketch.serialize()).decode("ascii")


def kll_from_text(text: str, kind: str):
    ds = _datasketches()
    cls = ds.kll_floats_sketch if kind == "floats" else ds.kll_doubles_sketch
    return cls.deserialize(base64.b64decode(text))


def kll_rank_error(k: int) -> float:
    """The normalized rank error of a single quantile for a KLL sketch of size ``k``."""
    return float(_datasketches().kll_doubles_sketch.get_normalized_rank_error(k, False))


# ---------------------------------------------------------------- HyperLogLog
HLL_P = 12
HLL_M = 1 << HLL_P
_U = np.uint64


def _splitmix64(x: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        x = x + _U(0x9E3779B97F4A7C15)
        x = (x ^ (x >> _U(30))) * _U(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> _U(27))) * _U(0x94D049BB133111EB)
        return x ^ (x >> _U(31))


def hll_registers(values: np.ndarray) -> np.ndarray:
    """HyperLogLog registers (``uint8[4096]``) of numeric ``values`` (no NaN)."""
    registers = np.zeros(HLL_M, dtype=np.uint8)
    if values.size == 0:
        return registers
    x = np.asarray(values, dtype=np.float64).reshape(-1) + 0.0  # -0.0 -> 0.0
    hashed = _splitmix64(x.view(np.uint64))
    index = (hashed >> _U(64 - HLL_P)).astype(np.intp)
    rest = hashed & _U((1 << (64 - HLL_P)) - 1)  # 52 bits: exact in float64
    _, exponent = np.frexp(rest.astype(np.float64))  # bit length of ``rest``
    rank = (64 - HLL_P + 1 - exponent).astype(np.uint8)
    seen = np.zeros((HLL_M, 64), dtype=bool)
    seen[index, rank] = True
    registers[:] = 63 - np.argmax(seen[:, ::-1], axis=1)
    registers[~seen.any(axis=1)] = 0
    return registers


def hll_estimate(registers: np.ndarray) -> float:
    """The cardinality estimate, with linear counting for small sets."""
    m = float(HLL_M)
    alpha = 0.7213 / (1 + 1.079 / m)
    raw = alpha * m * m / float(np.sum(np.ldexp(1.0, -registers.astype(np.int64))))
    zeros = int(np.count_nonzero(registers == 0))
    if raw <= 2.5 * m and zeros:
        return m * np.log(m / zeros)
    return raw
