"""Training processes agree on their data before each epoch, or all stop with the same error.

In synchronous data-parallel training every process runs the same number of
steps: a process with one step fewer leaves the others waiting forever in
the next collective (measured with two JAX processes: both deadlocked, one
in ``process_allgather`` at the next epoch). So before each epoch Keras
begins, every process's :class:`~streamfeed.keras.KerasDataset` shares, with
the training framework's own collective, what must be equal: the data epoch,
the number of steps Keras will run, and a digest of where the epoch starts
(the state, whose fingerprint names the source files, the settings and, for
a sharded dataset, the lanes and the global batch — not the worker). Every
process compares the same gathered table, so every process raises the same
:class:`~streamfeed.errors.StateError`, naming each worker's values, instead
of one raising and the rest hanging.

Where there is no multi-process runtime (one process; TensorFlow and
PyTorch, whose multi-worker paths are not used by ``fit`` here) nothing is
exchanged. JAX is detected only if the program imported it and the Keras
backend is JAX.
"""

from __future__ import annotations

import hashlib
import json
import sys
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from ..errors import StateError, describe

Gather = Callable[[np.ndarray], np.ndarray]
"""Stacks each process's 1-D integer array (of one length on every process) into ``(processes, n)``, on every one."""


def state_digest(state: Mapping[str, Any]) -> int:
    """A 63-bit digest of a JSON-able state (where an epoch starts, with its fingerprint)."""
    text = json.dumps(state, sort_keys=True, default=str).encode()
    return int.from_bytes(hashlib.sha256(text).digest()[:8], "big") >> 1


def jax_gather() -> Gather | None:
    """JAX's ``process_allgather`` when this program runs several JAX processes under Keras's JAX backend."""
    jax = sys.modules.get("jax")
    if jax is None:
        return None
    import keras

    if keras.backend.backend() != "jax" or jax.process_count() <= 1:
        return None
    from jax.experimental import multihost_utils

    return lambda values: np.asarray(multihost_utils.process_allgather(values))


def process_index() -> int:
    """This process's index in a multi-process JAX job (0 when there is none)."""
    jax = sys.modules.get("jax")
    return 0 if jax is None else int(jax.process_index())


def check_workers_agree(epoch: int, steps: int, start: Mapping[str, Any], gather: Gather | None) -> None:
    """Raises the same StateError on every process when their epoch, steps or start differ."""
    if gather is None:
        return
    mine = np.array([epoch, steps, state_digest(start)], dtype=np.int64)
    table = np.asarray(gather(mine)).reshape(-1, 3)
    if (table == table[0]).all():
        return
    differing, found = disagreement(table.tolist())
    raise StateError(
        describe(
            f"The training processes disagree on their data before an epoch ({', '.join(differing)})",
            expected="every process at the same data epoch, with the same number of steps, from the same state",
            found=found,
            fix="give every worker the same files and settings with .shard(index, count) (equal steps by "
            "construction), and restore the same saved state on all of them",
        )
    )


def disagreement(table: Sequence[Sequence[int]]) -> tuple[list[str], str]:
    """What differs, and each worker's values of it, from the gathered ``[epoch, steps, start digest]`` rows."""
    names = ("data epoch", "steps", "start")
    differing = [name for column, name in enumerate(names) if len({row[column] for row in table}) > 1]

    def shown(row: Sequence[int], name: str) -> str:
        value = row[names.index(name)]
        return f"{name} {value:x}" if name == "start" else f"{name} {value}"

    found = "; ".join(
        f"worker {worker}: " + ", ".join(shown(row, name) for name in differing) for worker, row in enumerate(table)
    )
    return differing, found


def rows_exchange(gather: Gather | None) -> Callable[[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]] | None:
    """Every process's ``(uint64 hashes, float64 losses)``, concatenated in process order (the hard-example
    scores each process measured); None without several processes.

    Three collectives: the lengths, then both arrays padded to the longest. The values travel as int32
    pairs (``view``): JAX without ``jax_enable_x64`` would cut int64 to int32.
    """
    if gather is None:
        return None

    def exchange(hashes: np.ndarray, losses: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        counts = np.asarray(gather(np.array([len(hashes)], dtype=np.int32))).reshape(-1).astype(np.int64)
        longest = int(counts.max())
        if longest == 0:
            return np.empty(0, np.uint64), np.empty(0, np.float64)

        def everyone(values: np.ndarray) -> list[np.ndarray]:
            padded = np.zeros(longest, dtype=values.dtype)
            padded[: len(values)] = values
            table = np.asarray(gather(padded.view(np.int32)), dtype=np.int32).reshape(len(counts), 2 * longest)
            return [row.view(values.dtype)[:count] for row, count in zip(table, counts.tolist())]

        all_hashes = everyone(np.ascontiguousarray(hashes, dtype=np.uint64))
        all_losses = everyone(np.ascontiguousarray(losses, dtype=np.float64))
        return np.concatenate(all_hashes), np.concatenate(all_losses)

    return exchange
