"""Imports run one way: core -> files -> sources/cache -> runtime -> pipeline -> keras/stats/inspect -> commands.

Read from the source text (every ``import``, including those inside
functions and under ``TYPE_CHECKING``), so a lazy import cannot hide an
upward dependency; and checked by importing, so that what a user loads is
what the layering promises.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "streamfeed"

# Lower numbers are lower layers; a module may import its own layer or below.
LAYERS: list[tuple[int, tuple[str, ...]]] = [
    (0, ("core", "core_ragged", "errors", "plan", "memory", "state", "sampling", "hard_examples", "row_ids")),
    (1, ("files",)),
    (2, ("sources", "cache")),
    (3, ("runtime",)),
    (4, ("pipeline",)),
    (5, ("keras", "stats", "inspect", "transforms", "diagnostics")),
    (6, ("readers", "readers_sql", "writers", "convert", "demo", "__init__")),
    (7, ("commands", "cli")),
]
# The one edge that runs up: Dataset.to_keras imports the adapter when it is called (docs/architecture.md),
# and MixedDataset.to_keras the same way (a mixture is handed to Keras as a dataset is).
ALLOWED_UPWARD = {("pipeline.dataset", "keras.adapter"), ("pipeline.mix", "keras.adapter")}


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" and len(parts) > 1 else parts)


def _layer(module: str) -> int:
    for number, prefixes in LAYERS:
        if any(module == prefix or module.startswith(prefix + ".") for prefix in prefixes):
            return number
    raise AssertionError(f"module streamfeed.{module} has no layer: add it to LAYERS in {__file__}")


def _imports(path: Path, modules: set[str]) -> set[str]:
    """streamfeed modules that ``path`` imports anywhere in its text (relative names resolved)."""
    name = _module_name(path)
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    if name == "__init__":
        package = []
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        targets: list[str] = []
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1] + ([node.module] if node.module else [])
            elif node.module and node.module.startswith("streamfeed"):
                base = node.module.split(".")[1:]
            else:
                continue
            targets = [".".join(base + [alias.name]) for alias in node.names] + [".".join(base)]
        elif isinstance(node, ast.Import):
            targets = [alias.name.split(".", 1)[1] for alias in node.names if alias.name.startswith("streamfeed.")]
        for target in targets:
            if target in modules:
                found.add(target)
                break
        else:
            if targets and targets[-1] in modules:
                found.add(targets[-1])
    found.discard(name)
    return found


def _graph() -> dict[str, set[str]]:
    files = sorted(PACKAGE.rglob("*.py"))
    modules = {_module_name(path) for path in files}
    return {_module_name(path): _imports(path, modules) for path in files}


def test_no_import_runs_upward():
    upward = [
        f"streamfeed.{module} (layer {_layer(module)}) imports streamfeed.{target} (layer {_layer(target)})"
        for module, targets in _graph().items()
        for target in sorted(targets)
        if _layer(target) > _layer(module) and (module, target) not in ALLOWED_UPWARD
    ]
    assert upward == []


def test_no_import_circles():
    graph = _graph()  # the allowed upward edge included: the adapter it loads is typed by pipeline.served, not Dataset
    circles: list[list[str]] = []
    state: dict[str, int] = {}  # 1: on the current path, 2: done

    def visit(module: str, path: list[str]) -> None:
        state[module] = 1
        for target in sorted(graph.get(module, ())):
            if state.get(target) == 1:
                circles.append(path[path.index(target) :] + [target])
            elif target not in state:
                visit(target, path + [target])
        state[module] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module, [module])
    assert circles == []


def _package(module: str, path: Path) -> str:
    return module if path.name == "__init__.py" else module.rpartition(".")[0]


def test_no_private_module_of_another_package_is_imported():
    """A module whose name starts with ``_`` is its package's own; what others need gets a public name."""
    files = {_module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}
    graph = _graph()
    reached = [
        f"streamfeed.{module} imports streamfeed.{target}"
        for module, targets in graph.items()
        for target in sorted(targets)
        if any(part.startswith("_") and part != "__init__" for part in target.split("."))
        and _package(target, files[target]) != _package(module, files[module])
    ]
    assert reached == []


def _loaded_after(statement: str) -> list[str]:
    code = f"import sys; {statement}; print('\\n'.join(sorted(sys.modules)))"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    return result.stdout.split()


def test_the_pipeline_loads_no_source():
    loaded = _loaded_after("import streamfeed.pipeline")
    assert [name for name in loaded if name.startswith("streamfeed.sources.")] == []


@pytest.mark.parametrize("framework", ["keras", "tensorflow", "jax", "torch"])
def test_importing_streamfeed_loads_no_framework(framework):
    loaded = _loaded_after("import streamfeed")
    assert framework not in loaded
