"""The ``streamfeed`` command: a thin layer over the library.

Each sub-command lives in ``streamfeed/commands/`` and calls library
functions; ``main(argv) -> int`` is what the tests call in-process.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import sys
from typing import Sequence

from .commands import bench, convert, demo, inspect, stats
from .inspect.progress import quiet

COMMANDS = [demo, convert, inspect, stats, bench]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="streamfeed", description="Stream larger-than-memory data into Keras 3.")
    commands = parser.add_subparsers(dest="command", required=True)
    for command in COMMANDS:
        command.register(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Runs one sub-command; ``--quiet`` (every command has it) turns off every progress bar."""
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(name)s: %(message)s")
    try:
        with quiet() if args.quiet else contextlib.nullcontext():
            return args.run(args)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
