"""The Dataset builders that draw an epoch's rows instead of serving each once: ``balance`` and
``hard_examples``, and what they drew (``sampling_report``).

They live apart from the other builders in ``dataset.py`` (one job: which rows an epoch draws, the
samplers being in :mod:`streamfeed.sampling` and :mod:`streamfeed.hard_examples`); ``Dataset``
inherits them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal, Mapping, TypeVar, cast

from ..errors import ArgumentError, describe
from .combinations import buckets_not_balanced, one_sampler
from .queries import Queries

D = TypeVar("D", bound="Draws")  # the Dataset a builder is called on, and returns


class Draws(Queries):
    """``balance``, ``hard_examples`` and ``sampling_report`` of a :class:`~streamfeed.pipeline.dataset.Dataset`."""

    if TYPE_CHECKING:

        def shuffle(self: D, seed: int | None = None, *, window: int | None = None) -> D: ...

        def _with(self: D, *, same_rows: bool | None = None, **changes: Any) -> D: ...

    def balance(
        self: D,
        label: str,
        *,
        stats: Any,
        proportions: "str | Mapping[Any, float]" = "uniform",
        samples_per_epoch: int | None = None,
        seed: int | None = None,
    ) -> D:
        """Draws rows so that the classes of ``label`` appear in target proportions.

        ``proportions``: ``"uniform"`` (every class equally often) or
        ``{class: weight}`` (normalised; classes left out are not drawn).
        Rows are drawn with replacement per read unit, with probabilities
        ``target[c] / count[c]`` from ``stats`` (a ``streamfeed.stats.Stats``),
        so rare classes are oversampled and common ones undersampled.
        ``samples_per_epoch`` (default: this shard's rows) is the exact epoch
        length. Implies a shuffle; ``seed`` defaults to the shuffle's seed.
        See :mod:`streamfeed.sampling` and :meth:`sampling_report`.
        """
        from ..sampling import make_sampler

        if self.bucket is not None:
            raise buckets_not_balanced()
        if self.sampler is not None:
            raise one_sampler()
        dataset = self if self.shuffled else self.shuffle(seed)
        draw_seed = seed if seed is not None else dataset.seed
        sampler = make_sampler(
            stats,
            label,
            proportions=proportions,  # type: ignore[arg-type]
            samples_per_epoch=samples_per_epoch,
            seed=cast(int, draw_seed),  # set: dataset is shuffled
        )
        return dataset._with(sampler=sampler)

    def hard_examples(
        self: D,
        ids: str,
        *,
        rule: Literal["loss", "quantile", "temperature"] = "loss",
        floor: float = 0.2,
        quantile: float = 0.75,
        temperature: float = 1.0,
        max_rows: int | None = 1_000_000,
        smoothing: float = 0.7,
        samples_per_epoch: int | None = None,
        seed: int | None = None,
    ) -> D:
        """Draws each epoch's rows by their training loss in the epochs before (hard examples more often).

        ``ids`` names a column unique per row; pass the same to
        ``to_keras(ids=)`` and give ``fit`` a
        :class:`streamfeed.keras.HardExampleMiner`, which measures each
        trained row's loss. ``rule``: ``"loss"`` (proportional to it),
        ``"quantile"`` (rows at or above the ``quantile`` of the losses) or
        ``"temperature"`` (a softmax of the losses). Every row is drawn, in
        expectation, at least ``floor`` times as often as a uniform draw
        would; ``floor=1`` is uniform. ``samples_per_epoch`` (default: the
        rows) is the exact epoch length; rows are drawn with replacement per
        read unit. At most ``max_rows`` rows are scored (16 bytes each); a
        row's score is a moving average of its losses over epochs, the older
        weighing ``smoothing``.
        Implies a shuffle; ``seed`` defaults to the shuffle's. The method
        and its guarantees: :mod:`streamfeed.hard_examples`.
        """
        from ..hard_examples import make_hard_sampler

        if self.bucket is not None:
            raise buckets_not_balanced()
        if self.sampler is not None:
            raise one_sampler()
        dataset = self if self.shuffled else self.shuffle(seed)
        sampler = make_hard_sampler(
            ids=ids,
            rule=rule,
            floor=floor,
            quantile=quantile,
            temperature=temperature,
            max_rows=max_rows,
            smoothing=smoothing,
            samples_per_epoch=samples_per_epoch,
            seed=cast(int, seed if seed is not None else dataset.seed),  # set: dataset is shuffled
        )
        return dataset._with(sampler=sampler)

    def sampling_report(self, epoch: int | None = None) -> dict:
        """What ``balance`` (class counts and proportions) or ``hard_examples`` (draws and the score
        distribution) emitted in ``epoch`` (the latest by default)."""
        if self.sampler is None:
            raise ArgumentError(
                describe("sampling_report() needs balance() or hard_examples()", fix="call .balance(...) first")
            )
        return self.sampler.report(epoch)
