"""The command line, called in-process through ``main(argv)``."""

import json

import pytest

from streamfeed.cli import main


def test_demo_trains_on_generated_data_and_reports(tmp_path, capsys):
    code = main(
        [
            "demo",
            "--rows",
            "6000",
            "--features",
            "4",
            "--epochs",
            "2",
            "--batch-size",
            "512",
            "--data-dir",
            str(tmp_path),
            "--json",
            "--quiet",
        ]
    )
    assert code == 0
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert result["rows"] == 6000 and result["epochs"] == 2
    assert result["bytes_on_disk"] > 6000 * 4 * 4 * 0.5  # float32 features, compressed at most 2x
    assert result["rows_per_second"] > 0 and result["peak_rss_bytes"] > 0
    assert 0.0 <= result["input_wait_share"] <= 1.0
    # the label is a noisy linear function of the features: two epochs must learn something
    assert result["final_loss"] < 4.0


def test_demo_reuses_cached_data(tmp_path, capsys):
    args = [
        "demo",
        "--rows",
        "3000",
        "--features",
        "3",
        "--epochs",
        "1",
        "--data-dir",
        str(tmp_path),
        "--json",
        "--quiet",
    ]
    main(args)
    files = sorted(p.stat().st_mtime_ns for p in tmp_path.rglob("*.parquet"))
    main(args)
    assert sorted(p.stat().st_mtime_ns for p in tmp_path.rglob("*.parquet")) == files


def test_unknown_command_exits_with_usage():
    with pytest.raises(SystemExit) as exc:
        main(["nope"])
    assert exc.value.code == 2


def test_from_python_a_failure_raises_unless_caught(tmp_path, capsys):
    from streamfeed.errors import NotFoundError

    missing = str(tmp_path / "missing.parquet")
    with pytest.raises(NotFoundError):
        main(["inspect", missing])
    assert main(["inspect", missing], catch=True) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and missing in err[0] and err[1].startswith("streamfeed inspect: fix:")


def test_version_is_printed(capsys):
    import streamfeed

    with pytest.raises(SystemExit) as excinfo:
        main(["--version"])
    assert excinfo.value.code == 0
    assert capsys.readouterr().out.strip() == f"streamfeed {streamfeed.__version__}"


def test_a_misspelt_flag_gets_the_near_one(tmp_path, capsys):
    with pytest.raises(SystemExit) as excinfo:
        main(["inspect", str(tmp_path), "--qualty"])
    assert excinfo.value.code == 2
    err = capsys.readouterr().err
    assert "--qualty" in err and "did you mean --quality?" in err


def test_every_demo_and_bench_flag_says_what_it_is(capsys):
    for command in ("demo", "bench"):
        with pytest.raises(SystemExit):
            main([command, "--help"])
        text = capsys.readouterr().out
        for flag in {"demo": ("--epochs", "--batch-size"), "bench": ("--read-threads",)}[command]:
            options = text.split("options:", 1)[1]
            entry = options.split(f"\n  {flag}", 1)[1].split("\n  -", 1)[0]  # its line(s) in the options list
            assert len(entry.split()) > 2, (command, flag, entry)  # a help text, not just the metavar
