"""One-pass statistics of any source, frozen to versioned JSON.

    from streamfeed.stats import compute_stats, Stats
    stats = compute_stats(sf.read_parquet("data/"), label="y")
    stats.save("stats.json")
    stats = Stats.load("stats.json"); stats.check_source(dataset)
    stats["f0"].mean, stats["f0"].quantiles(10), stats["city"].vocabulary

Needs the ``datasketches`` package (pip extra ``stats``) for quantile,
frequent-items and HLL sketches.
"""

from .compute import compute_stats
from .io import StaleStatsError
from .result import ColumnStats, Stats

__all__ = ["ColumnStats", "StaleStatsError", "Stats", "compute_stats"]
