"""Every source's contract-test factories, one module per format.

Each module defines ``FACTORIES`` (inputs with rows) and ``EMPTY_FACTORIES``
(zero-row inputs) as lists of ``pytest.param(factory, id=...)``. See
``tests/test_contract.py`` for what a factory returns.
"""

import importlib
import pkgutil

FACTORIES: list = []
EMPTY_FACTORIES: list = []
for _module in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
    _loaded = importlib.import_module(f"{__name__}.{_module.name}")
    FACTORIES += getattr(_loaded, "FACTORIES", [])
    EMPTY_FACTORIES += getattr(_loaded, "EMPTY_FACTORIES", [])
