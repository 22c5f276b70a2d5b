"""The unified coding framework (MATH.md §2): public entry point.

See :mod:`elastic_coded.schemes.unified` for the theory, the plans and the reference executor;
the scheme on Ray is :class:`elastic_coded.runtime.unified_runtime.UnifiedCluster`.  The public
names are those of that module's ``__all__``.
"""

from .schemes.unified import *  # noqa: F401,F403
from .schemes.unified import __all__  # noqa: F401
