"""The pipeline's share of the CPU: per-thread accounting and ``bench``'s report of it.

A pipeline that takes the cores from the model never makes it wait, so the
input-wait share cannot show it (issue 28: 0.0-0.4 % wait at 0.37-0.47x the
model's in-memory rate on 2 cores). What shows it is the CPU time of the
pipeline's own threads (those streamfeed starts, named ``streamfeed-...``).
No timed assertions: threads spin for a while and the tests compare whose
CPU it was, with margins far above any clock's resolution.
"""

from __future__ import annotations

import json
import threading
import time

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import streamfeed as sf
from streamfeed.cli import main

SPIN_SECONDS = 0.4


def _spin(stop: threading.Event) -> None:
    deadline = time.thread_time() + SPIN_SECONDS  # CPU, not wall: the same work on a loaded machine
    while time.thread_time() < deadline and not stop.is_set():
        pass


class Spinner:
    """A named thread that spins for SPIN_SECONDS of CPU when told, then waits to be let go."""

    def __init__(self, name: str) -> None:
        self.go, self.spun, self.stop = threading.Event(), threading.Event(), threading.Event()
        self.thread = threading.Thread(target=self._run, name=name)
        self.thread.start()

    def _run(self) -> None:
        self.go.wait()
        _spin(self.stop)
        self.spun.set()
        self.stop.wait()

    def spin(self) -> None:
        self.go.set()
        assert self.spun.wait(timeout=120)

    def end(self) -> None:
        self.go.set()
        self.stop.set()
        self.thread.join()


def test_a_busy_streamfeed_thread_counts_as_the_pipeline_and_another_does_not():
    from streamfeed.runtime.cpu import PipelineCPU

    ours, theirs = Spinner("streamfeed-read_0"), Spinner("someone-else")  # a read pool's name: prefix_index
    try:
        tracker = PipelineCPU()
        before = tracker.sample()
        assert before is not None, "Linux has /proc/self/task"
        ours.spin()
        middle = tracker.sample()
        theirs.spin()
        after = tracker.sample()
    finally:
        ours.end()
        theirs.end()
    assert middle is not None and after is not None
    # the named thread's CPU (0.4 s of it) is the pipeline's; the other's (as much) is only the process's
    assert middle.pipeline_seconds - before.pipeline_seconds > SPIN_SECONDS / 2, (before, middle)
    assert after.pipeline_seconds - middle.pipeline_seconds < SPIN_SECONDS / 4, (middle, after)
    assert after.process_seconds - middle.process_seconds > SPIN_SECONDS / 2, (middle, after)
    assert after.process_seconds >= after.pipeline_seconds


def test_thread_cpu_names_each_live_thread():
    from streamfeed.runtime.cpu import thread_cpu

    stop = threading.Event()
    thread = threading.Thread(target=stop.wait, name="streamfeed-epoch")
    thread.start()
    try:
        threads = thread_cpu()
        assert threads is not None
        names = {name for name, _ in threads.values()}
        assert "streamfeed-epoch" in names and threading.main_thread().name in names
    finally:
        stop.set()
        thread.join()


def test_a_thread_that_ended_keeps_its_cpu_in_the_pipelines_total():
    """Also the CPU it spent after the last sample that saw it: a read pool spins, then ends with its epoch."""
    from streamfeed.runtime.cpu import PipelineCPU

    tracker = PipelineCPU()
    ours = Spinner("streamfeed-units")
    try:
        seen = tracker.sample()  # alive, idle so far
        ours.spin()
    finally:
        ours.end()
    gone = tracker.sample()  # it spun and ended after the last sample that saw it
    assert seen is not None and gone is not None
    assert gone.pipeline_seconds - seen.pipeline_seconds > SPIN_SECONDS / 2, (seen, gone)
    assert tracker.sample().pipeline_seconds >= gone.pipeline_seconds  # never goes down


ROWS, ROW_GROUP = 20_000, 1_000


@pytest.fixture
def parquet_path(tmp_path):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(ROWS, 2)).astype("float32")
    path = tmp_path / "data.parquet"
    pq.write_table(pa.table({"f0": x[:, 0], "f1": x[:, 1]}), path, row_group_size=ROW_GROUP)
    return path


def burn(columns):
    """A per-fragment op that spends CPU in a read thread (not sleeping: a sleeping op costs no CPU)."""
    deadline = time.thread_time() + 0.02
    while time.thread_time() < deadline:
        pass
    return columns


def test_bench_reports_the_pipelines_share_of_the_cores(parquet_path):
    report = sf.bench(sf.read_parquet(parquet_path).map(burn).batch(500), seconds=0, max_batches=30)
    assert report.pipeline_cpu_seconds is not None and report.pipeline_cpu_seconds > 0.2, report.to_dict()
    assert 0 < report.pipeline_cpu_share <= 1.0 + 1e-6
    assert report.process_cpu_share >= report.pipeline_cpu_share
    rendered = report.render()
    from rich.console import Console

    console = Console(width=130, record=True)
    console.print(rendered)
    assert f"pipeline's threads kept {report.pipeline_cpu_share:.0%} of the {report.cpu_count} cores busy" in (
        console.export_text()
    )


def test_bench_json_reports_the_pipelines_share_of_the_cores(parquet_path, capsys):
    # a bound, not a timed assertion: two seconds of reading and decoding in the read threads, epoch after epoch
    assert main(["bench", str(parquet_path), "--json", "--batch-size", "500", "--seconds", "2", "--quiet"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["pipeline_cpu_share"] is not None and report["pipeline_cpu_share"] > 0, report
    assert report["pipeline_cpu_seconds"] > 0 and report["process_cpu_share"] >= report["pipeline_cpu_share"]


def test_doctors_pipeline_finding_says_the_share_of_the_cores_the_pipeline_takes(parquet_path):
    from streamfeed.commands.doctor_pipeline import tuning_finding

    finding = tuning_finding(sf.read_parquet(parquet_path).map(burn).with_options(read_threads=1).batch(500), 1.0)
    share = finding.measured["pipeline_cpu_share"]
    assert share is not None and share > 0, finding.measured
    assert finding.measured["process_cpu_share"] >= share
    assert f"its threads keep {share:.0%} of the" in finding.summary and "cores a model" in finding.summary
