"""Monte Carlo executor of StepPlans at scale (DESIGN.md, layer ``sim``).  Pure: numpy and scipy,
no Ray.

The simulator runs the same plans the runtime runs (``schemes.registry`` policies on placements
kept by ``repair_placement``/``extend_placement``), against delay and speed models and the same
churn scripts (:mod:`elastic_coded.churn`), in simulated time::

    from elastic_coded.sim import simulate, IIDStragglers

    res = simulate(1000, 1000, L=4, S=2, delays=IIDStragglers(k=2, factor=5),
                   policies=("uncoded", "speculative", "cyclic", "usctec", "ideal"))
    res.summary["usctec"]["ratio_mean"]     # mean step time over uncoded's, same trace

Modules: :mod:`~elastic_coded.sim.models` (delays, speeds), :mod:`~elastic_coded.sim.trace` (the
seeded trace every policy shares), :mod:`~elastic_coded.sim.executor` (one step in simulated time,
the plan cache), :mod:`~elastic_coded.sim.runner` (``simulate``).
"""

from .executor import (PlanCache, Speculation, StepOutcome, step_time, step_time_reference,
                       time_unit)
from .models import (Compose, EqualSpeeds, FixedSpeeds, IIDStragglers, LinearSpeeds,
                     MarkovStragglers, NoDelays, ShiftedExponential, SlowSpells, TraceDelays,
                     UniformSpeeds)
from .runner import BOUNDS, VARIANTS, SimResult, Variant, simulate, summarize_times
from .trace import Trace, make_trace

__all__ = [
    "simulate", "SimResult", "Variant", "VARIANTS", "BOUNDS", "summarize_times",
    "Trace", "make_trace",
    "step_time", "step_time_reference", "StepOutcome", "Speculation", "PlanCache", "time_unit",
    "NoDelays", "IIDStragglers", "ShiftedExponential", "MarkovStragglers", "SlowSpells",
    "TraceDelays", "Compose", "EqualSpeeds", "UniformSpeeds", "LinearSpeeds", "FixedSpeeds",
]
