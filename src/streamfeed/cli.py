"""The ``streamfeed`` command: a thin layer over the library.

Each sub-command lives in ``streamfeed/commands/`` and calls library
functions; ``main(argv) -> int`` is what the tests call in-process.

What a user sees is decided here once for every command:

* results (a table, a summary, ``--json``) go to stdout, written to
  ``args.out``; anything else printed while a command runs (Keras's
  progress) goes to stderr, so ``--json`` output is the whole of stdout;
* as the program, a mistake is one or two lines on stderr (what and
  where; the fix, in the command's own flags), exit code 2 for usage (a
  flag, a path, a column name) and 1 for the data or the machine (a null,
  a corrupt file, the memory limit, a permission): ``commands/_failure.py``;
  ``--debug`` (or ``STREAMFEED_DEBUG=1``) adds the traceback;
* TensorFlow's C++ start-up lines are silenced unless ``--debug``.
"""

from __future__ import annotations

import argparse
import contextlib
import difflib
import logging
import os
import sys
import traceback
from typing import NoReturn, Sequence

from . import __version__
from .commands import bench, convert, demo, doctor, inspect, stats
from .commands.failure import USAGE, error_message, exit_code
from .inspect.progress import quiet

COMMANDS = [demo, convert, inspect, stats, bench, doctor]


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage mistake is two lines (argparse prints the whole usage block first)."""

    def error(self, message: str) -> NoReturn:
        self.exit(USAGE, f"{self.prog}: error: {message}\n{self.prog}: fix: see '{self.prog} --help'\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="streamfeed", description="Stream larger-than-memory data into Keras 3.")
    parser.add_argument("--debug", action="store_true", help="show tracebacks and the frameworks' start-up logs")
    parser.add_argument("--version", action="version", version=f"streamfeed {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    for command in COMMANDS:
        command.register(commands)
    for sub in commands.choices.values():
        # SUPPRESS: the sub-command's flag must not reset a --debug given before the command
        sub.add_argument(
            "--debug", action="store_true", default=argparse.SUPPRESS, help="show the traceback of a failure"
        )
        sub.set_defaults(flags=frozenset(sub._option_string_actions))  # its option strings: what a fix may name
    return parser


def main(argv: Sequence[str] | None = None, *, catch: bool | None = None) -> int:
    """Runs one sub-command; ``--quiet`` (every command has it) turns off every progress bar.

    As the program (no ``argv``: the console script, ``python -m
    streamfeed.cli``) a failure ends as a short message on stderr and an
    exit code. Called from Python with ``argv`` (as tests do), the
    exception reaches the caller, unless ``catch=True``.
    """
    catch = argv is None if catch is None else catch
    parser = build_parser()
    args, extras = parser.parse_known_args(argv)
    if extras:  # a flag the command does not know: name the near one (argparse only lists them)
        flags = sorted(args.flags)
        near = [difflib.get_close_matches(extra, flags, n=1) for extra in extras if extra.startswith("-")]
        hint = "".join(f" (did you mean {match[0]}?)" for match in near if match)[:200]
        parser.error(f"unrecognized arguments: {' '.join(extras)}{hint}")
    args.debug = args.debug or os.environ.get("STREAMFEED_DEBUG", "") not in ("", "0")
    logging.basicConfig(level=logging.WARNING, format="%(name)s: %(message)s")
    if catch and not args.debug:
        quiet_frameworks()
    args.out = sys.stdout
    try:
        with quiet() if args.quiet else contextlib.nullcontext(), contextlib.redirect_stdout(sys.stderr):
            return args.run(args)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # noqa: BLE001 - as the program, every failure ends as a message and an exit code
        if not catch:
            raise
        if args.debug:
            traceback.print_exc()
        print(error_message(f"streamfeed {args.command}", exc, args.flags), file=sys.stderr)
        return exit_code(exc)


def quiet_frameworks() -> None:
    """TensorFlow's C++ INFO/WARNING lines off (the user's own setting wins); JAX's CPU fallback notice off.

    Process-wide settings: only the program sets them, not a Python caller of :func:`main`.
    """
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    logging.getLogger("jax._src.xla_bridge").setLevel(logging.ERROR)


if __name__ == "__main__":
    sys.exit(main())
