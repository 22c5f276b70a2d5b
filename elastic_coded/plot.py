"""Plots of a run (``elastic-coded plot``), from the reports ``elastic-coded run --json`` writes
(and a trace, :mod:`.runtime.trace`, for the Gantt chart of the slowest step).

:func:`plot_run` draws, one run per column:

* the step times, beside each step's floor (its slowest needed result: what no scheduling can
  beat), with the churn marked (joins, leaves and crashes as vertical lines);
* the machines present;
* the redundancy: products computed over products needed;
* a Gantt chart of the slowest step, from the trace when one is given.

matplotlib is needed (the ``plot`` extra); it is imported only here.
"""

from __future__ import annotations

import json
from pathlib import Path

from .errors import ArgumentError, MissingDependency

__all__ = ["load_reports", "plot_run", "plot_trace", "timeline"]

#: the colours of a call's outcome in the Gantt chart
OUTCOME_COLOURS = {"compute": "tab:green", "late": "tab:orange", "cancelled": "tab:gray",
                   "failed": "tab:red"}
#: the colours of the driver's and the controller's phases
PHASE_COLOURS = {"prepare": "tab:blue", "plan": "tab:blue", "encode": "tab:cyan",
                 "dispatch": "tab:olive", "wait for results": "lightsteelblue",
                 "shuffle": "tab:pink", "decode": "tab:purple", "verify": "tab:brown",
                 "report": "black", "driver": "silver"}
CHURN = (("joined", "tab:green", "join"), ("left", "tab:blue", "leave"),
         ("failed", "tab:red", "crash"))


def load_reports(path) -> list[dict]:
    """The step reports of a ``--json`` file (or of a bare list of reports)."""
    try:
        doc = json.loads(Path(path).read_text())
    except (OSError, ValueError) as exc:
        raise ArgumentError(f"reports: cannot read {str(path)!r} as JSON: {exc}") from None
    reports = doc.get("reports") if isinstance(doc, dict) else doc
    if not isinstance(reports, list) or not all(isinstance(r, dict) for r in reports):
        raise ArgumentError(f"reports: {str(path)!r} holds no list of step reports (write one "
                            f"with elastic-coded run CONFIG --json FILE)")
    if not reports:
        raise ArgumentError(f"reports: {str(path)!r} holds no step")
    return reports


def _pyplot():
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise MissingDependency("plot: matplotlib is needed; pip install "
                                "'elastic_coded[plot]'") from None
    return plt


def plot_run(runs: list, out, traces: list | None = None, labels: list | None = None) -> Path:
    """Draw ``runs`` (each a list of report dicts, :func:`load_reports`) side by side into the
    PNG ``out``; ``traces[i]`` (a trace file or ``None``) gives run ``i``'s Gantt chart."""
    plt = _pyplot()
    traces = traces or [None] * len(runs)
    labels = labels or [f"run {i + 1}" for i in range(len(runs))]
    fig, axes = plt.subplots(4, len(runs), figsize=(7 * len(runs), 12), squeeze=False,
                             gridspec_kw={"height_ratios": [3, 1.3, 1.3, 3]})
    for col, (reports, trace, label) in enumerate(zip(runs, traces, labels)):
        ax = axes[:, col]
        _times(ax[0], reports, label)
        _series(ax[1], reports, lambda r: len(r.get("available", ())), "machines present")
        _series(ax[2], reports, lambda r: r.get("redundancy") or 0.0,
                "redundancy (computed / needed)")
        ax[2].set_xlabel("step")
        _gantt(ax[3], reports, trace)
    fig.tight_layout()
    out = Path(out)
    try:
        fig.savefig(out, dpi=110)
    except OSError as exc:
        raise ArgumentError(f"-o: cannot write {str(out)!r}: {exc.strerror or exc}") from None
    finally:
        plt.close(fig)
    return out


def _times(ax, reports: list, label: str) -> None:
    steps = [r["step"] for r in reports]
    ax.plot(steps, [1e3 * r["t_total"] for r in reports], "o-", ms=3, label="step time")
    ax.plot(steps, [1e3 * (r.get("slowest_needed_s") or 0.0) for r in reports], "--", lw=1,
            label="its floor (the slowest needed result)")
    shown = set()
    for key, colour, name in CHURN:
        for r in reports:
            if r.get(key):
                ax.axvline(r["step"], color=colour, alpha=0.4, lw=1,
                           label=None if name in shown else name)
                shown.add(name)
    ax.set_ylabel("ms")
    ax.set_ylim(bottom=0)
    ax.set_title(f"{label}: {reports[0].get('policy', '')}, {len(reports)} steps")
    ax.legend(fontsize=8, loc="upper right")


def _series(ax, reports: list, value, name: str) -> None:
    ys = [value(r) for r in reports]
    ax.step([r["step"] for r in reports], ys, where="mid")
    ax.set_ylabel(name, fontsize=8)
    ax.set_ylim(0, max(max(ys) * 1.15, 1e-9))


def _gantt(ax, reports: list, trace) -> None:
    slow = max(reports, key=lambda r: r["t_total"])
    title = f"slowest step: {slow['step']} ({1e3 * slow['t_total']:.0f} ms)"
    if trace is None:
        ax.text(0.5, 0.5, "no trace given (elastic-coded run --trace FILE;\nthen plot --trace "
                "FILE) for the Gantt chart", ha="center", va="center", transform=ax.transAxes)
        ax.set_title(title)
        ax.set_axis_off()
        return
    from .runtime.trace import load_trace

    if not timeline(ax, load_trace(trace), {slow["step"]}):
        ax.text(0.5, 0.5, f"the trace holds no step {slow['step']}", ha="center",
                transform=ax.transAxes)
        ax.set_axis_off()
        return
    ax.set_title(title)


def timeline(ax, events: list, steps: set) -> bool:
    """Draw the spans of ``steps`` from a trace's ``events``, one row per track, as a viewer
    shows them; ``False`` when the trace holds none of them."""
    spans = [e for e in events if e.get("ph") == "X" and e.get("args", {}).get("step") in steps]
    names = {(e["pid"], e["tid"]): e["args"]["name"] for e in events
             if e.get("name") == "thread_name"}
    if not spans:
        return False
    t0 = min(e["ts"] for e in spans)
    tracks = sorted({(e["pid"], e["tid"]) for e in spans})
    for y, track in enumerate(tracks):
        for e in (e for e in spans if (e["pid"], e["tid"]) == track):
            if e["name"].startswith("step "):
                continue
            colour = OUTCOME_COLOURS.get(e["name"], "tab:green") if e["cat"] == "call" \
                else PHASE_COLOURS.get(e["name"], "silver")
            ax.barh(y, e["dur"] / 1e3, left=(e["ts"] - t0) / 1e3, height=0.7, color=colour,
                    alpha=0.85 if e.get("args", {}).get("kind", "call") == "call" else 0.5,
                    edgecolor="black", lw=0.3)
    row = {t: y for y, t in enumerate(tracks)}
    for e in events:  # joins, crashes, liars...: a marker and its name on the track
        if e.get("ph") == "i" and e.get("args", {}).get("step") in steps \
                and (e["pid"], e["tid"]) in row:
            x, y = (e["ts"] - t0) / 1e3, row[(e["pid"], e["tid"])]
            ax.plot(x, y, marker="v", color="red", ms=7)
            ax.annotate(e["name"], (x, y), xytext=(4, -9), textcoords="offset points",
                        fontsize=7, color="red")
    ax.set_yticks(range(len(tracks)), [names.get(t, str(t)) for t in tracks], fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("ms from the step's start" if len(steps) == 1 else "ms")
    from matplotlib.patches import Patch

    seen = {e["name"] for e in spans}
    colours = {**{k: v for k, v in PHASE_COLOURS.items() if k in seen and k != "plan"},
               **{k: v for k, v in OUTCOME_COLOURS.items() if k in seen}}
    ax.legend(handles=[Patch(color=c, label=n) for n, c in colours.items()], fontsize=7,
              loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return True


def plot_trace(trace, out, steps: set | None = None) -> Path:
    """Draw a trace's timeline (``steps``, default: the last three) into the PNG ``out``."""
    from .runtime.trace import load_trace

    plt = _pyplot()
    events = load_trace(trace)
    have = sorted({e["args"]["step"] for e in events if e.get("ph") == "X"
                   and "step" in e.get("args", {})})
    steps = set(have[-3:]) if steps is None else steps
    tracks = {(e["pid"], e["tid"]) for e in events if e.get("name") == "thread_name"}
    fig, ax = plt.subplots(figsize=(12, 1.5 + 0.28 * len(tracks)))
    if not timeline(ax, events, steps):
        plt.close(fig)
        raise ArgumentError(f"trace: {str(trace)!r} holds none of the steps {sorted(steps)}")
    ax.set_title(f"trace of steps {', '.join(map(str, sorted(steps)))}: one row per track "
                 f"(the driver, the controller, each machine)")
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return Path(out)
