"""Names a package imports on first use (its ``__getattr__`` and ``__dir__``), so that importing
the package, or one of its modules, stays light."""

from __future__ import annotations

import importlib
import sys
import warnings

__all__ = ["lazy_names"]


def lazy_names(package: str, table: dict, also: tuple = (), moved: dict | None = None):
    """``(__getattr__, __dir__)`` for ``package``: name ``n`` is ``table[n]``'s (a module
    relative to ``package``) attribute ``n``, imported when first asked for and kept; ``dir``
    lists them and ``also``.  A name of ``moved`` is found the same way, not listed, and warns
    once (a ``DeprecationWarning`` naming its module)."""
    names = sorted(table) + list(also)
    moved = moved or {}

    def __getattr__(name: str):
        if name in table or name in moved:
            where = table.get(name) or moved[name]
            value = getattr(importlib.import_module(f".{where}", package), name)
            if name in moved:
                warnings.warn(f"{package}.{name} has moved: import it from "
                              f"{package}.{where}", DeprecationWarning, stacklevel=2)
            setattr(sys.modules[package], name, value)
            return value
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    def __dir__():
        return names

    return __getattr__, __dir__
