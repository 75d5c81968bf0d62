"""``inspect --html`` rendered in a real browser: Debian's headless Chromium takes a screenshot and dumps the DOM.

For a small CSV (numbers, a category, dates, nulls, a label) and a small
image folder (three classes, with a dark, a bright, a blurred and a
duplicated image) the report is written through the CLI, rendered to PNG
at 1280 x 2000, and checked: the picture is not blank, and the DOM holds
the elements a person looks at (a histogram per numeric column, top-k bars,
null bars, the label's bars, the row-order plots, thumbnails per class and
the darkest, brightest, blurriest and duplicate images). The page fetches
nothing. Screenshots and pages are kept in ``$STREAMFEED_ARTIFACTS`` (by
default ``test-artifacts/`` at the repository root, git-ignored).

The browser is a test requirement, not an option: ``.ci/run`` installs
``chromium-headless-shell`` with apt-get, and without it these tests fail
saying so.
"""

from __future__ import annotations

import datetime
import os
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest
from PIL import Image, ImageFilter

from streamfeed.cli import main

ROOT = Path(__file__).resolve().parents[2]
WINDOW = (1280, 2000)
BROWSERS = ("chromium-headless-shell", "/usr/lib/chromium/chromium-headless-shell", "chromium", "chromium-browser")
BAR_BLUE = (74, 126, 187)  # the report's bar colour (#4a7ebb)


# ----------------------------------------------------------------------------------------------- browser
def _browser() -> str:
    configured = os.environ.get("STREAMFEED_CHROMIUM")
    for candidate in ([configured] if configured else []) + list(BROWSERS):
        found = shutil.which(candidate)
        if found:
            return found
    pytest.fail(
        "No headless Chromium found (looked for $STREAMFEED_CHROMIUM, " + ", ".join(BROWSERS) + "). "
        "The HTML report is tested in a real browser: install Debian's package with "
        "`apt-get update && apt-get install -y --no-install-recommends chromium-headless-shell` "
        "(.ci/run does), or set STREAMFEED_CHROMIUM to a Chromium binary.",
        pytrace=False,
    )


def _chromium(page: Path, profile: Path, *arguments: str) -> subprocess.CompletedProcess:
    command = [
        _browser(), "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--no-first-run",
        f"--user-data-dir={profile}", f"--window-size={WINDOW[0]},{WINDOW[1]}", *arguments, page.as_uri(),
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, f"{command} exited {done.returncode}: {done.stderr[-2000:]}"
    return done


def render(page: Path, tmp_path: Path, name: str) -> tuple[Path, str]:
    """The page's screenshot (kept as an artefact) and its DOM after rendering."""
    screenshot = tmp_path / f"{name}.png"
    _chromium(page, tmp_path / f"profile-{name}-shot", f"--screenshot={screenshot}")
    assert screenshot.exists() and screenshot.stat().st_size > 0, "Chromium wrote no screenshot"
    dom = _chromium(page, tmp_path / f"profile-{name}-dom", "--dump-dom").stdout
    artifacts = Path(os.environ.get("STREAMFEED_ARTIFACTS") or ROOT / "test-artifacts")
    artifacts.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(screenshot, artifacts / f"{name}.png")
    shutil.copyfile(page, artifacts / f"{name}.html")
    return screenshot, dom


class _Elements(HTMLParser):
    """Every start tag of a document with its attributes, and the text, in document order."""

    def __init__(self, document: str) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str]]] = []
        self.text: list[str] = []
        self.feed(document)

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, {key: value or "" for key, value in attrs}))

    def handle_data(self, data):
        self.text.append(data)

    def find(self, tag: str, cls: str | None = None, **attrs: str) -> list[dict[str, str]]:
        return [
            found
            for name, found in self.tags
            if name == tag
            and (cls is None or cls in found.get("class", "").split())
            and all(found.get(key.replace("_", "-")) == value for key, value in attrs.items())
        ]


def _assert_not_blank(screenshot: Path) -> Image.Image:
    image = Image.open(screenshot).convert("RGB")
    assert image.size == WINDOW
    colours = image.getcolors(maxcolors=1 << 20)
    assert colours is not None and len(colours) > 200, f"only {len(colours or [])} colours: a blank page?"
    background = max(colours)[0]
    assert background < 0.9 * image.width * image.height, "one colour fills 90 % of the page"
    return image


def _count(image: Image.Image, colour: tuple[int, int, int], tolerance: int = 6) -> int:
    pixels = np.asarray(image, dtype=np.int16)
    return int(np.all(np.abs(pixels - np.array(colour)) <= tolerance, axis=-1).sum())


def _self_contained(dom: str, elements: _Elements) -> None:
    assert "<script" not in dom and "<link" not in dom and "@import" not in dom and "url(" not in dom
    for tag in ("img", "image", "iframe", "source", "video", "audio"):
        for found in elements.find(tag):
            assert found.get("src", "").startswith("data:") and not found.get("href"), found


# ----------------------------------------------------------------------------------------------- data
CITIES = ["Paris", "Berlin", "Rome", "Oslo", "<b>Nice</b>"]


def write_csv(path: Path) -> Path:
    """300 rows: an id, a price with nulls, a city (one name is markup), a sorted date, a score, a 0/1 label."""
    rng = np.random.default_rng(0)
    with open(path, "w", encoding="utf-8") as out:
        out.write("id,price,city,day,score,returned\n")
        for i in range(300):
            price = "" if i % 17 == 0 else f"{rng.lognormal(3, 0.5):.2f}"
            city = CITIES[int(rng.choice(5, p=[0.4, 0.3, 0.15, 0.1, 0.05]))]
            day = (datetime.date(2024, 1, 1) + datetime.timedelta(days=i // 3)).isoformat()
            score = "" if i % 23 == 0 else f"{rng.normal():.3f}"
            out.write(f"{i},{price},{city},{day},{score},{int(rng.random() < 0.25)}\n")
    return path


def _picture(seed: int, hue: int) -> Image.Image:
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:48, 0:64]
    pixels = np.stack([(x * 4 + hue) % 256, (y * 5) % 256, ((x + y) * 3 + hue * 2) % 256], -1)
    pixels = pixels + rng.integers(-40, 40, pixels.shape)
    for _ in range(4):
        cx, cy, size = rng.integers(0, 64), rng.integers(0, 48), rng.integers(4, 12)
        pixels[max(0, cy - size) : cy + size, max(0, cx - size) : cx + size] = rng.integers(0, 256, 3)
    return Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8))


def write_images(root: Path) -> Path:
    """cat (9 + dark + blurred), dog (7 + bright + a copy of dog_01), fish (4): 24 PNGs of 64 x 48."""
    for index, (name, hue, count) in enumerate([("cat", 0, 9), ("dog", 90, 7), ("fish", 180, 4)]):
        (root / name).mkdir(parents=True)
        for i in range(count):
            _picture(index * 100 + i, hue).save(root / name / f"{name}_{i:02d}.png")
    Image.fromarray(np.full((48, 64, 3), 3, np.uint8)).save(root / "cat" / "dark.png")
    _picture(7, 0).filter(ImageFilter.GaussianBlur(6)).save(root / "cat" / "blurred.png")
    Image.fromarray(np.full((48, 64, 3), 252, np.uint8)).save(root / "dog" / "bright.png")
    shutil.copyfile(root / "dog" / "dog_01.png", root / "dog" / "dog_01_copy.png")
    return root


# ----------------------------------------------------------------------------------------------- tests
def test_csv_report_renders_with_histograms_top_k_nulls_label_and_row_order(tmp_path, capsys):
    data, page = write_csv(tmp_path / "sales.csv"), tmp_path / "report-csv.html"
    assert main(["inspect", str(data), "--quality", "--label", "returned", "--html", str(page), "--quiet"]) == 0
    capsys.readouterr()
    screenshot, dom = render(page, tmp_path, "report-csv")
    image = _assert_not_blank(screenshot)
    assert _count(image, BAR_BLUE) > 5000, "the bars of the charts are not on the screenshot"

    elements = _Elements(dom)
    _self_contained(dom, elements)
    kinds = {card["data-column"]: card["data-kind"] for card in elements.find("div", "column")}
    assert kinds == {
        "id": "numeric", "price": "numeric", "city": "categorical", "day": "datetime", "score": "numeric",
        "returned": "discrete",
    }  # fmt: skip
    for column in ("id", "price", "day", "score"):  # a histogram and a row-order plot per number or date
        assert elements.find("svg", "hist", data_for=column), column
        assert elements.find("svg", "order", data_for=column), column
    assert elements.find("svg", "topk", data_for="city") and elements.find("svg", "topk", data_for="returned")
    assert len(elements.find("svg", "nullbar")) == 6
    assert elements.find("svg", "missing") and elements.find("svg", "rho") and elements.find("svg", "fragments")
    assert elements.find("svg", "label", data_for="returned")
    text = "".join(elements.text)
    assert "Label returned (imbalance ratio" in text and "follows the row order" in text
    # a city named like markup is shown as its characters, never parsed as an element
    assert "<b>Nice</b>" in text and "&lt;b&gt;Nice&lt;/b&gt;" in dom and "<b>Nice</b>" not in dom


def test_image_report_renders_thumbnails_per_class_and_the_extremes(tmp_path, capsys):
    folder, page = write_images(tmp_path / "pets"), tmp_path / "report-images.html"
    assert main(["inspect", str(folder), "--quality", "--html", str(page), "--quiet"]) == 0
    capsys.readouterr()
    screenshot, dom = render(page, tmp_path, "report-images")
    image = _assert_not_blank(screenshot)
    assert _count(image, (3, 3, 3), tolerance=3) > 3 * 64 * 48, "the dark image's thumbnails are not on screen"
    assert _count(image, BAR_BLUE) > 500, "the bars of the class chart are not on the screenshot"

    elements = _Elements(dom)
    _self_contained(dom, elements)
    for name, files in (("cat", 11), ("dog", 9), ("fish", 4)):
        thumbs = elements.find("img", "class-thumb", data_class=name)
        assert len(thumbs) == min(files, 8), name
        assert all(thumb["src"].startswith("data:image/jpeg;base64,") for thumb in thumbs)
    assert elements.find("svg", "label")  # images per class
    assert elements.find("img", "darkest")[0]["alt"] == os.path.join("cat", "dark.png")
    assert elements.find("img", "brightest")[0]["alt"] == os.path.join("dog", "bright.png")
    blurriest = [found["alt"] for found in elements.find("img", "blurriest")]
    assert os.path.join("cat", "blurred.png") in blurriest[:3]
    assert sorted(found["alt"] for found in elements.find("img", "duplicate")) == [
        os.path.join("dog", "dog_01.png"), os.path.join("dog", "dog_01_copy.png"),
    ]  # fmt: skip
    assert elements.find("svg", "hist", data_for="brightness") and elements.find("svg", "hist", data_for="blur")
