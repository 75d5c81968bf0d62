"""The iterator state: a small JSON dict of positions, never data.

``{"version": 1, "epoch": e, "unit": u, "offset": o, "fingerprint": {...}}``
says that row ``o`` of read unit ``u`` of epoch ``e`` is the next row to
emit. The fingerprint names everything that fixes the row stream (files,
columns, seed, window, batch size, shard, sampler), so a state is restored
only into the pipeline that produced it.

A state may come from a file a person edited or a stranger sent: every
field is type- and range-checked before it is used, and a bad one is
refused with a :class:`~streamfeed.errors.StateError` naming the field.

A sharded dataset's state is a position in the *global* order instead:
``{"version": 1, "epoch": e, "batches": k, "fingerprint": {...}}`` says
that the first ``k`` global batches of epoch ``e`` were served. Its
fingerprint names the lanes, the global batch and the remainder policy but
not the worker index or count, so any worker of a job with another worker
count (dividing the lanes, with the same global batch) can restore it.

A dataset batched by length (``batch(bucket=...)``) saves
``{"version": 1, "epoch": e, "row": r, "waiting": [...], "served": [...],
"fingerprint": {...}}``: ``r`` rows of the epoch's order routed, the
numbers of those still waiting in a bucket, and each bucket's batches
served (``runtime/bucketing.py`` says how it resumes).
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, NoReturn, Sequence

from .core import Position
from .errors import StateError, describe
from .plan import EpochPlan

STATE_VERSION = 1
_FIX = "restore a state saved by this same pipeline (same files, seed, shuffle window, batch size and shard)"


def make_state(epoch: int, position: Position, fingerprint: Mapping[str, Any]) -> dict:
    """The JSON-able state for ``position`` in ``epoch``."""
    return {"version": STATE_VERSION, "epoch": int(epoch), **position.to_dict(), "fingerprint": dict(fingerprint)}


def parse_state(
    state: Any, fingerprint: Mapping[str, Any], plan_of: Callable[[int], EpochPlan]
) -> tuple[int, Position]:
    """Checks ``state`` against this pipeline; returns ``(epoch, position)``.

    ``plan_of(epoch)`` gives the epoch's plan, against which the position is
    range-checked: ``0 <= unit <= units`` and ``0 <= offset <= rows of the
    unit`` (``offset == 0`` at the end of the epoch).
    """
    if not isinstance(state, Mapping):
        _refuse("state", "a dict", type(state).__name__)
    if state.get("version") != STATE_VERSION:
        _refuse("version", str(STATE_VERSION), repr(state.get("version")))
    saved = state.get("fingerprint")
    if "batches" in state and isinstance(saved, Mapping) and isinstance(saved.get("shard"), Mapping):
        lanes, global_batch = saved["shard"].get("lanes"), saved["shard"].get("global_batch")
        raise StateError(
            describe(
                "The saved state is a sharded job's position in the global order, this pipeline is not sharded",
                expected="a state saved by an unsharded pipeline",
                found=f"a state of a job dealt into lanes={lanes!r} with {global_batch!r} rows per step",
                fix=f"restore it with .shard(index, count, lanes={lanes!r}).batch(global batch / count)",
            )
        )
    epoch, unit, offset = (_count(state, name) for name in ("epoch", "unit", "offset"))
    theirs = state.get("fingerprint")
    if not isinstance(theirs, Mapping):
        _refuse("fingerprint", "a dict", type(theirs).__name__)
    if theirs != fingerprint:
        _differ(theirs, fingerprint)
    plan = plan_of(epoch)
    units = len(plan.units)
    if unit > units:
        _refuse("unit", f"a read unit in 0..{units} of epoch {epoch}", str(unit))
    limit = plan.unit_rows[unit] if unit < units else 0
    if offset > limit:
        _refuse("offset", f"a row in 0..{limit} of read unit {unit}", str(offset))
    return epoch, Position(unit, offset)


def make_lane_state(epoch: int, batches: int, fingerprint: Mapping[str, Any]) -> dict:
    """The JSON-able state of a sharded epoch after ``batches`` global batches."""
    return {"version": STATE_VERSION, "epoch": int(epoch), "batches": int(batches), "fingerprint": dict(fingerprint)}


def parse_lane_state(
    state: Any, fingerprint: Mapping[str, Any], workers: int, steps_of: Callable[[int], int]
) -> tuple[int, int]:
    """Checks a sharded ``state`` against this pipeline; returns ``(epoch, global batches done)``.

    Before the field-by-field comparison, a state of the same job saved
    with another worker count is told apart: other lanes, or another
    global batch (``workers`` x this worker's batch), are refused naming
    the setting that would restore it. ``steps_of(epoch)`` bounds
    ``0 <= batches <= steps``.
    """
    if not isinstance(state, Mapping):
        _refuse("state", "a dict", type(state).__name__)
    if state.get("version") != STATE_VERSION:
        _refuse("version", str(STATE_VERSION), repr(state.get("version")))
    theirs = state.get("fingerprint")
    if not isinstance(theirs, Mapping):
        _refuse("fingerprint", "a dict", type(theirs).__name__)
    saved, ours = theirs.get("shard"), fingerprint["shard"]
    if isinstance(saved, Mapping) and saved.get("lanes") != ours["lanes"]:
        raise StateError(
            describe(
                "The saved state was dealt into another number of lanes",
                expected=f"lanes={ours['lanes']}",
                found=f"lanes={saved.get('lanes')!r}",
                fix=f"restore with .shard(index, count, lanes={saved.get('lanes')!r}) and a count dividing it",
            )
        )
    if isinstance(saved, Mapping) and saved.get("global_batch") != ours["global_batch"]:
        global_batch = saved.get("global_batch")
        right = f"batch({global_batch // workers})" if isinstance(global_batch, int) else "the saved batch size"
        now = ours["global_batch"]
        raise StateError(
            describe(
                "The saved state was trained with another global batch size",
                expected=f"{global_batch!r} rows per step (workers x batch_size)",
                found=f"{now} rows per step: {workers} workers x batch {None if now is None else now // workers}",
                fix=f"with {workers} workers use {right} per worker (global batch = workers x batch)",
            )
        )
    if theirs != fingerprint:
        _differ(theirs, fingerprint)
    epoch, batches = _count(state, "epoch"), _count(state, "batches")
    steps = steps_of(epoch)
    if batches > steps:
        _refuse("batches", f"a number of global batches in 0..{steps} of epoch {epoch}", str(batches))
    return epoch, batches


def make_bucket_state(
    epoch: int, row: int, waiting: Sequence[int], served: Sequence[int], fingerprint: Mapping[str, Any]
) -> dict:
    """The JSON-able state of a bucketed epoch (the module doc)."""
    return {
        "version": STATE_VERSION,
        "epoch": int(epoch),
        "row": int(row),
        "waiting": [int(n) for n in waiting],
        "served": [int(n) for n in served],
        "fingerprint": dict(fingerprint),
    }


def parse_bucket_state(
    state: Any,
    fingerprint: Mapping[str, Any],
    rows_of: Callable[[int], int],
    batches_of: Callable[[int], Sequence[int]],
    most_waiting: int,
) -> tuple[int, int, tuple[int, ...], tuple[int, ...]]:
    """Checks a bucketed ``state``; returns ``(epoch, row, waiting, served)``.

    ``rows_of(epoch)`` bounds ``row``; the waiting rows are increasing,
    before ``row`` and at most ``most_waiting``; ``batches_of(epoch)`` (each
    bucket's batches in the epoch) bounds ``served``, bucket by bucket.
    """
    if not isinstance(state, Mapping):
        _refuse("state", "a dict", type(state).__name__)
    if state.get("version") != STATE_VERSION:
        _refuse("version", str(STATE_VERSION), repr(state.get("version")))
    theirs = state.get("fingerprint")
    if not isinstance(theirs, Mapping):
        _refuse("fingerprint", "a dict", type(theirs).__name__)
    if theirs != fingerprint:
        _differ(theirs, fingerprint)
    epoch, row = _count(state, "epoch"), _count(state, "row")
    rows = rows_of(epoch)
    if row > rows:
        _refuse("row", f"a row in 0..{rows} of epoch {epoch}", str(row))
    waiting, served = state.get("waiting"), state.get("served")
    if (
        not isinstance(waiting, list)
        or len(waiting) > most_waiting
        or any(isinstance(n, bool) or not isinstance(n, int) for n in waiting)
        or any(not 0 <= n < row for n in waiting)
        or any(a >= b for a, b in zip(waiting, waiting[1:]))
    ):
        _refuse("waiting", f"at most {most_waiting} increasing row numbers below row={row}", repr(waiting)[:80])
    batches = list(batches_of(epoch))
    if (
        not isinstance(served, list)
        or len(served) != len(batches)
        or any(isinstance(n, bool) or not isinstance(n, int) or not 0 <= n <= most for n, most in zip(served, batches))
    ):
        _refuse("served", f"{len(batches)} counts of batches, each at most {batches}", repr(served)[:80])
    return epoch, row, tuple(waiting), tuple(served)


def _differ(theirs: Mapping[str, Any], fingerprint: Mapping[str, Any]) -> NoReturn:
    differing = sorted(key for key in fingerprint if fingerprint[key] != theirs.get(key))
    differing += sorted(key for key in theirs if key not in fingerprint)
    raise StateError(
        describe(
            "The saved state belongs to a different pipeline",
            expected=f"the same {', '.join(differing)}",
            found=f"saved {[theirs.get(k) for k in differing]}, now {[fingerprint.get(k) for k in differing]}",
            fix=_FIX,
        )
    )


def _count(state: Mapping[str, Any], name: str) -> int:
    value = state.get(name)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        _refuse(name, "an integer >= 0", repr(value))
    return value


def _refuse(field: str, expected: str, found: str) -> NoReturn:
    raise StateError(describe(f"The saved state's {field!r} is not valid", expected=expected, found=found, fix=_FIX))
