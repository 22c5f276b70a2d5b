"""The plan vocabulary (MATH.md §1): frozen dataclasses that the runtime and the simulator both
interpret.  Pure: no Ray, no I/O.

Machines are named by any hashable, orderable id (ints in the pure examples, strings such as
``"m3"`` in the runtime).  Row ranges are half-open ``(start, stop)``.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from ..errors import BudgetError, PlanError, ShortOfMachines  # noqa: F401  (their old home)
from .wire import TaskSpec

__all__ = ["RowBlock", "Placement", "Group", "Piece", "Task", "StepPlan", "PlanError",
           "ShortOfMachines"]

MachineId = Hashable


@dataclass(frozen=True)
class RowBlock:
    """Rows ``start..stop-1`` of ``A``, stored uncoded on every machine in ``holders``."""

    start: int
    stop: int
    holders: tuple[MachineId, ...]

    @property
    def size(self) -> int:
        return self.stop - self.start

    def __repr__(self) -> str:
        return f"RowBlock(rows {self.start}:{self.stop} on {list(self.holders)})"


@dataclass(frozen=True)
class Placement:
    """A storage placement ``Z``: the rows ``[0, num_rows)`` cut into blocks, each stored on its
    holders; ``budgets[n]`` is machine ``machines[n]``'s storage budget ``e[n]`` (a fraction of
    the rows).  ``Z_n`` is the union of the blocks ``n`` holds (see :meth:`rows_of`)."""

    num_rows: int
    machines: tuple[MachineId, ...]
    budgets: tuple[float, ...]
    blocks: tuple[Any, ...]  # RowBlocks (Any: families.usctec._repair nulls a list copy's)

    def __repr__(self) -> str:
        return (f"Placement({self.num_rows} rows in {len(self.blocks)} blocks on "
                f"{len(self.machines)} machines, replication {self.min_replication()}"
                f"..{self.max_replication()})")

    def budget(self, machine: MachineId) -> float:
        return self.budgets[self.machines.index(machine)]

    def rows_of(self, machine: MachineId) -> list[tuple[int, int]]:
        """``Z_n`` as row ranges."""
        return [(b.start, b.stop) for b in self.blocks if machine in b.holders]

    def stored_rows(self, machine: MachineId) -> int:
        return sum(b.size for b in self.blocks if machine in b.holders)

    def ranges_by_machine(self) -> dict[MachineId, list[tuple[int, int]]]:
        """:meth:`rows_of` of every holder, in one pass over the blocks."""
        out: dict[MachineId, list[tuple[int, int]]] = {}
        for b in self.blocks:
            for h in b.holders:
                out.setdefault(h, []).append((b.start, b.stop))
        return out

    def rows_by_machine(self) -> dict[MachineId, int]:
        """:meth:`stored_rows` of every holder, in one pass over the blocks."""
        out: dict[MachineId, int] = {}
        for b in self.blocks:
            for h in b.holders:
                out[h] = out.get(h, 0) + b.size
        return out

    def min_replication(self) -> int:
        return min((len(b.holders) for b in self.blocks), default=0)

    def max_replication(self) -> int:
        return max((len(b.holders) for b in self.blocks), default=0)

    def holders_present(self, present: Iterable[MachineId]) -> list[int]:
        """For each block, how many of its holders are in ``present``."""
        present = set(present)
        return [sum(h in present for h in b.holders) for b in self.blocks]

    def without(self, machine: MachineId) -> Placement:
        """This placement with ``machine`` gone (its copies dropped, its budget forgotten)."""
        if machine not in self.machines:
            return self
        keep = [i for i, m in enumerate(self.machines) if m != machine]
        blocks = tuple(RowBlock(b.start, b.stop, tuple(h for h in b.holders if h != machine))
                       for b in self.blocks)
        return Placement(self.num_rows, tuple(self.machines[i] for i in keep),
                         tuple(self.budgets[i] for i in keep), blocks)

    def holders_of(self, rows: tuple[int, int], present: Iterable[MachineId]
                   ) -> list[tuple[int, int, list[MachineId]]]:
        """Who among ``present`` stores rows ``rows = (start, stop)``: the rows cut at block
        boundaries, ``[(start, stop, [present holders]), ...]``, a span joining its neighbour
        while the two share a present holder (it keeps the shared ones).  One span with every
        present holder of the rows when they all sit on the same machines; a span with no
        holder where no present machine stores it.  The recovery and backup rules ask this."""
        present = set(present)
        out: list[tuple[int, int, list[MachineId]]] = []
        for blk in sorted(self.blocks, key=lambda b: b.start):
            a, b = max(blk.start, rows[0]), min(blk.stop, rows[1])
            if a >= b:
                continue
            hs = [m for m in blk.holders if m in present]
            if out and out[-1][1] == a and set(out[-1][2]) & set(hs):
                out[-1] = (out[-1][0], b, [m for m in out[-1][2] if m in hs])
            else:
                out.append((a, b, hs))
        return out


@dataclass(frozen=True)
class Group:
    """Row group ``A_g`` (``rows``), its fraction ``gamma = |A_g| / q`` of the rows, and the
    machines ``U_g`` selected for it (all of which store it)."""

    rows: tuple[int, int]
    gamma: float
    machines: tuple[MachineId, ...]

    @property
    def size(self) -> int:
        return self.rows[1] - self.rows[0]


@dataclass(frozen=True)
class Piece:
    """Piece ``M_{g,f}``: columns ``cols`` (``None`` = all ``r/L``) of group ``group``, computed
    by ``machines`` = ``P_{g,f}``; the machine at position ``i`` gets the Lagrange evaluation
    point ``alpha_i`` (MATH.md §1, eq. 2)."""

    group: int
    cols: tuple[int, int] | None
    machines: tuple[MachineId, ...]


@dataclass(frozen=True)
class Task:
    """One unit of work for one machine: ``A[rows] @ B~_position[:, cols]`` for ``piece``."""

    piece: int
    position: int
    rows: tuple[int, int]
    cols: tuple[int, int] | None


@dataclass(frozen=True)
class StepPlan:
    """One step's scheme ``(gamma, M)`` for the machines ``available`` with ``speeds``.

    ``theta`` is the fractional optimum's load per available machine and ``c`` its computation
    time (MATH.md §1: ``c = max theta[n] / s[n]``, in units of ``q v r / L`` products);
    ``c_int`` is the computation time of the integer plan actually dispatched.
    """

    L: int
    S: int
    num_rows: int
    available: tuple[MachineId, ...]
    speeds: tuple[float, ...]
    groups: tuple[Group, ...]
    pieces: tuple[Piece, ...]
    theta: tuple[float, ...]
    c: float
    c_int: float
    # caches, made on first use; not init fields, so ``dataclasses.replace`` starts them afresh
    _tasks: dict[MachineId, list[Task]] | None = field(default=None, init=False, repr=False,
                                                       compare=False)
    _wire: dict[MachineId, tuple[TaskSpec, ...]] | None = field(default=None, init=False,
                                                                repr=False, compare=False)

    @property
    def K(self) -> int:
        return self.L + self.S

    def __repr__(self) -> str:
        return (f"StepPlan(L={self.L}, S={self.S}, {len(self.available)} machines, "
                f"{len(self.groups)} groups, {len(self.pieces)} pieces, c={self.c:.6g}, "
                f"c_int={self.c_int:.6g})")

    def tasks(self) -> dict[MachineId, list[Task]]:
        """``{machine: [Task, ...]}`` for every machine with work (computed once)."""
        if self._tasks is None:
            out: dict[MachineId, list[Task]] = {m: [] for m in self.available}
            for pi, piece in enumerate(self.pieces):
                rows = self.groups[piece.group].rows
                for pos, m in enumerate(piece.machines):
                    out[m].append(Task(pi, pos, rows, piece.cols))
            tasks = {m: t for m, t in out.items() if t}
            object.__setattr__(self, "_tasks", tasks)
            return tasks
        return self._tasks

    def wire_tasks(self) -> dict[MachineId, tuple[TaskSpec, ...]]:
        """``{machine: (TaskSpec, ...)}``: :meth:`tasks` as sent to the machines (of source
        ``A``, input position = the task's position), made once: a plan the driver holds from
        step to step sends the same tuples again (and the trace formats each once)."""
        if self._wire is None:
            wire = {m: tuple(TaskSpec("A", t.rows, t.position, t.cols, t.piece, t.position)
                             for t in ts) for m, ts in self.tasks().items()}
            object.__setattr__(self, "_wire", wire)
            return wire
        return self._wire

    def rows_computed(self) -> dict[MachineId, int]:
        """Integer rows each machine multiplies (times the piece's column count)."""
        return {m: sum(t.rows[1] - t.rows[0] for t in ts) for m, ts in self.tasks().items()}

    def iter_pieces(self) -> Iterator[tuple[int, Piece, Group]]:
        for pi, piece in enumerate(self.pieces):
            yield pi, piece, self.groups[piece.group]
