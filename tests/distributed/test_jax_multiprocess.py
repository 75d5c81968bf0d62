"""Multi-process JAX training on loopback: real processes, gloo collectives, Keras DataParallel.

The files reproduce the deadlock of issue 12: three files of 1000-row row
groups (5003 rows); dealing whole row groups gave one worker 3000 rows
(47 steps) and the other 2003 (32), and both processes hung. Every job here
runs under a deadline; a job that does not finish is killed by pid and the
test fails naming the hang.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from _jobs import free_ports, run_workers

pytestmark = pytest.mark.backend

WORKER = Path(__file__).parent / "_jax_worker.py"
ROWS = 5003
GLOBAL_BATCH = 128
CRASH_CODE = 17
DEADLINE = 240


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> list[str]:
    root = tmp_path_factory.mktemp("mp")
    rng = np.random.default_rng(0)
    paths, start = [], 0
    for number, rows in enumerate((2000, 2000, 1003)):
        ids = np.arange(start, start + rows, dtype="int64")
        a, b = rng.standard_normal(rows).astype("float32"), rng.standard_normal(rows).astype("float32")
        table = pa.table({"id": ids, "a": a, "b": b, "y": (2 * a - b).astype("float32")})
        path = root / f"part-{number}.parquet"
        pq.write_table(table, path, row_group_size=1000)
        paths.append(str(path))
        start += rows
    return paths


def run_job(count: int, settings: dict, out: Path, *, per_worker: dict | None = None) -> list[tuple[int, dict]]:
    """Runs ``count`` worker processes to the end; returns (exit code, result) per worker."""
    port = free_ports(1)[0]

    def arguments(index: int) -> list[str]:
        mine = {**settings, **(per_worker or {}).get(index, {}), "out": str(out)}
        return [str(index), str(count), str(port), json.dumps(mine)]

    env = {"TF_CPP_MIN_LOG_LEVEL": "3", "XLA_FLAGS": ""}
    return run_workers(WORKER, count, arguments, out, deadline=DEADLINE, env=env)


def test_two_processes_on_uneven_row_groups_train_equal_steps_exactly_once(files, tmp_path):
    results = run_job(2, {"files": files, "global_batch": GLOBAL_BATCH, "epochs": 2}, tmp_path / "job")
    assert [code for code, _ in results] == [0, 0], results
    (_, first), (_, second) = results
    steps = -(-(ROWS // 2) // (GLOBAL_BATCH // 2))  # 2501 rows per lane, 64 per step: 40 steps, last one short
    assert first["steps"] == second["steps"] == [steps, steps]
    for epoch in range(2):
        ours, theirs = set(first["ids"][epoch]), set(second["ids"][epoch])
        assert not ours & theirs
        assert len(ours) + len(theirs) == len(first["ids"][epoch]) + len(second["ids"][epoch]) == ROWS - 1
        assert ours | theirs <= set(range(ROWS))  # one row (5003 % 2) is left out of the epoch, reported
    assert first["ids"][0] != first["ids"][1]  # reshuffled per epoch
    for mine, other in zip(first["weights"], second["weights"]):
        np.testing.assert_array_equal(np.asarray(mine), np.asarray(other))


def test_workers_that_disagree_all_stop_with_the_same_error_instead_of_hanging(files, tmp_path):
    """Worker 1 shuffles with another seed: its epoch starts elsewhere. Both raise, neither waits."""
    settings = {"files": files, "global_batch": GLOBAL_BATCH}
    results = run_job(2, settings, tmp_path / "job", per_worker={1: {"seed": 8}})
    assert [code for code, _ in results] == [3, 3], results
    (_, first), (_, second) = results
    assert first["error"] == second["error"] == "StateError"
    assert first["message"] == second["message"]
    assert "disagree" in first["message"] and "start" in first["message"]


def _global_order(per_worker: list[list[int]], batch: int) -> list[int]:
    """Global batches: step t of every worker, in worker order."""
    steps = [[ids[i : i + batch] for i in range(0, len(ids), batch)] for ids in per_worker]
    return [row for step in zip(*steps) for part in step for row in part]


@pytest.fixture(scope="module")
def whole_order(files, tmp_path_factory) -> list[int]:
    """The ids of epoch 0 as an uninterrupted one-process job with lanes=4 serves them (the global order)."""
    out = tmp_path_factory.mktemp("whole") / "job"
    whole = run_job(1, {"files": files, "global_batch": GLOBAL_BATCH, "lanes": 4}, out)
    assert whole[0][0] == 0, whole
    return whole[0][1]["ids"][0]


@pytest.fixture(scope="module")
def crashed(files, tmp_path_factory) -> Path:
    """A 2-process job (lanes=4) killed after 10 steps, each process having saved its state and weights."""
    root = tmp_path_factory.mktemp("crash")
    settings = {"files": files, "global_batch": GLOBAL_BATCH, "lanes": 4, "crash_after": 10}
    results = run_job(2, {**settings, "save": str(root / "saved")}, root / "job")
    assert [code for code, _ in results] == [CRASH_CODE, CRASH_CODE], results
    return root


@pytest.mark.parametrize("resumed_with", [1, 4])
def test_a_two_process_job_resumes_on_another_worker_count_exactly(files, whole_order, crashed, tmp_path, resumed_with):
    """Resume the crashed 2-process job on 1 or 4 processes (lanes=4, the same global batch).

    The rows served before the crash and after the resume are every row of
    the epoch exactly once, and after the resume they come in the same global
    order an uninterrupted run gives — for any worker count.
    """
    saved = [json.loads(Path(f"{crashed / 'saved'}.{index}").read_text()) for index in range(2)]
    assert saved[0]["state"] == saved[1]["state"]  # a position in the global order, not a worker's
    before = _global_order([saved[0]["ids"], saved[1]["ids"]], GLOBAL_BATCH // 2)
    assert before == whole_order[: len(before)] and len(before) == 10 * GLOBAL_BATCH

    common = {"files": files, "global_batch": GLOBAL_BATCH, "lanes": 4}
    resumed = run_job(resumed_with, {**common, "resume": f"{crashed / 'saved'}.0"}, tmp_path / "resumed")
    assert [code for code, _ in resumed] == [0] * resumed_with, resumed
    after = _global_order([result["ids"][0] for _, result in resumed], GLOBAL_BATCH // resumed_with)
    assert before + after == whole_order
    assert sorted(before + after) == sorted(set(whole_order)) and len(whole_order) == ROWS - ROWS % 4


def test_a_checkpointed_job_saves_once_and_resumes_on_another_worker_count(files, whole_order, tmp_path):
    """DataCheckpoint in every process: one state and one weights file (process 0), resumed by 4 workers.

    The 2-process job is killed after 15 steps (its last save was at step
    10); the 4-process job restores that save and finishes the epoch. Rows
    served after the save (steps 11-15) are served again, once, as an
    uninterrupted run serves them.
    """
    common = {"files": files, "global_batch": GLOBAL_BATCH, "lanes": 4, "checkpoint": str(tmp_path / "ckpt")}
    crashed = run_job(2, {**common, "every": 10, "crash_after": 15}, tmp_path / "crash")
    assert [code for code, _ in crashed] == [CRASH_CODE, CRASH_CODE], crashed
    written = sorted(p.name for p in (tmp_path / "ckpt").iterdir() if p.name != ".data_checkpoint.lock")  # killed
    assert written == ["data_state.json", "model-000001.weights.h5"], written
    state = json.loads((tmp_path / "ckpt" / "data_state.json").read_text())
    assert state["data"]["batches"] == 10 and state["keras_epoch"] == 0

    resumed = run_job(4, common, tmp_path / "resumed")
    assert [code for code, _ in resumed] == [0, 0, 0, 0], resumed
    after = _global_order([result["ids"][0] for _, result in resumed], GLOBAL_BATCH // 4)
    assert after == whole_order[10 * GLOBAL_BATCH :]
    weights = [result["weights"] for _, result in resumed]
    assert all(w == weights[0] for w in weights)


def test_a_worker_whose_data_fails_stops_the_job_with_the_error_instead_of_a_hang(files, tmp_path):
    """Worker 1's lane holds a corrupt row group (unshuffled: rows 2501-5001 include part-2).

    It raises naming the file and row group and exits (JAX's shutdown barrier, still
    missing worker 0, aborts it after ``shutdown_timeout_seconds``); worker 0, blocked in the
    step's collective, is stopped by JAX's heartbeat timeout (10 s here, 100 s by
    default) rather than waiting forever. With the default 300 s
    ``shutdown_timeout_seconds`` the failing worker itself waited 5 minutes at exit
    (measured): multi-process jobs should lower it, as this one does.
    """
    broken = tmp_path / "broken"
    broken.mkdir()
    paths = []
    for path in files:
        raw = bytearray(Path(path).read_bytes())
        if path.endswith("part-2.parquet"):
            raw[200:400] = b"\xff" * 200  # inside the first column chunk's pages; the footer stays whole
        (broken / Path(path).name).write_bytes(bytes(raw))
        paths.append(str(broken / Path(path).name))
    settings = {"files": paths, "global_batch": GLOBAL_BATCH, "shuffle": False, "heartbeat": 10, "shutdown": 10}
    results = run_job(2, settings, tmp_path / "job")
    (first_code, _), (second_code, second) = results
    # It raised (the error is its record); at exit JAX's shutdown barrier, missing worker 0, aborts it.
    assert second_code != 0 and second["error"] == "CorruptFileError", results
    assert "part-2.parquet" in second["message"] and "row group 0" in second["message"]
    assert first_code != 0  # stopped by the runtime, not finished and not waiting


def test_hard_example_scores_are_shared_by_every_process_and_the_draw_is_the_same_for_any_worker_count(files, tmp_path):
    """Each process scores the rows it trains; the table every process draws from holds all of them.

    Two epochs of 4000 drawn rows (lanes=4): after epoch 0 (every row once), the frozen table holds
    every row's loss on both processes alike, and epoch 1, drawn from it, has the same global order
    on two processes as on one (the losses come from the same weights, whichever process measured).
    """
    settings = {"files": files, "global_batch": GLOBAL_BATCH, "lanes": 4, "epochs": 2, "hard": 4000}
    two = run_job(2, settings, tmp_path / "two")
    one = run_job(1, settings, tmp_path / "one")
    assert [code for code, _ in two] == [0, 0] and one[0][0] == 0, (two, one)
    (_, first), (_, second) = two
    assert first["table"]["hashes"] == second["table"]["hashes"]
    assert first["table"]["losses"] == second["table"]["losses"]
    assert first["table"]["epoch"] == 2 and len(first["table"]["hashes"]) > 4000  # two epochs of 4000 distinct
    for epoch in range(2):
        order = _global_order([first["ids"][epoch], second["ids"][epoch]], GLOBAL_BATCH // 2)
        assert len(order) == 4000
        assert order == one[0][1]["ids"][epoch], epoch
    np.testing.assert_allclose(one[0][1]["table"]["losses"], first["table"]["losses"], rtol=1e-4, atol=1e-5)
