"""Run-time autotuning of read threads, read-ahead and prefetch depth, within the memory limit.

:func:`~streamfeed.memory.plan_layout` picks a layout once, before the first
read, from sizes alone. What it cannot know is how long a fragment takes to
decode (a gzip CSV, a JPEG, a user ``map`` calling a C library) against how
fast the consumer takes batches. An :class:`Autotuner` watches one running
epoch and moves the settings during it:

- **more parallelism** (read threads, then read-ahead) while the consumer
  waits for batches (``WAIT_HIGH`` of the interval's wall time) *and* the
  producer thread waits for the next fragment in plan order (the read pool
  is the limit, not window assembly or per-batch ops); a deeper prefetch
  queue when the consumer waits although the producer was also blocked on
  a full queue in the same interval (bursty production);
- **less** (one read thread fewer) when the producer is blocked on a full
  queue most of the interval (``PUT_HIGH``) and the consumer never waits:
  the model is the limit, and idle reads only take CPU from it;
- more threads than cores only while the reads mostly wait (their thread
  CPU time under ``CPU_BOUND`` of their wall time: I/O, a sleeping or
  GIL-releasing decoder waiting on something else): decoding that needs
  the CPU cannot go faster with more threads than cores, and a trial on a
  shared machine can mistake noise for a gain (measured on gzip CSV, see
  docs/self-healing.md);
- a raise of read threads or of the prefetch depth is a *trial*: if the
  next interval's batch rate is not ``MIN_GAIN`` higher, the tuner goes
  back and keeps that value as its ceiling for the epoch (a consumer that
  always waits, such as ``bench`` draining batches, is not fed faster by a
  deeper queue).

Bounds. Each decision waits for ``interval_batches`` batches *and*
``interval_seconds`` since the last one (hysteresis: the up and down
thresholds are far apart, and the measures restart after every change).
Steps are bounded (threads by at most half again, read-ahead to twice the
threads, prefetch doubled), threads never exceed ``max_threads`` (default
``4 x cores``) and no setting is taken unless
:func:`~streamfeed.memory.estimate_bytes` of the whole new layout is within
the memory limit the layout was planned for. A decision moves every setting
in one direction (all up, or all down), so the buffers held while a change
takes effect are those of the larger of the two layouts, both within the
limit. The order of batches does not depend on any of this: the reader
yields fragments in plan order whatever the concurrency.

Every change is kept as a :class:`Decision` (time, setting, old → new,
reason, the layout's estimated bytes); :meth:`Autotune.report` is what
``bench`` and ``doctor`` show.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import asdict, dataclass, replace
from typing import Any, Callable

from ..errors import ArgumentError, describe
from ..memory import Layout, estimate_bytes

WAIT_HIGH = 0.10  # consumer waiting above this share of the interval: more parallelism
WAIT_LOW = 0.02  # ... below this (with the producer blocked): fewer read threads
PUT_HIGH = 0.50  # producer blocked on a full queue above this share: the consumer is the limit
PUT_BURSTY = 0.05  # producer blocked this much while the consumer waited too: a deeper queue
READ_BOUND = 0.05  # producer waiting for the next fragment above this share: the read pool is the limit
MIN_GAIN = 0.05  # a raise of read threads must raise the batch rate this much, or it is undone
CPU_BOUND = 1 / 3  # reads on the CPU more than this share of their time: no more threads than cores
MAX_DECISIONS = 512  # kept per Autotune (the oldest are dropped beyond it)
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
    batch_rows: int
    window: int
    shuffled: bool
    memory_limit: int

    def estimate(self, settings: Settings) -> int:
        return estimate_bytes(
            self.row_bytes,
            self.fragment_rows,
            self.batch_rows,
            read_ahead=settings.read_ahead,
            window=self.window,
            prefetch=settings.prefetch,
            shuffled=self.shuffled,
            read_threads=settings.read_threads,
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
        }

    def summary(self) -> str:
        """One line: each setting initial → final, and the memory estimate against the limit."""
        parts = []
        for name, label in (("read_threads", "read threads"), ("read_ahead", "read-ahead"), ("prefetch", "prefetch")):
            old, new = getattr(self.initial, name), getattr(self.final, name)
            parts.append(f"{label} {old} → {new}" if old != new else f"{label} {new}")
        memory = f"estimate {_size(self.estimated_bytes)} within the {_size(self.memory_limit)} limit"
        held = "; held by the memory limit" if self.held_by_memory else ""
        held += "; held at one thread per core (the reads need the CPU)" if self.held_by_cpu else ""
        changes = sum(decision.old != decision.new for decision in self.decisions)
        return f"{', '.join(parts)} ({changes} changes; {memory}{held})"


def _usable_cores() -> int:
    affinity = getattr(os, "sched_getaffinity", None)
    return len(affinity(0)) if affinity is not None else (os.cpu_count() or 1)


def _size(nbytes: int) -> str:
    return f"{nbytes / MIB:,.1f} MiB" if nbytes >= MIB // 10 else f"{nbytes:,} bytes"


class Autotune:
    """Run-time tuning, enabled with ``Dataset.with_options(autotune=True)`` or ``autotune=Autotune(...)``.

    One object serves every epoch of a dataset and of the datasets derived
    from it (the Keras adapter's, ``bench``'s): each epoch gets its own
    :class:`Autotuner`, which starts from the settings the previous one
    ended with (when the memory budget is the same), so a later epoch does
    not climb again; a raise the previous epoch ended before judging is not
    carried over. :meth:`report` covers them all.

    Args:
        interval_seconds, interval_batches: the least time *and* batches
            between two decisions (measures over shorter spans are noise:
            a rate over 16 batches is known to about 1/16, close to the
            5 % gain a raise must show).
        max_threads: the ceiling on read threads (default ``4 x cores``).
        max_prefetch: the ceiling on queued batches.
        cores: the cores this process may run on (default: its CPU affinity).
    """

    def __init__(
        self,
        *,
        interval_seconds: float = 0.25,
        interval_batches: int = 16,
        max_threads: int | None = None,
        max_prefetch: int = 32,
        cores: int | None = None,
    ) -> None:
        for name, value, least in (
            ("interval_seconds", interval_seconds, 0.0),
            ("interval_batches", interval_batches, 1),
            ("max_threads", 1 if max_threads is None else max_threads, 1),
            ("max_prefetch", max_prefetch, 1),
            ("cores", 1 if cores is None else cores, 1),
        ):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value < least:
                raise ArgumentError(
                    describe(f"Invalid autotune {name}", expected=f"a number >= {least}", found=repr(value))
                )
        self.interval_seconds = float(interval_seconds)
        self.interval_batches = int(interval_batches)
        self.cores = int(cores) if cores is not None else _usable_cores()
        self.max_threads = int(max_threads) if max_threads is not None else 4 * self.cores
        self.max_prefetch = int(max_prefetch)
        self._lock = threading.Lock()
        # per memory budget (a dataset's sizes and limit): its first settings, decisions and latest tuner
        self._history: dict[Budget, _History] = {}
        self._latest: Autotuner | None = None
        self._iterators = 0
        self._started: float | None = None

    def __repr__(self) -> str:
        return (
            f"Autotune(interval_seconds={self.interval_seconds}, interval_batches={self.interval_batches}, "
            f"max_threads={self.max_threads}, max_prefetch={self.max_prefetch}, cores={self.cores})"
        )

    def start(self, layout: Layout, budget: Budget) -> "Autotuner":
        """A tuner for one epoch planned as ``layout``, from where the last one of the same budget settled.

        A dataset derived with other sizes (a Keras first-batch peek, another
        batch size) has another budget, and its own history.
        """
        with self._lock:
            if self._started is None:
                self._started = time.perf_counter()
            history = self._history.get(budget)
            number, self._iterators = self._iterators, self._iterators + 1
        initial = Settings(layout.read_threads, layout.read_ahead, layout.prefetch)
        if history is not None:
            initial = history.latest.settled
        tuner = Autotuner(budget, initial, self, started=self._started, number=number)
        with self._lock:
            if budget not in self._history:
                self._history[budget] = _History(initial, [], tuner)
            self._history[budget].latest = self._latest = tuner
        return tuner

    def _record(self, budget: Budget, decision: Decision) -> None:
        """Keeps a tuner's decision in its budget's history (none for a tuner built outside :meth:`start`)."""
        with self._lock:
            history = self._history.get(budget)
            if history is not None:
                history.decisions.append(decision)
                del history.decisions[:-MAX_DECISIONS]

    def report(self) -> TuningReport | None:
        """The tuning of the latest epoch's budget over all its epochs: first settings, now, every decision.

        None before any epoch ran with this ``Autotune``.
        """
        with self._lock:
            if self._latest is None:
                return None
            latest = self._latest
            history = self._history[latest.budget]
            initial, decisions = history.initial, tuple(history.decisions)
        return replace(latest.report(), initial=initial, decisions=decisions)


@dataclass
class _History:
    initial: Settings
    decisions: list[Decision]
    latest: "Autotuner"


class Autotuner:
    """The controller of one epoch: measures, decides, and applies to the readers' pools and the queue.

    The producer thread reports each batch it queued (:meth:`put`, with the
    time it was blocked) and each wait for the next fragment
    (:meth:`read_waited`); the consumer reports each batch it took
    (:meth:`took`, with its wait). Decisions run in the producer thread,
    inside :meth:`put`, never on the consumer's (the model's) thread.
    """

    def __init__(
        self,
        budget: Budget,
        initial: Settings,
        options: Autotune,
        *,
        started: float | None = None,
        clock: Callable[[], float] = time.perf_counter,
        number: int = 0,
    ) -> None:
        self.budget = budget
        self.initial = self.settings = initial
        self.options = options
        self.max_threads = max(1, options.max_threads, initial.read_threads)
        self.max_ahead = max(initial.read_ahead, 2 * self.max_threads)
        self.max_prefetch = max(options.max_prefetch, initial.prefetch)
        self._clock = clock  # the measures' clock (a test drives the controller with its own)
        self.number = number  # the how-manieth epoch iterator of its Autotune
        self._started = self._clock() if started is None else started
        self._lock = threading.Lock()
        self._pools: list[Callable[[], None]] = []  # each reader's pool: resized when read_threads moves
        self._resize_queue: Callable[[int], None] | None = None
        self._listeners: list[Callable[[Settings, int], None]] = []
        self._ceiling = self.max_threads  # lowered when a raise of threads did not pay
        self._prefetch_ceiling = self.max_prefetch  # lowered when a deeper queue did not pay
        self._trial: tuple[Settings, float] | None = None  # settings before a raise, and the rate then
        self._held_by_memory = False
        self._held_by_cpu = False
        self._decisions: list[Decision] = []
        self._started_taking = False
        self._begin_interval()

    # -------------------------------------------------------------- wiring
    def attach_pool(self, resize: Callable[[], None]) -> None:
        """Calls ``resize()`` whenever ``read_threads`` changes (a reader's pool, which reads the setting)."""
        with self._lock:
            self._pools.append(resize)

    def detach_pool(self, resize: Callable[[], None]) -> None:
        with self._lock:
            if resize in self._pools:
                self._pools.remove(resize)

    def control_queue(self, resize: Callable[[int], None]) -> None:
        """``resize(depth)`` sets the prefetch queue's depth (the background iterator's)."""
        self._resize_queue = resize

    def on_change(self, listener: Callable[[Settings, int], None]) -> None:
        """Calls ``listener(settings, estimated bytes)`` now and after every change (the stage metrics' layout)."""
        self._listeners.append(listener)
        listener(self.settings, self.budget.estimate(self.settings))

    # ------------------------------------------------------------- signals
    def _begin_interval(self) -> None:
        self._interval_started = self._clock()
        self._batches = 0
        self._wait = self._put_wait = self._read_wait = 0.0
        self._read_seconds = self._read_cpu = 0.0

    def took(self, waited: float) -> None:
        """The consumer took one batch after waiting ``waited`` seconds for it.

        The first batch's wait is the pipeline's cold start (opening, the
        first reads), not a steady state: measures begin after it. Measured
        in the slow-consumer test, it was 12-20 % of a 0.2 s first interval.
        """
        with self._lock:
            if not self._started_taking:
                self._started_taking = True
                self._begin_interval()
                return
            self._batches += 1
            self._wait += waited

    def read_waited(self, seconds: float) -> None:
        """The producer waited ``seconds`` for the next fragment in plan order."""
        with self._lock:
            self._read_wait += seconds

    def read_done(self, seconds: float, cpu_seconds: float) -> None:
        """A read (with its per-fragment ops) took ``seconds``, ``cpu_seconds`` of them on its thread's CPU."""
        with self._lock:
            self._read_seconds += seconds
            self._read_cpu += cpu_seconds

    def put(self, blocked: float) -> None:
        """The producer queued one batch after being blocked ``blocked`` seconds; decides when an interval is up."""
        with self._lock:
            self._put_wait += blocked
            now = self._clock()
            wall = now - self._interval_started
            if self._batches < self.options.interval_batches or wall < self.options.interval_seconds:
                return
            # shares capped at 1: a wait that began in the previous interval is counted whole in this one
            wait_share, put_share, read_share = (
                min(1.0, part / wall) for part in (self._wait, self._put_wait, self._read_wait)
            )
            rate = self._batches / wall
            on_cpu = self._read_cpu / self._read_seconds if self._read_seconds > 0 else 0.0
            self._begin_interval()
        self._decide(rate, wait_share, put_share, read_share, on_cpu)

    # ------------------------------------------------------------ deciding
    def _decide(self, rate: float, wait: float, blocked: float, reading: float, on_cpu: float = 0.0) -> None:
        current = self.settings
        if self._trial is not None:
            before, before_rate = self._trial
            self._trial = None
            if rate < before_rate * (1 + MIN_GAIN):
                if current.read_threads != before.read_threads:
                    self._ceiling = before.read_threads
                    tried = f"{current.read_threads} threads", f"{before.read_threads}"
                else:  # a deeper queue: a consumer that is never fed faster (bench's drain) gains nothing from it
                    self._prefetch_ceiling = before.prefetch
                    tried = f"a queue of {current.prefetch} batches", f"{before.prefetch}"
                self._apply(
                    before,
                    f"{tried[0]} gave {rate:,.1f} batches/s against {before_rate:,.1f} with {tried[1]}: "
                    f"no gain, back (and at most {tried[1]} for this epoch)",
                )
                return
        if wait >= WAIT_HIGH and reading >= READ_BOUND:
            self._more_parallel(current, rate, wait, reading, on_cpu)
        elif wait >= WAIT_HIGH and blocked >= PUT_BURSTY:
            self._deeper_queue(current, rate, wait, blocked)
        elif blocked >= PUT_HIGH and wait <= WAIT_LOW and current.read_threads > 1:
            threads = current.read_threads - 1
            self._apply(
                replace(current, read_threads=threads),
                f"the producer was blocked on a full queue {blocked:.0%} of the time and the consumer waited "
                f"{wait:.0%}: the consumer is the limit, one read thread fewer",
            )

    def _more_parallel(self, current: Settings, rate: float, wait: float, reading: float, on_cpu: float) -> None:
        why = f"the consumer waited {wait:.0%} and the producer waited for reads {reading:.0%} of the time"
        ceiling = min(self._ceiling, self.max_threads)
        cores = self.options.cores
        if on_cpu >= CPU_BOUND and ceiling > cores:
            ceiling = max(cores, current.read_threads)  # never lowered here: only not raised
            if current.read_threads >= cores and not self._held_by_cpu:
                self._held_by_cpu = True
                self._note(
                    "read_threads",
                    current.read_threads,
                    f"{why}, but the reads were on the CPU {on_cpu:.0%} of their time: more threads than the "
                    f"{cores} cores would not read faster",
                )
        candidates = []
        if current.read_threads < ceiling:
            threads = min(ceiling, current.read_threads + max(1, current.read_threads // 2))
            for more in range(threads, current.read_threads, -1):  # the largest raise that fits
                ahead = min(self.max_ahead, max(current.read_ahead, 2 * more))
                candidates.append(replace(current, read_threads=more, read_ahead=ahead))
        if current.read_ahead < min(self.max_ahead, 2 * current.read_threads):
            candidates.append(replace(current, read_ahead=min(self.max_ahead, 2 * current.read_threads)))
        for candidate in candidates:
            if self.budget.fits(candidate):
                if candidate.read_threads > current.read_threads:
                    self._trial = (current, rate)
                self._apply(candidate, f"{why}: more parallel reads")
                return
        if candidates and not self._held_by_memory:
            self._held_by_memory = True
            wanted = candidates[0]
            self._note(
                "read_threads",
                current.read_threads,
                f"{why}, but {wanted.read_threads} threads with {wanted.read_ahead} fragments ahead would need "
                f"{_size(self.budget.estimate(wanted))} > the {_size(self.budget.memory_limit)} limit",
            )

    def _deeper_queue(self, current: Settings, rate: float, wait: float, blocked: float) -> None:
        depth = min(self.max_prefetch, self._prefetch_ceiling, 2 * current.prefetch)
        if depth <= current.prefetch:
            return
        candidate = replace(current, prefetch=depth)
        if not self.budget.fits(candidate):
            self._held_by_memory = True
            return
        self._trial = (current, rate)  # kept only if the batch rate rises, as for threads
        self._apply(
            candidate,
            f"the consumer waited {wait:.0%} while the producer was blocked on a full queue {blocked:.0%} "
            "of the time: production is bursty, a deeper prefetch queue",
        )

    def _apply(self, new: Settings, reason: str) -> None:
        old = self.settings
        nbytes = self.budget.estimate(new)
        seconds = self._clock() - self._started
        changed = [
            Decision(seconds, name, getattr(old, name), getattr(new, name), reason, nbytes, self.number)
            for name in ("read_threads", "read_ahead", "prefetch")
            if getattr(old, name) != getattr(new, name)
        ]
        with self._lock:
            self.settings = new
            pools = list(self._pools)
            self._decisions.extend(changed)
        for decision in changed:
            self.options._record(self.budget, decision)
        if new.read_threads != old.read_threads:
            for resize in pools:
                resize()
        if new.prefetch != old.prefetch and self._resize_queue is not None:
            self._resize_queue(new.prefetch)
        for listener in self._listeners:
            listener(new, nbytes)

    def _note(self, setting: str, value: int, reason: str) -> None:
        """A decision not to change (the memory limit held it): kept once, with the current estimate."""
        decision = Decision(
            self._clock() - self._started,
            setting,
            value,
            value,
            reason,
            self.budget.estimate(self.settings),
            self.number,
        )
        with self._lock:
            self._decisions.append(decision)
        self.options._record(self.budget, decision)

    # ----------------------------------------------------------- reporting
    @property
    def settled(self) -> Settings:
        """The settings without a raise still on trial (what the next epoch starts from)."""
        with self._lock:
            trial, settings = self._trial, self.settings
        return settings if trial is None else trial[0]

    @property
    def read_ahead(self) -> int:
        """Fragments to keep in flight now (read by the reader before each submission)."""
        return self.settings.read_ahead

    def report(self) -> TuningReport:
        with self._lock:
            settings, decisions = self.settings, tuple(self._decisions)
        return TuningReport(
            initial=self.initial,
            final=settings,
            decisions=decisions,
            estimated_bytes=self.budget.estimate(settings),
            memory_limit=self.budget.memory_limit,
            max_threads=min(self.max_threads, self._ceiling),
            held_by_memory=self._held_by_memory,
            held_by_cpu=self._held_by_cpu,
        )


def resolve(autotune: "bool | Autotune | None") -> Autotune | None:
    """``True`` → a new :class:`Autotune`; an ``Autotune`` → itself; falsy → None (fixed settings)."""
    if isinstance(autotune, Autotune):
        return autotune
    return Autotune() if autotune else None


__all__ = [
    "Autotune",
    "Autotuner",
    "Budget",
    "Decision",
    "Settings",
    "TuningReport",
    "resolve",
]
