"""What crosses an actor boundary: frozen dataclasses shared by the driver, the controller, the
worker actors and the simulator.  Pure: no Ray.

Every scheme asks the same three things of a machine: keep row ranges of a *source* (a matrix
the driver can read rows of: ``A`` itself for USCTEC, the coded ``G_m A_m`` of master ``m`` for
heterogeneous masters, the coded storage ``G A`` of the unified framework), multiply stored rows
by a step's inputs, and (unified only) exchange coded-multicast packets built from a kept Map
result.  A :class:`Call` carries one machine's work for one step.
"""

from __future__ import annotations

import pickle
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from ..machines import MachineSpec

__all__ = ["TaskSpec", "Call", "CallResult", "packed", "unpacked", "packed_result",
           "packed_reply", "result_of", "BatchItem", "Reassignment", "Joined", "Rescued",
           "Snapshot", "Member", "StepMeasured", "StepRequest", "PreparedStep"]


@dataclass(frozen=True)
class TaskSpec:
    """``source[rows] @ inputs[arg][:, cols]`` for output ``piece`` at ``position``.

    ``rows`` are global row indices of ``source`` (half-open); ``cols`` ``None`` means all the
    input's columns."""

    source: str
    rows: tuple[int, int]
    arg: int
    cols: tuple[int, int] | None
    piece: int
    position: int

    @property
    def num_rows(self) -> int:
        return self.rows[1] - self.rows[0]

    # a plain tuple: a step's calls carry hundreds of tasks
    def __reduce__(self) -> tuple[Any, ...]:
        return (TaskSpec, (self.source, self.rows, self.arg, self.cols, self.piece,
                           self.position))


@dataclass(frozen=True)
class Call:
    """One machine's work in one step.

    ``tasks`` run in order on the inputs passed beside the call.  Pacing (emulation only):
    ``pace_s`` is the call's duration in seconds when the policy's model fixes it (hetero and
    unified draw latencies); otherwise, with ``time_scale > 0``, the worker takes
    ``work / speed * time_scale * slow`` seconds, ``work`` being its products over
    ``total_products``.  ``crash_at`` in [0, 1]: the machine crashes after that fraction of the
    paced time (scripted crashes).  ``keep``: keep the result on the worker for a later
    exchange (unified's Map) and return only the accounting."""

    step: int
    tasks: tuple[TaskSpec, ...]
    total_products: int
    slow: float = 1.0
    pace_s: float | None = None
    crash_at: float | None = None
    keep: bool = False

    def __reduce__(self) -> tuple[Any, ...]:
        return (Call, (self.step, self.tasks, self.total_products, self.slow, self.pace_s,
                       self.crash_at, self.keep))


@dataclass(frozen=True)
class CallResult:
    """What a worker returns for a :class:`Call`: one result per task (empty when ``keep``),
    the rows and products it computed, its work (products over the step's total), and its
    compute and elapsed times."""

    machine: str
    step: int
    results: tuple[np.ndarray, ...] = field(repr=False)
    rows: int
    products: int
    work: float
    compute_s: float
    elapsed_s: float
    finished: float = 0.0
    """Wall clock (``time.time()``) when the call finished."""
    paced_s: float | None = None
    """Emulation: how long the machine was busy as emulated (the time it was paced to);
    ``elapsed_s`` adds the host's own delays (a process's event loop waiting for a core, a
    host too slow for the pace).  ``None`` at real speed."""

    @property
    def busy_s(self) -> float:
        """The machine's busy time: what its speed is measured on."""
        return self.elapsed_s if self.paced_s is None else self.paced_s

    def __reduce__(self) -> tuple[Any, ...]:
        """Results of one width and dtype travel as one array (one buffer, not one per task)
        and come back as views of it."""
        res = self.results
        rest = (self.machine, self.step, self.rows, self.products, self.work, self.compute_s,
                self.elapsed_s, self.finished, self.paced_s)
        if len(res) > 1 and _same_2d(res):
            return (_unpack, (np.concatenate(res, axis=0), tuple(r.shape[0] for r in res),
                              rest))
        return (CallResult, (rest[0], rest[1], res, *rest[2:]))


def _same_2d(arrays: Sequence[np.ndarray]) -> bool:
    a0 = arrays[0]
    return all(isinstance(a, np.ndarray) and a.ndim == 2 and a.shape[1] == a0.shape[1]
               and a.dtype == a0.dtype for a in arrays)


def _unpack(packed: np.ndarray, heights: tuple[int, ...], rest: tuple[Any, ...]) -> CallResult:
    cuts = np.cumsum((0,) + heights)
    results = tuple(packed[a:b] for a, b in zip(cuts[:-1], cuts[1:]))
    return CallResult(rest[0], rest[1], results, *rest[2:])


def packed(obj: object, inline: dict[int, Any], by_ref: tuple[int, ...]) -> bytes:
    """``obj`` (calls) with the inputs sent inside it (``inline``: ``{arg: array}``) and the
    ``arg`` s of those sent by reference beside it, pickled once by the sender.  Small
    objects cost Ray's serializer far more one by one (a call's tasks, a small array each)
    than pickled together into one ``bytes`` argument."""
    return pickle.dumps((obj, inline, tuple(by_ref)), protocol=5)


def unpacked(payload: bytes, refs: Iterable[Any]) -> tuple[Any, dict[int, Any]]:
    """``(obj, inputs)`` from :func:`packed` and the referenced inputs (Ray passes their
    values), ``inputs`` a mapping from a task's ``arg`` to its input."""
    obj, inputs, by_ref = pickle.loads(payload)
    inputs.update(zip(by_ref, refs))
    return obj, inputs


PACK_RESULTS_BELOW = 64 << 10
"""Result arrays (bytes, all of a reply's) below which a reply travels pickled once."""


def packed_result(obj: CallResult | tuple[BatchItem, ...]
                  ) -> bytes | CallResult | tuple[BatchItem, ...]:
    """A worker's reply (a :class:`CallResult` or a tuple of :class:`BatchItem`) pickled
    into ``bytes`` when its results are small (:data:`PACK_RESULTS_BELOW`); large ones go
    as they are (Ray's own serialization shares their buffers).  Read back by
    :func:`result_of`."""
    outs = [obj] if isinstance(obj, CallResult) else [b.result for b in obj]
    size = sum(getattr(r, "nbytes", 0) for o in outs if o is not None for r in o.results)
    return pickle.dumps(obj, protocol=5) if size < PACK_RESULTS_BELOW else obj


def packed_reply(prep: PreparedStep) -> bytes | PreparedStep:
    """The controller's answer pickled once, into ``bytes`` (Ray's serializer costs several
    times more on a plan's many small objects), unless it carries actor handles, which go
    through Ray's serializer, as does one the standard pickle cannot take (a plan holding a
    mapping proxy, say).  Read back by :func:`result_of`."""
    if prep.handles:
        return prep
    try:
        return pickle.dumps(prep, protocol=5)
    except (TypeError, AttributeError, pickle.PicklingError):
        return prep


def result_of(reply: object) -> Any:
    """A reply as sent (:func:`packed_result`, :func:`packed_reply`): unpickled if it was
    packed."""
    return pickle.loads(reply) if isinstance(reply, bytes) else reply


@dataclass(frozen=True)
class BatchItem:
    """One machine's outcome in a worker process's batched call (one call per process per
    step, its machines' results streamed back as each finishes): its :class:`CallResult`, or
    ``died``, why the machine ended before answering (it crashed or left)."""

    machine: str
    result: CallResult | None = None
    died: str | None = None


@dataclass(frozen=True)
class Reassignment:
    """Lost tasks re-planned on one live ``machine`` (its actor ``handle``)."""

    machine: str
    handle: object = field(repr=False)
    tasks: tuple[TaskSpec, ...] = ()


@dataclass(frozen=True)
class Joined:
    """Machines added: the rows copied to them and their actor handles."""

    rows_moved: int
    handles: dict[str, Any] = field(repr=False)


@dataclass(frozen=True)
class Rescued:
    """Fresh coded rows ``ranges`` of a master stored on ``machine`` in the middle of a step."""

    machine: str
    handle: object = field(repr=False)
    ranges: tuple[tuple[int, int], ...] = ()


@dataclass(frozen=True)
class Snapshot:
    """The controller's view: machines present, speed estimates, the storage in force (a
    Placement or the scheme's storage) and the values moved to store it (unified)."""

    machines: tuple[str, ...]
    speeds: dict[str, float]
    storage: object = field(repr=False)
    values_moved: int = 0


@dataclass(frozen=True)
class Member:
    """A worker a new controller adopts: its spec, actor handle and speed estimate."""

    spec: object
    handle: object = field(repr=False)
    speed: float = 1.0


@dataclass(frozen=True)
class StepMeasured:
    """What a step tells the controller when it ends: the speeds measured (``{machine:
    (value, 'value' | 'upper')}``, for its estimates) and the step's times (its metrics).  It
    travels with the driver's next request (:attr:`StepRequest.report`), or alone before any
    other call."""

    policy: str
    measured: dict[str, tuple[float, str]]
    t_total: float
    t_decode: float
    stragglers: int
    slowest_s: float | None = None
    """The slowest result the step used (its compute, as the machines saw it), or ``None``."""


@dataclass(frozen=True)
class StepRequest:
    """What the driver asks the controller for: the plan of ``step`` under ``policy``, with
    ``S`` overriding the configured one (``None``: as configured) and ``n_cols`` inputs.
    ``ahead``: asked for while the step before runs (its storage repair shrinks no machine's
    rows then: that step may be reading them).  ``modes``: for a policy choosing its execution
    each step (``usctec-auto``), the executions to plan for (``()``: all of them)."""

    step: int
    policy: str
    S: int | None
    n_cols: int
    known: tuple[str, ...] = ()
    ahead: bool = False
    modes: tuple[str, ...] = ()
    held: tuple[int, ...] = ()
    """The serial numbers of the plans the driver holds (:attr:`PreparedStep.serial`): a plan
    it holds is not sent again."""
    report: StepMeasured | None = None
    """The last step's measurements, not told yet: taken in before anything else."""


@dataclass(frozen=True)
class PreparedStep:
    """The controller's answer: the validated ``plan``, handles for machines the driver does not
    know yet, the membership changes and rows moved since the last answer, and speeds."""

    plan: object
    handles: dict[str, Any]
    joined: tuple[str, ...]
    left: tuple[str, ...]
    rows_moved: int
    speeds: dict[str, float]
    emulated: dict[str, float]
    t_plan: float
    specs: dict[str, MachineSpec] | None = None
    storage: object = None
    redesign: str | None = None
    draining: tuple[str, ...] = ()
    preempted: tuple[str, ...] = ()
    restarted: tuple[str, ...] = ()
    """Machines back in a fresh worker process since the last answer (:mod:`~elastic_coded.
    runtime.restart`)."""
    not_restarted: tuple[tuple[str, str], ...] = ()
    """``(machine, why)`` for machines whose dead process was not restarted."""
    serial: int = 0
    """The plan's serial number (the controller counts its plans from a random start, so a
    controller that replaces one that died never reuses its numbers; a plan reused while
    nothing changed keeps its number).  ``plan`` is ``None`` when the request said the driver
    holds that plan (:attr:`StepRequest.held`)."""
