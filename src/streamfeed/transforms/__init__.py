"""Stages and column transforms: batching, shuffling, image decoding, scaling from stats."""

from .images import decode_images
from .stats import clip_to_quantiles, min_max_scale, standardize, vocabulary_lookup

__all__ = ["clip_to_quantiles", "decode_images", "min_max_scale", "standardize", "vocabulary_lookup"]
