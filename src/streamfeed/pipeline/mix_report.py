"""What a mixture served in an epoch: each component's weight, quota and rows served, against its target share.

The quotas are exact, so what an epoch realises is a function of how far
it got: the order of the epoch (:class:`~streamfeed.pipeline.mix_order.MixOrder`)
says how many of the first ``n`` rows each component gave
(``MixOrder.consumed``). A :class:`ServedRows` therefore keeps one number
per epoch (``mix_epoch.ServedRows``), the furthest row served, never a
count that a resumed or restarted epoch could add twice; a resumed epoch reports the rows served
before the resume too, as they are part of that epoch.
"""

from __future__ import annotations

from typing import Any, Protocol

from ..errors import ArgumentError, describe
from .mix_epoch import MixStart, ServedRows
from .mix_order import EpochOrder


class Mixed(Protocol):
    """What the report reads of a ``mix.MixedDataset`` (which imports this module)."""

    @property
    def served(self) -> ServedRows: ...

    @property
    def stratified(self) -> bool: ...

    @property
    def names(self) -> tuple[str, ...]: ...

    @property
    def epoch_rows(self) -> tuple[int, ...]: ...

    def start_of(self, epoch: int) -> MixStart: ...

    def epoch_order(self, start: MixStart) -> EpochOrder: ...


def mixing_report(mixed: Mixed, epoch: int | None = None) -> dict[str, Any]:
    """``epoch``'s mix (default: the latest one served): per component its weight, target share, quota, rows
    served so far and their share, its own rows per epoch, how many passes over it the quota makes, and the
    component epochs the quota reads from (``exhausted="repeat"`` moves into the next ones)."""
    if epoch is None:
        epoch = mixed.served.latest()
        if epoch is None:
            raise ArgumentError(
                describe("mixing_report() before any epoch was served", fix="pass an epoch, or iterate the mix first")
            )
    start = mixed.start_of(epoch)
    plan = mixed.epoch_order(start)
    served_rows = min(mixed.served.get(epoch), plan.served_rows)
    served = plan.order.consumed(served_rows)
    quotas = plan.order.quotas
    total_weight = sum(start.weights)
    components = {}
    for i, name in enumerate(mixed.names):
        rows = mixed.epoch_rows[i]
        first, offset = start.starts[i]
        last = first + (offset + int(quotas[i]) - 1) // rows if quotas[i] else first
        components[name] = {
            "weight": start.weights[i],
            "target_share": start.weights[i] / total_weight,
            "quota": int(quotas[i]),
            "served": int(served[i]),
            "served_share": int(served[i]) / served_rows if served_rows else 0.0,
            "component_rows": rows,
            "passes": int(quotas[i]) / rows,
            "component_epochs": [first, last],
        }
    return {
        "epoch": epoch,
        "rows": plan.rows,
        "served_rows": served_rows,
        "complete": served_rows == plan.served_rows,
        "stratified": mixed.stratified,
        "components": components,
    }
