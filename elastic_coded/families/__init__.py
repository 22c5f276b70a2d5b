"""Coding schemes ("families") by name: one frozen :class:`Family` value per scheme, registered
in one place (:func:`register_family`), that every part of the library looks up
(:func:`family_of`).  Pure: no Ray.

A family bundles what the rest of the library needs of a scheme: its storage (a maker of the
pure storage family, :mod:`elastic_coded.schemes.families`, from a
:class:`~elastic_coded.schemes.families.Setup`), the typed options of its policies, the
executions its policies may run, its simulator model (:class:`SimModel`) and its runtime part
(:class:`~elastic_coded.runtime.family_setup.FamilySetup`: loading ``A``, the checks before
Ray starts, the object-store sources, the step's inputs, the verifier's checks and the
executors).  Each of those may be given as the object itself or as ``"module:attribute"``,
imported when first asked for, so that this registry never imports Ray.  Each built-in scheme
has its folder here (``usctec/``, ``unified/``, ``hetero/``): its math, its policies, its
storage as the runtime keeps it (``store.py``), its simulator model where the simulator has one
of its own (``sim.py``), in ``family.py`` its :class:`Family` value, and its driver side, the
only modules of the folder that import Ray (``runtime.py``, ``executor*.py``, ``verify.py``,
``verify_repair.py``).
"""

from __future__ import annotations

from .hetero.family import HETERO
from .registry import (
    _BUILT_IN,
    Family,
    SimModel,
    built_in,
    family_names,
    family_of,
    register_family,
    resolve,
    unregister_family,
)
from .unified.family import UNIFIED
from .usctec.family import USCTEC

__all__ = ["Family", "SimModel", "register_family", "unregister_family", "family_of",
           "family_names", "built_in", "resolve", "USCTEC", "UNIFIED", "HETERO"]

for _family in (USCTEC, UNIFIED, HETERO):
    register_family(_family)
    _BUILT_IN.add(_family.name)
