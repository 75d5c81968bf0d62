"""The one progress bar of every command: rich, on stderr, off under ``--quiet`` and when not on a terminal.

Library functions that can take long (``inspect(full=True)``, the quality
pass, ``compute_stats`` through the CLI, ``convert_to_parquet``, ``bench``)
all report through :func:`progress`, so the CLI's ``--quiet`` (the
:func:`quiet` block) silences every one of them in one place, and a bar
never lands in a pipe or a log file: stdout stays free for ``--json``.
"""

from __future__ import annotations

import contextlib
import contextvars
import sys
from typing import Any, Callable, Iterator

Advance = Callable[..., None]
"""``advance(amount=1)``: that much more is done."""

_quiet: contextvars.ContextVar[bool] = contextvars.ContextVar("streamfeed_quiet", default=False)


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    """No progress bars inside this block (the CLI's ``--quiet``)."""
    token = _quiet.set(True)
    try:
        yield
    finally:
        _quiet.reset(token)


def _shown(enabled: bool | None) -> bool:
    """``enabled`` None: on a terminal only; True: always; False: never; none inside :func:`quiet`."""
    if _quiet.get() or enabled is False:
        return False
    return enabled is True or sys.stderr.isatty()


@contextlib.contextmanager
def progress(
    total: float | None, description: str, *, unit: str = "", enabled: bool | None = None
) -> Iterator[Advance]:
    """A bar with count, rate and ETA while the block runs; yields ``advance(amount=1)``.

    ``unit`` names what is counted in the rate column (``"rows"`` gives
    rows/s; ``"bytes"`` a transfer speed); ``total`` None counts without a
    bar's end. When the bar is not shown, ``advance`` is a no-op.
    """
    if not _shown(enabled):
        yield lambda amount=1: None
        return
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
        TransferSpeedColumn,
    )

    count = "{task.completed:,.0f}" + ("/{task.total:,.0f}" if total is not None else "")
    columns: list[Any] = [TextColumn("{task.description}"), BarColumn(), TextColumn(count)]
    if unit == "bytes":
        columns.append(TransferSpeedColumn())
    elif unit:
        columns.append(_rate(unit))
    columns += [TimeElapsedColumn(), TimeRemainingColumn()]
    with Progress(*columns, transient=True, console=Console(stderr=True)) as bar:
        task = bar.add_task(description, total=total)
        yield lambda amount=1: bar.advance(task, amount)


def _rate(unit: str) -> Any:
    """A column showing ``<rate> <unit>/s`` (rich's own speed column is for bytes)."""
    from rich.progress import ProgressColumn
    from rich.text import Text

    class RateColumn(ProgressColumn):
        def render(self, task: Any) -> Text:
            return Text(f"{task.speed or 0:,.1f} {unit}/s")

    return RateColumn()
