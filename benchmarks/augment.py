"""Augmented image ``fit``: streamfeed's ``random_map`` against tf.data's stateless random ops, same images and model.

Each approach trains the same tiny CNN (``images.tiny_model``: Rescaling →
Conv2D(8, 3, strides 4) → pooling → Dense(10)) for ``--epochs`` epochs on
the same generated 256x256 JPEG class folders (``images.generate``),
shuffled, with an Inception crop to 224x224 and a left-right flip drawn per
image, TensorFlow backend, each in a fresh process:

* ``streamfeed``: ``read_images(size=(256, 256)).random_map(compose(
  random_resized_crop((224, 224)), random_flip()), seed=1).shuffle(0)
  .batch(64).to_keras(...)``: the draws keyed on (seed, epoch, row), in the
  read threads;
* ``tf.data``: files listed and shuffled each epoch (``shuffle(len, seed=0,
  reshuffle_each_iteration=True)``), ``decode_jpeg`` + ``resize`` to 256,
  then ``stateless_sample_distorted_bounding_box`` (area 0.08–1, aspect
  3/4–4/3, as streamfeed's) + ``crop`` + ``resize`` to 224 and
  ``stateless_random_flip_left_right``, seeds from ``Dataset.random(seed=1)``
  zipped in, ``num_parallel_calls=AUTOTUNE``, batch 64, prefetch;
* ``keras-layers``: streamfeed's un-augmented 256x256 batches with Keras's
  ``RandomCrop(224, 224)`` and ``RandomFlip("horizontal")`` as the model's
  first layers (on an accelerator they would run there; here, as on every
  CPU-only machine, they take the same cores). A plain crop, not the
  Inception crop: Keras has no random resized crop layer.

Per approach: images/s over the epochs after the first (the first compiles
and warms), the process's CPU ms per image over those epochs, peak RSS, and
the ratio against tf.data.

Usage::

    python benchmarks/augment.py                 # 4 000 images, 3 epochs
    python benchmarks/augment.py --images 1000 --epochs 2   # smoke run

Images are generated once under ``~/.cache/streamfeed/bench/images/`` (or
``--data-dir``), never in the repository.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import _common as C
import images as I

SCRIPT = str(Path(__file__).resolve())
SIDE, OUT, BATCH = 256, 224, I.BATCH
APPROACHES = ("streamfeed", "tf.data", "keras-layers")


def streamfeed_data(path: Path, augment: bool):
    import streamfeed as sf
    from streamfeed.transforms.augment import compose, random_flip, random_resized_crop

    ds = sf.read_images(path, size=(SIDE, SIDE))
    if augment:
        ds = ds.random_map(compose(random_resized_crop((OUT, OUT)), random_flip()), seed=1, name="augment")
    return ds.shuffle(seed=0).batch(BATCH).to_keras(features=["image"], label="label", inputs="dict", dtype="uint8")


def tf_data(path: Path):
    import tensorflow as tf

    files, labels = I.list_files(path)
    pairs = tf.data.Dataset.from_tensor_slices((files, labels))
    pairs = pairs.shuffle(len(files), seed=0, reshuffle_each_iteration=True)
    seeds = tf.data.Dataset.random(seed=1).batch(2)  # one (2,) int64 seed per image, a new one every epoch

    def load(element, seed):
        name, label = element
        image = tf.image.resize(tf.io.decode_jpeg(tf.io.read_file(name), channels=3), (SIDE, SIDE))
        begin, size, _ = tf.image.stateless_sample_distorted_bounding_box(
            tf.shape(image),
            tf.zeros((1, 0, 4)),
            seed=seed,
            area_range=(0.08, 1.0),
            aspect_ratio_range=(3 / 4, 4 / 3),
            min_object_covered=0.0,
            use_image_if_no_bounding_boxes=True,
        )
        crop = tf.image.resize(tf.slice(image, begin, size), (OUT, OUT))
        crop = tf.image.stateless_random_flip_left_right(crop, seed=seed + 1)
        return {"image": tf.cast(tf.clip_by_value(crop, 0, 255), tf.uint8)}, label

    return (
        tf.data.Dataset.zip((pairs, seeds))
        .map(load, num_parallel_calls=tf.data.AUTOTUNE)
        .batch(BATCH)
        .prefetch(tf.data.AUTOTUNE)
    )


def model_for(approach: str):
    import keras

    if approach != "keras-layers":
        return I.tiny_model(OUT)
    inputs = keras.Input((SIDE, SIDE, 3), name="image")
    x = keras.layers.RandomCrop(OUT, OUT, seed=1)(inputs)
    x = keras.layers.RandomFlip("horizontal", seed=1)(x)
    x = keras.layers.Rescaling(1 / 255)(x)
    x = keras.layers.Conv2D(8, 3, strides=4, activation="relu")(x)
    x = keras.layers.GlobalAveragePooling2D()(x)
    model = keras.Model(inputs, keras.layers.Dense(I.CLASSES)(x))
    model.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return model


def worker(approach: str, path: str, epochs: int) -> dict:
    import keras

    path_ = Path(path)
    count = len(I.list_files(path_)[0])
    C.warm_files(I.list_files(path_)[0])
    keras.utils.set_random_seed(0)
    model = model_for(approach)
    data = tf_data(path_) if approach == "tf.data" else streamfeed_data(path_, augment=approach == "streamfeed")
    marks: list[tuple[float, float]] = []

    class Clock(keras.callbacks.Callback):
        def on_epoch_end(self, epoch, logs=None):
            marks.append((C.now(), time.process_time()))

    marks.append((C.now(), time.process_time()))
    model.fit(data, epochs=epochs, verbose=0, callbacks=[Clock()])
    if hasattr(data, "close"):
        data.close()
    (wall0, cpu0), (wall1, cpu1) = marks[1], marks[-1]  # the epochs after the first
    images = count * (epochs - 1)
    return {
        "images": images,
        "rate": images / (wall1 - wall0),
        "cpu_ms_per_image": 1e3 * (cpu1 - cpu0) / images,
        "first_epoch_s": marks[1][0] - marks[0][0],
        "peak_rss": C.peak_rss(),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=4000)
    parser.add_argument("--epochs", type=int, default=3, help="at least 2: the first is not timed")
    parser.add_argument("--data-dir", type=Path, default=I.DEFAULT_DATA_DIR)
    parser.add_argument("--timeout", type=float, default=1800)
    parser.add_argument("--worker", nargs=3, metavar=("APPROACH", "PATH", "EPOCHS"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        approach, path, epochs = args.worker
        C.emit(worker(approach, path, int(epochs)))
        return 0
    if args.epochs < 2:
        parser.error("--epochs must be at least 2")
    path = I.generate(args.data_dir, args.images, SIDE)
    print(f"$ {C.command_line()}\nload average before: {os.getloadavg()}")
    results = {}
    for approach in APPROACHES:
        results[approach] = result = C.run_worker(
            SCRIPT, [approach, str(path), str(args.epochs)], args.timeout, env={"KERAS_BACKEND": "tensorflow"}
        )
        if "error" in result:
            print(f"{approach}: {result['error']}", file=sys.stderr)
    rows = []
    base = results["tf.data"]
    for approach, r in results.items():
        if "error" in r:
            continue
        ratio = f"{r['rate'] / base['rate']:.2f}" if "error" not in base else "-"
        cpu = f"{r['cpu_ms_per_image'] / base['cpu_ms_per_image']:.2f}" if "error" not in base else "-"
        rows.append([approach, C.rate(r["rate"]), ratio, f"{r['cpu_ms_per_image']:.2f}", cpu, C.mib(r["peak_rss"])])
    print(f"{args.images} JPEGs {SIDE}² → {OUT}², Inception crop + flip per image, TF fit, epochs 2–{args.epochs}:")
    print(C.table(["approach", "img/s", "× tf.data", "CPU ms/img", "CPU × tf.data", "peak RSS"], rows))
    print(f"load average after: {os.getloadavg()}")
    print(json.dumps(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
