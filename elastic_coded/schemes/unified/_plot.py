"""A plot of the unified coding framework's latency-load tradeoff (MATH.md §2); needs the
optional ``matplotlib``."""

from __future__ import annotations

from typing import Iterable

from ._theory import Tradeoff

def plot_tradeoff(tradeoff: Tradeoff, path, *,
                  measured: Iterable[tuple[float, float]] | None = None,
                  title: str | None = None):
    """Draw the tradeoff to an image file (format from the extension, e.g. ``.png``): the
    achieved points ``(D(q), L(q))`` labelled by ``q``, their lower convex envelope (memory
    sharing) and the lower bound at each ``D(q)``; ``measured`` adds points ``(latency, load)``
    measured by a run.  Needs ``matplotlib`` (the ``plot`` extra).  Returns ``path``."""
    if not isinstance(tradeoff, Tradeoff):
        raise TypeError(f"tradeoff: must be a Tradeoff (from tradeoff(K, mu, N)), got "
                        f"{type(tradeoff).__name__}")
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError:
        raise ImportError("plot_tradeoff: needs matplotlib, which is not installed; install it "
                          "with pip install 'elastic_coded[plot]' (or pip install matplotlib)"
                          ) from None
    pts = tradeoff.points
    D = [float(p.D) for p in pts]
    L = [float(p.L) for p in pts]
    fig = Figure(figsize=(6.4, 4.8))
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    ax.plot([float(d) for d, _ in tradeoff.envelope], [float(l) for _, l in tradeoff.envelope],
            "-", color="tab:blue", label="envelope (memory sharing)")
    ax.plot(D, L, "o", color="tab:blue", label="achieved (D(q), L(q))")
    ax.plot(D, [float(p.lower_bound) for p in pts], "s--", color="tab:gray", markersize=4,
            label="lower bound")
    for p, d, l in zip(pts, D, L):
        ax.annotate(f"q={p.q}", (d, l), textcoords="offset points", xytext=(4, 4), fontsize=7)
    if measured is not None:
        mp = [(float(d), float(l)) for d, l in measured]
        if mp:
            ax.plot([d for d, _ in mp], [l for _, l in mp], "x", color="tab:red",
                    label="measured")
    ax.set_xlabel("Map latency D(q) (time units)")
    ax.set_ylabel("communication load L(q) (values / m)")
    ax.set_title(title or f"Unified coding tradeoff: K={tradeoff.K}, mu={tradeoff.mu}, "
                          f"N={tradeoff.N}")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    return path
