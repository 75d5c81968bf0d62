"""SQL benchmark: a PostgreSQL table into training batches, streamfeed ``read_sql`` vs. pandas ``read_sql`` chunks.

A real PostgreSQL server (Debian's ``initdb`` + ``pg_ctl``, started in a
temporary directory on loopback by ``tests/sources/sql/_postgres.py`` and
stopped by pid) holds ``--rows`` rows of ``id bigint primary key``, eight
``real`` features and an ``int`` label, loaded with ``psql \\copy``. One
epoch each, every approach in a fresh process, interleaved ``--repeat``
times (each approach's least CPU is kept), batches of 1024 rows as a model
takes them (``x (1024, 8)`` float32, ``y``):

* ``streamfeed``: ``read_sql(url, table=..., key="id")`` (ADBC: Arrow pages
  of keyset ranges, ``fragment_rows=50_000``), ``batch(1024)``, the feature
  matrix stacked per batch; the open (the exact count and key boundaries in
  one snapshot) is timed too;
* ``streamfeed_shuffled``: the same with ``shuffle(seed=1)``;
* ``streamfeed_sqlalchemy``: the same ``read_sql`` given a
  ``postgresql+psycopg://`` URL: the same keyset fragments through
  SQLAlchemy Core + psycopg 3, rows to Arrow column by column;
* ``pandas``: ``pandas.read_sql("SELECT ... ORDER BY id", engine,
  chunksize=65536)`` over SQLAlchemy + psycopg 3, each chunk stacked and cut
  into batches (the generator users write; no shuffle, no resume, no count);
* ``ray``: Ray Data's ``read_sql(sql, psycopg.connect, shard_keys=["id"])``
  (hash-sharded queries, ``MD5(id) % n``) on a local cluster of 2 CPUs,
  ``iter_batches(1024)``; its time includes starting the cluster (as a job
  pays it), its CPU the cluster's processes (the GCS, the raylet and
  its workers), and its peak RSS the driver's peak plus those processes'
  resident memory at the end of the epoch.

Printed: rows/s, CPU seconds per million rows (process CPU, all threads; the
server's CPU is not counted), peak RSS, and each approach against pandas.
The pandas path needs ``pip install 'psycopg[binary]' 'sqlalchemy>=2.0.42'`` (pandas 3's minimum), which
the tests do not.

Usage::

    python benchmarks/sql.py                  # 2 M rows
    python benchmarks/sql.py --rows 10000000 --repeat 1
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
from pathlib import Path

import numpy as np

import _common as C

SCRIPT = str(Path(__file__).resolve())
TABLE = "events"
FEATURES = [f"f{i}" for i in range(8)]
APPROACHES = {
    "streamfeed": "streamfeed read_sql (ADBC) -> batch(1024)",
    "streamfeed_shuffled": "streamfeed read_sql (ADBC) -> shuffle -> batch(1024)",
    "streamfeed_sqlalchemy": "streamfeed read_sql (SQLAlchemy + psycopg) -> batch(1024)",
    "pandas": "pandas read_sql(chunksize=65536) over SQLAlchemy + psycopg",
    "ray": "Ray Data read_sql(shard_keys=['id'], 2 CPUs) over psycopg -> iter_batches(1024)",
}


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def load(server, rows: int) -> None:
    """The table, written as CSV in blocks and copied in by psql (a real writer)."""
    path = server.root / f"{TABLE}.csv"
    rng = np.random.default_rng(0)
    with open(path, "w") as handle:
        for start in range(0, rows, 500_000):
            n = min(500_000, rows - start)
            block = np.column_stack(
                [np.arange(start, start + n), rng.normal(size=(n, 8)).round(4), rng.integers(0, 2, n)]
            )
            np.savetxt(handle, block, delimiter=",", fmt=["%d"] + ["%.4f"] * 8 + ["%d"])
    columns = ", ".join(f"{name} real" for name in FEATURES)
    server.psql(f"DROP TABLE IF EXISTS {TABLE}", f"CREATE TABLE {TABLE} (id bigint PRIMARY KEY, {columns}, y int)")
    server.psql(f"\\copy {TABLE} FROM '{path}' WITH (FORMAT csv)", "VACUUM ANALYZE")
    path.unlink()


def _ray_epoch(url: str) -> tuple[int, float, int]:
    """One epoch through Ray Data's read_sql on a local 2-CPU cluster: rows, and the CPU of the cluster's
    processes (children of this one: the GCS, the raylet and its workers), which the driver's own CPU misses."""
    import psutil
    import psycopg

    import ray

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        data = ray.data.read_sql(
            f"SELECT id, {', '.join(FEATURES)}, y FROM {TABLE}", lambda: psycopg.connect(url), shard_keys=["id"]
        )
        count = 0
        for batch in data.iter_batches(batch_size=1024, batch_format="numpy"):
            x = np.column_stack([batch[name] for name in FEATURES])
            count += len(x)
        cluster, resident = 0.0, 0
        for child in psutil.Process().children(recursive=True):
            try:
                times = child.cpu_times()
                cluster += times.user + times.system + times.children_user + times.children_system
                resident += child.memory_info().rss
            except psutil.Error:
                pass
        return count, cluster, resident
    finally:
        ray.shutdown()


def worker(approach: str, url: str) -> dict:
    started, cpu = C.now(), _cpu()
    count, cluster_cpu, cluster_rss = 0, 0.0, 0
    if approach == "ray":
        count, cluster_cpu, cluster_rss = _ray_epoch(url)
    elif approach.startswith("streamfeed"):
        import streamfeed as sf

        through = url.replace("postgresql://", "postgresql+psycopg://") if approach.endswith("sqlalchemy") else url
        data = sf.read_sql(through, table=TABLE, key="id")
        if approach == "streamfeed_shuffled":
            data = data.shuffle(seed=1)
        with data.batch(1024).iter_epoch(0) as stream:
            for batch in stream:
                x = np.column_stack([batch[name] for name in FEATURES])
                count += len(x)
    else:
        import pandas as pd
        import sqlalchemy

        engine = sqlalchemy.create_engine(url.replace("postgresql://", "postgresql+psycopg://"))
        query = f"SELECT id, {', '.join(FEATURES)}, y FROM {TABLE} ORDER BY id"
        with engine.connect() as connection:
            for frame in pd.read_sql(query, connection, chunksize=65_536):
                x_all = frame[FEATURES].to_numpy(np.float32)
                y_all = frame["y"].to_numpy()
                for at in range(0, len(x_all), 1024):
                    x, _ = x_all[at : at + 1024], y_all[at : at + 1024]
                    count += len(x)
        engine.dispose()
    seconds, cpu_seconds = C.now() - started, _cpu() - cpu + cluster_cpu
    return {
        "rows": count,
        "seconds": seconds,
        "cpu_seconds": cpu_seconds,
        "rows_per_s": count / seconds,
        "peak_rss": C.peak_rss() + cluster_rss,  # Ray: the driver's peak plus the cluster's processes at the end
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", type=int, default=2_000_000)
    p.add_argument("--repeat", type=int, default=2, help="interleaved runs; each approach's least CPU is kept")
    p.add_argument("--approaches", default=",".join(APPROACHES), help="a subset, comma-separated")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--approach", help=argparse.SUPPRESS)
    p.add_argument("--url", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        C.emit(worker(args.approach, args.url))
        return 0
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "sources" / "sql"))
    from _postgres import PostgresServer

    server = PostgresServer()
    try:
        load(server, args.rows)
        load_start = os.getloadavg()[0]
        results: dict[str, dict] = {}
        for _ in range(max(1, args.repeat)):
            for approach in args.approaches.split(","):
                result = C.run_worker(SCRIPT, ["--approach", approach, "--url", server.url], timeout=3600)
                print(
                    f"  {approach}: { {k: v for k, v in result.items() if k != 'error'} }", file=sys.stderr, flush=True
                )
                if "error" in result:
                    print(f"  {approach} failed: {str(result['error'])[-500:]}", file=sys.stderr)
                    continue
                best = results.get(approach)
                if best is None or result["cpu_seconds"] < best["cpu_seconds"]:
                    results[approach] = result
    finally:
        server.remove()
    base = results.get("pandas", {}).get("cpu_seconds")
    rows = []
    for approach, result in results.items():
        rows.append(
            [
                APPROACHES[approach],
                C.rate(result["rows_per_s"]),
                f"{result['cpu_seconds'] / result['rows'] * 1e6:.2f}",
                C.mib(result["peak_rss"]),
                f"{result['cpu_seconds'] / base:.2f}x" if base else "-",
            ]
        )
    print(f"{args.rows:,} rows x 10 columns in PostgreSQL on loopback")
    print(f"command: {C.command_line()}; load average {load_start:.2f} at start, {os.getloadavg()[0]:.2f} at end")
    print(C.table(["approach", "rows/s", "CPU s/Mrow", "peak RSS MiB", "CPU / pandas"], rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
