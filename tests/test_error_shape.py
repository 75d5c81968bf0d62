"""Every error streamfeed raises has the one shape, checked over the source text.

A raise of a builtin exception class (``ValueError``, ``KeyError``, ...)
or of one of ours must build a class from ``streamfeed.errors`` (each also
subclasses the matching builtin) with a :func:`streamfeed.errors.describe`
message: what was expected, what was found, where, how to fix it.
Exceptions private to a module (a parser's internal signal, caught and
re-raised in the shape above) are not builtins and are left to that module.
"""

from __future__ import annotations

import ast
import builtins
import inspect
from pathlib import Path

import streamfeed.errors as errors
from streamfeed.errors import StreamfeedError, describe

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "streamfeed"
OURS = {name for name, value in vars(errors).items() if inspect.isclass(value) and issubclass(value, StreamfeedError)}
BUILTIN = {
    name for name, value in vars(builtins).items() if inspect.isclass(value) and issubclass(value, BaseException)
}
ALLOWED = {"AttributeError"}  # what a module's __getattr__ must raise, by the import protocol


def _raises() -> list[tuple[str, int, str, bool]]:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call):
                func = node.exc.func
                name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", "?")
                first = node.exc.args[0] if node.exc.args else None
                described = isinstance(first, ast.Call) and getattr(first.func, "id", None) == "describe"
                found.append((str(path.relative_to(PACKAGE)), node.lineno, name, described))
    return found


def test_no_builtin_exception_is_raised_directly():
    direct = [f"{path}:{line} raises {name}" for path, line, name, _ in _raises() if name in BUILTIN - ALLOWED]
    assert direct == []


def test_every_streamfeed_error_is_described():
    bare = [
        f"{path}:{line} raises {name} without describe()"
        for path, line, name, described in _raises()
        if name in OURS and not described
    ]
    assert bare == []


def test_every_error_class_also_subclasses_a_builtin():
    for name in OURS - {"StreamfeedError"}:
        bases = getattr(errors, name).__mro__[1:]
        assert any(
            base.__module__ == "builtins" and base is not Exception and base is not BaseException for base in bases
        ), name


def test_a_key_error_prints_its_message_unquoted():
    message = describe("No column 'x'", expected="one of ['a']")
    assert str(errors.UnknownNameError(message)) == message
