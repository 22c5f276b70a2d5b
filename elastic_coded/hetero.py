"""Heterogeneous masters on heterogeneous workers: the public names (MATH.md §3).

The implementation lives in :mod:`elastic_coded.schemes.hetero`; see its docstrings.
"""

from .schemes.hetero import *  # noqa: F401,F403

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
