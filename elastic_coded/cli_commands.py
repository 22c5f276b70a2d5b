"""The ``tradeoff`` and ``plot`` subcommands of the command line (:mod:`elastic_coded.cli`),
and the check of an output path every subcommand makes before any work."""

from __future__ import annotations

import argparse
import json
import os
import sys
from fractions import Fraction
from pathlib import Path

from .errors import ArgumentError

TRADEOFF_PROG = "elastic-coded tradeoff"


def _check_output(opt: str, path: str) -> None:
    """Raise ``ValueError`` naming ``--opt`` unless ``path`` can be written; checked before
    any work, so a long run never ends in an unwritable path."""
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise ArgumentError(f"--{opt}: cannot write {path!r}: no folder {folder!r}")
    if os.path.isdir(path):
        raise ArgumentError(f"--{opt}: cannot write {path!r}: it is a folder")
    if not os.access(folder, os.W_OK) or (os.path.exists(path) and not os.access(path, os.W_OK)):
        raise ArgumentError(f"--{opt}: cannot write {path!r}: permission denied")


# ------------------------------------------------------------------------------------------------
# elastic-coded tradeoff
# ------------------------------------------------------------------------------------------------

def _add_tradeoff_parser(subparsers) -> argparse.ArgumentParser:
    """The ``tradeoff`` subcommand; its ``func`` default is :func:`_tradeoff`."""
    p = subparsers.add_parser(
        "tradeoff", help="latency-load tradeoff of the unified coding framework",
        description="Print the achievable (D(q), L(q)) of the unified coding framework for "
                    "every q = ceil(1/mu) .. K, their lower convex envelope (memory sharing) "
                    "and the lower bound on the load (MATH.md §2).")
    p.add_argument("--K", type=int, required=True, help="number of servers")
    p.add_argument("--mu", type=str, required=True,
                   help="storage fraction per server, 1/K <= mu <= 1: a fraction such as 1/3 "
                        "or a decimal (0.333 is read as 1/3)")
    p.add_argument("--N", type=int, required=True, help="number of input vectors")
    p.add_argument("--plot", metavar="FILE.png", default=None,
                   help="draw the points, envelope and lower bound (needs matplotlib)")
    p.add_argument("--json", metavar="FILE", default=None, help="write the table as JSON")
    p.set_defaults(func=_tradeoff)
    return p


def _parse_mu(text: str, K: int) -> Fraction:
    """``"1/3"`` exactly; a decimal such as ``"0.333"`` as a float, snapped to ``p/d``
    (``d <= K``) when within ``5e-4`` (:func:`~elastic_coded.families.unified.as_mu`)."""
    from .families.unified import as_mu

    text = str(text).strip()
    if "/" in text:
        return as_mu(text, K)
    try:
        value = float(text)
    except ValueError:
        raise ArgumentError(f"mu: {text!r} is not a number or fraction such as '1/3'") from None
    return as_mu(value, K)


def _tradeoff_to_dict(t) -> dict:
    """A :class:`~elastic_coded.families.unified.Tradeoff` as plain JSON types: floats, with the
    exact fractions as strings."""
    return {
        "K": t.K, "mu": str(t.mu), "N": t.N,
        "points": [{"q": p.q, "D": float(p.D), "L": float(p.L), "envelope": float(p.envelope),
                    "lower_bound": float(p.lower_bound), "on_envelope": p.on_envelope,
                    "exact": {"D": str(p.D), "L": str(p.L), "envelope": str(p.envelope),
                              "lower_bound": str(p.lower_bound)}}
                   for p in t.points],
        "envelope": [{"D": float(d), "L": float(l), "exact": {"D": str(d), "L": str(l)}}
                     for d, l in t.envelope],
    }


def _tradeoff_error(msg: str) -> None:
    print(f"{TRADEOFF_PROG}: error: {msg}", file=sys.stderr)


def _tradeoff_input(args: argparse.Namespace):
    """The tradeoff for ``args.K``, ``args.mu``, ``args.N``, after checking the output folders;
    raises ``ValueError``/``TypeError`` naming the bad argument."""
    from .families.unified import tradeoff

    K = args.K
    if isinstance(K, bool) or not isinstance(K, int) or K < 1:
        raise ArgumentError(f"K: {K!r} must be an int >= 1 (the number of servers)")
    t = tradeoff(K, _parse_mu(args.mu, K), args.N)
    for opt in ("json", "plot"):
        if getattr(args, opt, None):
            _check_output(opt, getattr(args, opt))
    return t


def _tradeoff(args: argparse.Namespace) -> int:
    """Print the tradeoff table; write ``args.json`` and draw ``args.plot`` when given.
    Returns the exit status."""
    from .families.unified import plot_tradeoff

    try:
        t = _tradeoff_input(args)
    except (ValueError, TypeError) as exc:
        _tradeoff_error(str(exc))
        return 2
    print(t.table())
    json_path = getattr(args, "json", None)
    if json_path:
        try:
            with open(json_path, "w") as fh:
                json.dump(_tradeoff_to_dict(t), fh, indent=2)
                fh.write("\n")
        except OSError as exc:
            _tradeoff_error(f"--json: cannot write {json_path!r}: {exc.strerror or exc}")
            return 2
        print(f"wrote {json_path}")
    plot_path = getattr(args, "plot", None)
    if plot_path:
        try:
            plot_tradeoff(t, plot_path)
        except ImportError as exc:
            _tradeoff_error(str(exc))
            return 1
        except (OSError, ValueError) as exc:  # unwritable path, unknown image format
            _tradeoff_error(f"--plot: cannot write {plot_path!r}: {exc}")
            return 2
        print(f"wrote {plot_path}")
    return 0


# ------------------------------------------------------------------------------------------------
# elastic-coded plot
# ------------------------------------------------------------------------------------------------

def _add_plot_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "plot", help="plot a run from its reports (run --json FILE)",
        description="Step times with the churn marked, machines present, redundancy and a "
                    "Gantt chart of the slowest step (from --trace) into one PNG.")
    p.add_argument("reports", nargs="?", help="a run's reports (elastic-coded run --json FILE); "
                   "without them, --trace FILE alone draws the trace's last steps")
    p.add_argument("-o", "--output", required=True, metavar="FILE.png", help="the PNG to write")
    p.add_argument("--trace", metavar="FILE", help="the run's trace, for the Gantt chart")
    p.add_argument("--compare", nargs=2, metavar=("A.json", "B.json"),
                   help="two runs' reports side by side (e.g. two policies on one churn script)")
    p.set_defaults(func=_plot)


def _plot(args) -> int:
    from .plot import load_reports, plot_run, plot_trace

    if args.reports is None and args.compare is None and args.trace is not None:
        try:  # a trace alone: its last steps' timeline
            _check_output("output", args.output)
            out = plot_trace(args.trace, args.output)
        except (ValueError, ImportError, OSError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        print(f"plot written to {out}", file=sys.stderr)
        return 0
    if (args.reports is None) == (args.compare is None):
        print("error: plot: give one reports file, or --compare A.json B.json",
              file=sys.stderr)
        return 2
    paths = [args.reports] if args.compare is None else list(args.compare)
    try:
        _check_output("output", args.output)
        runs = [load_reports(p) for p in paths]
        traces = [args.trace] + [None] * (len(runs) - 1)
        out = plot_run(runs, args.output, traces, labels=[Path(p).stem for p in paths])
    except (ValueError, ImportError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"plot written to {out}", file=sys.stderr)
    return 0
