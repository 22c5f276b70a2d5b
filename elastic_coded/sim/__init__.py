"""Monte Carlo executor of every scheme's steps at scale (DESIGN.md, layer ``sim``).  Pure: numpy
and scipy, no Ray.

The simulator runs the same plans and the same rules the runtime runs, against delay and speed
models and the same churn scripts (:mod:`elastic_coded.churn`), in simulated time:

* the USCTEC family: every ``schemes.registry`` policy, on placements kept by
  ``repair_placement``/``extend_placement``; whole plans with recovery and backups by
  :mod:`elastic_coded.schemes.policies.rules`, the pull policies (``usctec-auto``,
  ``usctec-pull``, ``dynamic``) as event-driven schedules driven by the runtime's queues
  (:mod:`~elastic_coded.sim.pull`), ``usctec-auto``'s execution chosen by the
  runtime's rule (:mod:`elastic_coded.families.usctec.pull_step`);
* the unified coding framework (storage kept by ``policies.unified.plan_storage``, the Map's
  latencies by ``map_latencies``);
* heterogeneous masters (storage kept by ``policies.hetero.plan_storage``, steps by
  ``step_plan``, top-ups by ``rules.top_up``)::

    from elastic_coded.sim import simulate, IIDStragglers, UnifiedOptions

    res = simulate(1000, 1000, L=4, S=2, delays=IIDStragglers(k=2, factor=5),
                   policies=("uncoded", "speculative", "cyclic", "usctec", "ideal"))
    res.summary["usctec"]["ratio_mean"]     # mean step time over uncoded's, same trace

    res = simulate(12, 200, L=2, S=1, policies=("unified", "hetero"), baseline=None,
                   unified_options=UnifiedOptions(mu="1/2", q=4), masters=(40, 60))
    res.redesigns["unified"], res.details["hetero"]["lower_bound"]

With ``cost=RuntimeCost(...)`` (:mod:`~elastic_coded.sim.cost`; ``RuntimeCost.load`` reads the
file ``python -m benchmarks calibrate`` writes) every USCTEC-family step also pays the runtime's
own cost; ``cost=None`` is the pure compute model.

Modules: :mod:`~elastic_coded.sim.models` (delays, speeds), :mod:`~elastic_coded.sim.trace` (the
seeded trace every policy shares), :mod:`~elastic_coded.sim.executor` (one USCTEC step in
simulated time, the plan cache), :mod:`~elastic_coded.sim.pull` (one pull step),
:mod:`~elastic_coded.sim.pulled` (the USCTEC family's steps, whole and pulled),
:mod:`~elastic_coded.sim.cost` (the runtime's cost),
:mod:`~elastic_coded.families.unified.sim` and :mod:`~elastic_coded.families.hetero.sim` (the
other two schemes, in their family's folder), :mod:`~elastic_coded.sim.variants`
(the policies as values), :mod:`~elastic_coded.sim.results`, :mod:`~elastic_coded.sim.runner`
(``simulate``).
"""

from ..families.hetero.policy import HeteroOptions
from ..families.hetero.sim import HeteroVariant, hetero_lower_bound, hetero_step
from ..families.unified.policy import UnifiedOptions
from ..families.unified.sim import UnifiedVariant, map_time
from .cost import RuntimeCost
from .executor import Speculation, StepOutcome, step_time, time_unit
from .models import (
                       Compose,
                       EqualSpeeds,
                       FixedSpeeds,
                       IIDStragglers,
                       LinearSpeeds,
                       MarkovStragglers,
                       NoDelays,
                       ShiftedExponential,
                       SlowSpells,
                       TraceDelays,
                       UniformSpeeds,
)
from .plan_cache import PlanCache
from .pull import PullOutcome, pull_step
from .reference_step import step_time_reference
from .results import SimResult, summarize_times
from .runner import simulate
from .trace import Trace, make_trace
from .variants import BOUNDS, VARIANTS, Variant, sim_families

__all__ = [
    "simulate", "SimResult", "RuntimeCost", "pull_step", "PullOutcome", "Variant", "VARIANTS",
    "BOUNDS", "sim_families", "summarize_times",
    "UnifiedVariant", "UnifiedOptions", "map_time",
    "HeteroVariant", "HeteroOptions", "hetero_step", "hetero_lower_bound",
    "Trace", "make_trace",
    "step_time", "step_time_reference", "StepOutcome", "Speculation", "PlanCache", "time_unit",
    "NoDelays", "IIDStragglers", "ShiftedExponential", "MarkovStragglers", "SlowSpells",
    "TraceDelays", "Compose", "EqualSpeeds", "UniformSpeeds", "LinearSpeeds", "FixedSpeeds",
]
