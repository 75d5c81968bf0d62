"""The image-folder source, on real files written by Pillow (and damaged copies).

Pixel checks use lossless formats where exact values matter and a tolerance
for JPEG. Every error test asserts that the message names the file.
"""

from __future__ import annotations

import io
import json
import os
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

import streamfeed as sf
from streamfeed.readers import read_images

DECODERS = ["pillow", "simplejpeg"]


def images(ds) -> dict[str, np.ndarray]:
    """Every row of an unbatched dataset, by column."""
    chunks = list(ds.iter_epoch(0))
    return {name: np.concatenate([c[name] for c in chunks]) for name in chunks[0]} if chunks else {}


def by_name(columns) -> dict[str, int]:
    return {os.path.basename(p): i for i, p in enumerate(columns["path"])}


def save(path: Path, image: Image.Image, fmt: str, **options) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    image.save(path, fmt, **options)
    return path


def halves(width: int = 64, height: int = 32) -> Image.Image:
    """Left half black, right half white (a pattern that shows rotation)."""
    pixels = np.zeros((height, width, 3), dtype=np.uint8)
    pixels[:, width // 2 :] = 255
    return Image.fromarray(pixels)


# ------------------------------------------------------------------- formats


def opened(path) -> Image.Image:
    """The image at ``path``, loaded and its file closed (an open handle would leak a ResourceWarning)."""
    with Image.open(path) as image:
        image.load()
        return image


def test_sixteen_bit_png_is_scaled_not_clipped(tmp_path):
    values = np.array([[0, 257, 32768, 65535]] * 4, dtype=np.uint16)
    image = Image.fromarray(values)
    assert image.mode.startswith("I;16")
    save(tmp_path / "c" / "deep.png", image, "PNG")
    assert opened(tmp_path / "c" / "deep.png").mode.startswith("I;16")  # really 16-bit on disk
    as_uint8 = images(read_images(tmp_path, size=(4, 4), channels=1))["image"][0, 0, :, 0]
    np.testing.assert_array_equal(as_uint8, [0, 1, 128, 255])
    as_float = images(read_images(tmp_path, size=(4, 4), channels=3, dtype="float32"))["image"][0]
    assert as_float.dtype == np.float32
    np.testing.assert_allclose(as_float[0, :, 0], [0, 257 / 65535, 32768 / 65535, 1.0], rtol=1e-6)
    np.testing.assert_array_equal(as_float[..., 0], as_float[..., 2])  # gray replicated to RGB


@pytest.mark.parametrize("decoder", DECODERS)
def test_exif_orientation_is_applied(tmp_path, decoder):
    exif = Image.Exif()
    exif[0x0112] = 6  # stored image must be rotated 90 degrees clockwise to display
    save(tmp_path / "c" / "rotated.jpg", halves(64, 32), "JPEG", exif=exif.tobytes(), quality=95)
    out = images(read_images(tmp_path, size=(64, 32), decoder=decoder))["image"][0]  # upright: 64 high, 32 wide
    assert out.shape == (64, 32, 3)
    assert out[:24].mean() < 20 and out[40:].mean() > 235  # the stored left (black) half is now on top


@pytest.mark.parametrize("decoder", DECODERS)
def test_cmyk_and_progressive_jpeg(tmp_path, decoder):
    save(tmp_path / "c" / "cmyk.jpg", Image.new("CMYK", (16, 16), (0, 255, 255, 0)), "JPEG", quality=95)
    save(
        tmp_path / "c" / "progressive.jpg",
        Image.new("RGB", (64, 48), (10, 200, 30)),
        "JPEG",
        quality=95,
        progressive=True,
    )
    assert opened(tmp_path / "c" / "cmyk.jpg").mode == "CMYK"
    assert opened(tmp_path / "c" / "progressive.jpg").info.get("progressive")
    columns = images(read_images(tmp_path, size=(8, 8), decoder=decoder))
    row = by_name(columns)
    np.testing.assert_allclose(columns["image"][row["cmyk.jpg"]].reshape(-1, 3).mean(0), [255, 0, 0], atol=6)
    np.testing.assert_allclose(columns["image"][row["progressive.jpg"]].reshape(-1, 3).mean(0), [10, 200, 30], atol=6)


def test_webp_tiff_bmp_gif_grayscale_and_alpha(tmp_path):
    color = (200, 100, 50)
    save(tmp_path / "c" / "a.webp", Image.new("RGB", (10, 10), color), "WEBP", lossless=True)
    save(tmp_path / "c" / "b.tiff", Image.new("RGB", (10, 10), color), "TIFF")
    save(tmp_path / "c" / "c.bmp", Image.new("RGB", (10, 10), color), "BMP")
    save(tmp_path / "c" / "d.gif", Image.new("RGB", (10, 10), color), "GIF")
    save(tmp_path / "c" / "e.png", Image.new("L", (10, 10), 77), "PNG")
    save(tmp_path / "c" / "f.png", Image.new("RGBA", (10, 10), color + (0,)), "PNG")
    columns = images(read_images(tmp_path, size=(5, 5)))
    row = by_name(columns)
    for name in ("a.webp", "b.tiff", "c.bmp", "d.gif", "f.png"):
        np.testing.assert_array_equal(columns["image"][row[name]].reshape(-1, 3), [color] * 25, err_msg=name)
    np.testing.assert_array_equal(columns["image"][row["e.png"]], 77)
    gray = images(read_images(tmp_path, size=(5, 5), channels=1))["image"]
    assert gray.shape == (6, 5, 5, 1)
    np.testing.assert_array_equal(gray[row["e.png"]], 77)
    rgba = images(read_images(tmp_path, size=(5, 5), channels=4))["image"]
    np.testing.assert_array_equal(rgba[row["f.png"], ..., 3], 0)  # alpha kept
    np.testing.assert_array_equal(rgba[row["e.png"], ..., 3], 255)  # opaque alpha added


def test_palette_png_with_transparency(tmp_path):
    image = Image.new("P", (4, 4), 0)
    image.putpalette([255, 0, 0, 0, 0, 255] + [0] * 762)
    image.putpixel((0, 0), 1)
    save(tmp_path / "c" / "p.png", image, "PNG", transparency=0)
    assert opened(tmp_path / "c" / "p.png").mode == "P"
    rgb = images(read_images(tmp_path, size=(4, 4)))["image"][0]
    np.testing.assert_array_equal(rgb[0, 0], [0, 0, 255])
    np.testing.assert_array_equal(rgb[1, 1], [255, 0, 0])  # the transparent index keeps its colour
    rgba = images(read_images(tmp_path, size=(4, 4), channels=4))["image"][0]
    assert rgba[0, 0, 3] == 255 and rgba[1, 1, 3] == 0


def test_format_is_sniffed_and_extensions_are_case_insensitive(tmp_path):
    save(tmp_path / "c" / "really-a-png.jpg", Image.new("RGB", (6, 6), (1, 2, 3)), "PNG")
    save(tmp_path / "c" / "SHOUT.JpEg", Image.new("RGB", (6, 6), (9, 9, 9)), "JPEG", quality=100)
    columns = images(read_images(tmp_path, size=(6, 6)))
    row = by_name(columns)
    np.testing.assert_array_equal(columns["image"][row["really-a-png.jpg"]], np.broadcast_to([1, 2, 3], (6, 6, 3)))
    assert set(row) == {"really-a-png.jpg", "SHOUT.JpEg"}


@pytest.mark.parametrize("decoder", DECODERS)
def test_dct_downscaling_matches_a_full_decode(tmp_path, decoder):
    """256 -> 224 (7/8) and 128 -> 32 (1/4) agree with decoding in full and resizing."""
    rng = np.random.default_rng(0)
    smooth = Image.fromarray(rng.integers(0, 255, (16, 16, 3), dtype=np.uint8)).resize((256, 256), Image.BICUBIC)
    save(tmp_path / "c" / "big.jpg", smooth, "JPEG", quality=95)
    full = np.asarray(opened(tmp_path / "c" / "big.jpg").convert("RGB"), dtype=np.float64)
    for side in (224, 32):
        got = images(read_images(tmp_path, size=(side, side), decoder=decoder))["image"][0].astype(np.float64)
        want = np.asarray(Image.fromarray(full.astype(np.uint8)).resize((side, side), Image.BILINEAR), dtype=np.float64)
        assert np.abs(got - want).mean() < 6.0, side  # a misplaced or mis-scaled image differs by tens


def test_resize_policies(tmp_path):
    """A 40x20 gradient: stretch, crop (centre columns), pad (centred on zeros)."""
    pixels = np.zeros((20, 40, 3), dtype=np.uint8)
    pixels[..., 0] = np.arange(40, dtype=np.uint8)[None, :] * 6
    pixels[..., 1] = 100
    save(tmp_path / "c" / "g.png", Image.fromarray(pixels), "PNG")
    crop = images(read_images(tmp_path, size=(20, 20), resize="crop"))["image"][0]
    np.testing.assert_array_equal(crop, pixels[:, 10:30])
    pad = images(read_images(tmp_path, size=(20, 40), resize="pad"))["image"][0]
    np.testing.assert_array_equal(pad, pixels)  # same aspect: no padding
    pad = images(read_images(tmp_path, size=(40, 40), resize="pad"))["image"][0]  # scale 1: content 40x20 centred
    np.testing.assert_array_equal(pad[:10], 0)
    np.testing.assert_array_equal(pad[30:], 0)
    np.testing.assert_array_equal(pad[10:30], pixels)
    stretch = images(read_images(tmp_path, size=(10, 20), resize="stretch"))["image"][0]
    assert stretch.shape == (10, 20, 3) and (stretch[..., 1] == 100).all()


def test_options_are_checked(tmp_path):
    (tmp_path / "c").mkdir()
    with pytest.raises(ValueError, match="float32"):
        read_images(tmp_path, dtype="float64")
    with pytest.raises(ValueError, match="resize"):
        read_images(tmp_path, resize="zoom")
    with pytest.raises(FileNotFoundError, match="nowhere"):
        read_images(tmp_path / "nowhere")


# -------------------------------------------------------- labels and listing
def test_labels_nested_folders_counts_and_label_map(tmp_path):
    for name, count in (("zebra", 2), ("apple", 3), ("mango", 1)):
        for number in range(count):
            save(
                tmp_path / "train" / name / ("deep/er" if number == 0 else "") / f"{number}.png",
                Image.new("L", (3, 3)),
                "PNG",
            )
    ds = read_images(tmp_path / "train", size=(3, 3))
    source = ds.source
    assert source.label_map == {"apple": 0, "mango": 1, "zebra": 2}
    assert source.class_names == ["apple", "mango", "zebra"]
    assert source.class_counts == {"apple": 3, "mango": 1, "zebra": 2}
    columns = images(ds)
    assert columns["label"].dtype == np.int64
    labels = {os.path.relpath(p, tmp_path / "train"): int(label) for p, label in zip(columns["path"], columns["label"])}
    assert labels[os.path.join("zebra", "deep", "er", "0.png")] == 2  # nested: the top-level class
    assert sorted(labels.values()) == [0, 0, 0, 1, 2, 2]
    source.save_label_map(tmp_path / "labels.json")
    assert json.loads((tmp_path / "labels.json").read_text()) == source.label_map

    save(tmp_path / "val" / "zebra" / "v.png", Image.new("L", (3, 3)), "PNG")  # a subset of the classes
    val = read_images(tmp_path / "val", size=(3, 3), label_map=tmp_path / "labels.json")
    assert images(val)["label"].tolist() == [2]
    assert val.source.class_counts == {"apple": 0, "mango": 0, "zebra": 1}
    save(tmp_path / "val" / "kiwi" / "k.png", Image.new("L", (3, 3)), "PNG")
    with pytest.raises(sf.SchemaError) as excinfo:
        read_images(tmp_path / "val", size=(3, 3), label_map=tmp_path / "labels.json")
    assert str(tmp_path / "val" / "kiwi") in str(excinfo.value)


def test_hidden_non_image_unicode_and_symlinks(tmp_path):
    root = tmp_path / "root"
    save(root / "chat noir" / "été 1.png", Image.new("L", (3, 3), 10), "PNG")
    save(tmp_path / "elsewhere" / "linked.png", Image.new("L", (3, 3), 20), "PNG")
    save(tmp_path / "shared" / "s.png", Image.new("L", (3, 3), 30), "PNG")
    (root / "chat noir" / "link.png").symlink_to(tmp_path / "elsewhere" / "linked.png")
    (root / "dogs").symlink_to(tmp_path / "shared", target_is_directory=True)  # a whole class by link
    (tmp_path / "shared" / "loop").symlink_to(tmp_path / "shared", target_is_directory=True)  # a cycle
    (root / "chat noir" / ".thumbs.png").write_bytes(b"junk")
    (root / ".git").mkdir()
    (root / "chat noir" / "labels.csv").write_text("a,b")
    save(root / "loose.png", Image.new("L", (3, 3)), "PNG")
    ds = read_images(root, size=(3, 3), channels=1, follow_links="all")  # both links point outside the root
    columns = images(ds)
    names = sorted(os.path.basename(p) for p in columns["path"])
    assert names == ["link.png", "s.png", "été 1.png"]
    assert ds.source.class_counts == {"chat noir": 2, "dogs": 1}
    assert ds.source.summary()["ignored"] == {
        "hidden": 2,
        "not_image": 1,
        "outside_class_folders": 1,
        "repeated_directory": 1,
    }
    assert ds.report.skipped_units == 0  # ignored files are not errors
    inside = read_images(root, size=(3, 3), channels=1)  # by default: file links anywhere, folder links inside
    assert [os.path.basename(p) for p in inside.source.files] == ["link.png", "été 1.png"]
    assert inside.source.summary()["links"] == {"outside_root": 1, "repeated_file": 0, "unreadable": 0}


# -------------------------------------------------------------- damaged files
def _tree_with(tmp_path: Path, bad: dict[str, bytes], good: int = 5) -> Path:
    root = tmp_path / "data"
    for number in range(good):
        save(root / "c" / f"good{number}.jpg", Image.new("RGB", (32, 32), (number * 40, 0, 0)), "JPEG")
    for name, data in bad.items():
        (root / "c" / name).write_bytes(data)
    return root


def _truncated_jpeg() -> bytes:
    buffer = io.BytesIO()
    rng = np.random.default_rng(1)
    Image.fromarray(rng.integers(0, 255, (64, 64, 3), dtype=np.uint8)).save(buffer, "JPEG", quality=90)
    return buffer.getvalue()[: len(buffer.getvalue()) // 2]


@pytest.mark.parametrize(
    "name, data, when",
    [
        ("empty.jpg", b"", "open"),
        ("text.jpg", b"just some text, not an image\n", "open"),
        ("truncated.jpg", _truncated_jpeg(), "read"),
    ],
)
@pytest.mark.parametrize("decoder", DECODERS)
def test_bad_file_raises_naming_it(tmp_path, name, data, when, decoder):
    root = _tree_with(tmp_path, {name: data})
    path = str(root / "c" / name)
    if when == "open":
        with pytest.raises(sf.CorruptFileError) as excinfo:
            read_images(root, size=(8, 8), decoder=decoder)
        assert path in str(excinfo.value) and "on_error='skip'" in str(excinfo.value)
    ds = read_images(root, size=(8, 8), decoder=decoder, verify_headers=False)  # found when decoding instead
    with pytest.raises(sf.CorruptFileError) as excinfo:
        images(ds)
    assert path in str(excinfo.value)


@pytest.mark.parametrize("decoder", DECODERS)
@pytest.mark.parametrize("verify_headers", [True, False])
def test_skip_reports_every_bad_file_and_counts_are_exact(tmp_path, decoder, verify_headers):
    bad = {"empty.jpg": b"", "text.jpg": b"hello", "truncated.jpg": _truncated_jpeg()}
    root = _tree_with(tmp_path, bad, good=7)
    (root / "c" / "png-named.jpg").write_bytes(
        (lambda b: (Image.new("RGB", (4, 4)).save(b, "PNG"), b.getvalue())[1])(io.BytesIO())
    )
    ds = read_images(
        root, size=(8, 8), decoder=decoder, verify_headers=verify_headers, on_error="skip", fragment_size=3
    )
    assert len(ds) == 8  # exact before the first epoch: 7 good JPEGs + the PNG named .jpg
    for epoch in (0, 1):
        batches = list(ds.batch(3).iter_epoch(epoch))
        yielded = sum(len(b["label"]) for b in batches)
        assert yielded == 8 and yielded + ds.report.skipped_rows == ds.report.total_rows == 11
    entries = sorted(ds.report.entries, key=lambda e: e.path)
    assert [(os.path.basename(e.path), e.location, e.rows) for e in entries] == [
        ("empty.jpg", "file", 1),
        ("text.jpg", "file", 1),
        ("truncated.jpg", "file", 1),
    ]
    for entry in entries:
        assert entry.path in entry.reason
    assert "png-named.jpg" in {os.path.basename(p) for b in ds.iter_epoch(0) for p in b["path"]}


def test_skip_respects_the_error_budget(tmp_path):
    root = _tree_with(tmp_path, {"a.jpg": b"", "b.jpg": b"x"}, good=2)
    with pytest.raises(sf.ErrorBudgetExceeded):
        read_images(root, size=(8, 8), on_error="skip", max_bad_count=1)
    report_path = tmp_path / "report.jsonl"
    ds = read_images(root, size=(8, 8), on_error="skip", max_bad_fraction=0.5, report_path=report_path)
    assert len(ds) == 2
    assert sorted(json.loads(line)["path"] for line in report_path.read_text().splitlines()) == [
        str(root / "c" / "a.jpg"),
        str(root / "c" / "b.jpg"),
    ]


def test_batches_feed_keras_shapes(tmp_path):
    root = _tree_with(tmp_path, {}, good=5)
    batch = next(iter(read_images(root, size=(8, 6), dtype="float32").batch(4).iter_epoch(0)))
    assert batch["image"].shape == (4, 8, 6, 3) and batch["image"].dtype == np.float32
    assert 0.0 <= batch["image"].min() and batch["image"].max() <= 1.0


# ------------------------------------------------------ the header probe at open
def test_jpeg_headers_are_probed_without_pillow(tmp_path, monkeypatch):
    """Opening a folder of JPEGs reads their headers with libjpeg-turbo (C), not Pillow's Python parser.

    Pillow's JPEG header parse holds the GIL (0.07 ms a file; the probe's
    threads wait on each other: 2.0-2.4 s for 10 000 files on 2 cores, before
    the first batch). A PNG among them is still opened by Pillow.
    """
    root = tmp_path / "data"
    for number in range(6):
        save(root / "c" / f"{number}.jpg", Image.new("RGB", (32, 24), (number * 40, 9, 0)), "JPEG")
    save(root / "c" / "other.png", Image.new("RGB", (4, 4)), "PNG")
    opened: list[str] = []
    real_open = Image.open

    def counting_open(fp, *args, **kwargs):
        opened.append(getattr(fp, "name", "?"))
        return real_open(fp, *args, **kwargs)

    monkeypatch.setattr(Image, "open", counting_open)
    ds = read_images(root, size=(8, 8))
    assert [os.path.basename(name) for name in opened] == ["other.png"]
    monkeypatch.setattr(Image, "open", real_open)
    assert len(ds) == 7 and sum(len(batch["label"]) for batch in ds.batch(4).iter_epoch(0)) == 7


def _declare_jpeg_size(data: bytes, width: int, height: int) -> bytes:
    """A JPEG whose frame header (SOF0) declares ``width`` x ``height`` (a bomb's header; its pixels stay small)."""
    at = data.index(b"\xff\xc0")
    return data[: at + 5] + height.to_bytes(2, "big") + width.to_bytes(2, "big") + data[at + 9 :]


@pytest.mark.parametrize("mode", ["L", "RGB", "CMYK"])
def test_jpeg_probe_refuses_what_pillows_probe_refuses_with_the_same_words(tmp_path, mode):
    """The declared decoded size of a JPEG (grey, RGB, CMYK) is bounded exactly as through Pillow's header."""
    from streamfeed.sources.images.decode import ImageTooLargeError, check_size

    root = tmp_path / "data"
    path = save(root / "c" / "photo.jpg", Image.new(mode, (300, 200)), "JPEG")
    assert len(read_images(root, size=(8, 8), channels=3, max_image_bytes=300 * 200 * 4)) == 1
    with Image.open(path) as image, pytest.raises(ImageTooLargeError) as pillows:
        check_size(image, 100_000, 3)  # what the Pillow probe says: grey counts 3 channels decoded to RGB
    with pytest.raises(sf.CorruptFileError) as ours:
        read_images(root, size=(8, 8), channels=3, max_image_bytes=100_000)
    assert str(path) in str(ours.value) and str(pillows.value) in str(ours.value)

    path.write_bytes(_declare_jpeg_size(path.read_bytes(), 50_000, 50_000))
    with pytest.raises(sf.CorruptFileError) as bomb:
        read_images(root, size=(8, 8))
    assert str(path) in str(bomb.value) and "declares" in str(bomb.value)  # the size, found before decoding
    skipped = read_images(root, size=(8, 8), on_error="skip")
    assert len(skipped) == 0 and [entry.rows for entry in skipped.report.entries] == [1]
