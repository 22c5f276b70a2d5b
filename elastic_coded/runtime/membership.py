"""The driver's side of membership: its tables of the machines (handles, specs, speeds, the
storage of the last step: the copy a new controller is rebuilt from), kept equal to the
controller's through crashes, departures and the controller's own death.

* :func:`forget`: a machine that ended leaves every driver-side table (handles, specs, speeds,
  the verifier's liars and catches); plans asked for ahead under the old membership are dropped.
* :func:`call`: a controller call; a controller that died is replaced (:func:`revive`) and the
  call made again, a bounded number of times.
* :func:`add` and :func:`remove` are idempotent across a revival.  An add carries a token that
  names the worker processes it opens; a controller that died in the middle of it may have
  started some of its machines, so the controller that takes over ends them (machines alive in
  the processes it adopts that the driver does not know, and the processes opened under the
  earlier tries' tokens) before adding them again: an add is neither lost nor doubled.  A
  removal of a machine the controller has already dropped (found dead) is done.
* :func:`revive`: a new controller from the driver's tables, started again (a bounded number of
  times) when it dies while taking over.
"""

from __future__ import annotations

import logging
import os

import ray

from ..errors import ElasticCodedError, InternalError, StepFailed
from ..machines import machine_specs
from ..schemes.wire import Member

__all__ = ["call", "revive", "forget", "add", "remove", "CALL_TRIES", "REVIVE_TRIES"]

log = logging.getLogger(__name__)

CALL_TRIES = 3
"""Controllers a driver call may go through (the first and up to two replacements)."""
REVIVE_TRIES = 4
"""New controllers started in a row for one revival before it gives up."""


def call(cl, method: str, *args, retry=None):
    """``cl.controller.<method>(*args)``; a controller that died is replaced and the call made
    again (``retry(attempt)`` gives the arguments of a later try).  A user error it raises
    comes back as itself, without Ray's traceback around it.  The last step's measurements
    not told yet go first (``cl._tell``), unless the call carries them (``prepare_step``)."""
    if method != "prepare_step" and getattr(cl, "_untold", None) is not None:
        cl._tell()
    for attempt in range(CALL_TRIES):
        try:
            return ray.get(getattr(cl.controller, method).remote(*args))
        except ray.exceptions.RayTaskError as exc:
            if isinstance(exc.cause, (ElasticCodedError, ValueError, TypeError)):
                raise exc.cause from None
            raise
        except ray.exceptions.RayActorError as exc:
            if not _is_controller(cl, exc) or attempt == CALL_TRIES - 1:
                raise
            revive(cl)
            if retry is not None:
                args = retry(attempt + 1)
    raise InternalError("unreachable")  # pragma: no cover


def _is_controller(cl, exc) -> bool:
    actor_id = getattr(exc, "actor_id", None)
    return actor_id is None or actor_id == cl.controller._actor_id.hex()


def revive(cl) -> None:
    """A new controller rebuilt from the driver's state: the machines it knows (specs, actor
    handles; the workers outlive the controller), their speeds, and the storage of the last
    step (or the constructor's).  The new controller pings the workers and repairs what the
    state misses.  One that dies while taking over is replaced, up to :data:`REVIVE_TRIES`
    times in a row; then a ``RuntimeError`` says so (the next call tries again)."""
    log.warning("the controller died; replacing it from the driver's state")
    last = None
    for _ in range(REVIVE_TRIES):
        cl.controller = cl._new_controller()
        members = tuple(Member(cl._specs[m], h, cl._speeds.get(m, cl._specs[m].speed))
                        for m, h in cl._handles.items() if m in cl._specs)
        try:
            ray.get(cl.controller.adopt.remote(members, cl._storage))
        except ray.exceptions.RayActorError as exc:  # killed while taking over: again
            last = exc
            log.warning("the new controller died while taking over; starting another")
            continue
        cl.revivals += 1
        cl._prefetch.clear()
        cl._plans.clear()  # serial numbers of the controller that died
        cl._present = None
        cl._epoch += 1
        return
    raise StepFailed(f"controller: {REVIVE_TRIES} new controllers in a row died while taking "
                       f"over from the one that died (last: {str(last).splitlines()[0]}); the "
                       f"workers still run, and the next call starts another") from None


def forget(cl, machines) -> None:
    """Machines that ended (crashed, left, found dead) leave every driver-side table."""
    gone = [m for m in machines if m in cl._handles or m in cl._specs]
    for m in gone:
        cl._handles.pop(m, None)
        cl._specs.pop(m, None)
        cl._speeds = {k: v for k, v in cl._speeds.items() if k != m}
        cl._verifier.forget(m)
    if gone:
        if cl._present is not None:
            cl._present = [m for m in cl._present if m not in gone]
        cl._epoch += 1  # plans asked for ahead counted them in


def add(cl, machines) -> int:
    """:meth:`ElasticCluster.add_machines`: idempotent across a revival (module docstring)."""
    specs = machine_specs(list(machines), 1.0)
    cl._adds += 1
    base = f"ec-{cl._uid}-a{cl._adds}"
    tokens = [f"{base}-t{k}" for k in range(CALL_TRIES)]
    joined = call(cl, "add_machines", specs, tokens[0], (),
                  retry=lambda k: (specs, tokens[k], tuple(tokens[:k])))
    cl._handles.update(joined.handles)
    cl._specs.update({s.id: s for s in specs})
    cl._present = None
    cl._epoch += 1
    return joined.rows_moved


def remove(cl, machine: str, crash: bool = False) -> None:
    """:meth:`ElasticCluster.remove_machine`; a machine the driver knows that the controller
    has already dropped (found dead, or removed by a controller that died before answering)
    is removed all the same."""
    call(cl, "remove_machine", machine, crash, machine in cl._handles)
    forget(cl, [machine])
    cl._present = None


def new_uid() -> str:
    """A cluster's id in the names of the worker processes it opens (:func:`add`)."""
    return os.urandom(6).hex()
