"""What a step's executor is given: a frozen :class:`StepContext`, with a typed
:class:`ControllerClient` for the few controller calls a step makes mid-way.

The executors (:mod:`.executors`) and the verifier (:mod:`.verifying`) read the step from here
and never see the cluster: the driver (:class:`~.cluster.ElasticCluster`) builds a context per
step, runs the policy's executor on it, and turns the :class:`~.executors.common.Outcome` it
returns into the step report.  Tests build one directly (every field but ``step`` and ``F`` has
a default), with a client over a fake ``call``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from ..errors import InternalError

__all__ = ["StepContext", "ControllerClient", "no_controller"]


def _no_call(method: str, *args):
    raise InternalError(f"controller: no controller in this context (called {method!r})")


@dataclass(frozen=True)
class ControllerClient:
    """The controller calls a step makes, typed.  ``call(method, *args)`` makes one (the
    cluster's: a controller that died is replaced and the call made again);
    ``replan()`` asks for the step's plan again after the storage changed mid-step (the
    unified scheme re-encoding for the machines left), updating the driver's tables;
    ``learn(machine, handle)`` tells the driver's tables of a machine the controller hands a
    step mid-way (a recovery or a rescue), so the step's read-only
    :attr:`StepContext.handles` shows it at once and later steps keep it."""

    call: Callable[..., Any] = _no_call
    replan: Callable[[], Any] | None = None
    learn: Callable[[Any, Any], None] | None = None

    def _learnt(self, machine, handle) -> None:
        if self.learn is not None and handle is not None:
            self.learn(machine, handle)

    def mark_dead(self, machines) -> None:
        """Drop machines found dead mid-step (their storage is repaired at the next step)."""
        self.call("mark_dead", list(machines))

    def recover(self, lost, dead) -> list:
        """USCTEC: lost tasks re-planned on live holders of their rows
        (:class:`~elastic_coded.schemes.wire.Reassignment` per machine)."""
        got = self.call("recover", list(lost), list(dead))
        for re in got:
            self._learnt(re.machine, re.handle)
        return got

    def holders_of(self, plan) -> dict:
        """``{piece: [present machines storing its rows]}`` (speculative and coded backups)."""
        return self.call("holders_of", plan) or {}

    def hetero_rescue(self, master: int, need: int, exclude, order):
        """Fresh coded rows of ``master`` on the first machine of ``order`` that takes them
        (:class:`~elastic_coded.schemes.wire.Rescued`)."""
        got = self.call("hetero_rescue", master, need, sorted(exclude), list(order))
        self._learnt(got.machine, got.handle)
        return got


def no_controller() -> ControllerClient:
    """A client whose every call fails clearly (in-process tests that need none)."""
    return ControllerClient()


@dataclass(frozen=True)
class StepContext:
    """One step, as its executor and verifier see it.

    ``handles``: the machines of the step, ``{id: worker handle}``, read-only: a machine the
    controller hands the step mid-way (a recovery, a rescue) reaches the driver's tables
    through :attr:`ControllerClient.learn`, and shows here at once (a view of them).
    ``options``: the policy's typed options.  ``patience``: the decode condition above which
    a piece waits for better-conditioned results (:attr:`~.verifying.Verifier.patience`).
    ``codes``: the heterogeneous masters' MDS codes.  ``history``: ``usctec-auto``'s recent
    steps of the policy, ``(observed, slowed)`` each
    (:func:`~elastic_coded.families.usctec.executor_pull.history`).
    ``pull_rate``: products per second per unit of speed measured by the last pull step at
    real speed; ``pull_lag``: the seconds the last coded pull step's calls took beyond their
    work (:func:`~elastic_coded.families.usctec.pull_step.next_lag`).  ``state``: what the
    family's executors keep on the driver from step to step
    (:meth:`~.family_setup.FamilySetup.make_state`; the unified family's
    :class:`~elastic_coded.families.unified.executor.UnifiedCache`).  ``crashed``: machines the
    step's events crash that had no call to crash in.  ``mode``: ``usctec-auto``'s execution of
    the step, chosen by the driver before it asked for the plan (``None``: chosen from the plan).
    ``weights``: what a row range of ``A`` costs per column
    (:class:`~elastic_coded.algebra.sparse.RowWeights`; ``None``: its rows), so that a sparse
    ``A``'s products and emulated times count its nonzeros."""

    step: int
    F: Any
    policy: str = "usctec"
    handles: Mapping = field(default_factory=lambda: MappingProxyType({}))
    time_scale: float = 0.0
    seed: int = 0
    deadline: float | None = None
    options: Any = None
    ctrl: ControllerClient = field(default_factory=no_controller)
    patience: float | None = None
    codes: tuple = ()
    history: tuple = ()
    pull_rate: float | None = None
    pull_lag: float = 0.0
    state: Any = None
    crashed: tuple = ()
    mode: str | None = None
    weights: Any = None
