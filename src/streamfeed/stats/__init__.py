"""One-pass statistics of any source, frozen to versioned JSON.

    from streamfeed.stats import compute_stats, Stats
    stats = compute_stats(sf.read_parquet("data/"), label="y")
    stats.save("stats.json")
    stats = Stats.load("stats.json"); stats.check_source(dataset)
    stats["f0"].mean, stats["f0"].quantiles(10), stats["city"].vocabulary

Quantiles come from a deterministic position-hashed sample (identical for
any thread count; rank error in ``quantile_rank_error``); the
``datasketches`` package (pip extra ``stats``) is needed for vocabularies
past ``max_vocabulary`` (frequent-items and HLL sketches) and for the
opt-in ``quantiles="kll"``.
"""

from .compute import compute_stats
from .io import StaleStatsError
from .result import ColumnStats, Stats

__all__ = ["ColumnStats", "StaleStatsError", "Stats", "compute_stats"]
