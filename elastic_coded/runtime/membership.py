"""The driver's side of membership: its tables of the machines (handles, specs, speeds, the
storage of the last step: the copy a new controller is rebuilt from), kept equal to the
controller's through crashes, departures and the controller's own death.

* :meth:`DriverTables.forget <.tables.DriverTables.forget>`: a machine that ended leaves every
  driver-side table (handles, specs, speeds, the verifier's liars and catches); plans asked for
  ahead under the old membership are dropped.
* :meth:`ControllerLink.call`: a controller call; a controller that died is replaced
  (:meth:`ControllerLink.revive`) and the call made again, a bounded number of times.
* :func:`add` and :func:`remove` are idempotent across a revival.  An add carries a token that
  names the worker processes it opens; a controller that died in the middle of it may have
  started some of its machines, so the controller that takes over ends them (machines alive in
  the processes it adopts that the driver does not know, and the processes opened under the
  earlier tries' tokens) before adding them again: an add is neither lost nor doubled.  A
  removal of a machine the controller has already dropped (found dead) is done.
* :meth:`ControllerLink.revive`: a new controller from the driver's tables, started again (a
  bounded number of times) when it dies while taking over.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from typing import Any

import ray

from ..errors import ElasticCodedError, InternalError, StepFailed
from ..machines import machine_specs
from .tables import DriverTables

__all__ = ["ControllerLink", "add", "remove", "new_controller", "new_uid", "CALL_TRIES",
           "REVIVE_TRIES"]

log = logging.getLogger(__name__)

CALL_TRIES = 3
"""Controllers a driver call may go through (the first and up to two replacements)."""
REVIVE_TRIES = 4
"""New controllers started in a row for one revival before it gives up."""


def _nothing() -> None:
    return None


class ControllerLink:
    """The driver's line to its controller: ``handle`` (the controller actor), the last step's
    measurements not told yet (:attr:`untold`), and revivals.  ``factory()`` starts a new
    controller; ``tables`` are the driver's (:class:`~.tables.DriverTables`), which a new one is
    rebuilt from; ``on_revived()`` is told once one took over (plans it made are void);
    ``get``: a reply's value (``ray.get``; tests pass a fake)."""

    def __init__(self, factory: Callable[[], Any], tables: DriverTables,
                 on_revived: Callable[[], None] = _nothing, get: Callable[..., Any] = ray.get):
        self.factory, self.tables, self.on_revived, self.get = factory, tables, on_revived, get
        self.handle: Any = None
        self.untold: Any = None
        self.revivals = 0

    def start(self, specs: list) -> None:
        """A first controller, starting ``specs``."""
        self.handle = self.factory()
        self.tables.begin(*self.get(self.handle.start.remote(specs)))

    def call(self, method: str, *args, retry=None):
        """``handle.<method>(*args)``; a controller that died is replaced and the call made
        again (``retry(attempt)`` gives the arguments of a later try).  A user error it raises
        comes back as itself, without Ray's traceback around it.  The last step's measurements
        not told yet go first (:meth:`tell`), unless the call carries them (``prepare_step``)."""
        if method != "prepare_step" and self.untold is not None:
            self.tell()
        for attempt in range(CALL_TRIES):
            try:
                return self.get(getattr(self.handle, method).remote(*args))
            except ray.exceptions.RayTaskError as exc:
                if isinstance(exc.cause, (ElasticCodedError, ValueError, TypeError)):
                    raise exc.cause from None
                raise
            except ray.exceptions.RayActorError as exc:
                if not self._is_controller(exc) or attempt == CALL_TRIES - 1:
                    raise
                self.revive()
                if retry is not None:
                    args = retry(attempt + 1)
        raise InternalError("unreachable")  # pragma: no cover

    def close(self):
        """Stop the controller (the measurements not told yet told first); returns its handle
        (``None``: none started)."""
        if self.handle is not None:
            self.tell()
            try:
                self.get(self.handle.shutdown.remote(), timeout=30)
            except Exception:  # a dead controller: the driver stops the workers it knows
                pass
        return self.handle

    def ask(self, req):
        """``prepare_step(req)`` without waiting: its object ref (a plan asked for ahead)."""
        return self.handle.prepare_step.remote(req)

    def tell(self) -> None:
        """Send the last step's measurements not told yet (:meth:`told` carries them in the
        next request instead, saving the controller a call per step)."""
        untold, self.untold = self.untold, None
        if untold is not None:
            self.handle.report.remote(untold)

    def told(self):
        """The last step's measurements, for the request about to carry them."""
        untold, self.untold = self.untold, None
        return untold

    def _is_controller(self, exc) -> bool:
        actor_id = getattr(exc, "actor_id", None)
        return actor_id is None or actor_id == self.handle._actor_id.hex()

    def revive(self) -> None:
        """A new controller rebuilt from the driver's tables: the machines it knows (specs,
        actor handles; the workers outlive the controller), their speeds, and the storage of the
        last step (or the constructor's).  The new controller pings the workers and repairs what
        the tables miss.  One that dies while taking over is replaced, up to
        :data:`REVIVE_TRIES` times in a row; then a ``RuntimeError`` says so (the next call
        tries again)."""
        log.warning("the controller died; replacing it from the driver's state")
        last = None
        for _ in range(REVIVE_TRIES):
            self.handle = self.factory()
            try:
                self.get(self.handle.adopt.remote(self.tables.members(), self.tables.storage))
            except ray.exceptions.RayActorError as exc:  # killed while taking over: again
                last = exc
                log.warning("the new controller died while taking over; starting another")
                continue
            self.revivals += 1
            self.on_revived()
            self.tables.changed()
            return
        raise StepFailed(f"controller: {REVIVE_TRIES} new controllers in a row died while "
                         f"taking over from the one that died (last: "
                         f"{str(last).splitlines()[0]}); the workers still run, and the next "
                         f"call starts another") from None


def add(link: ControllerLink, machines, base: str) -> int:
    """:meth:`ElasticCluster.add_machines`: idempotent across a revival (module docstring);
    ``base`` names the worker processes this add opens.  Returns rows copied."""
    specs = machine_specs(list(machines), 1.0)
    tokens = [f"{base}-t{k}" for k in range(CALL_TRIES)]
    joined = link.call("add_machines", specs, tokens[0], (),
                       retry=lambda k: (specs, tokens[k], tuple(tokens[:k])))
    link.tables.joined(joined.handles, specs)
    return joined.rows_moved


def remove(link: ControllerLink, machine: str, crash: bool = False) -> None:
    """:meth:`ElasticCluster.remove_machine`; a machine the driver knows that the controller
    has already dropped (found dead, or removed by a controller that died before answering)
    is removed all the same."""
    tables = link.tables
    link.call("remove_machine", machine, crash, machine in tables.handles)
    tables.forget([machine])
    tables.present = None


def new_controller(kwargs):
    """A controller actor (:class:`~.controller.Controller` of ``kwargs``) on the driver's node,
    which outlives the spot and autoscaled nodes that come and go."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    from .controller import Controller

    here = NodeAffinitySchedulingStrategy(ray.get_runtime_context().get_node_id(), soft=False)
    return Controller.options(scheduling_strategy=here).remote(**kwargs)


def new_uid() -> str:
    """A cluster's id in the names of the worker processes it opens (:func:`add`)."""
    return os.urandom(6).hex()
