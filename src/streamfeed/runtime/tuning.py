"""What the autotuner moves and reports: its settings, its memory budget, each decision, the report.

Kept apart from the controller (``runtime/autotune.py``, which re-exports
them) so that each module has one job: these are plain values that
``bench``, ``doctor`` and the iterator show.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from ..memory import estimate_bytes

MIB = 2**20


@dataclass(frozen=True)
class Settings:
    """The settings the tuner moves: read threads, fragments in flight, queued batches."""

    read_threads: int
    read_ahead: int
    prefetch: int

    def to_dict(self) -> dict[str, int]:
        return asdict(self)


@dataclass(frozen=True)
class Budget:
    """What :func:`~streamfeed.memory.estimate_bytes` sizes a layout from, and the limit it must fit.

    ``memory_limit`` is the limit the layout was planned for (a lane's share
    when the epoch is sharded).
    """

    row_bytes: float
    fragment_rows: float
    batch_rows: int | None  # None: unbatched
    window: int
    shuffled: bool
    memory_limit: int
    read_scratch: float | None = None  # each read's decoding bytes per fragment byte (Source.read_scratch)

    def estimate(self, settings: Settings, row_bytes: float | None = None) -> int:
        """:func:`~streamfeed.memory.estimate_bytes` of ``settings``, at ``row_bytes`` a row (default: the source's)."""
        return estimate_bytes(
            self.row_bytes if row_bytes is None else row_bytes,
            self.fragment_rows,
            self.batch_rows,
            read_ahead=settings.read_ahead,
            window=self.window,
            prefetch=settings.prefetch,
            shuffled=self.shuffled,
            read_threads=settings.read_threads,
            read_scratch=self.read_scratch,
        )

    def fits(self, settings: Settings) -> bool:
        return self.estimate(settings) <= self.memory_limit


@dataclass(frozen=True)
class Decision:
    """One setting changed: when (seconds since tuning began), old → new, why, and the layout's bytes after it."""

    seconds: float
    setting: str  # "read_threads", "read_ahead", "prefetch"
    old: int
    new: int
    reason: str
    estimated_bytes: int  # estimate_bytes of all settings after the decision (<= memory_limit)
    iterator: int = 0  # which epoch iterator of the Autotune decided (epochs may overlap: Keras starts the next early)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class TuningReport:
    """What the tuning did: the settings it started from and ended with, and every change."""

    initial: Settings
    final: Settings
    decisions: tuple[Decision, ...]
    estimated_bytes: int  # of ``final``
    memory_limit: int
    max_threads: int
    held_by_memory: bool  # more parallelism was wanted but would not have fitted the limit
    held_by_cpu: bool = False  # more threads were wanted, but the reads need the CPU and every core had one
    row_bytes: float = 0.0  # the bytes a row the estimates used: the source's, or more as measured after the ops

    def to_dict(self) -> dict[str, Any]:
        return {
            "initial": self.initial.to_dict(),
            "final": self.final.to_dict(),
            "decisions": [decision.to_dict() for decision in self.decisions],
            "estimated_bytes": self.estimated_bytes,
            "memory_limit": self.memory_limit,
            "max_threads": self.max_threads,
            "held_by_memory": self.held_by_memory,
            "held_by_cpu": self.held_by_cpu,
            "row_bytes": self.row_bytes,
        }

    def summary(self) -> str:
        """One line: each setting initial → final, and the memory estimate against the limit."""
        parts = []
        for name, label in (("read_threads", "read threads"), ("read_ahead", "read-ahead"), ("prefetch", "prefetch")):
            old, new = getattr(self.initial, name), getattr(self.final, name)
            parts.append(f"{label} {old} → {new}" if old != new else f"{label} {new}")
        memory = f"estimate {size_text(self.estimated_bytes)} within the {size_text(self.memory_limit)} limit"
        held = "; held by the memory limit" if self.held_by_memory else ""
        held += "; held at one thread per core (the reads need the CPU)" if self.held_by_cpu else ""
        changes = sum(decision.old != decision.new for decision in self.decisions)
        return f"{', '.join(parts)} ({changes} changes; {memory}{held})"


def size_text(nbytes: int) -> str:
    """``nbytes`` for a reason or a summary: MiB from a tenth of one, bytes below."""
    return f"{nbytes / MIB:,.1f} MiB" if nbytes >= MIB // 10 else f"{nbytes:,} bytes"
