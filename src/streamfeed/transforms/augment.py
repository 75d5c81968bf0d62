"""Image augmentations for ``Dataset.random_map``: vectorised NumPy over a fragment's images, drawn per row.

``ds.map(decode_images(size=(256, 256))).random_map(random_resized_crop((224, 224)), seed=1)``
runs in the read threads, before ``batch``. Each function takes the
column's images as one array ``(rows, height, width[, channels])`` (what
``decode_images`` and ``read_images(size=...)`` give) and draws its
parameters from the rows' :class:`~streamfeed.runtime.row_random.RowRandom`,
so an image is augmented the same way whichever thread, shard or backend
serves it, and again so after a resume (the epoch changes the draw).

Integer images keep their dtype (rounded and clipped to its range);
float images are taken to lie in [0, 1] for brightness and are not
clipped. The geometric ones (crop, resized crop, affine) resample by
bilinear interpolation in ``float32``, a block of rows at a time so that
the scratch arrays stay near the size of the images themselves.
"""

from __future__ import annotations

import math
from typing import Callable

import numpy as np

from ..core import Chunk
from ..errors import ArgumentError, SchemaError, UnknownNameError, describe
from ..runtime.row_random import RowRandom

Augmentation = Callable[[Chunk, RowRandom], Chunk]
_BLOCK = 32  # rows resampled at once: 32 images of 224 x 224 x 3 make 19 MB of float32 scratch per corner


def random_flip(
    *, column: str = "image", horizontal: bool = True, vertical: bool = False, p: float = 0.5
) -> Augmentation:
    """Mirrors each image left-right (``horizontal``) and/or top-bottom (``vertical``), each with probability ``p``."""
    _check_probability(p)

    def flip(chunk: Chunk, rng: RowRandom) -> Chunk:
        images = _images(chunk, column)
        out = images
        for axis, chosen in ((2, horizontal), (1, vertical)):
            if chosen:
                # Only the drawn rows are written flipped into a copy: 0.20 ms an image of 224² x 3 against
                # 0.43 for np.where over every row (which also reads the whole flipped view).
                mask = rng.bernoulli(p)
                flipped = np.flip(out[mask], axis=axis)
                out = out.copy()
                out[mask] = flipped
        return {**chunk, column: out}

    return _named(flip, f"random_flip({column}, horizontal={horizontal}, vertical={vertical}, p={p})")


def random_brightness_contrast(
    *, column: str = "image", brightness: float = 0.2, contrast: float = 0.2
) -> Augmentation:
    """Adds a brightness offset uniform in ±``brightness`` (a fraction of the full range) and scales the
    contrast around each image's mean by a factor uniform in ``[1 - contrast, 1 + contrast]``."""
    if not 0.0 <= brightness <= 1.0 or not 0.0 <= contrast <= 1.0:
        raise ArgumentError(
            describe(f"brightness and contrast must lie in [0, 1], got {brightness!r} and {contrast!r}")
        )

    def adjust(chunk: Chunk, rng: RowRandom) -> Chunk:
        images = _images(chunk, column)
        span = float(np.iinfo(images.dtype).max) if images.dtype.kind in "ui" else 1.0
        shape = (-1,) + (1,) * (images.ndim - 1)
        offset = (rng.uniform(-brightness, brightness) * span).astype(np.float32).reshape(shape)
        factor = rng.uniform(1.0 - contrast, 1.0 + contrast).astype(np.float32).reshape(shape)
        values = images.astype(np.float32)
        mean = values.mean(axis=tuple(range(1, images.ndim)), keepdims=True)
        return {**chunk, column: _as_dtype((values - mean) * factor + mean + offset, images.dtype)}

    return _named(adjust, f"random_brightness_contrast({column}, brightness={brightness}, contrast={contrast})")


def random_crop(size: tuple[int, int], *, column: str = "image") -> Augmentation:
    """Cuts a ``size`` (height, width) window from each image at a uniformly drawn place (no resampling)."""
    height, width = _size(size)

    def crop(chunk: Chunk, rng: RowRandom) -> Chunk:
        images = _images(chunk, column)
        rows, full_height, full_width = images.shape[:3]
        if height > full_height or width > full_width:
            raise ArgumentError(
                describe(f"random_crop({size}) of images of {full_height} x {full_width}: the crop is larger")
            )
        top = rng.integers(0, full_height - height + 1)
        left = rng.integers(0, full_width - width + 1)
        index = np.arange(rows)[:, None, None]
        ys = top[:, None, None] + np.arange(height)[None, :, None]
        xs = left[:, None, None] + np.arange(width)[None, None, :]
        return {**chunk, column: images[index, ys, xs]}

    return _named(crop, f"random_crop({column}, size={(height, width)})")


def random_resized_crop(
    size: tuple[int, int],
    *,
    column: str = "image",
    scale: tuple[float, float] = (0.08, 1.0),
    ratio: tuple[float, float] = (3 / 4, 4 / 3),
) -> Augmentation:
    """A box of a drawn area (``scale``: a fraction of the image) and aspect (``ratio``: width over height,
    drawn log-uniformly) at a drawn place, resized to ``size``: the Inception crop of torchvision and Keras.
    A box that does not fit is shrunk to fit (no retries: one draw per row, whatever the image).

    ``uint8`` images (grey, RGB, RGBA) are cropped and resized by Pillow's bilinear ``resize(box=...)``,
    which widens its filter when it shrinks (antialiased, as torchvision's default): 0.63 ms an image
    of 256² → 224² against 5.7 ms for the NumPy resampling that other dtypes get (which samples the box
    bilinearly at each output pixel, no antialiasing; ``benchmarks/augment.py``)."""
    height, width = _size(size)
    if not 0.0 < scale[0] <= scale[1] <= 1.0 or not 0.0 < ratio[0] <= ratio[1]:
        raise ArgumentError(
            describe(f"scale must lie in (0, 1] and ratio be positive, low <= high: got {scale!r}, {ratio!r}")
        )

    def resized_crop(chunk: Chunk, rng: RowRandom) -> Chunk:
        images = _images(chunk, column)
        full_height, full_width = images.shape[1:3]
        area = rng.uniform(scale[0], scale[1]) * full_height * full_width
        aspect = np.exp(rng.uniform(math.log(ratio[0]), math.log(ratio[1])))
        box_width = np.clip(np.sqrt(area * aspect), 1.0, full_width)
        box_height = np.clip(np.sqrt(area / aspect), 1.0, full_height)
        left = rng.uniform() * (full_width - box_width)
        top = rng.uniform() * (full_height - box_height)
        if _pillow_resizes(images):
            return {**chunk, column: _pillow_crop_resize(images, left, top, box_width, box_height, (height, width))}
        inverse = np.zeros((len(images), 2, 3))  # output pixel (x, y, 1) -> input pixel (x, y)
        inverse[:, 0, 0], inverse[:, 0, 2] = box_width / width, left
        inverse[:, 1, 1], inverse[:, 1, 2] = box_height / height, top
        return {**chunk, column: _warp(images, inverse, (height, width), fill=None)}

    return _named(resized_crop, f"random_resized_crop({column}, size={(height, width)}, scale={scale}, ratio={ratio})")


def random_affine(
    *,
    column: str = "image",
    degrees: float = 10.0,
    translate: float = 0.0,
    zoom: tuple[float, float] = (1.0, 1.0),
    shear_degrees: float = 0.0,
    fill: float = 0.0,
) -> Augmentation:
    """Rotates each image about its centre by an angle uniform in ±``degrees``, shears it by one in
    ±``shear_degrees``, zooms it by a factor in ``zoom`` and shifts it by up to ±``translate`` of its
    size; pixels from outside the image are ``fill``. Same size out as in."""
    if degrees < 0 or shear_degrees < 0 or not 0.0 <= translate <= 1.0 or not 0.0 < zoom[0] <= zoom[1]:
        raise ArgumentError(
            describe("random_affine needs degrees, shear_degrees >= 0, translate in [0, 1], 0 < zoom low <= high")
        )

    def affine(chunk: Chunk, rng: RowRandom) -> Chunk:
        images = _images(chunk, column)
        full_height, full_width = images.shape[1:3]
        angle = np.deg2rad(rng.uniform(-degrees, degrees))
        shear = np.deg2rad(rng.uniform(-shear_degrees, shear_degrees))
        factor = rng.uniform(zoom[0], zoom[1])
        shift = rng.uniform(-translate, translate, size=2) * np.array([full_width, full_height])
        # The forward map is centre + zoom * R(angle) * Shear(shear) * (p - centre) + shift; sampling needs its
        # inverse: Shear(-shear) * R(-angle) / zoom * (p - centre - shift) + centre.
        cos, sin, tan = np.cos(angle), np.sin(angle), np.tan(shear)
        linear = np.empty((len(images), 2, 2))
        linear[:, 0, 0], linear[:, 0, 1] = cos + tan * sin, sin - tan * cos
        linear[:, 1, 0], linear[:, 1, 1] = -sin, cos
        linear /= factor[:, None, None]
        centre = np.array([full_width / 2.0, full_height / 2.0])
        moved = centre[None, :] + shift
        inverse = np.concatenate([linear, (centre[None, :] - np.einsum("nij,nj->ni", linear, moved))[:, :, None]], 2)
        return {**chunk, column: _warp(images, inverse, (full_height, full_width), fill=fill)}

    name = f"random_affine({column}, degrees={degrees}, translate={translate}, zoom={zoom}, shear={shear_degrees})"
    return _named(affine, f"{name[:-1]}, fill={fill})")


def random_rotation(degrees: float = 10.0, *, column: str = "image", fill: float = 0.0) -> Augmentation:
    """Rotates each image about its centre by an angle uniform in ±``degrees`` (:func:`random_affine`)."""
    return random_affine(column=column, degrees=degrees, fill=fill)


def compose(*augmentations: Augmentation) -> Augmentation:
    """The augmentations applied in order to the same rows, drawing from the one generator in turn."""

    def composed(chunk: Chunk, rng: RowRandom) -> Chunk:
        for augmentation in augmentations:
            chunk = augmentation(chunk, rng)
        return chunk

    return _named(composed, f"compose({', '.join(getattr(a, '__name__', '?') for a in augmentations)})")


# ---------------------------------------------------------------- helpers
def _warp(images: np.ndarray, inverse: np.ndarray, size: tuple[int, int], fill: float | None) -> np.ndarray:
    """Each image resampled bilinearly at ``inverse @ (x, y, 1)`` of each output pixel centre, to ``size``.

    ``fill``: the value outside the image (None: the nearest edge pixel's).
    """
    height, width = size
    ys, xs = np.meshgrid(np.arange(height) + 0.5, np.arange(width) + 0.5, indexing="ij")
    grid = np.stack([xs, ys, np.ones_like(xs)])  # (3, height, width)
    out = np.empty((len(images), height, width, *images.shape[3:]), dtype=images.dtype)
    for start in range(0, len(images), _BLOCK):
        block = images[start : start + _BLOCK]
        source = np.einsum("nij,jhw->nihw", inverse[start : start + _BLOCK], grid) - 0.5  # pixel centres at .0
        out[start : start + _BLOCK] = _as_dtype(_bilinear(block, source[:, 0], source[:, 1], fill), images.dtype)
    return out


def _bilinear(images: np.ndarray, x: np.ndarray, y: np.ndarray, fill: float | None) -> np.ndarray:
    """The four-neighbour blend at ``(x, y)`` (pixel units, centres at .0), gathered by flat index: one
    ``np.take`` per corner runs about twice as fast as indexing by (row, y, x) arrays."""
    rows, full_height, full_width = images.shape[:3]
    flat = images.reshape(rows * full_height * full_width, -1)
    base = (np.arange(rows, dtype=np.int64) * (full_height * full_width))[:, None, None]
    x0, y0 = np.floor(x), np.floor(y)
    fx, fy = (x - x0).astype(np.float32), (y - y0).astype(np.float32)
    x0i, y0i = x0.astype(np.int64), y0.astype(np.int64)
    total = np.zeros((*x.shape, flat.shape[1]), dtype=np.float32)
    for dy in (0, 1):
        for dx in (0, 1):
            xi, yi = x0i + dx, y0i + dy
            index = base + np.clip(yi, 0, full_height - 1) * full_width + np.clip(xi, 0, full_width - 1)
            weight = (fx if dx else 1 - fx) * (fy if dy else 1 - fy)
            if fill is not None:  # a corner outside the image counts as ``fill``
                inside = (xi >= 0) & (xi < full_width) & (yi >= 0) & (yi < full_height)
                total += (weight * ~inside * np.float32(fill))[..., None]
                weight = weight * inside
            total += weight[..., None] * np.take(flat, index, axis=0)
    return total.reshape(x.shape + images.shape[3:])


def _pillow_resizes(images: np.ndarray) -> bool:
    """Whether Pillow resizes these images: ``uint8`` with no channel axis or 1, 3 or 4 channels."""
    return images.dtype == np.uint8 and (images.ndim == 3 or images.shape[3] in (1, 3, 4))


def _pillow_crop_resize(
    images: np.ndarray,
    left: np.ndarray,
    top: np.ndarray,
    box_width: np.ndarray,
    box_height: np.ndarray,
    size: tuple[int, int],
) -> np.ndarray:
    """Each image's box ``(left, top, width, height)`` resized to ``size`` by Pillow (bilinear; it releases
    the GIL, so read threads resize side by side)."""
    from PIL import Image

    height, width = size
    out = np.empty((len(images), height, width, *images.shape[3:]), dtype=np.uint8)
    boxes = np.stack([left, top, left + box_width, top + box_height], axis=1).tolist()
    for index, (image, box) in enumerate(zip(images, boxes)):
        plane = image[..., 0] if image.ndim == 3 and image.shape[2] == 1 else image
        resized = Image.fromarray(plane).resize((width, height), Image.Resampling.BILINEAR, box=tuple(box))
        out[index] = np.asarray(resized).reshape(out.shape[1:])
    return out


def _images(chunk: Chunk, column: str) -> np.ndarray:
    if column not in chunk:
        raise UnknownNameError(describe(f"No column {column!r} to augment", expected=f"one of {sorted(chunk)}"))
    images = np.asarray(chunk[column])
    if images.dtype == object or images.ndim not in (3, 4):
        raise SchemaError(
            describe(
                f"Column {column!r} does not hold images of one size",
                expected="shape (rows, height, width[, channels])",
                found=f"{images.dtype} of shape {images.shape}",
                fix="decode with a size (decode_images(size=...), read_images(size=...))",
            )
        )
    return images


def _as_dtype(values: np.ndarray, dtype: np.dtype) -> np.ndarray:
    if dtype.kind in "ui":
        info = np.iinfo(dtype)
        return np.clip(np.rint(values), info.min, info.max).astype(dtype)
    return values.astype(dtype, copy=False)


def _size(size: tuple[int, int]) -> tuple[int, int]:
    height, width = (int(n) for n in size)
    if height < 1 or width < 1:
        raise ArgumentError(describe(f"size must be (height, width) of at least 1 pixel each, got {size!r}"))
    return height, width


def _check_probability(p: float) -> None:
    if not 0.0 <= p <= 1.0:
        raise ArgumentError(describe(f"p must lie in [0, 1], got {p!r}"))


def _named(fn: Augmentation, name: str) -> Augmentation:
    """``fn`` named by its parameters, which the fingerprint's op identity then holds."""
    fn.__name__ = name
    fn.new_columns = ()  # type: ignore[attr-defined]  # the column is replaced in place, none added
    return fn
