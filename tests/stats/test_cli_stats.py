"""``streamfeed stats`` in-process through ``cli.main``."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from streamfeed.cli import main
from streamfeed.stats import Stats


def test_stats_command_writes_json_and_prints_a_summary(tmp_path, capsys):
    n = 500
    table = pa.table({"f0": np.arange(n, dtype=np.float32), "code": np.arange(n) % 4, "y": np.arange(n) % 2})
    pq.write_table(table, tmp_path / "d.parquet", row_group_size=128)
    out = tmp_path / "stats.json"
    assert (
        main(
            [
                "stats",
                str(tmp_path / "d.parquet"),
                "-o",
                str(out),
                "--label",
                "y",
                "--categorical",
                "code",
                "--max-vocabulary",
                "3",
            ]
        )
        == 0
    )
    printed = capsys.readouterr().out
    assert "500 rows of parquet" in printed and "f0" in printed and "categorical" in printed
    data = json.loads(out.read_text())
    assert data["version"] == 1 and data["label"] == "y"
    stats = Stats.load(out)
    assert stats["f0"].mean == np.arange(n).mean() and stats["f0"].max == n - 1
    assert stats.label_counts == {0: 250, 1: 250}
    assert stats["code"].vocabulary_exact is False  # 4 codes, cap 3


def test_stats_command_quiet_prints_nothing(tmp_path, capsys):
    np.save(tmp_path / "x.npy", np.arange(10.0))
    assert main(["stats", str(tmp_path / "x.npy"), "-o", str(tmp_path / "s.json"), "--quiet"]) == 0
    assert capsys.readouterr().out == ""
    assert Stats.load(tmp_path / "s.json").rows == 10


def test_cli_passes_quantile_and_distinct_choices(tmp_path):
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    from streamfeed.cli import main
    from streamfeed.stats import Stats

    pq.write_table(pa.table({"x": np.linspace(0, 1, 500), "k": np.arange(500) % 7}), tmp_path / "d.parquet")
    out = tmp_path / "s.json"
    assert (
        main(
            [
                "stats",
                str(tmp_path / "d.parquet"),
                "-o",
                str(out),
                "--distinct",
                "all",
                "--quantiles",
                "none",
                "--quiet",
            ]
        )
        == 0
    )
    stats = Stats.load(out)
    assert stats["x"].distinct is not None and abs(stats["x"].distinct - 500) < 50  # floats only with --distinct all
    assert stats["x"].mean == np.linspace(0, 1, 500).mean()
