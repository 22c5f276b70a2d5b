"""Names a package imports on first use (its ``__getattr__`` and ``__dir__``), so that importing
the package, or one of its modules, stays light."""

from __future__ import annotations

import importlib
import sys

__all__ = ["lazy_names"]


def lazy_names(package: str, table: dict, also: tuple = ()):
    """``(__getattr__, __dir__)`` for ``package``: name ``n`` is ``table[n]``'s (a module
    relative to ``package``) attribute ``n``, imported when first asked for and kept; ``dir``
    lists them and ``also``."""
    names = sorted(table) + list(also)

    def __getattr__(name: str):
        if name in table:
            value = getattr(importlib.import_module(f".{table[name]}", package), name)
            setattr(sys.modules[package], name, value)
            return value
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    def __dir__():
        return names

    return __getattr__, __dir__
