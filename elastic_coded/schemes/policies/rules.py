"""Scheduling rules the runtime and the simulator both apply, as small pure functions over plain
data (machine ids, row ranges, mappings).  Pure: no Ray.

Each rule is written once, here; the runtime's driver and controller and the simulator call it,
so a simulated step makes the same choices a real one does.

USCTEC family (MATH.md §1):

* :func:`assign_recovery` (with :func:`recovery_target`): where the tasks a crash lost run again.
* :func:`backup_copies` (with :func:`backup_target`, :func:`backup_due`) and
  :func:`speculation_start`: speculative backup copies (the ``speculative`` policy).
* Speed estimates are :mod:`elastic_coded.schemes.speeds` (``observe``), shared already.
* :func:`speeds_close` (with :data:`REPLAN_SPEED_CHANGE`): whether a plan made for some speed
  estimates is kept for the current ones.

Heterogeneous masters (MATH.md §3):

* :func:`hetero_needs_replan`: whether the storage is planned anew for the machines present.
* :func:`top_up` (with :func:`top_up_time`): which machines are asked for more of a master's
  coded rows, and how long they take.

Pacing of the model-driven policies (unified, MATH.md §2; hetero, MATH.md §3):

* :func:`paced`: a call's duration from its model time; :func:`quorum_time`: when the fastest
  ``q`` have finished.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import numpy as np

from ...errors import ArgumentError
from ...families.hetero import policy as het
from ..plan import PlanError

if TYPE_CHECKING:
    import numpy.typing as npt

__all__ = ["recovery_target", "assign_recovery", "backup_due", "backup_target", "backup_copies",
           "speculation_start", "hetero_needs_replan", "top_up", "top_up_time", "paced",
           "quorum_time", "speeds_close", "keep_plan", "REPLAN_SPEED_CHANGE",
           "REPLAN_SPEED_CHANGE_REAL"]

_M = TypeVar("_M", bound=Hashable)   # a machine id
_K = TypeVar("_K")                    # a call's key
_P = TypeVar("_P")                    # a piece
_T = TypeVar("_T", float, "npt.NDArray[np.float64]")   # a scalar or an array of them


class _PerMachine(Protocol):
    """A number per machine, read as ``x[machine]``: a mapping by id, or (the simulator's) an
    array by plan position."""

    def __getitem__(self, machine: Any, /) -> float: ...


REPLAN_SPEED_CHANGE = 0.1
"""A plan is made anew once some machine's speed estimate moved by more than this fraction
from the estimate it was planned with (loads follow speeds: a smaller move costs a step at
most this fraction of its time)."""

REPLAN_SPEED_CHANGE_REAL = 0.3
""":data:`REPLAN_SPEED_CHANGE` for machines at their real speed (``time_scale = 0``): measured
speeds of processes sharing a host's cores move by 10-25% from step to step with no change in
the machines, and a fresh plan cost the controller 5-15 ms of CPU on the cores the machines
compute on (six machines on two cores: as much as a short step); a stopped or contended
process moves by far more and is planned anew at once."""


def speeds_close(planned: Sequence[float], now: Sequence[float],
                 change: float = REPLAN_SPEED_CHANGE) -> bool:
    """Whether every speed of ``now`` is within ``change`` (relative) of ``planned``, the two
    given machine by machine in the same order (``change = 0``: equal)."""
    if len(planned) != len(now):
        return False
    return all(abs(b - a) <= change * abs(a) for a, b in zip(planned, now))


def keep_plan(planned: Sequence[float], now: Sequence[float], change: float,
              step_s: float | None = None, plan_s: float | None = None) -> bool:
    """Whether a plan made for the speed estimates ``planned`` is kept for ``now`` (the same
    machines, in the same order): while :func:`speeds_close` within ``change``, and, given the
    last step's compute ``step_s`` (its slowest result used) and what the plan cost to make
    ``plan_s``, also while the most a fresh plan could save is below that cost.  The plan
    balanced for ``planned`` takes ``step_s``; under ``now`` its machines take ``step_s
    planned/now`` each, the slowest setting the step, and a fresh plan about ``step_s
    sum(planned)/sum(now)``.  A short step's noisy speeds are not worth a plan; a machine
    that stopped moves by orders of magnitude and is planned anew."""
    if speeds_close(planned, now, change):
        return True
    if step_s is None or plan_s is None or len(planned) != len(now) or min(now) <= 0:
        return False
    worst = max(a / b for a, b in zip(planned, now))
    fresh = sum(planned) / sum(now)
    return step_s * (worst - fresh) < plan_s


# -- recovery after a crash ----------------------------------------------------------------------

def _key(h: Hashable, tie: _PerMachine | None) -> object:
    return h if tie is None else tie[h]


def recovery_target(holders: Iterable[_M], load: Mapping[_M, int], speed: _PerMachine,
                    tie: _PerMachine | None = None) -> _M:
    """The holder to run lost rows on: the fewest rows already given to it in this recovery per
    unit of its speed estimate (``load[h] / speed[h]``), then the smallest id (or ``tie[h]``
    where ids do not order)."""
    return min(holders, key=lambda h: (load.get(h, 0) / speed[h], _key(h, tie)))


def assign_recovery(lost_rows: Sequence[tuple[int, int]],
                    spans: Callable[[tuple[int, int]], Iterable[tuple[int, int, Sequence[_M]]]],
                    speed: _PerMachine, tie: _PerMachine | None = None
                    ) -> list[tuple[int, int, int, _M]]:
    """Where the tasks a crash lost run again.

    ``lost_rows[i]``: the rows ``(start, stop)`` of lost task ``i``, in the order they are
    re-planned; ``spans(rows)``: ``[(start, stop, [live holders]), ...]`` (what
    :meth:`~elastic_coded.schemes.plan.Placement.holders_of` returns); ``speed[h]``: speed
    estimates.  Each span goes to its :func:`recovery_target`, the rows counting towards that
    holder's load for the spans after it.  Returns ``[(i, start, stop, holder), ...]``; raises
    :class:`~elastic_coded.schemes.plan.PlanError` when no live machine stores a span."""
    load: dict[_M, int] = {}
    out: list[tuple[int, int, int, _M]] = []
    for i, rows in enumerate(lost_rows):
        for a, b, holders in spans(rows):
            if not holders:
                raise PlanError(f"recover: no live machine stores rows {a}:{b}")
            h = recovery_target(holders, load, speed, tie)
            load[h] = load.get(h, 0) + b - a
            out.append((i, a, b, h))
    return out


# -- speculative backups -------------------------------------------------------------------------

def backup_due(elapsed: float, median_done: float | None, factor: float) -> bool:
    """A call running for ``elapsed`` gets backup copies once at least one call has completed
    and ``elapsed >= factor * median_done`` (the median completed call's time)."""
    return median_done is not None and elapsed >= factor * median_done


def backup_target(others: Iterable[_M], busy: Mapping[_M, int], tie: _PerMachine | None = None
                  ) -> _M:
    """The holder to run a backup copy on: the fewest calls in flight, then the smallest id (or
    ``tie[h]``)."""
    return min(others, key=lambda h: (busy.get(h, 0), _key(h, tie)))


def backup_copies(calls: Iterable[tuple[_K, _M, Iterable[_P]]], holders: Mapping[_P, Iterable[_M]],
                  busy: Mapping[_M, int], needed: Callable[[_P], bool] = lambda piece: True,
                  tie: _PerMachine | None = None) -> list[tuple[_K, int, _M]]:
    """Backup copies of the calls due for them (:func:`backup_due`).

    ``calls``: ``[(key, machine, pieces), ...]`` in dispatch order, ``pieces`` the piece of each
    of the call's tasks; ``holders[piece]``: the machines storing the piece's rows;
    ``busy[h]``: calls in flight on ``h``.  Every task whose piece is still ``needed`` and has
    a holder other than its machine gets one copy on the :func:`backup_target`, which counts as
    one more call in flight for the tasks after it.  Returns ``[(key, task index, holder)]``."""
    busy = dict(busy)
    out: list[tuple[_K, int, _M]] = []
    for key, machine, pieces in calls:
        for i, piece in enumerate(pieces):
            others = [h for h in holders.get(piece, ()) if h != machine]
            if not others or not needed(piece):
                continue
            h = backup_target(others, busy, tie)
            busy[h] = busy.get(h, 0) + 1
            out.append((key, i, h))
    return out


def speculation_start(durations: npt.ArrayLike, multiplier: float, min_completed: int = 1
                      ) -> float:
    """When backups start if every call starts at 0 and takes ``durations`` (``inf``: never
    returns): the earliest ``t`` with at least ``min_completed`` calls completed by ``t`` and
    ``t >= multiplier * median(durations completed by t)``; ``inf`` if never.  The runtime's
    driver reaches the same ``t`` online (it wakes at ``multiplier`` times the current median
    and looks again whenever a call completes)."""
    d = np.sort(np.asarray(durations, dtype=np.float64))
    d = d[np.isfinite(d)]
    m = d.size
    k0 = max(1, int(min_completed))
    if m < k0:
        return math.inf
    k = np.arange(k0, m + 1)
    med = 0.5 * (d[(k - 1) // 2] + d[k // 2])
    lo = d[k - 1]
    hi = np.append(d[1:], math.inf)[k - 1]
    cand = np.maximum(lo, multiplier * med)
    ok = np.flatnonzero(cand < hi)
    return float(cand[ok[0]]) if ok.size else math.inf


# -- heterogeneous masters -----------------------------------------------------------------------

def hetero_needs_replan(storage: het.HeteroStorage | None, present: Iterable[Hashable],
                        fresh: Iterable[Hashable] = ()) -> bool:
    """The heterogeneous-masters storage is planned anew (:func:`~.hetero.plan_storage`) when
    there is none yet, when a machine joined (``fresh``: it holds nothing, whatever its id held
    before) or when the machines present are not the ones it was planned for."""
    return storage is None or bool(set(fresh)) or set(storage.machines) != set(present)


def top_up(storage: het.HeteroStorage, m: int, have: Iterable[int], busy: Iterable[Hashable],
           usable: Iterable[Hashable]
           ) -> tuple[list[tuple[Hashable, het.Ranges]], int, list[Hashable]]:
    """More of master ``m``'s coded rows, until ``L_m`` are received or in flight.

    ``have``: the coded rows of ``m`` received or in flight; ``busy``: machines with a call in
    flight; ``usable``: machines that may be asked (present, not known dead).  The usable
    machines of the storage are ordered idle first, then by the expected time of one of
    ``m``'s rows (:func:`~.hetero.row_time`), then by id; each in turn is asked for its rows of
    ``m`` not in ``have`` (at most ``need`` rows, ``need`` the rows still missing)
    until none are missing.  Returns ``([(machine, ranges), ...], short, order)``: ``short``
    rows no holder can give, for :func:`~.hetero.rescue` to store afresh on the first machine
    of ``order`` that takes them (each call's model time: :func:`top_up_time`)."""
    have = set(have)
    need = storage.L[m] - len(have)
    busy = set(busy)
    order = sorted((n for n in usable if n in storage.machines),
                   key=lambda n: (n in busy, het.row_time(storage, m, n), str(n)))
    asks: list[tuple[Hashable, het.Ranges]] = []
    for n in order:
        if need <= 0:
            break
        ranges = het.take_rows(het.ranges_minus(storage.rows_of(m, n), have), need)
        if ranges:
            asks.append((n, ranges))
            need -= sum(b - a for a, b in ranges)
            have |= {i for a, b in ranges for i in range(a, b)}
    return asks, max(0, need), order


def top_up_time(storage: het.HeteroStorage, m: int, machine: Hashable, rows: int) -> float:
    """Model time (time units) of a top-up call of ``rows`` coded rows of master ``m`` on
    ``machine``: ``rows`` times the expected time of one (:func:`~.hetero.row_time`)."""
    return het.row_time(storage, m, machine) * rows


# -- pacing of the model-driven policies ---------------------------------------------------------

def paced(model_time: _T, time_scale: float, slow: float = 1.0, speed: float = 1.0) -> _T:
    """A call's duration from its model time (time units): ``model_time * time_scale * slow /
    speed`` (unified's Map: the drawn latency over the machine's speed; hetero: the drawn
    processing time, ``speed`` 1).  Scalars or numpy arrays."""
    return model_time * time_scale * slow / speed


def quorum_time(finish: npt.ArrayLike, q: int) -> float:
    """When the fastest ``q`` of ``finish`` have finished (``inf`` when fewer than ``q`` ever
    do)."""
    f = np.asarray(finish, dtype=np.float64).reshape(-1)
    if q < 1:
        raise ArgumentError(f"q: at least 1, got {q!r}")
    if f.size < q:
        return math.inf
    return float(np.partition(f, q - 1)[q - 1])
