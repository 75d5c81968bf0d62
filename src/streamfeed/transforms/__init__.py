"""Stages and column transforms: batching, shuffling, image decoding."""

from .images import decode_images

__all__ = ["decode_images"]
