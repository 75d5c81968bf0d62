"""Runs one ``write_tfrecord`` to S3 in a subprocess so that a test can stop it mid-publish.

Used by ``test_remote_publish.py``:

    python _publish_driver.py '<json args>'

args: ``endpoint`` (``host:port`` of the S3 server), ``destination``
(``bucket/dir/name``), ``first`` (the first id written), ``rows``,
``shard_rows`` and ``die_after`` (the process kills itself with SIGKILL
after that many calls of ``streamfeed.files.publish.move_shard``: between
two shards of the publish). Writes with ``overwrite=True``; exits 0 if it
was not killed.
"""

from __future__ import annotations

import json
import os
import signal
import sys

import numpy as np
import pyarrow.fs as pafs
from _seaweed import KEY, REGION, SECRET


def main() -> int:
    args = json.loads(sys.argv[1])
    import streamfeed as sf
    from streamfeed.files import publish

    original, moved = publish.move_shard, [0]

    def move_then_maybe_die(*a, **k):
        original(*a, **k)
        moved[0] += 1
        if moved[0] == args["die_after"]:
            os.kill(os.getpid(), signal.SIGKILL)

    publish.move_shard = move_then_maybe_die
    filesystem = pafs.S3FileSystem(
        endpoint_override=args["endpoint"], scheme="http", access_key=KEY, secret_key=SECRET, region=REGION
    )
    ids = np.arange(args["first"], args["first"] + args["rows"])
    sf.write_tfrecord(
        {"id": ids}, args["destination"], shard_rows=args["shard_rows"], overwrite=True, filesystem=filesystem
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
