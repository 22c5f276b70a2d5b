"""Heterogeneous masters on heterogeneous workers: assignment and load allocation (MATH.md §3).

``M`` masters each compute ``A_m x_m`` (``L_m`` rows, MDS-coded); ``N > M`` workers are shared.
Worker ``n`` computing ``l`` coded rows for master ``m`` takes ``T = a[m,n]*l + Exp(rate u[m,n]/l)``
and returns all ``l`` results at once.  The planner chooses

* which workers serve which master: *dedicated* (each worker serves at most one master; a max-min
  allocation, solved by the seed's two greedy algorithms or exactly by a MILP) or *probabilistic*
  (worker ``n`` serves master ``m`` with probability ``k[m,n]``; an LP);
* how many coded rows each worker computes (Theorem 1: ``l* = u t / (W - 1)`` with the Lambert-W
  constant ``W``), then rounded to integers.

Everything here is pure numpy/scipy.  The result a runtime needs is a :class:`HeteroPlan`: for each
master the list of ``(worker, coded rows)``.  :func:`simulate` runs an assignment and its
loads against the model (Monte Carlo).

The names are imported from here; they live in private topic modules: ``_model`` (processing
time, Theorem 1, Lambert W), ``_problem`` (:class:`HeteroProblem`), ``_assignment``
(:class:`Assignment` and its constructors and check), ``_greedy`` (the seed's Algorithms 1 and 2),
``_exact`` (the MILP, the exhaustive search and the probabilistic LP), ``_plan`` (integer loads,
:class:`HeteroPlan`) and ``_simulate`` (Monte Carlo and the baselines).

Conventions: ``v[m,n] = u/W`` is the worker value of MATH.md §3 (expected results per unit time at
the optimal load); ``w[m,n] = v[m,n] / L_m`` is the item value of the max-min allocation, so a
master's sum value is ``V_m = sum_{n in Omega_m} w[m,n] = 1 / t*_m``.
"""

from ._assignment import Assignment, assignment_from_k, assignment_from_owner, validate_assignment
from ._exact import exact_assignment, exhaustive_assignment, probabilistic_assignment
from ._greedy import best_value_assignment, iterated_greedy, simple_greedy
from ._model import (  # noqa: F401  (private, tested directly)
                          _phi,
                          _w_minus_one,
                          cdf,
                          expected_results,
                          lambert_W,
                          optimal_load,
                          sample_time,
                          t_star,
                          worker_value,
)
from ._plan import HeteroPlan, approx_completion_time, integer_loads, make_plan
from ._problem import HeteroProblem, random_problem
from ._simulate import (
                          SimulationResult,
                          even_split_owner,
                          simulate,
                          unbalanced_coded_baseline,
                          uncoded_baseline,
)

__all__ = [
    # processing-time model
    "cdf", "expected_results", "sample_time",
    # Theorem 1
    "lambert_W", "optimal_load", "worker_value", "t_star",
    # problem and assignments
    "HeteroProblem", "random_problem", "Assignment", "assignment_from_owner",
    "assignment_from_k", "validate_assignment",
    # dedicated assignment
    "best_value_assignment", "simple_greedy", "iterated_greedy", "exact_assignment",
    "exhaustive_assignment",
    # probabilistic assignment
    "probabilistic_assignment",
    # integer loads, plans, simulation
    "integer_loads", "approx_completion_time", "HeteroPlan", "make_plan", "SimulationResult",
    "simulate",
    # baselines
    "even_split_owner", "uncoded_baseline", "unbalanced_coded_baseline",
]
