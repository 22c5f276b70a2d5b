"""The package's exceptions: every error ``elastic_coded`` raises on purpose is an
:class:`ElasticCodedError`, so that ``except ElasticCodedError`` catches them all.

Each also keeps the built-in base it had before this module existed (a bad plan or bad input is
still a ``ValueError``, a failed step a ``RuntimeError``), so existing ``except`` clauses keep
working.  Pure: no Ray.  The classes pickle with their fields (they cross actor boundaries).

::

    ElasticCodedError
    ├── ArgumentError (ValueError)       an argument's value breaks a rule
    ├── ArgumentTypeError (TypeError)    an argument is of a type that is not accepted
    ├── Unsupported (NotImplementedError) a combination the package does not provide
    ├── InternalError (RuntimeError)     an invariant of the package broke: a bug to report
    ├── ClusterError (RuntimeError)      Ray refused or failed an operation of the cluster
    ├── Unreachable (ConnectionError)    no Ray cluster answers at the address given
    ├── MissingDependency (ImportError)  an optional package a feature needs is not installed
    ├── NotInvertible (ZeroDivisionError) zero has no inverse in a field
    ├── SingularMatrix (numpy's LinAlgError) a system over a field has no unique solution
    ├── NotStored (KeyError)             a machine was asked for rows it does not store
    ├── ConfigError (ValueError)         a YAML config or CLI flag breaks a rule
    ├── PlanError (ValueError)           a plan breaks a constraint of its scheme
    │   ├── BudgetError                  storage budgets cannot hold the rows L+S times
    │   └── ShortOfMachines              too few machines, or too little storage, for L+S now
    ├── StepFailed (RuntimeError)        a step could not finish; it changed nothing
    ├── VerificationError (RuntimeError) a product failed verification and was not repaired
    └── ToleranceExceeded (RuntimeError) a real product's error could not be kept in tolerance
"""

from __future__ import annotations

import numpy as np

__all__ = ["ElasticCodedError", "ArgumentError", "ArgumentTypeError", "Unsupported",
           "InternalError", "ClusterError", "Unreachable", "MissingDependency", "NotInvertible",
           "SingularMatrix", "NotStored", "ConfigError", "PlanError", "BudgetError",
           "ShortOfMachines", "StepFailed", "VerificationError", "ToleranceExceeded"]


class ElasticCodedError(Exception):
    """Base of every error the package raises on purpose."""


class ArgumentError(ElasticCodedError, ValueError):
    """An argument's value breaks a rule (the message names the argument, the value and the
    rule)."""


class ArgumentTypeError(ElasticCodedError, TypeError):
    """An argument is of a type that is not accepted (the message names the argument, its type
    and the types accepted)."""


class Unsupported(ElasticCodedError, NotImplementedError):
    """A combination of options, fields or schemes that the package does not provide."""


class InternalError(ElasticCodedError, RuntimeError):
    """An invariant of the package itself broke (a bug to report, not a user's mistake)."""


class ClusterError(ElasticCodedError, RuntimeError):
    """Ray refused or failed an operation of the cluster (not a step: see :class:`StepFailed`)."""


class Unreachable(ElasticCodedError, ConnectionError):
    """No Ray cluster answers at the address given."""


class MissingDependency(ElasticCodedError, ImportError):
    """An optional package that a feature needs is not installed (the message says which extra
    installs it)."""


class NotInvertible(ElasticCodedError, ZeroDivisionError):
    """Zero has no inverse in the field."""


class SingularMatrix(ElasticCodedError, np.linalg.LinAlgError):
    """A square system over a finite field has no unique solution (numpy's ``LinAlgError``, as
    ``numpy.linalg.solve`` raises)."""


class NotStored(ElasticCodedError, KeyError):
    """A machine was asked for rows that it does not store."""

    def __str__(self) -> str:  # KeyError's own quotes its message
        return str(self.args[0]) if self.args else ""


class ConfigError(ElasticCodedError, ValueError):
    """A config file or flag breaks a rule (the message names the key, the value and the rule)."""


class PlanError(ElasticCodedError, ValueError):
    """A plan violates one of the constraints (9b)-(9f) of the USCTEC seed (MATH.md §1), or the
    scheme's own."""


class BudgetError(PlanError):
    """The storage budgets of the machines cannot hold every row ``L+S`` times (a repair falls
    back to a lower ``S`` on this error, and only on this one)."""


class ShortOfMachines(PlanError):
    """Fewer machines present, or storage within the budgets, than ``L+S`` needs; ``S_max`` is
    the largest ``S`` a step can run with now (``allow_lower_S`` runs with it)."""

    def __init__(self, message: str, S_max: int):
        super().__init__(message)
        self.S_max = int(S_max)

    def __reduce__(self):
        return (type(self), (str(self), self.S_max))


class StepFailed(ElasticCodedError, RuntimeError):
    """A step could not finish (results ran out, storage could not be restored, the cluster is
    shut down); the cluster's state is as before the step."""


class VerificationError(ElasticCodedError, RuntimeError):
    """A step's product failed verification and could not be repaired (``caught``: the machines
    whose results were found wrong)."""

    def __init__(self, msg: str, caught=()):
        super().__init__(msg)
        self.caught = tuple(caught)

    def __reduce__(self):
        return (type(self), (str(self), self.caught))


class ToleranceExceeded(ElasticCodedError, RuntimeError):
    """A real-field step's product could not be had within the ``tolerance``: its estimated
    error still exceeds it after decoding again from better-conditioned results (or, under
    ``strict=True``, its error bound does).  ``condition`` and ``estimate`` (relative) say how
    far it was."""

    def __init__(self, msg: str, condition=None, estimate=None):
        super().__init__(msg)
        self.condition, self.estimate = condition, estimate

    def __reduce__(self):
        return (type(self), (str(self), self.condition, self.estimate))
