"""Runs one ``convert`` in a subprocess so that a test can ``kill -9`` it (``test_atomic_output.py``).

    python _convert_driver.py '<json args>'

args: ``source`` (a Parquet file), ``destination``, ``to`` (``"parquet"`` or
``"tfrecord"``), ``shard_rows``, ``overwrite`` (bool), ``slow`` (seconds a
per-fragment ``map`` sleeps, so that a kill at a random time lands between
shards and inside them, not only before or after the whole write) and
``die_at`` (``"before:NAME"`` or ``"after:NAME"``: the process kills itself
with SIGKILL around a call of ``streamfeed.files.publish.NAME``, a step of
the publish sequence). Prints ``ready`` once the imports are done and the
source is open, then converts and exits 0.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time


def _die_around(step: str) -> None:
    from streamfeed.files import publish

    when, name = step.split(":", 1)
    original = getattr(publish, name)

    def wrapped(*args, **kwargs):
        if when == "before":
            os.kill(os.getpid(), signal.SIGKILL)
        result = original(*args, **kwargs)
        if when == "after":
            os.kill(os.getpid(), signal.SIGKILL)
        return result

    setattr(publish, name, wrapped)


def main() -> int:
    args = json.loads(sys.argv[1])
    import streamfeed as sf
    from streamfeed.convert import convert_to_parquet, convert_to_tfrecord

    dataset = sf.read_parquet(args["source"])
    if args.get("slow"):
        delay = float(args["slow"])

        def slow(chunk):
            time.sleep(delay)
            return chunk

        dataset = dataset.map(slow)
    if args.get("die_at"):
        _die_around(args["die_at"])
    options = {"overwrite": True} if args.get("overwrite") else {}
    print("ready", flush=True)
    if args["to"] == "tfrecord":
        convert_to_tfrecord(dataset, args["destination"], shard_rows=args["shard_rows"], **options)
    else:
        convert_to_parquet(dataset, args["destination"], shard_rows=args["shard_rows"], row_group_rows=1000, **options)
    return 0


if __name__ == "__main__":
    sys.exit(main())
