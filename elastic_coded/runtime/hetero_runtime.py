"""Heterogeneous masters on shared heterogeneous workers, on Ray (MATH.md §3): :class:`HeteroCluster`.

``M`` jobs ("masters"); job ``m`` computes ``A_m x_m`` with ``A_m`` of ``L_m`` rows.  ``N``
worker actors are shared by all masters.  The plan is made once, on the driver, by the pure
planner :mod:`elastic_coded.schemes.hetero`: an assignment (which workers serve which master:
dedicated, or per step with probabilities ``k[m,n]``) and integer loads ``l[m,n]`` (Theorem 1,
rounded), giving a :class:`~elastic_coded.schemes.hetero.HeteroPlan`.

**Storage.**  Master ``m``'s ``A_m`` is MDS-encoded on the driver into
``n_m = sum_n l[m,n]`` coded rows (an ``[n_m, L_m]`` code over the chosen field); worker ``n``
gets its block ``Ã_{m,n}`` of ``l[m,n]`` consecutive coded rows, through the object store, once.
Under a probabilistic plan a worker holds a block for every master it may serve.

**A step** (:meth:`HeteroCluster.multiply`).  All masters' jobs run at once on the shared
workers.  Each ``x_m`` is put in the object store once and passed by reference to the workers
serving ``m`` this step (a dedicated worker serves its master; a probabilistic worker draws one
master, or none, with probabilities ``k[:, n]``).  A worker multiplies its block by ``x_m`` and
returns all ``l`` results at once, at the processing time the model draws for it,
``T = a l + Exp(rate u / l)`` model time units, each lasting ``time_scale`` seconds (a
cancellable async sleep paces it).  The draws are seeded per step.  Master ``m`` decodes as soon
as it holds ``L_m`` coded results (any ``L_m``; systematic rows are preferred, which keeps real
decoding well conditioned) and cancels its other workers' tasks (``ray.cancel``).

**Re-dispatch.**  A step never returns a wrong or partial result.  When the workers serving
master ``m`` cannot deliver ``L_m`` rows (a probabilistic step in which too few of them drew
``m``, or a worker that died), the missing blocks are dispatched to other workers that hold
blocks of ``m``, best expected finish first.  A worker that is busy with another master's task
computes the extra block after it (its model time is the sum of both draws).  If no holder is
left the step raises ``RuntimeError``.

Each step appends a :class:`HeteroReport`: per master the completion time (wall seconds, and
model units = seconds / ``time_scale``), the model's own completion time for the step's draws,
``t*_m`` beside them, which workers' results decoded it, which were cancelled, which were
re-dispatched.  :meth:`HeteroCluster.simulate` runs the pure Monte Carlo of the same plan.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from dataclasses import asdict, dataclass
from typing import Any, Sequence

import numpy as np
import ray

from .session import ensure_ray, stop

from ..algebra.fields import Field, field as make_field
from ..algebra.mds import mds_code
from ..schemes.hetero import (Assignment, HeteroProblem, SimulationResult,
                              exact_assignment, integer_loads, iterated_greedy, make_plan,
                              probabilistic_assignment, random_problem, sample_time,
                              simple_greedy, simulate, unbalanced_coded_baseline,
                              uncoded_baseline)

__all__ = ["HeteroCluster", "HeteroReport", "HeteroWorker", "ASSIGNMENTS"]

log = logging.getLogger(__name__)

ASSIGNMENTS = ("iterated_greedy", "simple_greedy", "exact", "probabilistic", "uncoded",
               "unbalanced_coded")
"""Assignment methods by name.  The last two are the baselines of MATH.md §3 (even worker
split; uncoded, or coded with equal loads), runnable on the cluster for comparison."""

_EXACT_TIME_LIMIT = 30.0  # seconds for the MILP of assignment="exact"


# ------------------------------------------------------------------------------------------------
# the report
# ------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class HeteroReport:
    """What one :meth:`HeteroCluster.multiply` step did.  Tuples indexed by master unless said
    otherwise; times in model units unless the name ends in ``_s`` (seconds)."""

    step: int
    """Step index (0-based)."""
    policy: str
    """``"dedicated"`` or ``"probabilistic"``."""
    method: str
    """The assignment method that planned the cluster."""
    served: tuple[int, ...]
    """Per worker the master it served first this step (-1: none).  For a probabilistic plan
    this is the worker's draw."""
    completion_s: tuple[float, ...]
    """Measured: wall seconds from dispatch until the master held ``L_m`` coded results."""
    completion_units: tuple[float, ...]
    """``completion_s / time_scale``: the measured completion time in model units."""
    decoded_s: tuple[float, ...]
    """Wall seconds from dispatch until the master's ``A_m x_m`` was decoded."""
    model_time: tuple[float, ...]
    """The model's completion time for this step's draws: when the tasks dispatched to the
    master (re-dispatches included) reach ``L_m`` rows, by their drawn processing times."""
    t_star: tuple[float, ...]
    """Per master ``t*_m`` of the plan's integer loads (expectation model, MATH.md §3)."""
    decoded_by: tuple[tuple[int, ...], ...]
    """Workers whose coded results were used to decode each master."""
    cancelled: tuple[tuple[int, ...], ...]
    """Workers whose task for the master was cancelled once it had decoded."""
    redispatched: tuple[tuple[int, ...], ...]
    """Workers that got a re-dispatched block of the master (empty: none needed)."""
    failed: tuple[int, ...]
    """Workers found dead during the step."""
    late: tuple[int, ...]
    """Workers whose real compute took longer than their paced time (the pacing could not be
    honoured: raise ``time_scale``)."""
    total_s: float
    """Whole step, wall seconds (dispatch, gathering, decoding)."""

    @property
    def rescued(self) -> tuple[int, ...]:
        """Masters that needed re-dispatched blocks to decode."""
        return tuple(m for m, ws in enumerate(self.redispatched) if ws)

    @property
    def completion(self) -> float:
        """Measured completion of the step, model units: the last master's."""
        return max(self.completion_units)

    @property
    def model_completion(self) -> float:
        """The model's completion of the step for its draws: the last master's."""
        return max(self.model_time)

    @property
    def t(self) -> float:
        """``max_m t*_m``: the plan's system completion time in the expectation model."""
        return max(self.t_star)

    @property
    def by_t_star(self) -> bool:
        """Whether every master held ``L_m`` results (measured) by ``t = max_m t*_m``."""
        return self.completion <= self.t

    @property
    def model_by_t_star(self) -> bool:
        """Whether every master decoded by ``max_m t*_m`` in the model, for this step's draws."""
        return self.model_completion <= self.t

    def to_dict(self) -> dict:
        d = asdict(self)
        for key in ("rescued", "completion", "model_completion", "t", "by_t_star",
                    "model_by_t_star"):
            d[key] = getattr(self, key)
        return d


# ------------------------------------------------------------------------------------------------
# the worker actor
# ------------------------------------------------------------------------------------------------

@ray.remote(num_cpus=0)
class HeteroWorker:
    """Worker ``n``: holds its coded blocks ``Ã_{m,n}`` (one per master it may serve) and
    multiplies one by ``x_m`` on request.  Async, so that several masters' tasks can be in
    flight at once and a task no longer needed can be cancelled (``ray.cancel``)."""

    def __init__(self, n: int, field_spec):
        self.n = int(n)
        self.F = make_field(field_spec)
        self.blocks: dict[int, np.ndarray] = {}

    async def store(self, masters: Sequence[int], *blocks) -> int:
        """Keep ``blocks[i]`` as this worker's coded rows for master ``masters[i]``, dropping
        any earlier blocks, and warm up the field arithmetic.  Returns rows stored."""
        self.blocks = {}
        for m, rows in zip(masters, blocks):
            self.blocks[int(m)] = np.asarray(rows)
        for rows in self.blocks.values():
            await asyncio.to_thread(self.F.matmul, rows[:1], self.F.zeros((rows.shape[1], 1)))
        return sum(int(b.shape[0]) for b in self.blocks.values())

    async def ping(self) -> dict:
        return {"worker": self.n, "rows": {m: int(b.shape[0]) for m, b in self.blocks.items()}}

    async def compute(self, step: int, m: int, delay_s: float, x) -> dict:
        """``Ã_{m,n} @ x``, returned ``delay_s`` seconds after the call started (at once when
        computing took longer)."""
        t0 = time.perf_counter()
        try:
            rows = self.blocks[m]
        except KeyError:
            raise KeyError(f"worker {self.n} holds no coded rows of master {m}") from None
        result = await asyncio.to_thread(self.F.matmul, rows, x)
        compute_s = time.perf_counter() - t0
        await asyncio.sleep(max(0.0, delay_s - compute_s))
        return {"worker": self.n, "master": m, "step": step, "result": result,
                "compute_s": compute_s, "late": compute_s > delay_s,
                "elapsed_s": time.perf_counter() - t0}

    async def exit(self) -> None:
        ray.actor.exit_actor()


# ------------------------------------------------------------------------------------------------
# input checks
# ------------------------------------------------------------------------------------------------

def _check_int(name: str, value: Any, lo: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < lo:
        raise ValueError(f"{name}: {value!r} must be an int >= {lo}")
    return int(value)


def _check_matrices(As: Any, F: Field) -> list[np.ndarray]:
    if isinstance(As, np.ndarray) and As.ndim == 2:
        raise ValueError("As: needs a sequence of matrices, one per master, got one 2-D array "
                         "(wrap it in a list for a single master)")
    try:
        mats = list(As)
    except TypeError:
        raise ValueError(f"As: needs a sequence of 2-D matrices (one per master), "
                         f"got {type(As).__name__}") from None
    if not mats:
        raise ValueError("As: needs at least one matrix (one per master), got none")
    out = []
    for m, A in enumerate(mats):
        arr = F.asarray(A, f"As[{m}]")
        if arr.ndim != 2 or arr.shape[0] < 1 or arr.shape[1] < 1:
            raise ValueError(f"As[{m}]: must be a non-empty 2-D matrix (L_m x s_m), "
                             f"got shape {arr.shape}")
        out.append(arr)
    return out


def _build_problem(L: np.ndarray, problem, a, u, n_workers, seed: int) -> HeteroProblem:
    M = L.size
    if problem is not None:
        if a is not None or u is not None:
            raise ValueError("problem: give either problem or a and u, not both")
        if not isinstance(problem, HeteroProblem):
            raise ValueError(f"problem: must be a HeteroProblem, got {type(problem).__name__}")
        if problem.M != M or not np.array_equal(problem.L, L):
            raise ValueError(f"problem: its L = {[int(x) for x in problem.L]} must equal the "
                             f"row counts of As, {[int(x) for x in L]}")
        P = problem
    elif a is not None or u is not None:
        if a is None or u is None:
            raise ValueError(f"{'a' if a is None else 'u'}: give both a and u (shape (M, N)), "
                             f"or neither to draw them")
        P = HeteroProblem(L=L, a=a, u=u)  # checks shapes, positivity and N > M
    else:
        N = 4 * M if n_workers is None else _check_int("n_workers", n_workers, M + 1)
        drawn = random_problem(M, N, seed)
        P = HeteroProblem(L=L, a=drawn.a, u=drawn.u)
    if n_workers is not None:
        _check_int("n_workers", n_workers, M + 1)
        if int(n_workers) != P.N:
            raise ValueError(f"n_workers: {n_workers!r} must equal the model's N = {P.N} "
                             f"(columns of a and u)")
    return P


def _plan(P: HeteroProblem, assignment, seed: int) -> tuple[Assignment, np.ndarray]:
    if isinstance(assignment, Assignment):
        if assignment.k.shape != (P.M, P.N):
            raise ValueError(f"assignment: k has shape {assignment.k.shape}, the problem "
                             f"needs {(P.M, P.N)}")
        return assignment, integer_loads(assignment, P)
    if not isinstance(assignment, str) or assignment not in ASSIGNMENTS:
        raise ValueError(f"assignment: {assignment!r} is not a known method; "
                         f"known: {', '.join(repr(s) for s in ASSIGNMENTS)}, or an Assignment")
    if assignment == "uncoded":
        return uncoded_baseline(P)
    if assignment == "unbalanced_coded":
        return unbalanced_coded_baseline(P)
    asg = {
        "iterated_greedy": lambda: iterated_greedy(P, rng=seed),
        "simple_greedy": lambda: simple_greedy(P),
        "exact": lambda: exact_assignment(P, time_limit=_EXACT_TIME_LIMIT),
        "probabilistic": lambda: probabilistic_assignment(P),
    }[assignment]()
    return asg, integer_loads(asg, P)


# ------------------------------------------------------------------------------------------------
# the driver
# ------------------------------------------------------------------------------------------------

class HeteroCluster:
    """``M`` masters' jobs ``A_m x_m`` on ``N`` shared worker actors (see the module docstring).

    ``As``: the ``M`` matrices ``A_m`` (``L_m x s_m``; ``L_m`` is the row count).  The model:
    ``problem`` (a :class:`~elastic_coded.schemes.hetero.HeteroProblem` whose ``L`` equals the
    row counts), or ``a`` and ``u`` (``M x N``), or neither: drawn by
    :func:`~elastic_coded.schemes.hetero.random_problem` (seeded by ``seed``; ``n_workers``
    workers, default ``4 M``) with the row counts as ``L``.  ``assignment``: one of
    :data:`ASSIGNMENTS` or an :class:`~elastic_coded.schemes.hetero.Assignment` (its loads are
    :func:`~elastic_coded.schemes.hetero.integer_loads`); ``"exact"`` runs the MILP with a
    30 s limit.  ``field``: a field or spec (``"real"``, ``"gf(65521)"``, ...).  ``time_scale``:
    seconds per model time unit (> 0).  ``seed``: seeds the plan's randomised parts and the
    per-step draws.  ``address``/``num_cpus``: used only when Ray is not yet initialised
    (``None``: an embedded local Ray, shut down by :meth:`shutdown`).
    """

    def __init__(self, As, *, problem: HeteroProblem | None = None, a=None, u=None,
                 assignment: str | Assignment = "iterated_greedy", field: Any = "real",
                 time_scale: float = 0.01, seed: int = 0, n_workers: int | None = None,
                 address: str | None = None, num_cpus: int | None = None):
        self.F = make_field(field)
        if isinstance(time_scale, bool) or not isinstance(time_scale, (int, float, np.number)) \
                or not (math.isfinite(time_scale) and time_scale > 0):
            raise ValueError(f"time_scale: {time_scale!r} must be a finite number > 0 "
                             f"(seconds per model time unit)")
        self.seed = _check_int("seed", seed, 0)
        self.time_scale = float(time_scale)
        mats = _check_matrices(As, self.F)
        L = np.array([A.shape[0] for A in mats], dtype=np.int64)
        self.problem = _build_problem(L, problem, a, u, n_workers, self.seed)
        self.M, self.N = self.problem.M, self.problem.N
        self.L = tuple(int(x) for x in L)
        self.cols = tuple(int(A.shape[1]) for A in mats)
        self._As = mats
        first = self._prepare(*_plan(self.problem, assignment, self.seed))  # before any actor
        if self.F.exact:
            self.F.solve(self.F.eye(2), self.F.eye(2))  # load the solver before the first step
        self.reports: list[HeteroReport] = []
        self._step = 0
        self._dead: set[int] = set()
        self._since = 0
        self._closed = False
        self._workers: list = []
        self._own_ray = ensure_ray(address, num_cpus)
        try:
            self._workers = [HeteroWorker.remote(n, self.F) for n in range(self.N)]
            self._install(first)
        except BaseException:
            self.shutdown()
            raise

    def _prepare(self, asg: Assignment, loads: np.ndarray) -> dict:
        """The plan of ``asg`` and ``loads``, its coded-row blocks and codes, and every ``A_m``
        encoded (driver side, nothing sent yet)."""
        plan = make_plan(self.problem, asg, loads)
        blocks: list[dict[int, tuple[int, int]]] = []
        for m in range(self.M):
            off, blk = 0, {}
            for n, rows in plan.tasks[m]:
                blk[n] = (off, off + rows)
                off += rows
            blocks.append(blk)
        order = getattr(self.F, "order", None)
        for m in range(self.M):
            if order is not None and plan.code_length(m) > order:
                raise ValueError(
                    f"field: {self.F.name} has {order} elements, too few for master {m}'s MDS "
                    f"code of length {plan.code_length(m)} (the code length may not exceed the "
                    f"field's order); use a larger field")
        codes = [mds_code(self.F, plan.code_length(m), self.L[m], seed=self.seed + m)
                 for m in range(self.M)]
        coded = [code.encode(A) for code, A in zip(codes, self._As)]
        return {"assignment": asg, "loads": np.asarray(loads), "plan": plan, "blocks": blocks,
                "codes": codes, "coded": coded}

    def _install(self, prep: dict) -> None:
        """Send each worker its coded blocks of a prepared plan (once, by reference); every
        worker drops the blocks of an earlier plan.  The following steps run this plan."""
        blocks, coded, loads = prep["blocks"], prep["coded"], prep["loads"]
        calls = []
        for n, w in enumerate(self._workers):
            masters = [m for m in range(self.M) if n in blocks[m]]
            refs = [ray.put(coded[m][slice(*blocks[m][n])]) for m in masters]
            calls.append(w.store.remote(masters, *refs))
        ray.get(calls)
        self.assignment, self.loads, self.plan = prep["assignment"], loads, prep["plan"]
        self.blocks, self.codes = blocks, prep["codes"]
        # expected processing time of each block, a l + l / u (for choosing re-dispatches)
        with np.errstate(divide="ignore", invalid="ignore"):
            self._expected = np.where(loads > 0, self.problem.a * loads
                                      + loads / self.problem.u, np.inf)
        self._since = len(self.reports)

    def replan(self, assignment: str | Assignment) -> None:
        """Plan anew for the same model with another assignment (a name of
        :data:`ASSIGNMENTS` or an :class:`~elastic_coded.schemes.hetero.Assignment`) and store
        the new coded blocks on the same workers; the following steps run that plan.  Cheaper
        than a new cluster: the worker actors stay."""
        if self._closed:
            raise RuntimeError("HeteroCluster: already shut down")
        if self._dead:
            raise RuntimeError(f"replan: workers {sorted(self._dead)} are dead; a new plan "
                               f"needs all N = {self.N} workers (start a new cluster)")
        self._install(self._prepare(*_plan(self.problem, assignment, self.seed)))

    def crash_worker(self, n: int) -> None:
        """Kill worker ``n`` without notice (for tests and experiments).  The next step finds
        it dead when its task fails and re-dispatches the blocks it held to other holders;
        later steps leave it out."""
        if self._closed:
            raise RuntimeError("HeteroCluster: already shut down")
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or not 0 <= n < self.N:
            raise ValueError(f"n: {n!r} must be a worker index in 0..N-1 = 0..{self.N - 1}")
        ray.kill(self._workers[int(n)], no_restart=True)

    # -- plan figures -------------------------------------------------------------------------
    @property
    def t_star(self) -> tuple[float, ...]:
        """Per master ``t*_m`` of the plan's integer loads (model units)."""
        return self.plan.t_star

    @property
    def t(self) -> float:
        """``max_m t*_m``."""
        return max(self.plan.t_star)

    def simulate(self, trials: int = 10_000, rng: Any = None) -> SimulationResult:
        """Monte Carlo of this plan in the model (:func:`~elastic_coded.schemes.hetero.simulate`,
        without re-dispatch), with ``t_ref = max_m t*_m``."""
        return simulate(self.problem, self.assignment, self.loads, trials, rng, t_ref=self.t)

    def summary(self) -> dict:
        """Figures over the steps run with the current plan (model units)."""
        reps = self.reports[self._since:]
        if not reps:
            return {"steps": 0, "t_star": self.t}
        return {
            "steps": len(reps),
            "t_star": self.t,
            "mean_completion": float(np.mean([r.completion for r in reps])),
            "mean_model_completion": float(np.mean([r.model_completion for r in reps])),
            "fraction_by_t_star": float(np.mean([r.by_t_star for r in reps])),
            "model_fraction_by_t_star": float(np.mean([r.model_by_t_star for r in reps])),
            "mean_completion_per_master": tuple(
                float(np.mean([r.completion_units[m] for r in reps])) for m in range(self.M)),
            "rescued_steps": int(sum(bool(r.rescued) for r in reps)),
            "late_tasks": int(sum(len(r.late) for r in reps)),
            "mean_step_s": float(np.mean([r.total_s for r in reps])),
        }

    # -- a step -------------------------------------------------------------------------------
    def _check_inputs(self, xs) -> tuple[list[np.ndarray], list[bool]]:
        if isinstance(xs, np.ndarray) and self.M != 1:
            raise ValueError(f"xs: needs a sequence of M = {self.M} inputs (one per master), "
                             f"got one array")
        try:
            xs = list(xs)
        except TypeError:
            raise ValueError(f"xs: needs a sequence of M = {self.M} inputs, "
                             f"got {type(xs).__name__}") from None
        if len(xs) != self.M:
            raise ValueError(f"xs: needs one input per master, M = {self.M}, got {len(xs)}")
        out, vec = [], []
        for m, x in enumerate(xs):
            arr = self.F.asarray(x, f"xs[{m}]")
            if arr.ndim == 1:
                arr = arr[:, None]
                vec.append(True)
            else:
                vec.append(False)
            if arr.ndim != 2 or arr.shape[0] != self.cols[m] or arr.shape[1] < 1:
                raise ValueError(f"xs[{m}]: shape {np.shape(x)} does not fit A_{m} "
                                 f"({self.L[m]} x {self.cols[m]}): needs {self.cols[m]} rows "
                                 f"(a vector, or a matrix with >= 1 column)")
            out.append(arr)
        return out, vec

    def _draw(self, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """This step's master per worker (-1: none) and the processing times ``T[m,n]`` (model
        units) of every block, drawn whether or not it is dispatched."""
        k = self.assignment.k
        if self.plan.policy == "probabilistic":
            cum = np.cumsum(k, axis=0)
            draw = rng.random(self.N)
            choice = (draw[None, :] >= cum).sum(axis=0)
            choice = np.where(choice >= self.M, -1, choice)
        else:
            choice = -np.ones(self.N, dtype=np.int64)
            for m in range(self.M):
                for n in self.plan.workers(m):
                    choice[n] = m
        T = sample_time(self.loads, self.problem.a, self.problem.u, rng)
        return choice.astype(np.int64), T

    def multiply(self, xs) -> list[np.ndarray]:
        """``[A_m x_m for m]`` for the inputs ``xs`` (one per master: a vector of ``s_m``
        entries or an ``s_m x c`` matrix); see the module docstring."""
        if self._closed:
            raise RuntimeError("HeteroCluster: already shut down")
        X, vec = self._check_inputs(xs)
        step = self._step
        choice, T = self._draw(np.random.default_rng([self.seed, step]))
        Y, report = self._run_step(step, X, choice, T)
        self.reports.append(report)
        self._step += 1
        return [y[:, 0] if v else y for y, v in zip(Y, vec)]

    def _run_step(self, step: int, X: list[np.ndarray], choice: np.ndarray, T: np.ndarray):
        M, ts = self.M, self.time_scale
        x_refs = [ray.put(x) for x in X]
        pending: dict = {}                            # ref -> (worker, master)
        used: list[set[int]] = [set() for _ in range(M)]   # workers given master m's block
        model_finish: list[dict[int, float]] = [{} for _ in range(M)]
        busy_model = np.zeros(self.N)                 # drawn time each worker is busy until
        busy_expected = np.zeros(self.N)              # the same, in expectation (for choosing)
        received: list[dict[int, np.ndarray]] = [{} for _ in range(M)]
        redispatched: list[list[int]] = [[] for _ in range(M)]
        cancelled: list[list[int]] = [[] for _ in range(M)]
        failed: list[int] = []
        late: set[int] = set()
        completion_s = [math.nan] * M
        decoded_s = [math.nan] * M
        decoded_by: list[tuple[int, ...]] = [()] * M
        Y: list[np.ndarray | None] = [None] * M
        t0 = time.perf_counter()

        def dispatch(n: int, m: int, start_units: float) -> None:
            """Block ``(m, n)``: starts at ``start_units`` (model time) once worker ``n`` is
            free, finishes ``T[m,n]`` later."""
            begin = max(start_units, busy_model[n])
            finish = begin + float(T[m, n])
            busy_model[n] = finish
            busy_expected[n] = max(start_units, busy_expected[n]) + self._expected[m, n]
            used[m].add(n)
            model_finish[m][n] = finish
            ref = self._workers[n].compute.remote(step, m, (finish - start_units) * ts,
                                                  x_refs[m])
            pending[ref] = (n, m)

        def rows_alive(m: int) -> int:
            """Rows of master ``m`` received or still in flight."""
            inflight = sum(self.loads[m, n] for n, mm in pending.values() if mm == m)
            return int(inflight + sum(self.loads[m, n] for n in received[m]))

        def top_up(m: int, now_units: float) -> None:
            """Dispatch more of master ``m``'s blocks until ``L_m`` rows are received or in
            flight: to live holders not yet used, best expected finish first."""
            need = self.L[m] - rows_alive(m)
            if need <= 0:
                return
            cands = [n for n in self.blocks[m] if n not in used[m] and n not in self._dead]
            cands.sort(key=lambda n: (max(now_units, busy_expected[n]) + self._expected[m, n], n))
            for n in cands:
                if need <= 0:
                    break
                dispatch(n, m, now_units)
                redispatched[m].append(n)
                need -= int(self.loads[m, n])
            if need > 0:
                raise RuntimeError(
                    f"step {step}: master {m} cannot decode: {self.L[m] - need} of its "
                    f"L_m = {self.L[m]} coded rows are received or in flight and no other live "
                    f"worker holds its rows (dead workers: {sorted(self._dead)})")

        try:
            for n in range(self.N):
                m = int(choice[n])
                if m >= 0 and n in self.blocks[m] and n not in self._dead:
                    dispatch(n, m, 0.0)
            for m in range(M):
                top_up(m, 0.0)
            while any(y is None for y in Y):
                if not pending:
                    raise RuntimeError(f"step {step}: results ran out before every master "
                                       f"decoded")
                ray.wait(list(pending), num_returns=1)
                ready, _ = ray.wait(list(pending), num_returns=len(pending), timeout=0)
                t_ready = time.perf_counter() - t0
                done = set(ready)
                for r in ready:
                    n, m = pending.pop(r)
                    try:
                        out = ray.get(r)
                    except ray.exceptions.RayActorError:
                        if n not in self._dead:
                            log.warning("step %d: worker %d died", step, n)
                            failed.append(n)
                            self._dead.add(n)
                        model_finish[m].pop(n, None)
                        if Y[m] is None:
                            top_up(m, t_ready / ts)
                        continue
                    if out["late"]:
                        late.add(n)
                    if Y[m] is not None:
                        continue  # arrived with, or after, the results that decoded it
                    received[m][n] = out["result"]
                    if sum(self.loads[m, w] for w in received[m]) >= self.L[m]:
                        completion_s[m] = t_ready
                        Y[m], decoded_by[m] = self._decode(m, received[m])
                        decoded_s[m] = time.perf_counter() - t0
                        received[m].clear()
                        for r2, (n2, m2) in list(pending.items()):
                            if m2 == m and r2 not in done:  # done ones are dropped below
                                ray.cancel(r2)
                                cancelled[m].append(n2)
                                del pending[r2]
        finally:
            for r in pending:
                ray.cancel(r)
        total_s = time.perf_counter() - t0

        model_time = []
        for m in range(M):
            fin = sorted((f, int(self.loads[m, n])) for n, f in model_finish[m].items())
            cum, when = 0, math.inf
            for f, rows in fin:
                cum += rows
                if cum >= self.L[m]:
                    when = f
                    break
            model_time.append(float(when))
        report = HeteroReport(
            step=step, policy=self.plan.policy, method=self.assignment.method,
            served=tuple(int(c) for c in choice),
            completion_s=tuple(completion_s),
            completion_units=tuple(c / ts for c in completion_s),
            decoded_s=tuple(decoded_s), model_time=tuple(model_time),
            t_star=tuple(self.plan.t_star), decoded_by=tuple(decoded_by),
            cancelled=tuple(tuple(sorted(c)) for c in cancelled),
            redispatched=tuple(tuple(r) for r in redispatched), failed=tuple(failed),
            late=tuple(sorted(late)), total_s=total_s)
        return Y, report

    def _decode(self, m: int, got: dict[int, np.ndarray]) -> tuple[np.ndarray, tuple[int, ...]]:
        """``A_m x_m`` from the coded results ``got = {worker: block result}`` (at least
        ``L_m`` rows), using ``L_m`` of them: systematic rows first, then the others in code
        order.  Returns it and the workers whose rows were used."""
        L, F, code = self.L[m], self.F, self.codes[m]
        idx_parts, val_parts, owner_parts = [], [], []
        for n, res in got.items():
            a, b = self.blocks[m][n]
            idx_parts.append(np.arange(a, b))
            val_parts.append(res)
            owner_parts.append(np.full(b - a, n))
        idx = np.concatenate(idx_parts)
        vals = np.concatenate(val_parts, axis=0)
        owners = np.concatenate(owner_parts)
        sel = np.lexsort((idx, idx >= L))[:L]
        used = tuple(sorted({int(w) for w in owners[sel]}))
        idx, vals = idx[sel], vals[sel]
        G = code.generator
        if not (G.shape[0] >= L and np.array_equal(G[:L], F.eye(L))):
            return code.decode(idx, vals), used  # not systematic: invert the whole submatrix
        # Systematic code: the systematic rows are data rows; the parity rows P give the
        # missing data rows U by G[P, U] d_U = y_P - G[P, S] d_S, an |U| x |U| system.
        systematic = idx < L
        out = F.zeros((L,) + vals.shape[1:])
        S, P = idx[systematic], idx[~systematic]
        out[S] = vals[systematic]
        if P.size:
            U = np.setdiff1d(np.arange(L), S)
            rhs = vals[~systematic]
            if S.size:
                rhs = F.sub(rhs, F.matmul(G[np.ix_(P, S)], vals[systematic]))
            out[U] = F.solve(G[np.ix_(P, U)], rhs)
        return out, used

    # -- lifecycle ----------------------------------------------------------------------------
    def shutdown(self) -> None:
        """Stop the workers (and the embedded Ray, if this cluster started it)."""
        if self._closed:
            return
        self._closed = True
        workers, self._workers = self._workers, []
        stop(workers, self._own_ray)

    def __enter__(self) -> "HeteroCluster":
        return self

    def __exit__(self, *exc) -> None:
        self.shutdown()

    def __repr__(self) -> str:
        return (f"<HeteroCluster over {self.F.name}: M={self.M} masters L={list(self.L)}, "
                f"N={self.N} workers, {self.plan.policy}/{self.assignment.method}, "
                f"t*={self.t:.4g}, steps={self._step}>")
