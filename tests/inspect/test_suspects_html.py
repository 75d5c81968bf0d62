"""The label-noise suspects page of ``DataQualityMonitor`` rendered in a real browser.

A real Keras model is measured by the monitor on the served batches of an
image folder (the inspect browser test's pets: cat, dog, fish, with a dark
and a bright image), the suspects are written as a page, and headless
Chromium renders it (the helpers of ``test_html_browser.py``): every
suspect has a card with its thumbnail (a JPEG data URI), rank, path, given
label and mean margin, in the monitor's order, and the thumbnails are on
the screenshot (the near-black image's pixels).
"""

from __future__ import annotations

import os

import numpy as np
from test_html_browser import _assert_not_blank, _count, _Elements, _self_contained, render, write_images

from streamfeed.inspect.figures import THUMB_SIDE
from streamfeed.inspect.suspects_html import suspects_page

SIZE = (24, 32)  # what the model sees; the page shows the files


def _monitored(folder):
    """A DataQualityMonitor after one epoch of an untrained model's outputs on every image of ``folder``."""
    import keras

    import streamfeed as sf

    train = sf.read_images(folder, size=SIZE).batch(8).to_keras(label="label", ids="path")
    model = keras.Sequential(
        [keras.Input((*SIZE, 3)), keras.layers.Rescaling(1 / 255), keras.layers.Flatten(), keras.layers.Dense(3)]
    )
    monitor = sf.keras.DataQualityMonitor(train)
    monitor.set_model(model)
    monitor.on_train_begin()  # as fit calls it: batches are kept only while fit trains
    with train:
        train.on_epoch_begin()
        for number in range(len(train)):
            train[number]
        monitor.on_train_batch_end(len(train) - 1)  # as Keras reports the epoch's last batch trained
        train.on_epoch_end()
    return monitor


def test_the_suspects_page_shows_each_suspects_thumbnail_label_and_evidence(tmp_path):
    folder = write_images(tmp_path / "pets")
    files = sorted(str(path) for path in folder.glob("*/*.png"))
    monitor = _monitored(folder)
    suspects = monitor.suspects(top=len(files))
    assert sorted(row["path"] for row in suspects) == files

    page = tmp_path / "suspects.html"
    assert monitor.write_suspects_html(page, top=len(files)) == len(files)
    screenshot, dom = render(page, tmp_path, "suspects-images")
    image = _assert_not_blank(screenshot)
    dark = next(row for row in suspects if row["path"].endswith("dark.png"))
    assert _count(image, (3, 3, 3), tolerance=3) > 0.5 * THUMB_SIDE * THUMB_SIDE * 48 / 64, (
        f"the near-black image's thumbnail (rank {dark['rank']}) is not on the screenshot"
    )

    elements = _Elements(dom)
    _self_contained(dom, elements)
    cards = elements.find("div", "suspect-card")
    assert [card["data-id"] for card in cards] == [row["id"] for row in suspects]  # most suspect first
    assert [int(card["data-rank"]) for card in cards] == list(range(1, len(files) + 1))
    thumbs = elements.find("img", "suspect")
    assert [thumb["alt"] for thumb in thumbs] == [os.path.relpath(row["path"], folder) for row in suspects]
    assert all(thumb["src"].startswith("data:image/jpeg;base64,") and int(thumb["width"]) > 0 for thumb in thumbs)
    names = ["cat", "dog", "fish"]
    for row, thumb in zip(suspects, thumbs):  # the given label, named as the folder names it
        assert thumb["data-class"] == f"{names[row['label']]} ({row['label']})"
    text = "".join(elements.text)
    assert f"{dark['mean_margin']:.3f}" in text and "estimated label noise" in text
    assert len(elements.find("tr")) == len(files) + 1  # the evidence table: a header and a row per suspect


def test_an_id_that_is_not_an_image_gets_a_card_without_a_picture():
    page = suspects_page(
        [{"id": 7, "rank": 1, "mean_margin": -1.5, "label": 2}, {"id": "a<b>", "rank": 2, "mean_margin": -0.25}],
        noise_rate=0.1,
        tracked=20,
    )
    elements = _Elements(page)
    assert [card["data-id"] for card in elements.find("div", "suspect-card")] == ["7", "a<b>"]
    assert not elements.find("img") and len(elements.find("div", "missing")) == 2
    assert "a&lt;b&gt;" in page and "<b>a" not in page and "10.0 %" in page and np.isfinite(-1.5)
