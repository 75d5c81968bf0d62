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

Measured bytes. The layout is planned from the source's bytes a row, but a
per-fragment ``map`` may change them: one that turned an 8-byte column into
256 bytes a row had the tuner raise to 4 threads and 8 fragments ahead,
reporting 7.8 MiB "within" a 64 MiB limit while the process grew 149 MiB.
So each read tells the tuner the rows and bytes of its chunk after the ops
(:meth:`Autotuner.held`), and every estimate uses the largest bytes a row
seen so far (never less than the source's): no raise is taken whose
measured cost passes the limit, and when a measure shows that the current
settings pass it, the next batch lowers read-ahead, then prefetch, then
threads until they fit (one decision, all down). The next epoch starts
from the measure.

Every change is kept as a :class:`Decision` (time, setting, old → new,
reason, the layout's estimated bytes); :meth:`Autotune.report` is what
``bench`` and ``doctor`` show.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, replace
from typing import Callable

from ..errors import ArgumentError, describe
from ..memory import Layout
from .cpu import usable_cores
from .tuning import Budget, Decision, Settings, TuningReport, size_text

WAIT_HIGH = 0.10  # consumer waiting above this share of the interval: more parallelism
WAIT_LOW = 0.02  # ... below this (with the producer blocked): fewer read threads
PUT_HIGH = 0.50  # producer blocked on a full queue above this share: the consumer is the limit
PUT_BURSTY = 0.05  # producer blocked this much while the consumer waited too: a deeper queue
READ_BOUND = 0.05  # producer waiting for the next fragment above this share: the read pool is the limit
MIN_GAIN = 0.05  # a raise of read threads must raise the batch rate this much, or it is undone
CPU_BOUND = 1 / 3  # reads on the CPU more than this share of their time: no more threads than cores
MAX_DECISIONS = 512  # kept per Autotune (the oldest are dropped beyond it)


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
        self.cores = int(cores) if cores is not None else usable_cores()
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
        row_bytes = None
        if history is not None:
            initial, row_bytes = history.latest.settled, history.latest.row_bytes
        tuner = Autotuner(budget, initial, self, started=self._started, number=number, row_bytes=row_bytes)
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
    (:meth:`took`, with its wait); the read threads report each chunk's
    rows and bytes after the ops (:meth:`held`). Decisions run in the
    producer thread, inside :meth:`put`, never on the consumer's (the
    model's) thread. ``row_bytes``: a measure to start from (the previous
    epoch's).
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
        row_bytes: float | None = None,
    ) -> None:
        self.budget = budget
        # the bytes a row every estimate uses: the largest measured after the ops, never below the source's
        self.row_bytes = max(budget.row_bytes, row_bytes or 0.0)
        self._measured = self.row_bytes  # the largest measure so far, taken into row_bytes by the producer
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
        listener(self.settings, self.estimate(self.settings))

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

    def held(self, rows: int, nbytes: int) -> None:
        """A read's chunk after the per-fragment ops: ``rows`` rows holding ``nbytes`` (its arrays' ``nbytes``)."""
        if rows > 0:
            with self._lock:
                self._measured = max(self._measured, nbytes / rows)

    def estimate(self, settings: Settings) -> int:
        """The bytes ``settings`` hold at the bytes a row measured so far (:attr:`row_bytes`)."""
        return self.budget.estimate(settings, self.row_bytes)

    def fits(self, settings: Settings) -> bool:
        return self.estimate(settings) <= self.budget.memory_limit

    def put(self, blocked: float) -> None:
        """The producer queued one batch after being blocked ``blocked`` seconds; decides when an interval is up."""
        with self._lock:
            grown = self._measured > self.row_bytes
            if grown:
                self.row_bytes = self._measured
        if grown and not self.fits(self.settings):
            self._lower_to_fit()
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
            if self.fits(candidate):
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
                f"{size_text(self.estimate(wanted))} > the {size_text(self.budget.memory_limit)} limit",
            )

    def _deeper_queue(self, current: Settings, rate: float, wait: float, blocked: float) -> None:
        depth = min(self.max_prefetch, self._prefetch_ceiling, 2 * current.prefetch)
        if depth <= current.prefetch:
            return
        candidate = replace(current, prefetch=depth)
        if not self.fits(candidate):
            self._held_by_memory = True
            return
        self._trial = (current, rate)  # kept only if the batch rate rises, as for threads
        self._apply(
            candidate,
            f"the consumer waited {wait:.0%} while the producer was blocked on a full queue {blocked:.0%} "
            "of the time: production is bursty, a deeper prefetch queue",
        )

    def _lower_to_fit(self) -> None:
        """Lowers read-ahead (to the threads), then prefetch (halved), then threads, until the measured cost fits.

        Called when a measure after the ops shows that the current settings pass the limit. If even one
        thread, one fragment ahead and one batch queued do not fit, those are taken (and held by memory).
        """
        current = new = self.settings
        while not self.fits(new):
            if new.read_ahead > new.read_threads:
                new = replace(new, read_ahead=max(new.read_threads, new.read_ahead // 2))
            elif new.prefetch > 1:
                new = replace(new, prefetch=new.prefetch // 2)
            elif new.read_threads > 1:
                new = replace(new, read_threads=new.read_threads - 1, read_ahead=new.read_threads - 1)
            else:
                self._held_by_memory = True
                break
        if new == current:
            return
        self._trial = None  # a raise on trial is judged no more: the lowered settings are not its comparison
        self._apply(
            new,
            f"the rows hold {self.row_bytes:,.0f} bytes each after the ops (the source's estimate: "
            f"{self.budget.row_bytes:,.0f}): {size_text(self.estimate(current))} > the "
            f"{size_text(self.budget.memory_limit)} limit, lower",
        )

    def _apply(self, new: Settings, reason: str) -> None:
        old = self.settings
        nbytes = self.estimate(new)
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
            self.estimate(self.settings),
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
            estimated_bytes=self.estimate(settings),
            memory_limit=self.budget.memory_limit,
            max_threads=min(self.max_threads, self._ceiling),
            held_by_memory=self._held_by_memory,
            held_by_cpu=self._held_by_cpu,
            row_bytes=self.row_bytes,
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
