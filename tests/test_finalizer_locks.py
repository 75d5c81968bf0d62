"""A finalizer never waits for a thread: it may run while its thread holds a lock that thread needs.

The garbage collector runs finalizers on whatever thread allocates when a
collection is due, inside whatever that thread is doing. CI hung (the
Keras JAX driver, 1 run in 5) with the main thread inside
``ThreadPoolExecutor.submit``, which holds ``concurrent.futures``' global
lock, collecting a dropped epoch iterator whose finalizer joined the
producer, while the producer waited for that same lock in its own
``submit``. A finalizer now only tells the producer to stop; an explicit
``close()`` still waits for it.

The hazard is reproduced exactly, in a subprocess (a deadlock there must
not take this process's executor lock with it): a thread holds the
global lock, lets a new iterator's producer block on it, drops the
iterator in a reference cycle and collects.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

HANG_BOUND_SECONDS = 60  # only to turn a hang into a failure; no test measures time

SCRIPT = textwrap.dedent(
    """
    import concurrent.futures.thread as pool_module
    import gc, sys, threading, time
    import streamfeed as sf

    dataset = sf.read_parquet(sys.argv[1]).shuffle(1, window=2).batch(16)
    {make}

    def collect_while_holding_the_lock():
        with pool_module._global_shutdown_lock:  # what submit() holds while it allocates
            cycle = [make()]
            cycle.append(cycle)  # only the cyclic collector frees it, wherever it runs
            time.sleep(0.5)  # the producer reaches submit() and waits for the lock
            del cycle
            gc.collect()  # the finalizer runs here, with the lock held

    holder = threading.Thread(target=collect_while_holding_the_lock)
    holder.start()
    holder.join()
    baseline = time.monotonic()
    while any(t.name.startswith("streamfeed-") for t in threading.enumerate()):
        if time.monotonic() - baseline > 30:
            print("THREADS LEFT", [t.name for t in threading.enumerate()])
            sys.exit(2)
        time.sleep(0.01)
    print("COLLECTED")
    """
)


def _run(mixed_dir, make: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", SCRIPT.format(make=make), str(mixed_dir)],
        capture_output=True,
        text=True,
        timeout=HANG_BOUND_SECONDS,
    )


def test_a_dropped_iterator_collected_under_the_executor_lock_does_not_deadlock(mixed_dir):
    proc = _run(mixed_dir, "def make():\n        return dataset.iter_epoch(0)")
    assert proc.returncode == 0 and "COLLECTED" in proc.stdout, proc.stdout + proc.stderr[-3000:]


def test_an_early_epoch_closed_when_keras_iterator_is_collected_under_the_lock_does_not_deadlock(mixed_dir):
    # The adapter closes an epoch started early for Keras's epoch iterator when that iterator is
    # collected (keras/adapter._Driver). Keras's objects live in reference cycles, so that finalizer
    # runs inside collections too. Reached through the adapter's internals: only a ``fit`` stopped
    # early leaves such an epoch, and when fit's frame drops the iterator is Keras's to decide.
    make = textwrap.dedent(
        """
        import os
        os.environ["KERAS_BACKEND"] = "numpy"
        adapter = dataset.to_keras(features=["x"], label="label")

        class KerasEpochIterator:
            pass

        first = dataset.iter_epoch(0)
        for _ in first:  # read to its end outside the lock: its threads are gone
            pass

        def make():
            iterator = KerasEpochIterator()
            adapter._follow(iterator)  # Keras's iterator begins the epoch...
            adapter._successor = first.successor(dataset.initial_state(1))  # ...and the next one starts early
            return iterator
        """
    ).strip()
    proc = _run(mixed_dir, make)
    assert proc.returncode == 0 and "COLLECTED" in proc.stdout, proc.stdout + proc.stderr[-3000:]
