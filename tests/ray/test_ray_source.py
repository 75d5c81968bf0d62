"""``read_ray``: Ray decodes, streamfeed gives exact epochs, seeded order, resume, shards and Keras.

One local Ray started by the module fixture (2 CPUs, no dashboard) and
shut down after; the data are small PNG files written with Pillow, read by
``ray.data.read_binary_files`` and decoded in a Ray ``map_batches``.
"""

from __future__ import annotations

import inspect
import io
import json
import subprocess
import sys
import threading
import time

import keras
import numpy as np
import pyarrow as pa
import pytest
from PIL import Image

import streamfeed as sf
from streamfeed.errors import ArgumentError, StateError, StorageError

ray = pytest.importorskip("ray", reason="needs streamfeed[ray]")

# Ray 2.60's DataContext sets its own deprecated fields (use_push_based_shuffle, use_polars, ...) when
# it builds or copies itself (ray/data/context.py:1285-1299); nothing of ours is involved.
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning:ray.data.context")

IMAGES = 240
SIDE = 6


def pixel(ids: np.ndarray) -> np.ndarray:
    """The value every pixel of image ``id`` holds (the test's truth)."""
    return (np.asarray(ids) * 7 % 251).astype(np.uint8)


def decode(batch: dict) -> dict:
    """The Ray map: PNG bytes -> (rows, 6, 6, 3) uint8 and the id from the file name."""
    images = np.stack([np.asarray(Image.open(io.BytesIO(data)).convert("RGB")) for data in batch["bytes"]])
    ids = np.array([int(str(path).rsplit("/", 1)[-1].split(".")[0]) for path in batch["path"]], dtype=np.int64)
    return {"id": ids, "image": images, "y": (ids % 2).astype(np.float32)}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    folder = tmp_path_factory.mktemp("pngs")
    for i in range(IMAGES):
        Image.fromarray(np.full((SIDE, SIDE, 3), pixel(i), dtype=np.uint8)).save(folder / f"{i}.png")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])  # Ray's workers cannot import this test file
    ray.data.DataContext.get_current().enable_progress_bars = False
    try:
        yield folder
    finally:
        ray.shutdown()


def ray_dataset(folder, blocks: int = 8):
    return ray.data.read_binary_files(str(folder), include_paths=True, override_num_blocks=blocks).map_batches(decode)


@pytest.fixture(scope="module")
def images(cluster):
    return sf.read_ray(ray_dataset(cluster), name="pngs", version=1)


def epoch_ids(ds, epoch: int = 0, state=None) -> list[np.ndarray]:
    with ds.iter_epoch(epoch, state=state) as it:
        out = []
        for batch in it:
            assert np.array_equal(batch["image"][:, 0, 0, 0], pixel(batch["id"]))  # rows stay whole
            out.append(batch["id"].copy())
    return out


def test_every_row_once_per_epoch_in_a_reproducible_seeded_order(images):
    assert len(images.source.fragments) == 8
    assert images.source.column_names == ["id", "image", "y"]
    train = images.shuffle(seed=3).batch(32)
    first = epoch_ids(train)
    assert sorted(np.concatenate(first).tolist()) == list(range(IMAGES))
    assert [len(b) for b in first] == [32] * 7 + [16]
    again = np.concatenate(epoch_ids(images.shuffle(seed=3).batch(32)))
    assert np.array_equal(np.concatenate(first), again)
    other = np.concatenate(epoch_ids(train, epoch=1))
    assert sorted(other.tolist()) == list(range(IMAGES)) and not np.array_equal(other, again)


def test_resume_mid_epoch_through_json_is_exact(images):
    train = images.shuffle(seed=5).batch(20)
    whole = epoch_ids(train)
    with train.iter_epoch(0) as it:
        head = [next(it)["id"].copy() for _ in range(4)]
        state = json.loads(json.dumps(it.get_state()))
    tail = epoch_ids(train, state=state)
    assert [b.tolist() for b in head + tail] == [b.tolist() for b in whole]


def test_two_shards_partition_the_epoch_equally(images):
    train = images.shuffle(seed=2)
    halves = [np.concatenate(epoch_ids(train.shard(index, 2).batch(16))) for index in range(2)]
    assert len(halves[0]) == len(halves[1]) == IMAGES // 2
    assert sorted(np.concatenate(halves).tolist()) == list(range(IMAGES))


def test_fingerprint_follows_the_ray_dataset(cluster, images):
    with images.shuffle(seed=1).batch(40).iter_epoch(0) as it:
        next(it)
        saved = it.get_state()
    fingerprint = images.source.fingerprint()
    assert fingerprint["blocks"] == 8 and fingerprint["rows"] == IMAGES and fingerprint["version"] == 1
    rerun = sf.read_ray(ray_dataset(cluster), name="pngs", version=1)  # the same pipeline run again, as on resume
    assert rerun.source.fingerprint() == fingerprint
    assert [b.tolist() for b in epoch_ids(rerun.shuffle(seed=1).batch(40), state=saved)] == [
        b.tolist() for b in epoch_ids(images.shuffle(seed=1).batch(40), state=saved)
    ]
    for changed in (
        sf.read_ray(ray_dataset(cluster), name="pngs", version=2),  # the user's version
        sf.read_ray(ray_dataset(cluster, blocks=6), name="pngs", version=1),  # the block layout
        sf.read_ray(ray_dataset(cluster).drop_columns(["y"]), name="pngs", version=1),  # the schema and plan
    ):
        assert changed.source.fingerprint() != fingerprint
        with pytest.raises(StateError):
            changed.shuffle(seed=1).batch(40).iter_epoch(state=saved)


def test_a_limited_pipeline_streams_exactly_its_rows(cluster):
    limited = sf.read_ray(ray.data.range(100, override_num_blocks=4).map_batches(lambda b: {"id": b["id"]}).limit(30))
    assert sum(fragment.num_rows for fragment in limited.source.fragments) == 30
    assert sorted(epoch_ids_plain(limited.shuffle(seed=0).batch(7))) == list(range(30))


class Holder:
    """A Ray actor that owns blocks: when it dies, its blocks are lost (as when a node goes)."""

    def blocks(self, count: int) -> list:
        return [ray.put(pa.table({"id": np.arange(i * 25, (i + 1) * 25)})) for i in range(count)]


def test_a_lost_block_raises_naming_it(cluster):
    holder = ray.remote(Holder).remote()
    refs = ray.get(holder.blocks.remote(4))
    lost = sf.read_ray(ray.data.from_arrow_refs(refs))
    assert [fragment.num_rows for fragment in lost.source.fragments] == [25] * 4
    ray.kill(holder)
    wait_until_lost(refs[0])
    with pytest.raises(StorageError, match="A Ray block could not be fetched") as raised:
        epoch_ids_plain(lost.batch(10))
    message = str(raised.value)
    assert "OwnerDiedError" in message
    assert any(f"block {i} " in message and refs[i].hex() in message for i in range(4)), message


def wait_until_lost(ref, tries: int = 300) -> None:
    """Ray learns of a dead owner a moment after the kill (4 polls of 0.1 s here): wait for it, boundedly."""
    for _ in range(tries):
        try:
            ray.get(ref, timeout=10)
        except ray.exceptions.OwnerDiedError:
            return
        time.sleep(0.1)
    raise AssertionError(f"object {ref.hex()} still readable after its owner was killed")


def epoch_ids_plain(ds) -> list[int]:
    with ds.iter_epoch(0) as it:
        return [int(i) for batch in it for i in batch["id"]]


def test_keras_fit_on_ray_decoded_images(images):
    model = keras.Sequential(
        [keras.Input((SIDE, SIDE, 3)), keras.layers.Rescaling(1 / 255), keras.layers.Flatten(), keras.layers.Dense(1)]
    )
    model.compile("sgd", "mse")
    train = images.shuffle(seed=4).batch(32).to_keras(features=["image"], label="y", model=model)
    history = model.fit(train, epochs=2, verbose=0)
    assert len(history.history["loss"]) == 2 and np.all(np.isfinite(history.history["loss"]))
    assert len(train) == -(-IMAGES // 32)


def test_anything_but_a_ray_dataset_is_refused(cluster):
    with pytest.raises(ArgumentError, match="read_ray takes a Ray Data dataset"):
        sf.read_ray([{"id": 1}])


def test_streamfeed_imports_ray_only_when_a_ray_source_opens():
    code = "import sys, streamfeed as sf; sf.read_ray; sf.read_parquet; print('ray' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_streaming_split_gives_each_worker_an_equal_disjoint_share(cluster):
    """The other direction (docs/scale.md, "Ray Data"): Ray splits, each worker iterates its own part.

    ``streaming_split`` needs every split consumed at once, so the two
    workers are two threads here, as they would be two training processes.
    """
    splits = ray_dataset(cluster).streaming_split(2, equal=True)
    seen: list[list[int]] = [[], []]
    errors: list[BaseException] = []

    def worker(index: int) -> None:
        try:
            for batch in splits[index].iter_batches(batch_size=20, batch_format="numpy"):
                seen[index] += batch["id"].tolist()
        except BaseException as exc:  # handed to the test thread below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(index,)) for index in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    assert len(seen[0]) == len(seen[1]) == IMAGES // 2
    assert sorted(seen[0] + seen[1]) == list(range(IMAGES))


def _with_side_file(folder, side) -> "ray.data.Dataset":
    """A pipeline whose map reads ``side`` (a lookup table, as real pipelines do): Ray's plan cannot see it."""

    def add_offset(batch: dict) -> dict:
        offset = float(side.read_text())
        return {**batch, "y": batch["y"] + np.float32(offset)}

    return ray_dataset(folder).map_batches(add_offset)


def test_a_source_whose_fingerprint_cannot_see_values_is_not_cached_without_a_version(cluster, tmp_path):
    side = tmp_path / "offset.txt"
    side.write_text("0")
    before = sf.read_ray(_with_side_file(cluster, side), name="side")
    side.write_text("100")  # the input changed: the rows do, the plan text, counts and schema do not
    after = sf.read_ray(_with_side_file(cluster, side), name="side")
    assert after.source.fingerprint() == before.source.fingerprint()  # what the fingerprint cannot see
    assert not after.source.info.sees_values
    for ds in (before, after):
        with pytest.raises(ArgumentError, match="version="):
            ds.cache(tmp_path / "cache")
    named = sf.read_ray(_with_side_file(cluster, side), name="side", version="offset-100")
    assert named.source.info.sees_values
    rows = [batch["y"].copy() for batch in named.cache(tmp_path / "cache").batch(40).iter_epoch(0)]
    assert sorted(np.concatenate(rows).tolist()) == sorted((np.arange(IMAGES) % 2 + 100.0).tolist())


def test_every_read_ray_keyword_is_in_the_fingerprint_or_excluded(cluster):
    from streamfeed.cache.key import cache_key
    from streamfeed.core import NOT_ROW_SETTINGS

    base = {"dataset": ray_dataset(cluster), "name": "pngs", "version": 1}
    changed = {
        "dataset": ray_dataset(cluster).drop_columns(["y"]),
        "name": "other",
        "version": 2,
        "nulls": "drop",
        "fill": 0.0,
        "list_lengths": {"id": 1},
    }
    opened = sf.read_ray(**base).source
    unchanged = []
    for keyword in inspect.signature(sf.read_ray).parameters:
        if keyword in NOT_ROW_SETTINGS:
            continue
        assert keyword in changed, f"read_ray({keyword}=) is neither given another value here nor excluded"
        source = sf.read_ray(**{**base, keyword: changed[keyword]}).source
        if source.fingerprint() == opened.fingerprint() or cache_key(source) == cache_key(opened):
            unchanged.append(keyword)
    assert not unchanged
