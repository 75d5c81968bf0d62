"""The image half of the quality report: decodability, outliers, exposure, blur, duplicates.

Each file is read once in blocks (hashed as it is read), decoded at reduced
size (JPEG DCT-domain draft, else Pillow's reduce) to greyscale, and
measured with NumPy: mean brightness and the variance of the Laplacian
(low = blurry). Nothing but one image at a time per thread is held, and an
image whose header declares more than ``max_image_bytes`` at the size it
would be decoded (after the JPEG draft) is reported as undecodable rather
than decoded: a decompression bomb costs a header read.
"""

from __future__ import annotations

import collections
import concurrent.futures
import hashlib
import io
import os
from typing import Any, Sequence

import numpy as np

from ..errors import require
from ..sources.images.decode import DEFAULT_MAX_IMAGE_BYTES, check_size
from .image_files import ImageFiles
from .images import decode_failure
from .progress import progress
from .report import QualityReport

MAX_SIDE = 1024  # images are measured at most this large (blur scales with resolution)
EXAMPLES = 50  # paths kept per finding, for people to look at; the counts are of every image
DARK, BRIGHT = 10.0, 245.0  # mean brightness (0-255) below/above which an image is near-black/near-white
BLURRY_SHARE = 0.1  # blur below this share of the folder's median is flagged
_BLOCK = 1 << 20


def laplacian_variance(gray: np.ndarray) -> float:
    """Variance of the 4-neighbour Laplacian: edges make it large, blur makes it small."""
    g = np.asarray(gray, dtype=np.float64)
    if g.shape[0] < 3 or g.shape[1] < 3:
        return 0.0
    lap = g[:-2, 1:-1] + g[2:, 1:-1] + g[1:-1, :-2] + g[1:-1, 2:] - 4.0 * g[1:-1, 1:-1]
    return float(lap.var())


def _gray(image: Any) -> np.ndarray:
    """Greyscale 0-255 floats, whatever the mode (16-bit and float images scaled by their range)."""
    if image.mode in ("I;16", "I;16L", "I;16B", "I;16N", "I", "F"):
        array = np.asarray(image, dtype=np.float64)
        top = 65535.0 if image.mode.startswith("I;16") or array.max(initial=0) > 255 else 255.0
        return array * (255.0 / top)
    if image.mode not in ("L", "RGB"):
        image = image.convert("RGB")
    if image.mode == "RGB":
        image = image.convert("L")
    return np.asarray(image, dtype=np.float64)


def measure_image(path: str, max_image_bytes: int = DEFAULT_MAX_IMAGE_BYTES, files: ImageFiles | None = None) -> dict:
    """Hash, format, mode, size, brightness and blur of one file; ``error`` if it does not decode.

    ``files``: where ``path`` is listed (a zip archive's member is opened
    through it); None: a file on disk.
    """
    Image = require("PIL.Image", "images")
    digest = hashlib.blake2b(digest_size=16)
    buffer = io.BytesIO()
    try:
        with files.open(path) if files is not None else open(path, "rb") as handle:
            for block in iter(lambda: handle.read(_BLOCK), b""):
                digest.update(block)
                buffer.write(block)
    except (OSError, ValueError) as exc:  # ValueError: a zip member that does not inflate (MemberError)
        return {"path": path, "error": decode_failure(exc)}
    facts: dict[str, Any] = {"path": path, "hash": digest.hexdigest(), "bytes": buffer.tell()}
    try:
        buffer.seek(0)
        with Image.open(buffer) as image:
            facts.update(format=image.format, mode=image.mode, width=image.width, height=image.height)
            if image.format == "JPEG":
                image.draft("L" if image.mode == "L" else "RGB", (MAX_SIDE, MAX_SIDE))
            check_size(image, max_image_bytes)
            image.load()
            factor = max(1, max(image.size) // MAX_SIDE)
            if factor > 1:
                image = image.reduce(factor)
            gray = _gray(image)
    except Exception as exc:  # noqa: BLE001 - Pillow raises many types for bad data
        facts["error"] = decode_failure(exc, facts["bytes"])
        return facts
    facts["brightness"] = float(gray.mean())
    facts["blur"] = laplacian_variance(gray)
    return facts


def image_quality(
    files: Sequence[str],
    *,
    progress_bar: bool | None = None,
    threads: int = 4,
    max_image_bytes: int = DEFAULT_MAX_IMAGE_BYTES,
    files_of: ImageFiles | None = None,
) -> QualityReport:
    """The quality report of image files (each decoded only if it declares at most ``max_image_bytes``).

    ``files_of``: the listing ``files`` come from, to open a zip archive's
    members through (None: files on disk).
    """
    measured = []
    with progress(len(files), "measuring images", unit="images", enabled=progress_bar) as advance:
        with concurrent.futures.ThreadPoolExecutor(threads) as pool:
            for facts in pool.map(lambda file: measure_image(file, max_image_bytes, files_of), files):
                measured.append(facts)
                advance()
    bad = [m for m in measured if "error" in m]
    good = [m for m in measured if "error" not in m]
    report = QualityReport(rows=len(good))
    modes = collections.Counter(m["mode"] for m in good)
    common_mode = modes.most_common(1)[0][0] if modes else None
    widths = np.array([m["width"] for m in good], dtype=np.float64)
    heights = np.array([m["height"] for m in good], dtype=np.float64)
    median_w, median_h = (float(np.median(widths)), float(np.median(heights))) if good else (0.0, 0.0)
    size_outliers = [
        m["path"]
        for m in good
        if not (median_w / 2 <= m["width"] <= median_w * 2 and median_h / 2 <= m["height"] <= median_h * 2)
    ]
    blur = np.array([m["blur"] for m in good])
    median_blur = float(np.median(blur)) if good else 0.0
    blurry = sorted((m for m in good if m["blur"] < BLURRY_SHARE * median_blur), key=lambda m: m["blur"])
    by_hash: dict[str, list[str]] = collections.defaultdict(list)
    for m in measured:
        if "hash" in m:
            by_hash[m["hash"]].append(m["path"])
    duplicates = [paths for paths in by_hash.values() if len(paths) > 1]
    report.duplicates = {
        "estimated": sum(len(p) - 1 for p in duplicates),
        "groups": duplicates[:EXAMPLES],
        "method": "exact: BLAKE2b of file contents",
    }
    found = {
        "undecodable": [{"path": m["path"], "error": m["error"]} for m in bad],
        "mode_outliers": [m["path"] for m in good if m["mode"] != common_mode],
        "size_outliers": size_outliers,
        "near_black": [m["path"] for m in good if m["brightness"] < DARK],
        "near_white": [m["path"] for m in good if m["brightness"] > BRIGHT],
    }
    report.images = {
        "files": len(measured),
        "modes": dict(modes.most_common()),
        "median_size": [median_w, median_h],
        **{key: paths[:EXAMPLES] for key, paths in found.items()},  # examples; the counts are of all
        "counts": {key: len(paths) for key, paths in found.items()},
        "blur": {
            "median": median_blur,
            "p05": float(np.percentile(blur, 5)) if good else 0.0,
            "blurry": [{"path": m["path"], "blur": m["blur"]} for m in blurry[:EXAMPLES]],
        },
        "per_image": [
            {k: m.get(k) for k in ("path", "mode", "width", "height", "brightness", "blur")} for m in good[:1000]
        ],
    }
    images = report.images
    for key, text in (
        ("undecodable", "do not decode"),
        ("mode_outliers", f"are not {common_mode} like most"),
        ("size_outliers", "are less than half or more than twice the median size"),
        ("near_black", "are nearly black"),
        ("near_white", "are nearly white"),
    ):
        count = images["counts"][key]
        if count:
            report.warnings.append(
                f"{count} image(s) {text}, e.g. {images[key][0]['path'] if key == 'undecodable' else images[key][0]}"
            )
    if blurry:
        report.warnings.append(
            f"{len(blurry)} image(s) are much blurrier than the median "
            f"(variance of the Laplacian < {BLURRY_SHARE:.0%} of {median_blur:.0f}), e.g. {blurry[0]['path']}"
        )
    if duplicates:
        report.warnings.append(
            f"{report.duplicates['estimated']} duplicate file(s) in {len(duplicates)} group(s), "
            f"e.g. {', '.join(os.path.basename(p) for p in duplicates[0][:3])}"
        )
    return report
