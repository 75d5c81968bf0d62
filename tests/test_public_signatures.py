"""The public API shows its keywords: no ``**options`` that hides them from ``help()``, IDEs and type checkers."""

from __future__ import annotations

import inspect

import streamfeed as sf
from streamfeed.keras.adapter import KerasDataset


def _keywords(function) -> dict[str, inspect.Parameter]:
    return {name: p for name, p in inspect.signature(function).parameters.items() if name not in ("self", "dataset")}


def test_to_keras_takes_exactly_the_keywords_of_keras_dataset_with_their_defaults():
    ours, theirs = _keywords(sf.Dataset.to_keras), _keywords(KerasDataset.__init__)
    assert list(ours) == list(theirs)
    for name, parameter in ours.items():
        assert parameter.kind is inspect.Parameter.KEYWORD_ONLY, name
        assert parameter.default == theirs[name].default, name


def test_no_public_method_of_dataset_hides_its_keywords():
    hidden = [
        name
        for name, member in inspect.getmembers(sf.Dataset, inspect.isfunction)
        if not name.startswith("_")
        and any(p.kind is inspect.Parameter.VAR_KEYWORD for p in inspect.signature(member).parameters.values())
    ]
    assert hidden == []
