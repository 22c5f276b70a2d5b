"""The unified family's storage as the runtime keeps it: coded batches, re-encoded when the
code can no longer cover the machines present.  Pure: no Ray.

Its :class:`~elastic_coded.schemes.families.Family` (the protocol every storage family answers,
in :mod:`elastic_coded.schemes.families` with the values it returns); made by name through the
family registry (:func:`~elastic_coded.schemes.families.make_family`)."""

from __future__ import annotations

import functools
import logging
from collections.abc import Hashable, Iterable
from typing import Any, cast

from ...errors import PlanError
from ...machines import MachineSpec
from ...schemes.families import (
    Change,
    Family,
    Present,
    PutSource,
    Setup,
    Spans,
    no_holders,
    no_rescue,
)
from ...schemes.wire import StepRequest
from . import policy as uni

__all__ = ["UnifiedFamily", "make_unified"]

log = logging.getLogger(__name__)


class UnifiedFamily:
    """Coded batches (source ``U{version}``), re-encoded when the code can no longer cover."""

    name = "unified"
    has_LS = False

    def __init__(self, opts: uni.UnifiedOptions, num_rows: int, field: Any):
        self.opts, self.q, self.F = opts, int(num_rows), field
        self._storage: uni.UnifiedStorage | None = None
        self.N = opts.N or opts.q

    @property
    def storage(self) -> uni.UnifiedStorage | None:
        return self._storage

    def sources(self) -> tuple[str, ...]:
        return () if self._storage is None else (self._storage.source,)

    def _redesign(self, machines: Iterable[Hashable], N: int) -> Change:
        st, new = uni.plan_storage(self.opts, self.q, list(machines), self._storage, N, self.F)
        if not new:
            return Change()
        old, self._storage = self._storage, st
        if old is not None:
            log.info("unified: re-encoded for K=%d (%s)", st.design.K, st.reason)
        moves = [(st.source, a, b, mach) for mach, rs in uni.store_orders(st).items()
                 for a, b in rs]
        put = PutSource(st.source, functools.partial(uni.coded_matrix, st),
                        drop=None if old is None else old.source,
                        values_rows=sum(b - a for _, a, b, _ in moves))
        return Change(moves, puts=(put,), redesign=None if old is None else st.reason)

    def start(self, specs: list[MachineSpec]) -> Change:
        return self._redesign([s.id for s in specs], self.N)

    def join(self, spec: MachineSpec) -> Change:
        """A machine joins: used at the next re-design; a re-used id of a server of the design in
        force gets that server's rows again at once (the coded source put again first if the
        runtime lost it, with a controller that died)."""
        st = self._storage
        if st is None or spec.id not in st.servers:
            return Change()
        put = PutSource(st.source, functools.partial(uni.coded_matrix, st), if_missing=True)
        k = st.servers.index(spec.id)
        return Change([(st.source, a, b, spec.id) for a, b in st.ranges_of(k)], puts=(put,))

    def forget(self, machine: Hashable) -> None:
        pass

    def snapshot(self) -> uni.UnifiedStorage | None:
        return self._storage

    def members(self) -> tuple[Hashable, ...]:
        return ()  # servers that left stay in the design: the Map waits for those present

    def restore(self, state: uni.UnifiedStorage | None) -> None:
        self._storage = state

    def repair(self, present: Present, S: int, n_cols: int | None = None) -> Change:
        """Designed anew for the machines ``present`` and ``n_cols`` inputs (``None``: the
        options' ``N``) when the design in force no longer covers
        (:func:`~elastic_coded.families.unified.policy.plan_storage`); ``S`` does not enter."""
        return self._redesign(present.machines, self.N if n_cols is None else n_cols)

    def rescue(self, m: int, need: int, exclude: set[int], machines: list[Hashable]) -> Change:
        raise no_rescue(self.name, m)

    def plan(self, policy: str, present: Present, S: int, request: StepRequest
             ) -> uni.UnifiedStorage:
        st = cast(uni.UnifiedStorage, self._storage)   # the design start() made
        live = st.live(present.machines)
        if len(live) < st.q:
            raise PlanError(f"machines: {len(live)} servers of the design are present, fewer "
                            f"than q = {st.q}")
        return st

    def holders(self, rows: tuple[int, int], present: Iterable[Hashable]) -> Spans:
        raise no_holders(self.name)

    def state_key(self) -> None:
        return None


def make_unified(s: Setup) -> Family:
    return UnifiedFamily(s.options, s.num_rows, s.field)
