"""The JPEG fast path (issue 27): one header read per file, decoded in place, the same pixels as before.

``decode()`` with simplejpeg used to open every JPEG with Pillow (its header
parsed in Python, 0.05 ms a file) before libjpeg-turbo parsed it again to
decode, and decoded into a new array copied into the fragment's. Now the
header is read once by libjpeg-turbo (size check, mode, scale), Pillow is
asked only for a file holding an APP1 segment (EXIF or XMP: its
orientation), and a decode that lands on the target is written into the
fragment's array. What is served must not change: every case here is
compared with the Pillow-header path, which is the code as it was.
"""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

simplejpeg = pytest.importorskip("simplejpeg")

import streamfeed.sources.images.decode as decode_module  # noqa: E402
from streamfeed.readers import read_images  # noqa: E402
from streamfeed.sources.images.decode import DecodeSpec, decode, scaled_size  # noqa: E402


def jpeg(
    width: int, height: int, *, mode: str = "RGB", orientation: int | None = None, seed: int = 0, xmp: int | None = None
) -> bytes:
    """A smooth random JPEG written by Pillow (with an EXIF, or XMP, orientation when given)."""
    rng = np.random.default_rng(seed)
    small = rng.integers(0, 256, (max(1, height // 8), max(1, width // 8), 3), dtype=np.uint8)
    image = Image.fromarray(small).resize((width, height), Image.BICUBIC).convert(mode)
    options = {"quality": 90}
    if orientation is not None:
        exif = Image.Exif()
        exif[0x0112] = orientation
        options["exif"] = exif.tobytes()
    if xmp is not None:
        options["xmp"] = (
            f'<x:xmpmeta xmlns:x="adobe:ns:meta/"><tiff:Orientation>{xmp}</tiff:Orientation></x:xmpmeta>'.encode()
        )
    out = io.BytesIO()
    image.save(out, "JPEG", **options)
    return out.getvalue()


def as_before(data: bytes, spec: DecodeSpec) -> np.ndarray:
    """What ``decode`` served before: Pillow's header parse, then simplejpeg into a new array."""
    return decode_module._decode_pillow(data, spec, "simplejpeg")


CASES = [  # (stored width, height, mode, orientation, target h, w, channels, dtype, resize)
    (256, 256, "RGB", None, 224, 224, 3, "uint8", "stretch"),  # 7/8: decoded in place
    (256, 256, "RGB", None, 224, 224, 3, "float32", "stretch"),
    (256, 256, "L", None, 224, 224, 1, "uint8", "stretch"),
    (256, 256, "RGB", None, 224, 224, 1, "uint8", "stretch"),  # RGB file, grey output
    (1024, 768, "RGB", None, 256, 256, 3, "uint8", "stretch"),  # scaled, then resized
    (300, 200, "RGB", None, 100, 150, 3, "uint8", "stretch"),  # 1/2 lands on it
    (300, 200, "RGB", None, 96, 96, 3, "uint8", "crop"),
    (300, 200, "RGB", None, 96, 96, 3, "uint8", "pad"),
    (64, 32, "RGB", 6, 32, 64, 3, "uint8", "stretch"),  # EXIF: Pillow reads the orientation
    (64, 32, "RGB", 1, 16, 8, 3, "uint8", "stretch"),  # an APP1 saying upright
    (64, 32, "RGB", 3, 16, 32, 3, "float32", "crop"),
    (64, 32, "RGB", "xmp", 32, 64, 3, "uint8", "stretch"),  # XMP's orientation (Pillow reads it without EXIF)
    (64, 32, "RGB", "tail", 32, 64, 3, "uint8", "stretch"),  # an APP1 marker after the end of the image
]


@pytest.mark.parametrize("case", CASES, ids=[f"{c[0]}x{c[1]}-{c[2]}-o{c[3]}-{c[6]}c-{c[7]}-{c[8]}" for c in CASES])
def test_the_fast_path_serves_what_the_pillow_header_path_served(case):
    width, height, mode, orientation, th, tw, channels, dtype, resize = case
    if orientation == "xmp":
        data = jpeg(width, height, mode=mode, xmp=6)
    elif orientation == "tail":
        data = jpeg(width, height, mode=mode) + b"\xff\xe1\x00\x10Exif\x00\x00" + bytes(8)
    else:
        data = jpeg(width, height, mode=mode, orientation=orientation)
    spec = DecodeSpec(th, tw, channels, dtype, resize)
    expected = as_before(data, spec)
    plain = decode(data, spec, "simplejpeg")
    out = np.full(spec.shape, 7, dtype=dtype)
    into = decode(data, spec, "simplejpeg", out=out)
    assert into is out
    for got in (plain, into):
        assert got.shape == spec.shape and got.dtype == np.dtype(dtype)
        np.testing.assert_array_equal(got, expected)


def test_the_segment_walk_sends_every_app1_file_to_pillow_and_only_those():
    """Pillow reads the orientation of a file whose segments may hold an APP1 (EXIF, XMP, or unsure)."""
    walk = decode_module._app1_before_scan
    plain = jpeg(64, 32)
    assert not walk(plain) and not walk(plain + b"\xff\xe1\x00\x10")  # after the image: not before its scan
    assert walk(jpeg(64, 32, orientation=1)) and walk(jpeg(64, 32, xmp=6))
    assert walk(plain[:2] + b"\x00junk" + plain[2:])  # junk between segments: Pillow's parse judges
    assert walk(plain[:40])  # cut before the scan


def test_scaled_size_is_simplejpegs_own():
    """The scale computed without a second header read is the one libjpeg-turbo decodes at."""
    data = {size: jpeg(*size) for size in [(256, 256), (257, 131), (1000, 17), (9, 640), (1, 1), (333, 334)]}
    for (width, height), encoded in data.items():
        for need in [(1, 1), (224, 224), (31, 7), (width, height), (width + 5, 3), (width // 2, height // 3 + 1)]:
            h, w, _, _ = simplejpeg.decode_jpeg_header(encoded, min_height=need[1], min_width=need[0])
            assert scaled_size((width, height), need) == (w, h), ((width, height), need)


def test_each_jpeg_header_is_read_once_and_pillow_not_at_all(tmp_path, monkeypatch):
    """Per file: the probe at open reads the header, the decode reads it once more (C); Pillow never opens one.

    Before: Pillow opened every file in ``decode()`` (its header parsed in
    Python) before simplejpeg parsed it again.
    """
    root = tmp_path / "data"
    for index in range(6):
        (root / f"c{index % 2}").mkdir(parents=True, exist_ok=True)
        (root / f"c{index % 2}" / f"{index}.jpg").write_bytes(jpeg(256, 256, seed=index))
    headers, opens = [], []
    read_header, pillow_open = simplejpeg.decode_jpeg_header, Image.open

    def counted_header(data, *args, **kwargs):
        headers.append(bytes(data[:3]))
        return read_header(data, *args, **kwargs)

    def counted_open(*args, **kwargs):
        opens.append(args[0])
        return pillow_open(*args, **kwargs)

    monkeypatch.setattr(simplejpeg, "decode_jpeg_header", counted_header)
    monkeypatch.setattr(Image, "open", counted_open)
    ds = read_images(root, size=(224, 224), decoder="simplejpeg")
    assert len(headers) == 6 and not opens  # the probe: one C header read per file
    with ds.batch(4).iter_epoch(0) as batches:
        images = np.concatenate([batch["image"] for batch in batches])
    assert images.shape == (6, 224, 224, 3)
    assert len(headers) == 12 and not opens  # the decode: one more per file, and Pillow's parse no more


def test_an_exif_file_still_gets_its_orientation_from_pillow(tmp_path: Path):
    """A file with an APP1 segment is the one case Pillow parses: rotated as before."""
    root = tmp_path / "data" / "c"
    root.mkdir(parents=True)
    data = jpeg(64, 32, orientation=6)
    (root / "r.jpg").write_bytes(data)
    with read_images(tmp_path / "data", size=(64, 32), decoder="simplejpeg").batch(1).iter_epoch(0) as batches:
        (batch,) = list(batches)
    expected = np.rot90(simplejpeg.decode_jpeg(data), -1)
    spec = DecodeSpec(64, 32)
    np.testing.assert_array_equal(batch["image"][0], decode_module._finish_array(expected, spec, (32, 64)))


def test_a_short_read_is_read_on_to_the_end(tmp_path, monkeypatch):
    """The fragment reads a file with one ``os.read`` of its size; a read returning less goes on to the end."""
    import streamfeed.sources.images.fragment as fragment_module

    root = tmp_path / "data" / "c"
    root.mkdir(parents=True)
    data = jpeg(256, 256)
    (root / "a.jpg").write_bytes(data)
    calls, real_read = [], fragment_module.os.read

    def short_read(handle, size):
        calls.append(size)
        return real_read(handle, min(size, 1000))

    expected = decode(data, DecodeSpec(224, 224), "simplejpeg")
    dataset = read_images(tmp_path / "data", size=(224, 224), decoder="simplejpeg").batch(1)
    monkeypatch.setattr(fragment_module.os, "read", short_read)
    with dataset.iter_epoch(0) as batches:
        (batch,) = list(batches)
    np.testing.assert_array_equal(batch["image"][0], expected)
    assert calls[0] == len(data) + 1 and len(calls) == -(-len(data) // 1000) + 1  # then 1000 at a time, to EOF


def test_opening_stats_each_file_once_beside_the_walk(tmp_path, monkeypatch):
    """The fragments' stamps and the fingerprint come from the walk's stat: only the probe stats a file again.

    Before: the stamps (``take_stamps``) and the fingerprint's digest
    (``file_stats``) each stat'ed every file once more.
    """
    import streamfeed.files.stamps as stamps_module

    root = tmp_path / "data"
    for index in range(5):
        (root / f"c{index % 2}").mkdir(parents=True, exist_ok=True)
        (root / f"c{index % 2}" / f"{index}.jpg").write_bytes(jpeg(32, 32, seed=index))
    stats: list[str] = []
    real_stat = stamps_module.os.stat

    def counted(path, *args, **kwargs):
        if str(path).endswith(".jpg"):
            stats.append(str(path))
        return real_stat(path, *args, **kwargs)

    monkeypatch.setattr(stamps_module.os, "stat", counted)
    dataset = read_images(root, size=(16, 16))
    before = len(stats)
    digest = dataset.source.fingerprint()["digest"]
    assert before == 5 and len(stats) == 5  # the probe's one stat a file; the fingerprint none
    monkeypatch.undo()
    files = sorted(str(path) for path in root.rglob("*.jpg"))
    from streamfeed.files.paths import file_digest, file_stats

    assert digest == file_digest((str(Path(p).relative_to(root)), s, m) for p, s, m in file_stats(files))
