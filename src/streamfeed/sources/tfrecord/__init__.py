"""TFRecord files: the source (``source.py``), the framing scan and file index (``index.py``), the fragment
(``fragment.py``), record framing and CRCs (``framing.py``), the ``tf.train.Example`` wire format
(``format.py``, shared with the writer) and the layout decoder (``fast.py``)."""

from .source import TFRecordSource

__all__ = ["TFRecordSource"]
