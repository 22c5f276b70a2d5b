"""Integer rows for a step: the exact integer optimum of the per-step problem, by parametric
max-flow, and its layout into groups of ``L+S`` machines.

**The integer problem.**  With whole-column pieces every row is computed by ``K = L+S`` distinct
machines that store it, so a plan is, up to layout, the integer counts ``y[a,n]`` of the rows of
atom ``a`` (``R_a`` rows, available holders ``H_a``) that machine ``n`` computes:

    minimise T  s.t.  sum_{n in H_a} y[a,n] = K R_a,  0 <= y[a,n] <= R_a,
                      sum_a y[a,n] <= T q s[n],  y integer.

Conversely every such ``y`` is a plan: McNaughton's wrap-around rule lays an atom's counts along
``K`` passes over its rows, so every row gets ``K`` distinct holders (:func:`_wrap_layout`).

**Exact solution.**  For a fixed ``T`` the constraints are a flow network (source -> atom
``K R_a`` -> holder ``R_a`` -> sink ``floor(T q s[n])``) with integer capacities, so an integral
flow exists whenever any flow does: feasibility at ``T`` is one max-flow.  The optimum ``T*`` is
one of the values ``k / (q s[n])`` (a machine's finish time with ``k`` rows), and feasibility is
monotone in ``T``, so a search over these values (bisection while they are many, then binary
search among them) finds ``T*`` exactly.  ``c_int = T*``: the integer optimum, for any speeds and
placement.

**Bound.**  The fractional optimum (loads ``theta``) is a feasible flow with machine capacities
``q theta[n]``, hence with capacities ``ceil(q theta[n])``; by integrality so is an integral one:

    c <= c_int <= max_n ceil(q theta[n]) / (q s[n])  <  c + 1 / (q min_{n: theta[n] > 0} s[n])

(:func:`rounding_bound`).  **Balance.**  Among the optimal plans the one returned keeps every
machine near its fractional share: flows are pushed first up to ``floor(q theta[n])`` rows, then
up to ``ceil(q theta[n])``, then up to what ``T*`` allows; augmenting never lowers a machine's
rows, so each machine gets at least ``floor(q theta[n])`` rows (forced rows aside).
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

import numpy as np
import numpy.typing as npt
from scipy.sparse import csr_array
from scipy.sparse.csgraph import maximum_flow

from ...errors import ArgumentError
from ...schemes.plan import Group, PlanError, RowBlock, StepPlan
from ._layout import _flat, _wrap_layout

__all__ = ["rounding_bound"]

_REL = 1e-12          # relative slack when turning a time T into whole rows
_INT32 = 2 ** 31 - 1


class _RowFlow:
    """The network source -> free atom ``a`` (``K R_a``) -> holder (``R_a``) -> sink (set per
    call) over the machines that hold a free atom (local indices ``0..M-1``).  A flow is an int
    array over the forward edges; :meth:`augment` grows one to a maximum flow by running the
    max-flow on its residual network."""

    def __init__(self, R: np.ndarray, local: list[np.ndarray], M: int, K: int):
        A = R.size
        self.R, self.K, self.M = R, K, M
        self.atom_of = np.repeat(np.arange(A), [len(h) for h in local])
        self.local = np.concatenate(local)
        nx = self.local.size
        self.n_nodes, self.sink = A + M + 2, A + M + 1
        self.fu = np.concatenate([np.zeros(A, np.int64), 1 + self.atom_of, 1 + A + np.arange(M)])
        self.fv = np.concatenate([1 + np.arange(A), 1 + A + self.local, np.full(M, self.sink)])
        self.cap = np.concatenate([K * R, R[self.atom_of], np.zeros(M, np.int64)]).astype(np.int64)
        self.mid = slice(A, A + nx)        # atom -> holder edges: the rows y[a, n]
        self.tail = slice(A + nx, None)    # holder -> sink edges: each machine's rows
        u, v = np.concatenate([self.fu, self.fv]), np.concatenate([self.fv, self.fu])
        self.order = np.lexsort((v, u))
        self.indices = v[self.order].astype(np.int32)
        self.indptr = np.concatenate([[0], np.cumsum(np.bincount(u, minlength=self.n_nodes))]
                                     ).astype(np.int32)
        self.need = int(K * R.sum())
        self.stored = np.bincount(self.local, weights=R[self.atom_of], minlength=M).astype(np.int64)

    def zero(self) -> np.ndarray:
        return np.zeros(self.cap.size, np.int64)

    def augment(self, flow: np.ndarray, sink_cap: np.ndarray) -> np.ndarray:
        """A maximum flow with machine ``m`` taking at most ``sink_cap[m]`` rows, grown from
        ``flow`` (whose machine rows must lie within ``sink_cap``)."""
        cap = self.cap.copy()
        cap[self.tail] = sink_cap
        data = np.concatenate([cap - flow, flow])[self.order].astype(np.int32)
        g = csr_array((data, self.indices, self.indptr), shape=(self.n_nodes, self.n_nodes))
        res = maximum_flow(g, 0, self.sink, method="dinic")
        if res.flow_value == 0:
            return flow
        return flow + np.asarray(res.flow[self.fu, self.fv]).ravel().astype(np.int64)

    def carries_all(self, flow: np.ndarray) -> bool:
        return int(flow[self.tail].sum()) == self.need

    def may_carry(self, cap: np.ndarray) -> bool:
        """Necessary conditions for a flow carrying every row: in total and atom by atom."""
        if cap.sum() < self.need:
            return False
        room = np.bincount(self.atom_of, weights=np.minimum(cap[self.local], self.R[self.atom_of]),
                           minlength=self.R.size)
        return bool(np.all(room >= self.K * self.R))


class _Search:
    """Feasibility of a time ``T`` (module docstring): the forced rows ``fixed`` of every
    machine, plus one max-flow for the free atoms over the machines ``machines`` (global
    indices) that hold one."""

    def __init__(self, net: _RowFlow, machines: np.ndarray, fixed: np.ndarray,
                 qs: npt.NDArray[np.float64]):
        self.net = net
        self.qs: npt.NDArray[np.float64] = qs[machines]
        self.fixed = fixed[machines]
        self.t_fixed = float(np.max(fixed / qs))

    def rows(self, T: float) -> np.ndarray:
        """Rows each machine may compute in time ``T`` (forced rows included)."""
        return np.floor(T * self.qs * (1 + _REL)).astype(np.int64)

    def flow_at(self, T: float) -> np.ndarray | None:
        """A flow carrying every free row in time ``T``, or ``None`` when there is none."""
        if T * (1 + _REL) < self.t_fixed:
            return None
        cap = np.minimum(self.rows(T) - self.fixed, self.net.stored)
        if np.any(cap < 0) or not self.net.may_carry(cap):
            return None
        flow = self.net.augment(self.net.zero(), cap)
        return flow if self.net.carries_all(flow) else None

    def candidates(self, lo: float, hi: float, limit: int) -> np.ndarray | None:
        """The finish times ``k / (q s[n])`` in ``(lo, hi]`` (where feasibility can change),
        sorted; ``None`` when there are more than ``limit``."""
        k0, k1 = self.rows(lo), self.rows(hi)
        n = k1 - k0
        if n.sum() > limit:
            return None
        mach = np.repeat(np.arange(n.size), n)
        k = np.arange(mach.size) - np.repeat(np.cumsum(n) - n, n) + 1 + k0[mach]
        T = k / self.qs[mach]
        extra = [self.t_fixed] if lo < self.t_fixed <= hi else []
        return np.unique(np.concatenate([T[(T > lo) & (T <= hi)], extra, [hi]]))


def _min_time(sr: _Search, lo: float, hi: float, t_full: float) -> float:
    """The smallest feasible time: ``lo`` a (hinted) lower bound, ``hi`` a (hinted) upper bound,
    ``t_full`` (every machine computing all it stores) feasible for sure."""
    while sr.flow_at(hi) is None:
        if hi >= t_full:
            raise PlanError("integer rows: no integer plan even with every stored row computed")
        lo, hi = hi, min(2 * hi, t_full)
    lo = min(lo, hi)
    while lo > 0 and sr.flow_at(lo) is not None:  # the hint was not a lower bound: step down
        lo, hi = lo / 2, lo
    limit = 2 * sr.qs.size + 64
    while (cands := sr.candidates(lo, hi, limit)) is None:
        mid = 0.5 * (lo + hi) if hi <= 2 * lo else float(np.sqrt(max(lo, hi * 1e-300) * hi))
        if sr.flow_at(mid) is None:
            lo = mid
        else:
            hi = mid
    a, b = -1, cands.size - 1  # cands[a] infeasible (lo), cands[b] feasible (>= hi's rows)
    while b - a > 1:
        m = (a + b) // 2
        if sr.flow_at(float(cands[m])) is None:
            a = m
        else:
            b = m
    return float(cands[b])


def _balanced_flow(sr: _Search, T: float, theta_rows: np.ndarray) -> np.ndarray:
    """An optimal flow at ``T`` close to the fractional rows ``theta_rows`` (of the search's
    machines): augmented up to ``floor``, then ``ceil`` of them, then up to ``T``."""
    net = sr.net
    cap = np.minimum(sr.rows(T) - sr.fixed, net.stored)
    flow = net.zero()
    for bound in (np.floor(theta_rows + 1e-9), np.ceil(theta_rows - 1e-9)):
        flow = net.augment(flow, np.clip(bound.astype(np.int64) - sr.fixed, 0, cap))
    flow = net.augment(flow, cap)
    if not net.carries_all(flow):
        raise PlanError(f"integer rows: the max-flow carries {int(flow[net.tail].sum())} of "
                        f"{net.need} rows at the optimal time")
    return flow


def integer_rows(R: np.ndarray, holders: list[list[int]], s: npt.NDArray[np.float64],
                 q: int, K: int, theta: np.ndarray, c: float) -> np.ndarray:
    """The optimal integer counts ``y[a, n]`` of the module docstring, flat over the atoms'
    holders in order (``holders[0]`` first); ``theta`` and ``c`` are the fractional optimum."""
    if K * q > _INT32:
        raise ArgumentError(f"num_rows: L+S times the rows ({K} x {q}) must stay below 2^31")
    R = np.asarray(R, dtype=np.int64)
    n_h = np.array([len(h) for h in holders])
    flat = _flat(holders)
    edge_atom = np.repeat(np.arange(R.size), n_h)
    forced_edge = (n_h == K)[edge_atom]
    y = np.where(forced_edge, R[edge_atom], 0)
    fixed = np.bincount(flat, weights=y, minlength=s.size).astype(np.int64)
    free = np.flatnonzero(n_h != K)
    if free.size == 0:
        return y
    qs = q * s
    machines = np.unique(flat[~forced_edge])
    local = [np.searchsorted(machines, holders[a]) for a in free]
    net = _RowFlow(R[free], local, machines.size, K)
    sr = _Search(net, machines, fixed, qs)
    hi = float(np.max(np.ceil(q * theta - 1e-9) / qs))
    t_full = float(np.max((fixed[machines] + net.stored) / sr.qs))
    T = _min_time(sr, max(c * (1 - 1e-9), sr.t_fixed * (1 - 1e-12)), max(hi, sr.t_fixed), t_full)
    y[~forced_edge] = _balanced_flow(sr, T, q * theta[machines])[net.mid]
    return y


def lay_out_groups(atoms: Sequence[Sequence[RowBlock]], holders: Sequence[Sequence[int]],
                   y: np.ndarray, avail: tuple[Hashable, ...], q: int, K: int) -> list[Group]:
    """The groups: atom ``a`` (its ``blocks`` in row order) carries ``y`` rows per holder (flat,
    as :func:`integer_rows` returns them); each atom's rows are laid out by the wrap-around rule,
    cut at block boundaries so every group's rows are contiguous.  A group's machines are in
    ``avail`` order."""
    blocks = [b for bs in atoms for b in bs]
    sizes = np.array([b.size for b in blocks], dtype=np.int64)
    b_off = np.concatenate([[0], np.cumsum(sizes)])
    R = np.array([sum(b.size for b in bs) for bs in atoms], dtype=np.int64)
    n_h = [len(h) for h in holders]
    edges, members = _wrap_layout(R, np.repeat(np.arange(len(atoms)), n_h), y, K, b_off[1:-1])
    flat = _flat(holders)
    who = np.sort(flat[members], axis=1)
    bi = np.searchsorted(b_off, edges[:-1], side="right") - 1
    starts = np.array([b.start for b in blocks], dtype=np.int64)[bi] + edges[:-1] - b_off[bi]
    ids = np.empty(len(avail), dtype=object)
    ids[:] = avail
    return [Group((a, a + n), n / q, tuple(U))
            for a, n, U in zip(starts.tolist(), np.diff(edges).tolist(), ids[who].tolist())]


def rounding_bound(plan: StepPlan) -> float:
    """Upper bound on ``c_int - c`` (module docstring):
    ``max_n ceil(q theta[n]) / (q s[n]) - c``, below ``1 / (q min_{theta[n] > 0} s[n])``.
    The plan's ``c_int`` is moreover the exact integer optimum."""
    q = plan.num_rows
    qs = q * np.asarray(plan.speeds, dtype=np.float64)
    rows = np.ceil(q * np.asarray(plan.theta, dtype=np.float64) - 1e-9)
    return max(0.0, float(np.max(rows / qs)) - plan.c)
