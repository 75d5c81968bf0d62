"""The image augmentations of ``transforms/augment.py``: what each does to a row, and that a pipeline's rows
are augmented the same whatever the threads or the shuffle (images written by PIL, read by ``read_images``)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PIL import Image

import streamfeed as sf
from streamfeed.runtime.row_random import RowRandom
from streamfeed.transforms import (
    compose,
    random_affine,
    random_brightness_contrast,
    random_crop,
    random_flip,
    random_resized_crop,
    random_rotation,
)

ROWS = 64


def images(rows: int = ROWS, height: int = 12, width: int = 15, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, (rows, height, width, 3), dtype=np.uint8)


def rng(rows: int = ROWS, seed: int = 4) -> RowRandom:
    return RowRandom.for_rows(seed, 0, 0, np.arange(rows))


def test_flip_mirrors_each_row_or_leaves_it():
    source = images()
    out = random_flip(p=0.5)({"image": source}, rng())["image"]
    mirrored = np.array([np.array_equal(o, s[:, ::-1]) for o, s in zip(out, source)])
    same = np.array([np.array_equal(o, s) for o, s in zip(out, source)])
    assert np.all(mirrored ^ same)
    assert 16 < mirrored.sum() < 48  # p=0.5 of 64 rows
    assert np.array_equal(mirrored, rng().bernoulli(0.5))  # the flip is the row's first draw
    vertical = random_flip(horizontal=False, vertical=True, p=1.0)({"image": source}, rng())["image"]
    np.testing.assert_array_equal(vertical, source[:, ::-1])


def test_brightness_shifts_and_contrast_scales_about_the_mean():
    source = np.random.default_rng(1).uniform(0.2, 0.8, (ROWS, 8, 8, 3)).astype(np.float32)
    shifted = random_brightness_contrast(brightness=0.1, contrast=0.0)({"image": source}, rng())["image"]
    offsets = (shifted - source).reshape(ROWS, -1)
    np.testing.assert_allclose(offsets, offsets[:, :1].repeat(offsets.shape[1], 1), atol=1e-6)
    assert np.all(np.abs(offsets[:, 0]) <= 0.1) and len(np.unique(offsets[:, 0].round(6))) > ROWS // 2
    scaled = random_brightness_contrast(brightness=0.0, contrast=0.5)({"image": source}, rng())["image"]
    mean = source.mean(axis=(1, 2, 3), keepdims=True)
    np.testing.assert_allclose(scaled.mean(axis=(1, 2, 3), keepdims=True), mean, atol=1e-5)
    ratio = (scaled - mean).std(axis=(1, 2, 3)) / (source - mean).std(axis=(1, 2, 3))
    assert np.all((ratio >= 0.5 - 1e-4) & (ratio <= 1.5 + 1e-4)) and ratio.std() > 0.1


def test_brightness_of_integer_images_stays_in_their_range():
    out = random_brightness_contrast(brightness=1.0, contrast=1.0)({"image": images()}, rng())["image"]
    assert out.dtype == np.uint8 and out.min() == 0 and out.max() == 255


def test_a_crop_is_a_window_of_its_image_at_a_drawn_place():
    source = images()
    out = random_crop((5, 7))({"image": source}, rng())["image"]
    assert out.shape == (ROWS, 5, 7, 3)
    draws = rng()
    tops, lefts = draws.integers(0, 12 - 5 + 1), draws.integers(0, 15 - 7 + 1)
    for o, s, top, left in zip(out, source, tops, lefts):
        np.testing.assert_array_equal(o, s[top : top + 5, left : left + 7])
    assert len(set(zip(tops.tolist(), lefts.tolist()))) > 10
    with pytest.raises(ValueError, match="larger"):
        random_crop((13, 7))({"image": source}, rng())


def test_a_resized_crop_of_the_whole_image_is_the_image_and_otherwise_a_resized_part():
    source = images(height=12, width=15)
    whole = random_resized_crop((12, 15), scale=(1.0, 1.0), ratio=(15 / 12, 15 / 12))({"image": source}, rng())
    np.testing.assert_array_equal(whole["image"], source)
    constant = np.full((ROWS, 12, 15, 3), 77, dtype=np.uint8)
    constant[:, :, :, 1] = 200
    out = random_resized_crop((6, 6))({"image": constant}, rng())["image"]
    assert out.shape == (ROWS, 6, 6, 3)
    assert np.all(out[..., 0] == 77) and np.all(out[..., 1] == 200)  # resampled inside the image only


def test_affine_moves_a_point_where_its_drawn_rotation_says():
    size = 41
    blob = np.zeros((ROWS, size, size), dtype=np.float32)
    blob[:, 8:11, 25:28] = 1.0  # centred on pixel (y=9, x=26)
    out = random_rotation(25.0)({"image": blob}, rng())["image"]
    angle = np.deg2rad(rng().uniform(-25.0, 25.0))
    centre = size / 2.0
    px, py = 26.5 - centre, 9.5 - centre  # pixel centres at .5
    expected_x = centre + np.cos(angle) * px - np.sin(angle) * py
    expected_y = centre + np.sin(angle) * px + np.cos(angle) * py
    ys, xs = np.mgrid[0:size, 0:size] + 0.5
    mass = out.sum(axis=(1, 2))
    np.testing.assert_allclose(mass, 9.0, rtol=0.05)  # bilinear resampling keeps the blob's mass
    np.testing.assert_allclose((out * xs).sum(axis=(1, 2)) / mass, expected_x, atol=0.25)
    np.testing.assert_allclose((out * ys).sum(axis=(1, 2)) / mass, expected_y, atol=0.25)


def test_an_identity_affine_changes_nothing_and_fill_fills_what_comes_from_outside():
    source = images()
    still = random_affine(degrees=0.0)({"image": source}, rng())["image"]
    np.testing.assert_array_equal(still, source)
    shifted = random_affine(degrees=0.0, translate=0.5, fill=3.0)({"image": np.full_like(source, 100)}, rng())
    values = np.unique(shifted["image"])
    assert 3 in values and 100 in values


def test_a_ragged_column_is_refused_with_a_fix():
    ragged = np.empty(2, dtype=object)
    ragged[:] = [np.zeros((3, 3, 3)), np.zeros((4, 4, 3))]
    with pytest.raises(ValueError, match=r"decode_images\(size=\.\.\.\)"):
        random_flip()({"image": ragged}, rng(2))


def write_folder(root: Path) -> Path:
    rng_ = np.random.default_rng(0)
    for label, name in enumerate(["a", "b"]):
        (root / name).mkdir(parents=True)
        for i in range(30 + 7 * label):
            Image.fromarray(rng_.integers(0, 256, (20, 24, 3), dtype=np.uint8)).save(root / name / f"{i}.png")
    return root


AUGMENT = compose(
    random_resized_crop((12, 12), scale=(0.5, 1.0)),
    random_flip(),
    random_rotation(10.0),
    random_brightness_contrast(),
)


def augmented(ds: sf.Dataset) -> dict[str, bytes]:
    """Each image's augmented bytes under its path."""
    out: dict[str, bytes] = {}
    with ds.batch(16).iter_epoch(1) as it:
        for batch in it:
            for path, image in zip(batch["path"].tolist(), batch["image"]):
                out[str(path)] = image.tobytes()
    return out


def test_a_pipelines_images_are_augmented_alike_for_any_threads_and_shuffle(tmp_path):
    root = write_folder(tmp_path / "images")
    base = sf.read_images(root, size=(16, 16), fragment_size=8).random_map(AUGMENT, seed=2)
    reference = augmented(base.with_options(read_threads=1))
    assert len(reference) == 67
    assert augmented(base.with_options(read_threads=4)) == reference
    assert augmented(base.shuffle(5, window=2).with_options(read_threads=3)) == reference
    reseeded = augmented(sf.read_images(root, size=(16, 16), fragment_size=8).random_map(AUGMENT, seed=3))
    assert sum(reseeded[path] != reference[path] for path in reseeded) > 60  # the draws did decide them


def test_a_resized_crop_of_uint8_images_is_pillows_bilinear_resize_of_the_drawn_box():
    """Pillow resizes uint8 images (9x faster than the NumPy resampling measured); floats keep the NumPy path."""
    from PIL import Image

    source = images(height=40, width=50)
    crop = random_resized_crop((16, 20), scale=(0.3, 0.9))
    out = crop({"image": source}, rng())["image"]
    draws = rng()
    area = draws.uniform(0.3, 0.9) * 40 * 50
    aspect = np.exp(draws.uniform(np.log(3 / 4), np.log(4 / 3)))
    box_width, box_height = np.clip(np.sqrt(area * aspect), 1, 50), np.clip(np.sqrt(area / aspect), 1, 40)
    left, top = draws.uniform() * (50 - box_width), draws.uniform() * (40 - box_height)
    for i, image in enumerate(source):
        box = (left[i], top[i], left[i] + box_width[i], top[i] + box_height[i])
        expected = np.asarray(Image.fromarray(image).resize((20, 16), Image.Resampling.BILINEAR, box=box))
        np.testing.assert_array_equal(out[i], expected)
    grey = crop({"image": source[..., :1]}, rng())["image"]
    assert grey.shape == (ROWS, 16, 20, 1)
    np.testing.assert_array_equal(grey[..., 0], crop({"image": source[..., 0]}, rng())["image"])
    floats = crop({"image": source.astype(np.float32) / 255}, rng())["image"]
    assert floats.dtype == np.float32 and floats.shape == (ROWS, 16, 20, 3)
