"""Heterogeneous masters as a placement policy of the one runtime (MATH.md §3).  Pure.

Storage: master ``m``'s ``A_m`` is MDS-coded once into a *source* ``C{m}`` of ``capacity``
coded rows (``G_m A_m``; any ``L_m`` distinct coded rows decode).  Machine ``n`` holds row
ranges of ``C{m}`` for the masters it may serve, ``l[m,n]`` rows in all.  Whenever the machines
present change, the assignment and the integer loads are planned anew for them
(:func:`plan_storage`): a machine keeps the coded rows it still needs, drops the rest, and is
*topped up* with coded rows no present machine holds, so no two present machines ever hold
the same coded row of a master.

A step (:func:`step_plan`): each machine serves its master (dedicated) or draws one
(probabilistic); its task multiplies its rows of ``C{m}`` by ``x_m``; the model's processing
time ``T = a l + Exp(u/l)`` paces it.  Master ``m`` decodes from its first ``L_m`` coded
results (:class:`~elastic_coded.schemes.policies.collect.MDSCollector`).

The model of a machine with speed ``s`` (relative, as the USCTEC planner's): ``a[m,n] =
a0 / (s L_m)`` and ``u[m,n] = u0 s L_m``, so a speed-1 machine computing all ``L_m`` rows takes
``a0 + 1/u0`` time units on average; explicit ``a``/``u`` columns may be given per machine.
"""

from __future__ import annotations

import math
from collections.abc import Container, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...errors import ArgumentError
from ...schemes.plan import PlanError
from ...schemes.wire import TaskSpec
from . import (
    Assignment,
    HeteroProblem,
    exact_assignment,
    integer_loads,
    iterated_greedy,
    probabilistic_assignment,
    sample_time,
    simple_greedy,
    unbalanced_coded_baseline,
    uncoded_baseline,
)

__all__ = ["ASSIGNMENTS", "HeteroOptions", "HeteroStorage", "HeteroStepPlan", "plan_storage",
           "step_plan", "source_name", "capacities", "rescue",
           "ranges_minus", "take_rows", "row_time", "row_asks"]

ASSIGNMENTS = ("iterated_greedy", "simple_greedy", "exact", "probabilistic", "uncoded",
               "unbalanced_coded")
"""Assignment methods by name; the last two are MATH.md §3's baselines."""

_EXACT_TIME_LIMIT = 30.0

Ranges = tuple[tuple[int, int], ...]
"""Row ranges ``((start, stop), ...)`` of a master's coded rows."""
Move = tuple[str, int, int, Hashable]
"""Coded rows to send: ``(source, start, stop, machine)``."""
_Columns = tuple[np.ndarray, np.ndarray]   # a machine's explicit (a column, u column)


def source_name(m: int) -> str:
    """The coded source of master ``m``."""
    return f"C{m}"


@dataclass(frozen=True)
class HeteroOptions:
    """Options of policy ``hetero``; every error names the key, the value and the rule."""

    assignment: str = "iterated_greedy"
    """One of :data:`ASSIGNMENTS`."""
    a0: float = 1.0
    """Shift of the processing time of all ``L_m`` rows on a speed-1 machine (time units)."""
    u0: float = 2.0
    """Straggling rate of the same (the exponential tail's mean is ``1/u0``)."""
    a: Any = None
    """Optional explicit ``a`` (``M x N``) for the first machines, in their order."""
    u: Any = None
    """Optional explicit ``u`` (``M x N``), given with ``a``."""
    capacity: float = 4.0
    """Coded rows per master, as a multiple of ``L_m`` (bounded by the field's order)."""

    def __post_init__(self) -> None:
        if self.assignment not in ASSIGNMENTS:
            raise ArgumentError(f"assignment: {self.assignment!r} is not a known method; known: "
                                f"{', '.join(ASSIGNMENTS)}")
        for key in ("a0", "u0"):
            v = getattr(self, key)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not (
                    math.isfinite(v) and v > 0):
                raise ArgumentError(f"{key}: {v!r} must be a positive finite number")
        if (self.a is None) != (self.u is None):
            raise ArgumentError(f"{'a' if self.a is None else 'u'}: give both a and u, or neither")
        if isinstance(self.capacity, bool) or not isinstance(self.capacity, (int, float)) or \
                not self.capacity >= 1.5:
            raise ArgumentError(f"capacity: {self.capacity!r} must be a number >= 1.5 (coded rows "
                                f"per master as a multiple of L_m)")


@dataclass(frozen=True)
class HeteroStorage:
    """Who holds which coded rows: ``blocks[m] = {machine: ((start, stop), ...)}``, the plan's
    ``assignment`` and integer ``loads`` (``M x len(machines)``) over ``machines`` (in the
    problem's column order), the model ``problem``, and each master's code ``capacity``."""

    L: tuple[int, ...]
    machines: tuple[Hashable, ...]
    problem: HeteroProblem = field(repr=False)
    assignment: Assignment = field(repr=False)
    loads: np.ndarray = field(repr=False)
    blocks: tuple[Mapping[Hashable, Ranges], ...] = field(repr=False)
    capacity: tuple[int, ...] = ()

    def rows_of(self, m: int, machine: Hashable) -> Ranges:
        return self.blocks[m].get(machine, ())

    def holders(self, m: int) -> tuple[Hashable, ...]:
        return tuple(n for n, r in self.blocks[m].items() if r)


@dataclass(frozen=True)
class HeteroStepPlan:
    """One step: ``serve[machine] = master`` (or absent), each machine's ``pace`` (model time
    units of its task), the storage it runs on, and ``t_star`` per master."""

    storage: HeteroStorage = field(repr=False)
    serve: Mapping[Hashable, int]
    pace: Mapping[Hashable, float]
    t_star: tuple[float, ...]
    c_int: float = 0.0

    @property
    def available(self) -> tuple[Hashable, ...]:
        return self.storage.machines

    @property
    def L(self) -> tuple[int, ...]:
        return self.storage.L

    def tasks_for(self, machine: Hashable, m: int) -> tuple[TaskSpec, ...]:
        """``machine``'s tasks for master ``m``: one per stored range of ``C{m}``."""
        out: list[TaskSpec] = []
        for a, b in self.storage.rows_of(m, machine):
            out.append(TaskSpec(source_name(m), (a, b), m, None, m, a))
        return tuple(out)


# -- the model of the machines present ---------------------------------------------------------

def _problem(opts: HeteroOptions, L: Sequence[int], machines: Sequence[Hashable],
             speeds: Mapping[Hashable, float], explicit: Mapping[Hashable, _Columns]
             ) -> HeteroProblem:
    M = len(L)
    if len(machines) <= M:
        raise PlanError(f"machines: hetero needs more machines than masters, got "
                        f"{len(machines)} for M = {M}")
    Lv = np.asarray(L, dtype=np.float64)
    a = np.empty((M, len(machines)))
    u = np.empty((M, len(machines)))
    for j, n in enumerate(machines):
        if n in explicit:
            a[:, j], u[:, j] = explicit[n]
        else:
            s = float(speeds[n])
            a[:, j] = opts.a0 / (s * Lv)
            u[:, j] = opts.u0 * s * Lv
    return HeteroProblem(L=Lv, a=a, u=u)


def explicit_columns(opts: HeteroOptions, M: int, machines: Sequence[Hashable]
                     ) -> dict[Hashable, _Columns]:
    """``{machine: (a column, u column)}`` from the options' explicit ``a``/``u``."""
    if opts.a is None:
        return {}
    a = np.asarray(opts.a, dtype=np.float64)
    u = np.asarray(opts.u, dtype=np.float64)
    if a.shape != u.shape or a.ndim != 2 or a.shape[0] != M or a.shape[1] != len(machines):
        raise ArgumentError(f"a: shape {a.shape} (u: {u.shape}) must be (M, machines) = "
                            f"({M}, {len(machines)})")
    if not (np.all(np.isfinite(a)) and np.all(a > 0) and np.all(np.isfinite(u)) and
            np.all(u > 0)):
        raise ArgumentError("a, u: every entry must be positive and finite")
    return {n: (a[:, j].copy(), u[:, j].copy()) for j, n in enumerate(machines)}


def _assign(opts: HeteroOptions, P: HeteroProblem, seed: int) -> tuple[Assignment, np.ndarray]:
    method = opts.assignment
    if method == "uncoded":
        return uncoded_baseline(P)
    if method == "unbalanced_coded":
        return unbalanced_coded_baseline(P)
    asg = {"iterated_greedy": lambda: iterated_greedy(P, rng=seed),
           "simple_greedy": lambda: simple_greedy(P),
           "exact": lambda: exact_assignment(P, time_limit=_EXACT_TIME_LIMIT),
           "probabilistic": lambda: probabilistic_assignment(P)}[method]()
    return asg, integer_loads(asg, P)


# -- storage -----------------------------------------------------------------------------------

def take_rows(ranges: Iterable[tuple[int, int]], count: int) -> Ranges:
    """The first ``count`` rows of ``ranges``."""
    out, left = [], count
    for a, b in ranges:
        if left <= 0:
            break
        take = min(b - a, left)
        out.append((a, a + take))
        left -= take
    return tuple(out)


def _free_ranges(capacity: int, held: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    """Row ranges of ``[0, capacity)`` that no range of ``held`` covers, increasing."""
    out, at = [], 0
    for a, b in sorted(held):
        if a > at:
            out.append((at, a))
        at = max(at, b)
    if at < capacity:
        out.append((at, capacity))
    return out


def _merge(ranges: Iterable[tuple[int, int]]) -> Ranges:
    out: list[tuple[int, int]] = []
    for a, b in sorted(ranges):
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return tuple(out)


def _place_master(need: Mapping[Hashable, int], old: Mapping[Hashable, Ranges], capacity: int,
                  m: int) -> tuple[dict[Hashable, Ranges], list[tuple[int, int, Hashable]]]:
    """Blocks of one master for the row counts ``need`` (``{machine: rows}``): keep what each
    machine holds (up to its need), then top up from rows no present machine keeps.  Returns
    the blocks and the moves ``[(start, stop, machine), ...]``."""
    kept = {n: take_rows(old.get(n, ()), rows) for n, rows in need.items()}
    free = _free_ranges(capacity, [r for rs in kept.values() for r in rs])
    blocks, moves = {}, []
    for n in sorted(need, key=str):
        short = need[n] - sum(b - a for a, b in kept[n])
        extra: list[tuple[int, int]] = []
        while short > 0:
            if not free:
                raise PlanError(f"capacity: master {m}'s code of {capacity} coded rows is "
                                f"used up; raise the option capacity")
            a, b = free[0]
            take = min(b - a, short)
            extra.append((a, a + take))
            free[0] = (a + take, b)
            if a + take == b:
                free.pop(0)
            short -= take
        moves += [(a, b, n) for a, b in extra]
        if need[n] > 0:
            blocks[n] = _merge(kept[n] + tuple(extra))
    return blocks, moves


def capacities(opts: HeteroOptions, L: Iterable[int], field_order: int | None
               ) -> tuple[int, ...]:
    """Coded rows of each master's source: ``capacity * L_m``, at most the field's order."""
    caps = []
    for m, Lm in enumerate(L):
        cap = int(math.ceil(opts.capacity * Lm))
        if field_order is not None:
            cap = min(cap, int(field_order))
        if cap < Lm:
            raise ArgumentError(f"field: order {field_order} is too small for master {m}'s code "
                                f"of L_m = {Lm} rows; use a larger field")
        caps.append(cap)
    return tuple(caps)


def plan_storage(opts: HeteroOptions, L: Sequence[int], machines: Iterable[Hashable],
                 speeds: Mapping[Hashable, float], old: HeteroStorage | None,
                 explicit: Mapping[Hashable, _Columns], caps: Sequence[int], seed: int = 0,
                 fresh: Container[Hashable] = ()
                 ) -> tuple[HeteroStorage, list[Move], dict[Hashable, dict[str, Ranges]]]:
    """Assignment, loads and blocks for the ``machines`` present (see the module docstring);
    ``caps``: coded rows of each master's source (:func:`capacities`); ``fresh``: machines that
    hold nothing whatever ``old`` says (a re-used id).

    Returns the storage, the moves ``[(source, start, stop, machine), ...]`` (coded rows to
    send) and ``{machine: {source: ranges kept}}`` for the machines that must drop rows."""
    machines = tuple(sorted(machines, key=str))
    P = _problem(opts, L, machines, speeds, explicit)
    asg, loads = _assign(opts, P, seed)
    M = len(L)
    blocks, moves = [], []
    shrink: dict[Hashable, dict[str, Ranges]] = {}
    for m in range(M):
        need = {n: int(loads[m, j]) for j, n in enumerate(machines) if loads[m, j] > 0}
        prev = {} if old is None else {n: r for n, r in old.blocks[m].items()
                                        if n in machines and n not in fresh}
        blk, mv = _place_master(need, prev, caps[m], m)
        blocks.append(blk)
        moves += [(source_name(m), a, b, n) for a, b, n in mv]
        for n, rs in prev.items():
            if _merge(blk.get(n, ())) != _merge(rs) and set(rs) - set(blk.get(n, ())):
                shrink.setdefault(n, {})[source_name(m)] = blk.get(n, ())
    st = HeteroStorage(L=tuple(int(x) for x in L), machines=machines, problem=P,
                       assignment=asg, loads=loads, blocks=tuple(blocks), capacity=tuple(caps))
    return st, moves, shrink


def ranges_minus(ranges: Iterable[tuple[int, int]], rows: Container[int]) -> Ranges:
    """``ranges`` without the rows in ``rows``, as ranges."""
    out: list[tuple[int, int]] = []
    for a, b in ranges:
        start = None
        for i in range(a, b):
            if i in rows:
                if start is not None:
                    out.append((start, i))
                    start = None
            elif start is None:
                start = i
        if start is not None:
            out.append((start, b))
    return tuple(out)


def rescue(st: HeteroStorage, m: int, need: int, exclude: Iterable[int],
           machines: Sequence[Hashable]) -> tuple[HeteroStorage, list[Move]]:
    """Fresh coded rows of master ``m`` for the middle of a step: ``need`` rows that no machine
    present holds and that are not in ``exclude`` (received or in flight), given to the first
    of ``machines`` (best first; the controller tries the next when storing fails).  Returns the
    storage with them and the moves ``[(source, start, stop, machine)]``."""
    if not machines:
        raise PlanError(f"rescue: no live machine can take master {m}'s rows")
    held = [r for n, rs in st.blocks[m].items() if n in machines for r in rs]
    held += [(i, i + 1) for i in exclude]
    extra = take_rows(_free_ranges(st.capacity[m], held), need)
    if sum(b - a for a, b in extra) < need:
        raise PlanError(f"capacity: master {m}'s code of {st.capacity[m]} coded rows is used up; "
                        f"raise the option capacity")
    n = machines[0]
    blocks = list(st.blocks)
    blocks[m] = {**blocks[m], n: _merge(blocks[m].get(n, ()) + tuple(extra))}
    new = HeteroStorage(st.L, st.machines, st.problem, st.assignment, st.loads, tuple(blocks),
                        st.capacity)
    return new, [(source_name(m), a, b, n) for a, b in extra]


def check_decodable(st: HeteroStorage, present: Iterable[Hashable]) -> None:
    """Every master's coded rows held by ``present`` machines number at least ``L_m``."""
    present = set(present)
    for m, Lm in enumerate(st.L):
        have = sum(b - a for n, rs in st.blocks[m].items() if n in present for a, b in rs)
        if have < Lm:
            raise PlanError(f"storage: master {m} has {have} coded rows on the machines "
                            f"present, fewer than L_m = {Lm}")


# -- a step ------------------------------------------------------------------------------------

def step_plan(st: HeteroStorage, rng: np.random.Generator) -> HeteroStepPlan:
    """This step's service (dedicated, or drawn per machine) and the model's processing time of
    every machine's task, drawn whether or not it runs."""
    k = st.assignment.k
    M, N = k.shape
    if st.assignment.policy == "probabilistic":
        cum = np.cumsum(k, axis=0)
        choice = (rng.random(int(N))[None, :] >= cum).sum(axis=0)
    else:
        choice = np.full(N, M)
        for m in range(M):
            choice[k[m] >= 1.0] = m
    T = sample_time(st.loads, st.problem.a, st.problem.u, rng)
    serve, pace = {}, {}
    for j, n in enumerate(st.machines):
        m = int(choice[j])
        if m < M and st.rows_of(m, n):
            serve[n] = m
            pace[n] = float(T[m, j])
    t_star = tuple(float(x) for x in st.assignment.t_star)
    return HeteroStepPlan(storage=st, serve=serve, pace=pace, t_star=t_star,
                          c_int=max(pace.values(), default=0.0))


def row_time(st: HeteroStorage, m: int, machine: Hashable) -> float:
    """Expected processing time per coded row of master ``m`` on ``machine``: ``a + 1/u``
    (the model's ``E[T] = a l + l/u`` over ``l``)."""
    j = st.machines.index(machine)
    return float(st.problem.a[m, j] + 1.0 / st.problem.u[m, j])


def row_asks(storage: HeteroStorage, m: int, need: int, exclude: Iterable[int],
             usable: Iterable[Hashable]) -> list[tuple[Hashable, Ranges]]:
    """``[(machine, ranges)]``: ``need`` coded rows of master ``m`` not in ``exclude``, from
    the machines ``usable`` storing them, in id order (a repair's fresh rows: the runtime's
    checks and the simulator ask the same machines)."""
    out: list[tuple[Hashable, Ranges]] = []
    for n in sorted((n for n in usable if n in storage.machines), key=str):
        if need <= 0:
            break
        ranges = take_rows(ranges_minus(storage.rows_of(m, n), set(exclude)), need)
        if ranges:
            out.append((n, ranges))
            need -= sum(b - a for a, b in ranges)
    return out
