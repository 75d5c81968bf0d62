"""The HTML report's figures without a browser: a bounded sample spread over the data, thumbnails only of
listed files, every name from the data escaped."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from PIL import Image

from streamfeed.inspect import figures, inspect
from streamfeed.inspect.html import to_html


def test_the_sample_is_bounded_and_spread_from_the_first_row_group_to_the_last(tmp_path, monkeypatch):
    path = tmp_path / "sorted.parquet"
    pq.write_table(pa.table({"x": np.arange(40_000, dtype=np.float64)}), path, row_group_size=500)
    monkeypatch.setattr(figures, "MAX_FRAGMENTS", 10)
    monkeypatch.setattr(figures, "SAMPLE_ROWS", 1000)
    found = figures.compute_figures(inspect(path))
    assert (found.fragments_read, found.fragment_count, found.fragment_rows) == (10, 80, [500] * 80)
    assert found.sample_rows <= 1000 + 10
    (column,) = found.columns
    assert column.kind == "numeric" and column.stats["min"] == "0" and column.stats["max"] == "39,999"
    assert column.rho is not None and column.rho > 0.99 and column.order[0][1] < column.order[-1][1]
    page = to_html(inspect(path), found)
    assert "a sample of 1,000 of 40,000 rows, taken evenly from 10 of 80 row groups" in page


def test_thumbnails_are_decoded_only_for_files_the_folder_lists(tmp_path):
    folder, outside = tmp_path / "data", tmp_path / "secret.png"
    (folder / "a").mkdir(parents=True)
    for i in range(3):
        Image.fromarray(np.full((20, 30, 3), 60 * i, np.uint8)).save(folder / "a" / f"{i}.png")
    Image.fromarray(np.zeros((20, 30, 3), np.uint8)).save(outside)
    report = inspect(folder, format="images", quality=True)
    report.quality["images"]["per_image"].append({"path": str(outside), "brightness": -1.0, "blur": -1.0})
    report.quality["duplicates"]["groups"] = [[str(outside), str(folder / "a" / "0.png")]]
    found = figures.compute_figures(report)
    shown = [
        t.path for thumbs in [*found.classes.values(), *found.extremes.values(), *found.duplicates] for t in thumbs
    ]
    assert shown and not any("secret" in path for path in shown)
    assert found.extremes["darkest"][0].path.endswith("0.png") and found.duplicates == []
    assert all(t.uri and t.uri.startswith("data:image/jpeg;base64,") and max(t.width, t.height) <= 96 for t in
               found.classes["a"])  # fmt: skip


def test_names_from_the_data_are_text_never_markup(tmp_path):
    column, folder_name = "<script>alert(1)</script>", '<img src=x onerror="alert(2)">'
    pq.write_table(pa.table({column: [1.0, 2.0, 3.0], "s": ["<b>x</b>", "y", "y"]}), tmp_path / "d.parquet")
    page = to_html(inspect(tmp_path / "d.parquet", quality=True))
    assert "<script" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page and "<b>x</b>" not in page
    (tmp_path / "imgs" / folder_name).mkdir(parents=True)
    Image.fromarray(np.zeros((8, 8, 3), np.uint8)).save(tmp_path / "imgs" / folder_name / "a.png")
    page = to_html(inspect(tmp_path / "imgs", format="images"))
    assert "<img src=x" not in page and "&lt;img src=x onerror=&quot;alert(2)&quot;&gt;" in page
