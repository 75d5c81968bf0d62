"""``streamfeed inspect ckpt/``: what a training checkpoint's data state says, without the pipeline.

A ``DataCheckpoint`` directory (or its ``data_state.json``) holds where the
data stood when the weights were saved. This reads it as JSON, never as
code, and reports the Keras and data epochs, the position in the epoch,
and what the samplers recorded:

- a mixture (``sf.mix``): the weights in force for the epoch and the rows
  of it served (the realised per-component counts need the pipeline:
  ``MixedDataset.mixing_report``);
- hard-example sampling: the score distribution the epoch is drawn from
  (rows scored, loss quantiles, the share of the loss mass in the top
  tenth of rows: how concentrated the draw is) and the measurements of
  the running epoch not merged yet.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import DataError, describe

STATE_FILE = "data_state.json"  # keras.checkpoint.STATE_FILE (keras is not imported to read a file)
_QUANTILES = (0.0, 0.1, 0.25, 0.5, 0.75, 0.9, 0.99, 1.0)


def is_training_state(path: str | os.PathLike) -> bool:
    """Whether ``path`` is a checkpoint directory holding a data state, or such a state file."""
    target = Path(path)
    return (target.is_dir() and (target / STATE_FILE).is_file()) or (target.name == STATE_FILE and target.is_file())


def read_training_state(path: str | os.PathLike) -> dict[str, Any]:
    """The checkpoint's data state summarised (module doc); raises :class:`DataError` naming the file."""
    target = Path(path)
    file = target / STATE_FILE if target.is_dir() else target
    try:
        saved = json.loads(file.read_text())
        data = saved["data"]
        summary: dict[str, Any] = {
            "file": str(file),
            "keras_epoch": int(saved["keras_epoch"]),
            "save_number": int(saved["save_number"]),
            "weights_file": saved.get("weights_file"),
            "data_epoch": int(data["epoch"]),
            "position": {k: data[k] for k in ("unit", "offset", "rows", "batches") if k in data},
        }
        if "weights" in data:
            summary["mixture"] = {"weights": dict(data["weights"]), "rows_served": int(data["rows"])}
        if "row_scores" in data:
            summary["hard_examples"] = _scores_summary(data["row_scores"])
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise DataError(
            describe(
                "Not a readable training data state",
                where=str(file),
                expected="the data_state.json a DataCheckpoint wrote",
                found=f"{type(error).__name__}: {error}",
            )
        ) from None
    return summary


def _scores_summary(scores: dict[str, Any]) -> dict[str, Any]:
    table = scores["table"]
    losses = np.asarray(table["losses"] if table else [], dtype=np.float64)
    ordered = np.sort(np.maximum(losses, 0.0))[::-1]
    top = ordered[: max(1, len(ordered) // 10)] if len(ordered) else ordered
    return {
        "table_epoch": None if table is None else int(table["epoch"]),
        "rows_scored": len(losses),
        "max_rows": scores["max_rows"],
        "smoothing": scores["smoothing"],
        "pending_measurements": len(scores["pending"]["hashes"]),
        "loss_quantiles": {str(q): float(np.quantile(losses, q)) for q in _QUANTILES} if len(losses) else {},
        "top_tenth_loss_share": float(top.sum() / ordered.sum()) if len(ordered) and ordered.sum() > 0 else None,
    }


def render_training_state(summary: dict[str, Any]) -> list[str]:
    """The summary as text lines."""
    lines = [
        f"training state {summary['file']} (save {summary['save_number']}, weights {summary['weights_file']})",
        f"  resumes Keras epoch {summary['keras_epoch']} at data epoch {summary['data_epoch']}, "
        + ", ".join(f"{k} {v}" for k, v in summary["position"].items()),
    ]
    mixture = summary.get("mixture")
    if mixture:
        weights = ", ".join(f"{name} {weight:g}" for name, weight in mixture["weights"].items())
        lines.append(f"  mixture: weights in force {weights}; {mixture['rows_served']} rows of the epoch served")
    hard = summary.get("hard_examples")
    if hard:
        lines.append(
            f"  hard examples: {hard['rows_scored']} rows scored (table of epoch {hard['table_epoch']}, "
            f"max_rows {hard['max_rows']}, smoothing {hard['smoothing']}), "
            f"{hard['pending_measurements']} measurements of the running epoch not merged yet"
        )
        if hard["loss_quantiles"]:
            quantiles = "  ".join(f"q{float(q):g} {v:.3g}" for q, v in hard["loss_quantiles"].items())
            lines.append(f"    loss {quantiles}")
        if hard["top_tenth_loss_share"] is not None:
            lines.append(f"    the top tenth of rows holds {100 * hard['top_tenth_loss_share']:.1f} % of the loss")
    return lines
