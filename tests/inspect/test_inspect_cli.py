"""``streamfeed inspect`` in-process through ``main(argv)``: the table and ``--json``."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from PIL import Image

from streamfeed.cli import main


def _write(tmp_path):
    label = np.repeat([0, 1], 500)
    pq.write_table(
        pa.table({"__index_level_0__": np.arange(1000), "feature": np.linspace(0, 1, 1000), "y": label}),
        tmp_path / "data.parquet",
        row_group_size=250,
    )
    return tmp_path / "data.parquet"


def test_table_output(tmp_path, capsys):
    path = _write(tmp_path)
    assert main(["inspect", str(path), "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "parquet" in out and "1,000" in out and "feature" in out
    assert "[index_column]" in out and "__index_level_0__" in out


def test_json_output(tmp_path, capsys):
    path = _write(tmp_path)
    assert main(["inspect", str(path), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["format"] == "parquet" and report["rows"] == 1000
    assert report["details"]["row_groups"]["count"] == 4
    assert [c["name"] for c in report["columns"]] == ["__index_level_0__", "feature", "y"]
    assert report["quality"] is None


def test_quality_as_json_and_table(tmp_path, capsys):
    path = _write(tmp_path)
    assert main(["inspect", str(path), "--quality", "--label", "y", "--json"]) == 0
    quality = json.loads(capsys.readouterr().out)["quality"]
    assert quality["label"]["counts"] == {"0": 500, "1": 500}
    assert quality["row_order"]["y"] > 0.8
    assert main(["inspect", str(path), "--quality", "--label", "y"]) == 0
    out = capsys.readouterr().out
    assert "quality (1,000 rows)" in out and "follows the row order" in out and "imbalance ratio 1.0" in out


def test_image_folder_with_quality(tmp_path, capsys):
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        Image.fromarray(np.zeros((8, 8, 3), dtype=np.uint8)).save(tmp_path / name / "x.png")
    assert main(["inspect", str(tmp_path), "--format", "images", "--quality"]) == 0
    out = capsys.readouterr().out
    assert "image quality (2 files)" in out and "nearly black" in out and "duplicate" in out


def test_html_report_with_histograms(tmp_path, capsys):
    path = _write(tmp_path)
    page = tmp_path / "report.html"
    assert main(["inspect", str(path), "--quality", "--label", "y", "--html", str(page), "--quiet"]) == 0
    text = page.read_text()
    assert text.startswith("<!doctype html>") and "<svg" in text and "Label y (imbalance ratio 1.0)" in text
    assert "index_column" in text and "follows the row order" in text


def test_names_from_the_data_print_literally_never_as_markup_or_terminal_escapes(tmp_path, capsys):
    """A column named like rich markup, or holding an escape sequence, prints as its characters."""
    markup, clear = "[bold red]loud[/]", "\x1b[2Jcleared"
    folder = tmp_path / "[red]dir"
    folder.mkdir()
    pq.write_table(pa.table({markup: [1.0, 2.0], clear: [3.0, 4.0], "s": ["\x1b[31mred", "ok"]}), folder / "d.parquet")
    assert main(["inspect", str(folder / "d.parquet"), "--quiet", "--quality"]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out  # no raw escape byte reaches the terminal
    assert markup in out and "\\x1b[2Jcleared" in out and "[red]dir" in out


def test_a_file_named_with_an_escape_sequence_prints_as_its_characters(tmp_path, capsys, monkeypatch):
    # issue 22, item 14 (doctor printed such names raw; inspect's table and warnings must not either)
    # A terminal wide enough for the whole path: at rich's 80 columns a longer tmp_path (pytest-xdist's
    # popen-gw1/) wrapped the name inside its cell, and the name was then not found whole.
    monkeypatch.setenv("COLUMNS", "400")
    path = tmp_path / "x\x1b[2J.parquet"
    pq.write_table(pa.table({"index": list(range(50)), "v": [1.0] * 50}), path)  # "index" warns, naming the file
    assert main(["inspect", str(path), "--quiet", "--quality"]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out
    assert "x\\x1b[2J.parquet" in out


def test_a_misspelt_quality_label_is_refused_like_stats_refuses_it(tmp_path, capsys):
    """``inspect --quality --label clickd`` silently ignored the label and exited 0 (issue 23 item 10)."""
    import pyarrow as pa
    import pyarrow.csv as pacsv

    pacsv.write_csv(pa.table({"x": [1.0, 2.0, 3.0], "clicked": [0, 1, 0]}), tmp_path / "d.csv")
    code = main(["inspect", str(tmp_path / "d.csv"), "--quality", "--label", "clickd"], catch=True)
    err = capsys.readouterr().err
    assert code != 0 and "'clickd'" in err and "clicked" in err
