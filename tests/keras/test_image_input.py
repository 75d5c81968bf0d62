"""Images reach the model whole: one n-D feature keeps its row shape."""

import keras
import numpy as np
from PIL import Image

import streamfeed as sf


def test_image_folder_trains_with_its_shape_and_labels(tmp_path):
    rng = np.random.default_rng(0)
    for label, name in enumerate(["cat", "dog"]):
        (tmp_path / name).mkdir()
        for i in range(12 + 5 * label):  # uneven classes
            Image.fromarray(rng.integers(0, 256, (20, 24, 3), dtype=np.uint8)).save(tmp_path / name / f"{i}.png")
    model = keras.Sequential(
        [keras.Input((16, 16, 3)), keras.layers.Rescaling(1 / 255), keras.layers.Flatten(), keras.layers.Dense(2)]
    )
    model.compile("sgd", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    train = (
        sf.read_images(tmp_path, size=(16, 16))
        .shuffle(seed=1)
        .batch(8)
        .to_keras(features=["image"], label="label", model=model)
    )
    train.on_epoch_begin()
    x, y = train[0]
    assert x.shape == (8, 16, 16, 3) and x.dtype == np.float32
    assert set(np.unique(y)) <= {0, 1}
    train.on_epoch_end()
    history = model.fit(train, epochs=1, verbose=0)
    assert np.isfinite(history.history["loss"][0])
    assert len(train) == -(-29 // 8)
