"""The HTML report tells what the CLI tells, in a real browser (issue 23, items 13 and 14).

* An empty image file is "empty file (0 bytes)" in the undecodable-files
  table, as the CLI says it, never an exception's object repr.
* An evenly spread, time-sorted timestamp column has no empty histogram
  bin: the sample covers the whole file, not the few fragments the read
  budget allows.
* Every warning the page shows (a column flagged "sorted?" in its card) is
  counted in the warnings summary: no "No warnings" beside one.
* An HDF5 column of (64, 64) images gets thumbnails and a pixel histogram,
  as an image folder does, not "values are arrays: no chart".
"""

from __future__ import annotations

import base64
import io
import re

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pytest
from PIL import Image
from test_html_browser import _Elements, render

from streamfeed.cli import main
from streamfeed.inspect import figures


def _card(dom: str, column: str) -> str:
    """The HTML of one column's card."""
    start = dom.index(f'data-column="{column}"')
    end = dom.find('<div class="card column"', start)
    return dom[start : end if end > 0 else len(dom)]


def _bins(card: str) -> list[int]:
    """The counts of a card's histogram bins, as their tooltips say them."""
    histogram = card[card.index('<svg class="hist"') : card.index("</svg>", card.index('<svg class="hist"'))]
    return [int(count.replace(",", "")) for count in re.findall(r"<title>[^<]*: ([\d,]+)</title>", histogram)]


def test_an_empty_image_file_is_named_as_the_cli_names_it(tmp_path, capsys):
    folder = tmp_path / "pets"
    for name in ("cat", "dog"):
        (folder / name).mkdir(parents=True)
        for i in range(3):
            Image.fromarray(np.full((24, 32, 3), 40 * i + 60, np.uint8)).save(folder / name / f"{i}.png")
    (folder / "cat" / "empty.png").write_bytes(b"")
    page = tmp_path / "report.html"
    assert main(["inspect", str(folder), "--html", str(page), "--quality"]) == 0
    assert "empty file (0 bytes)" in capsys.readouterr().out  # what the CLI says
    _, dom = render(page, tmp_path, "undecodable-empty")
    table = dom[dom.index("Undecodable files") :]
    table = table[: table.index("</table>")]
    assert "empty file (0 bytes)" in table, table
    empty = dom[dom.index('title="cat/empty.png') :]
    assert empty[: empty.index("</figure>")].count("empty file (0 bytes)") == 2  # its thumbnail's box and title
    assert "object at 0x" not in dom and "BytesIO" not in dom


def test_a_time_sorted_column_spread_over_many_fragments_has_no_empty_bin(tmp_path, capsys, monkeypatch):
    # 3 fragments of 16 MiB (the CSV default); a read budget of about 1.5 fragments' decoded bytes lets the
    # sample read only the first and the last: the middle third of the time range would be an empty gap.
    rows = 2_400_000
    seconds = np.linspace(1.7e9, 1.7e9 + 86_400 * 30, rows).astype("int64")
    table = pa.table({"ts": pa.array(seconds.astype("datetime64[s]")), "n": np.arange(rows) % 7})
    data = tmp_path / "clicks.csv"
    pacsv.write_csv(table, data)
    monkeypatch.setattr(figures, "READ_BUDGET", int(rows / 3 * 16 * 1.5))
    page = tmp_path / "report.html"
    assert main(["inspect", str(data), "--html", str(page), "--quiet"]) == 0
    capsys.readouterr()
    _, dom = render(page, tmp_path, "time-sorted")
    counts = _bins(_card(dom, "ts"))
    assert len(counts) >= 6 and min(counts) > 0, counts
    assert max(counts) < 2 * min(counts), counts  # evenly spread data, evenly sampled


def test_every_warning_the_page_shows_is_counted(tmp_path, capsys):
    rng = np.random.default_rng(1)
    data = tmp_path / "sorted.csv"
    pacsv.write_csv(pa.table({"t": np.sort(rng.random(2000)) * 1000, "x": rng.random(2000)}), data)
    page = tmp_path / "report.html"
    assert main(["inspect", str(data), "--html", str(page), "--quiet"]) == 0
    capsys.readouterr()
    _, dom = render(page, tmp_path, "sorted-warning")
    assert "sorted?" in _card(dom, "t")
    warnings = dom[dom.index('id="warnings"') :]
    warnings = warnings[: warnings.index("</section>")]
    assert "No warnings" not in warnings
    shown = warnings.count('class="warn"')
    assert shown >= 1 and "'t'" in warnings, warnings
    tile = re.search(r'<div class="tile[^"]*"><b>(\d+)</b><span>warnings</span>', dom)
    assert tile is not None and int(tile.group(1)) == shown


@pytest.mark.parametrize("channels", [None, 3], ids=["grey", "rgb"])
def test_an_hdf5_image_column_gets_thumbnails_and_a_pixel_histogram(channels, tmp_path, capsys):
    import h5py

    # each picture: a dark left half with noise, a bright right half (red for RGB)
    rng = np.random.default_rng(2)
    shape = (200, 64, 64) if channels is None else (200, 64, 64, channels)
    images = rng.integers(0, 40, shape, dtype=np.uint8)
    images[:, :, 32:] = 230 if channels is None else (230, 0, 0)
    data = tmp_path / "digits.h5"
    with h5py.File(data, "w") as handle:
        handle["images"] = images
        handle["labels"] = rng.integers(0, 10, 200)
    page = tmp_path / "report.html"
    assert main(["inspect", str(data), "--html", str(page), "--quiet"]) == 0
    capsys.readouterr()
    _, dom = render(page, tmp_path, f"hdf5-images-{channels or 1}")
    card = _card(dom, "images")
    assert "no chart" not in card
    thumbs = _Elements(card).find("img", "array-thumb")
    assert len(thumbs) >= 4 and all(t["src"].startswith("data:image/jpeg;base64,") for t in thumbs)
    for thumb in thumbs:  # the row's picture, whole: dark left, bright (red) right
        shown = np.asarray(Image.open(io.BytesIO(base64.b64decode(thumb["src"].split(",", 1)[1]))).convert("RGB"))
        assert shown.shape == (64, 64, 3)
        left, right = shown[:, :28].astype(float).mean(axis=(0, 1)), shown[:, 36:].astype(float).mean(axis=(0, 1))
        assert left.max() < 60 and right[0] > 200
        assert (right[1:] > 200).all() if channels is None else (right[1:] < 40).all()
    counts = _bins(card)
    assert len(counts) >= 6 and counts[0] > 0 and counts[-1] > 0, counts  # pixel values 0-40 and 230


def test_a_gap_the_sample_could_not_cover_is_said_beside_its_empty_bins(tmp_path, capsys, monkeypatch):
    # Parquet row groups cannot be cut finer: a budget of 2.5 row groups reads the first and the last of 3,
    # and the card says that its empty bins may be the row group it did not read.
    import pyarrow.parquet as pq

    rows = 30_000
    data = tmp_path / "clicks.parquet"
    pq.write_table(pa.table({"t": np.arange(rows, dtype=np.float64) * 0.5}), data, row_group_size=rows // 3)
    monkeypatch.setattr(figures, "READ_BUDGET", int(rows / 3 * 8 * 2.5))
    page = tmp_path / "report.html"
    assert main(["inspect", str(data), "--html", str(page), "--quiet"]) == 0
    capsys.readouterr()
    _, dom = render(page, tmp_path, "parquet-gap")
    card = _card(dom, "t")
    assert 0 in _bins(card)
    assert "empty bins" in card and "2 of 3 row groups" in card, card
