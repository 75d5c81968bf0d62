"""One module per ``streamfeed`` sub-command.

Each module has ``register(commands)``, which adds its parser to the
argparse sub-parsers and sets ``run`` to a function of the parsed
arguments returning an exit code. ``cli.COMMANDS`` lists them in help order.
"""
