"""Heterogeneous masters on heterogeneous workers: the public names (MATH.md §3).

The implementation lives in :mod:`elastic_coded.schemes.hetero`; see its docstrings.  The public
names are those of that module's ``__all__``.
"""

from .schemes.hetero import *  # noqa: F401,F403
from .schemes.hetero import __all__  # noqa: F401
