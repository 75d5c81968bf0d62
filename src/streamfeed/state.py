"""The iterator state: a small JSON dict of positions, never data.

``{"version": 1, "epoch": e, "unit": u, "offset": o, "fingerprint": {...}}``
says that row ``o`` of read unit ``u`` of epoch ``e`` is the next row to
emit. The fingerprint names everything that fixes the row stream (files,
columns, seed, window, batch size, shard, sampler), so a state is restored
only into the pipeline that produced it.

A state may come from a file a person edited or a stranger sent: every
field is type- and range-checked before it is used, and a bad one is
refused with a :class:`~streamfeed.errors.StateError` naming the field.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, NoReturn

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
    epoch, unit, offset = (_count(state, name) for name in ("epoch", "unit", "offset"))
    theirs = state.get("fingerprint")
    if not isinstance(theirs, Mapping):
        _refuse("fingerprint", "a dict", type(theirs).__name__)
    if theirs != fingerprint:
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
    plan = plan_of(epoch)
    units = len(plan.units)
    if unit > units:
        _refuse("unit", f"a read unit in 0..{units} of epoch {epoch}", str(unit))
    limit = plan.unit_rows[unit] if unit < units else 0
    if offset > limit:
        _refuse("offset", f"a row in 0..{limit} of read unit {unit}", str(offset))
    return epoch, Position(unit, offset)


def _count(state: Mapping[str, Any], name: str) -> int:
    value = state.get(name)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        _refuse(name, "an integer >= 0", repr(value))
    return value


def _refuse(field: str, expected: str, found: str) -> NoReturn:
    raise StateError(describe(f"The saved state's {field!r} is not valid", expected=expected, found=found, fix=_FIX))
