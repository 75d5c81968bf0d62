"""Layers from stats, and class weights, on the backend named by ``KERAS_BACKEND``.

    KERAS_BACKEND=jax python _layers_driver.py '{"dir": "/tmp/x"}'

Writes a small Parquet file, computes its stats, and reports (one line
``RESULT {json}``) for each check what happened, exceptions included, so
``test_layers.py`` can assert on every part even when one fails.
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: the stats helper

ROWS, ROW_GROUP, BATCH, BINS = 1200, 150, 100, 4
FEATURES = ["f0", "f1", "f2", "f3"]
CODES = {11: 500, 4: 300, 27: 200, 8: 120, 3: 80}  # distinct counts: no frequency ties
CITIES = {"oslo": 450, "lima": 350, "kyiv": 250, "rome": 150}


def write_data(path: Path) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    if path.exists():
        return path
    rng = np.random.default_rng(0)
    features = (rng.normal(size=(ROWS, 4)) * [1.0, 3.0, 0.5, 10.0] + [0.0, 5.0, -2.0, 100.0]).astype("float32")
    code = rng.permutation(np.repeat(list(CODES), list(CODES.values()))).astype("int64")
    city = rng.permutation(np.repeat(list(CITIES), list(CITIES.values())))
    y = (features[:, 0] + 0.2 * features[:, 1] > 1.0).astype("int64") + (code == 3)
    columns = {name: features[:, i] for i, name in enumerate(FEATURES)}
    columns.update(code=code, city=np.array(city, dtype=object), y=y.astype("int64"))
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    pq.write_table(pa.table(columns), tmp, row_group_size=ROW_GROUP)
    os.replace(tmp, path)
    return path


def caught(fn):
    try:
        return {"ok": True, "value": fn()}
    except Exception as exc:  # reported to the test
        return {
            "ok": False,
            "type": type(exc).__name__,
            "message": str(exc)[:2000],
            "traceback": traceback.format_exc()[-2500:],
        }


def numpy_of(layer_output) -> np.ndarray:
    import keras

    return np.asarray(keras.ops.convert_to_numpy(layer_output))


# -------------------------------------------------------------- equivalence
def normalization_vs_adapt(stats, data) -> dict:
    import keras

    from streamfeed.keras.layers import normalization_layer

    matrix = np.stack([data[f] for f in FEATURES], axis=1)
    ours = normalization_layer(stats, FEATURES)
    adapted = keras.layers.Normalization()
    adapted.adapt(matrix)
    single = normalization_layer(stats, "f3")
    single_adapted = keras.layers.Normalization()
    single_adapted.adapt(matrix[:, 3:])
    probe = matrix[:50] * 1.5
    return {
        "max_diff": float(np.max(np.abs(numpy_of(ours(probe)) - numpy_of(adapted(probe))))),
        "single_max_diff": float(
            np.max(np.abs(numpy_of(single(probe[:, 3:])) - numpy_of(single_adapted(probe[:, 3:]))))
        ),
    }


def discretization_vs_adapt(stats, data) -> dict:
    import keras

    from streamfeed.keras.layers import discretization_layer

    ours = discretization_layer(stats, "f1", num_bins=BINS)
    adapted = keras.layers.Discretization(num_bins=BINS, epsilon=0.001)
    adapted.adapt(data["f1"])
    values = data["f1"]
    mine, theirs = numpy_of(ours(values)), numpy_of(adapted(values))
    return {
        "boundaries": [float(b) for b in ours.bin_boundaries],
        "adapted_boundaries": [float(b) for b in adapted.bin_boundaries],
        "boundary_ranks": [float(np.mean(values < b)) for b in ours.bin_boundaries],
        "adapted_ranks": [float(np.mean(values < b)) for b in adapted.bin_boundaries],
        "rank_error": float(stats["f1"].quantile_rank_error),
        "agreement": float(np.mean(mine == theirs)),
        "bin_counts": np.bincount(mine.astype("int64"), minlength=BINS).tolist(),
    }


def integer_lookup_vs_adapt(stats, data) -> dict:
    import keras

    from streamfeed.keras.layers import integer_lookup_layer

    ours = integer_lookup_layer(stats, "code")
    adapted = keras.layers.IntegerLookup()
    adapted.adapt(data["code"])
    probe = np.array([11, 4, 27, 8, 3, 99, 0, 11], dtype="int64")
    capped = integer_lookup_layer(stats, "code", max_tokens=3)
    capped_adapted = keras.layers.IntegerLookup(max_tokens=3)
    capped_adapted.adapt(data["code"])
    return {
        "ours": numpy_of(ours(probe)).tolist(),
        "adapted": numpy_of(adapted(probe)).tolist(),
        "vocabulary": [int(v) for v in ours.get_vocabulary()[1:]],
        "capped": numpy_of(capped(probe)).tolist(),
        "capped_adapted": numpy_of(capped_adapted(probe)).tolist(),
    }


def string_lookup_vs_adapt(stats, data) -> dict:
    import keras

    from streamfeed.keras.layers import string_lookup_layer

    ours = string_lookup_layer(stats, "city")
    adapted = keras.layers.StringLookup()
    adapted.adapt(np.array(data["city"], dtype=str))
    probe = np.array(["oslo", "lima", "kyiv", "rome", "paris"])
    return {"ours": numpy_of(ours(probe)).tolist(), "adapted": numpy_of(adapted(probe)).tolist()}


# ------------------------------------------------------------------ models
def numeric_model(stats):
    import keras

    from streamfeed.keras.layers import discretization_layer, normalization_layer

    keras.utils.set_random_seed(0)
    inputs = {f: keras.Input(shape=(1,), name=f) for f in FEATURES}
    stacked = keras.layers.Concatenate()([inputs[f] for f in FEATURES])
    normalized = normalization_layer(stats, FEATURES, name="norm")(stacked)
    bins = discretization_layer(stats, "f1", num_bins=BINS, name="bins")(inputs["f1"])
    onehot = keras.layers.CategoryEncoding(num_tokens=BINS, output_mode="one_hot")(bins)
    hidden = keras.layers.Dense(8, activation="relu")(keras.layers.Concatenate()([normalized, onehot]))
    outputs = keras.layers.Dense(3, activation="softmax")(hidden)
    model = keras.Model(inputs, outputs)
    model.compile(optimizer=keras.optimizers.SGD(0.05), loss="sparse_categorical_crossentropy")
    return model


def lookup_model(stats):
    import keras

    from streamfeed.keras.layers import integer_lookup_layer

    keras.utils.set_random_seed(0)
    code = keras.Input(shape=(1,), name="code", dtype="int64")
    ids = integer_lookup_layer(stats, "code", name="lookup")(code)
    embedded = keras.layers.Flatten()(keras.layers.Embedding(len(CODES) + 1, 4)(ids))
    model = keras.Model(code, keras.layers.Dense(3, activation="softmax")(embedded))
    model.compile(optimizer=keras.optimizers.SGD(0.05), loss="sparse_categorical_crossentropy")
    return model


def fit_save_reload(
    build, dataset, features, data, directory: Path, name: str, *, dtype: str = "float32", run_eagerly: bool = False
) -> dict:
    import keras

    model = build()
    if run_eagerly:
        model.compile(optimizer=keras.optimizers.SGD(0.05), loss="sparse_categorical_crossentropy", run_eagerly=True)
    train = dataset.shuffle(1).batch(BATCH).to_keras(features=features, label="y", inputs="dict", dtype=dtype)
    history = model.fit(train, epochs=3, verbose=0)
    raw = {f: data[f][:200].astype(dtype).reshape(-1, 1) for f in features}
    before = numpy_of(model.predict(raw, verbose=0))
    path = directory / f"{name}-{keras.backend.backend()}.keras"
    model.save(path)
    reloaded = keras.saving.load_model(path)
    after = numpy_of(reloaded.predict(raw, verbose=0))
    return {
        "losses": [float(v) for v in history.history["loss"]],
        "reload_max_diff": float(np.max(np.abs(before - after))),
    }


def string_model_fit(stats, dataset, data, directory: Path) -> dict:
    """Train on ids from the pipeline's vocabulary_lookup; serve raw strings through StringLookup.

    Keras's PyDataset adapter refuses string arrays (``Invalid dtype``), so
    a StringLookup cannot sit in a model trained from a PyDataset. Both
    give the same ids (stats order, OOV 0), so the trained model is wrapped
    for serving.
    """
    import keras

    from streamfeed.keras.layers import string_lookup_layer
    from streamfeed.transforms.stats import vocabulary_lookup

    keras.utils.set_random_seed(0)
    ids = keras.Input(shape=(1,), name="city", dtype="int64")
    embedded = keras.layers.Flatten()(keras.layers.Embedding(len(CITIES) + 1, 4)(ids))
    core = keras.Model(ids, keras.layers.Dense(3, activation="softmax")(embedded))
    core.compile(optimizer="sgd", loss="sparse_categorical_crossentropy")
    train = (
        dataset.map(vocabulary_lookup(stats, "city"))
        .batch(BATCH)
        .to_keras(features=["city"], label="y", inputs="dict", dtype="int64")
    )
    history = core.fit(train, epochs=2, verbose=0)
    text = keras.Input(shape=(1,), name="city", dtype="string")
    serving = keras.Model(text, core(string_lookup_layer(stats, "city")(text)))
    raw = np.array(list(data["city"][:100]) + ["paris"], dtype=str).reshape(-1, 1)
    expected = numpy_of(
        core.predict(vocabulary_lookup(stats, "city")({"city": raw.ravel()})["city"].reshape(-1, 1), verbose=0)
    )
    import tensorflow as tf  # predict() refuses NumPy text; a tf.string tensor is the raw input

    before = numpy_of(serving(tf.constant(raw)))
    path = directory / "string.keras"
    serving.save(path)
    after = numpy_of(keras.saving.load_model(path)(tf.constant(raw)))
    return {
        "losses": [float(v) for v in history.history["loss"]],
        "serving_vs_ids_max_diff": float(np.max(np.abs(before - expected))),
        "reload_max_diff": float(np.max(np.abs(before - after))),
    }


def class_weight_paths(stats, dataset) -> dict:
    """fit(class_weight=...) on a KerasDataset equals fit on the pipeline's per-row weights."""
    from streamfeed.sampling import class_weights, with_class_weights

    weights = class_weights(stats)

    def train(**fit_options) -> tuple[list, list]:
        model = numeric_model(stats)
        options = fit_options.pop("to_keras", {})
        source = fit_options.pop("source", dataset)
        data = source.batch(BATCH).to_keras(features=FEATURES, label="y", inputs="dict", **options)
        history = model.fit(data, epochs=2, verbose=0, shuffle=False, **fit_options)
        return [float(v) for v in history.history["loss"]], [
            np.asarray(w).ravel().tolist() for w in model.get_weights()
        ]

    plain_loss, plain = train()
    cw_loss, by_class_weight = train(class_weight={int(k): float(v) for k, v in weights.items()})
    sw_loss, by_sample_weight = train(
        source=dataset.map(with_class_weights(stats, "y")), to_keras={"sample_weight": "weight"}
    )
    flat = lambda ws: np.concatenate([np.asarray(w) for w in ws])  # noqa: E731
    return {
        "weights": {str(k): v for k, v in weights.items()},
        "losses": {"plain": plain_loss, "class_weight": cw_loss, "sample_weight": sw_loss},
        "class_vs_sample_max_diff": float(np.max(np.abs(flat(by_class_weight) - flat(by_sample_weight)))),
        "class_vs_plain_max_diff": float(np.max(np.abs(flat(by_class_weight) - flat(plain)))),
    }


def main() -> None:
    import keras

    import streamfeed as sf
    from _stats_reference import stats_of

    args = json.loads(sys.argv[1])
    directory = Path(args["dir"])
    path = write_data(directory / "layers.parquet")
    dataset = sf.read_parquet(path)
    # Fewer rows than the quantile sample (65 536 values): every value is kept, so quantiles are exact.
    stats = stats_of(dataset, categorical=["code", "city"], label="y")
    with dataset.iter_epoch(0) as stream:
        chunks = list(stream)
    data = {name: np.concatenate([c[name] for c in chunks]) for name in chunks[0]}
    out: dict = {"backend": keras.backend.backend()}
    out["normalization"] = caught(lambda: normalization_vs_adapt(stats, data))
    out["discretization"] = caught(lambda: discretization_vs_adapt(stats, data))
    out["integer_lookup"] = caught(lambda: integer_lookup_vs_adapt(stats, data))
    out["string_lookup"] = caught(lambda: string_lookup_vs_adapt(stats, data))
    out["numeric_model"] = caught(
        lambda: fit_save_reload(lambda: numeric_model(stats), dataset, FEATURES, data, directory, "numeric")
    )
    out["lookup_model"] = caught(
        lambda: fit_save_reload(
            lambda: lookup_model(stats), dataset, ["code"], data, directory, "lookup", dtype="int64"
        )
    )
    out["lookup_model_eager"] = caught(
        lambda: fit_save_reload(
            lambda: lookup_model(stats),
            dataset,
            ["code"],
            data,
            directory,
            "lookup-eager",
            dtype="int64",
            run_eagerly=True,
        )
    )
    if keras.backend.backend() == "tensorflow":
        out["string_model"] = caught(lambda: string_model_fit(stats, dataset, data, directory))
    out["class_weight"] = caught(lambda: class_weight_paths(stats, dataset))
    print("RESULT " + json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
