"""Every thread an epoch starts ends with it: on close, on error, at the end, on Ctrl-C."""

from __future__ import annotations

import select
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import streamfeed as sf
from streamfeed.errors import DataError, UserFunctionError

HANG_BOUND_SECONDS = 60  # only to turn a hang into a failure; no test measures time


@pytest.fixture
def dataset(mixed_dir) -> sf.Dataset:
    """1800 rows in 19 row groups: far more batches than the prefetch queue holds."""
    return sf.read_parquet(mixed_dir).shuffle(1, window=2).batch(16).prefetch(2)


def test_close_after_one_batch_ends_every_thread(dataset, live_threads):
    it = dataset.iter_epoch(0)
    next(it)
    assert "streamfeed-epoch" in live_threads()  # the producer is blocked on the full queue
    it.close()
    assert live_threads() == []
    it.close()  # closing twice is harmless
    with pytest.raises(StopIteration):
        next(it)


def test_break_out_of_a_with_block_ends_every_thread(dataset, live_threads):
    with dataset.iter_epoch(0) as it:
        for number, _ in enumerate(it):
            if number == 3:
                break
    assert live_threads() == []


def test_exception_inside_a_with_block_ends_every_thread(dataset, live_threads):
    with pytest.raises(RuntimeError, match="user code failed"):
        with dataset.iter_epoch(0) as it:
            next(it)
            raise RuntimeError("user code failed")
    assert live_threads() == []


@pytest.mark.parametrize("closing", ["exhausted", "exhausted-in-with"])
def test_iterating_to_the_end_ends_every_thread(dataset, live_threads, closing):
    if closing == "exhausted":
        rows = sum(len(batch["id"]) for batch in dataset.iter_epoch(0))  # no close() at all
    else:
        with dataset.iter_epoch(1) as it:
            rows = sum(len(batch["id"]) for batch in it)
    assert rows == 1800
    assert live_threads() == []


def test_error_in_the_data_mid_epoch_ends_every_thread(tmp_path, live_threads):
    values = pa.array([None if i == 700 else float(i) for i in range(1000)], pa.float64())
    path = tmp_path / "late-null.parquet"
    pq.write_table(pa.table({"id": np.arange(1000), "x": values}), path, row_group_size=50)
    ds = sf.read_parquet(path).batch(10).prefetch(2)
    seen = 0
    with pytest.raises(DataError) as excinfo:
        with ds.iter_epoch(0) as it:
            for batch in it:
                seen += len(batch["id"])
    assert str(path) in str(excinfo.value) and "row 700 " in str(excinfo.value)
    assert seen == 700  # every batch before the bad row group came out first
    assert live_threads() == []


def test_error_in_a_map_function_ends_every_thread(mixed_dir, live_threads):
    def explode(columns):
        if (columns["id"] == 1234).any():
            raise ZeroDivisionError("row 1234 is cursed")
        return columns

    base = sf.read_parquet(mixed_dir).map(explode).batch(16).prefetch(2)
    with pytest.raises(UserFunctionError, match="cursed") as excinfo:  # naming explode and the fragment
        with base.iter_epoch(0) as it:
            for _ in it:
                pass
    assert isinstance(excinfo.value.__cause__, ZeroDivisionError)
    assert live_threads() == []


def test_close_while_reads_are_slow_ends_every_thread(mixed_dir, live_threads):
    def slow(columns):
        time.sleep(0.05)
        return columns

    pipeline = sf.read_parquet(mixed_dir).map(slow).batch(16).prefetch(1)
    with pipeline.iter_epoch(0) as it:
        next(it)
    assert live_threads() == []


# --------------------------------------------------------------------- Ctrl-C
_CHILD = textwrap.dedent(
    """
    import json, sys, threading, time
    import streamfeed as sf

    path, mode = sys.argv[1], sys.argv[2]

    def slow(columns):
        time.sleep(0.2)  # the consumer ends up waiting on the queue
        return columns

    def main():
        ds = sf.read_parquet(path)
        ds = (ds.map(slow) if "waiting" in mode else ds).shuffle(0, window=2).batch(8).prefetch(2)
        epoch = 0
        while True:
            if mode.startswith("bare-loop"):  # no name holds the iterator: dropping it must end its threads
                for batch in ds.iter_epoch(epoch):
                    mark_ready()
                    if mode == "bare-loop-busy":
                        time.sleep(0.01)  # Ctrl-C lands in the loop's body, outside the iterator
            elif mode == "consumer-waiting-no-with":  # the iterator must close itself when interrupted
                consume(ds.iter_epoch(epoch))
            else:
                with ds.iter_epoch(epoch) as it:
                    consume(it)
            epoch += 1

    def mark_ready():
        if not hasattr(main, "ready"):
            main.ready = True
            print("ready", flush=True)

    def consume(it):
        for batch in it:
            mark_ready()
            if mode == "consumer-busy":
                time.sleep(0.01)

    try:
        main()
    except KeyboardInterrupt:
        alive = [t.name for t in threading.enumerate() if t.name.startswith("streamfeed-") and t.is_alive()]
        print("threads " + json.dumps(alive), flush=True)
        raise
    """
)


@pytest.mark.parametrize(
    "mode", ["consumer-waiting", "consumer-waiting-no-with", "consumer-busy", "bare-loop-waiting", "bare-loop-busy"]
)
def test_sigint_while_iterating_exits_with_keyboard_interrupt(pyarrow_file, tmp_path, mode):
    script = tmp_path / "child.py"
    script.write_text(_CHILD)
    child = subprocess.Popen(
        [sys.executable, str(script), str(pyarrow_file), mode],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        ready, _, _ = select.select([child.stdout], [], [], HANG_BOUND_SECONDS)
        assert ready, "the child never started iterating"
        assert child.stdout.readline().strip() == "ready"
        if "waiting" in mode:
            # Let the child drain the ready batches and block on the queue: sent at once, the signal
            # can land in its print of "ready", outside the iterator (seen once under CI load).
            time.sleep(0.5)
        child.send_signal(signal.SIGINT)
        stdout, stderr = child.communicate(timeout=HANG_BOUND_SECONDS)
    except subprocess.TimeoutExpired:
        child.kill()
        child.communicate()
        pytest.fail(f"the child did not exit after SIGINT ({mode})")
    finally:
        if child.poll() is None:
            child.kill()
            child.communicate()
    assert child.returncode != 0
    assert "KeyboardInterrupt" in stderr, stderr
    assert "threads []" in stdout, f"threads alive after Ctrl-C: {stdout!r}"
