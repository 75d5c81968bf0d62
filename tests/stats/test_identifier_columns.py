"""A path column is an identifier, not a category: ``stats`` builds no vocabulary for it unless it is named.

Before, ``streamfeed stats`` on an image folder of over a thousand images
counted every path, kept 100 of them as a "truncated vocabulary" and warned
that ``path`` looked like an identifier: work and a warning about a column
nobody asked to be a category. Through the real CLI, on a folder written by
Pillow.
"""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

import streamfeed as sf
from streamfeed.stats import compute_stats

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "cli"))
from _console import streamfeed  # noqa: E402

IMAGES = 1_100  # over IDENTIFIER_MIN_DISTINCT: enough for the old identifier cap and its warning


@pytest.fixture(scope="module")
def image_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("imgs")
    for label in ("cat", "dog"):
        (root / label).mkdir()
    for index in range(IMAGES):
        pixels = np.full((4, 4, 3), index % 251, dtype=np.uint8)
        Image.fromarray(pixels).save(root / ("cat", "dog")[index % 2] / f"{index:05d}.png")
    return root


def test_cli_stats_on_an_image_folder_builds_no_path_vocabulary_and_warns_nothing(image_folder, tmp_path):
    out = tmp_path / "s.json"
    done = streamfeed("stats", image_folder, "-o", out, "--quiet")
    assert done.returncode == 0, done.stderr[-3000:]
    assert "path" not in done.stderr and "vocabulary" not in done.stderr, done.stderr
    saved = json.loads(out.read_text())
    path = saved["columns"]["path"]
    assert path["vocabulary"] is None and not path["vocabulary_truncated"], path
    assert path["count"] == IMAGES and path["nulls"] == 0
    assert not [warning for warning in saved.get("warnings") or [] if "path" in warning]
    assert saved["columns"]["label"]["count"] == IMAGES  # the other columns are described as before


def test_a_path_named_categorical_gets_its_whole_vocabulary(image_folder, caplog):
    with caplog.at_level(logging.WARNING, logger="streamfeed"):
        stats = compute_stats(sf.read_images(image_folder, size=(4, 4)), categorical=["path"])
    path = stats["path"]
    assert len(path.vocabulary) == IMAGES and path.vocabulary_truncated is False
    assert not stats.warnings
