"""A plot of the unified coding framework's latency-load tradeoff (MATH.md §2); needs the
optional ``matplotlib``."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, cast

from ...errors import ArgumentTypeError, MissingDependency
from ._theory import Tradeoff

# where a point's "q=" label may go, in points from the marker, tried in this order
_LABEL_OFFSETS = ((5, 4), (5, -11), (-10, 8), (-10, -15), (-26, 4), (-26, -11), (5, 14),
                  (-26, 14))


def plot_tradeoff(tradeoff: Tradeoff, path: str | os.PathLike[str], *,
                  measured: Mapping[int, tuple[float, float]]
                  | Iterable[tuple[float, float]] | None = None,
                  title: str | None = None, caption: str | None = None
                  ) -> str | os.PathLike[str]:
    """Draw the tradeoff to an image file (format from the extension, e.g. ``.png``): the
    achieved points ``(D(q), L(q))`` labelled by ``q`` (each label where it overlaps no other
    label or marker; crowded points go unlabelled), their lower convex envelope (memory
    sharing) and the lower bound at each ``D(q)``.  ``measured`` adds points ``(latency,
    load)`` measured by a run; as a mapping ``q -> (latency, load)`` each is joined to its
    theory point.  ``title`` (default: the parameters) and ``caption`` (a line of setup under
    it).  Needs ``matplotlib`` (the ``plot`` extra).  Returns ``path``."""
    if not isinstance(tradeoff, Tradeoff):
        raise ArgumentTypeError(f"tradeoff: must be a Tradeoff (from tradeoff(K, mu, N)), got "
                                f"{type(tradeoff).__name__}")
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError:
        raise MissingDependency("plot_tradeoff: needs matplotlib, which is not installed; install "
                                "it with pip install 'elastic_coded[plot]' (or pip install "
                                "matplotlib)"
                                ) from None
    pts = tradeoff.points
    D = [float(p.D) for p in pts]
    L = [float(p.L) for p in pts]
    fig = Figure(figsize=(6.4, 4.8))
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    ax.plot([float(d) for d, _ in tradeoff.envelope], [float(l) for _, l in tradeoff.envelope],
            "-", color="tab:blue", label="envelope (memory sharing)")
    ax.plot(D, L, "o", color="tab:blue", label="achieved (D(q), L(q)), labelled q")
    ax.plot(D, [float(p.lower_bound) for p in pts], "s--", color="tab:gray", markersize=4,
            label="lower bound")
    if measured is not None:
        _plot_measured(ax, measured, {p.q: (d, l) for p, d, l in zip(pts, D, L)})
    ax.set_xlabel("Map latency D(q) (time units)")
    ax.set_ylabel("communication load L(q) (values / m)")
    head = title or (f"Unified coding tradeoff: K={tradeoff.K}, mu={tradeoff.mu}, "
                     f"N={tradeoff.N}")
    ax.set_title(head if caption is None else f"{head}\n{caption}",
                 fontsize=11 if caption is None else 9)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    _label_points(fig, ax, [(p.q, d, l) for p, d, l in zip(pts, D, L)])
    fig.savefig(path)
    return path


def _plot_measured(ax: Any, measured: Mapping[int, tuple[float, float]]
                   | Iterable[tuple[float, float]],
                   theory: dict[int, tuple[float, float]]) -> None:
    """Measured ``(latency, load)`` points; those given per ``q`` joined to their theory
    point by a thin line."""
    by_q = dict(measured) if isinstance(measured, Mapping) else None
    mp = [(float(d), float(l)) for d, l in (
        by_q.values() if by_q is not None else cast(Iterable[tuple[float, float]], measured))]
    if not mp:
        return
    ax.plot([d for d, _ in mp], [l for _, l in mp], "x", color="tab:red", markersize=9,
            markeredgewidth=2, label="measured")
    for q, (d, l) in (by_q or {}).items():
        if q in theory:
            ax.plot([theory[q][0], float(d)], [theory[q][1], float(l)], ":", color="tab:red",
                    linewidth=1)


def _label_points(fig: Any, ax: Any, points: Sequence[tuple[int, float, float]]) -> None:
    """``q=`` beside each point, at the first offset whose text overlaps no marker, no label
    placed so far and stays inside the axes; a point with no such offset stays unlabelled."""
    renderer = fig.canvas.get_renderer()
    frame = ax.get_window_extent(renderer)
    taken: list[Any] = []
    for _, x, y in points:  # the markers themselves (about 6 px across)
        cx, cy = ax.transData.transform((x, y))
        taken.append(_box(cx - 4, cy - 4, cx + 4, cy + 4))
    for q, x, y in points:
        for dx, dy in _LABEL_OFFSETS:
            text = ax.annotate(f"q={q}", (x, y), textcoords="offset points", xytext=(dx, dy),
                               fontsize=7)
            box = text.get_window_extent(renderer)
            inside = (frame.x0 <= box.x0 and box.x1 <= frame.x1 and frame.y0 <= box.y0
                      and box.y1 <= frame.y1)
            if inside and not any(box.overlaps(t) for t in taken):
                taken.append(box)
                break
            text.remove()


def _box(x0: float, y0: float, x1: float, y1: float) -> Any:
    from matplotlib.transforms import Bbox

    return Bbox([[x0, y0], [x1, y1]])
