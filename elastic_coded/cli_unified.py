"""``elastic-coded tradeoff``: the latency-load tradeoff of the unified coding framework
(MATH.md §2) for every ``q``, as a table, and optionally as JSON and a plot.

Hooked into the main CLI by :func:`add_tradeoff_parser`; :func:`run_tradeoff` does the work and
returns the exit status (0; 2 for bad input, with the message on stderr; 1 when the optional
``matplotlib`` is missing for ``--plot``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from fractions import Fraction

from .schemes.unified import Tradeoff, as_mu, plot_tradeoff, tradeoff

__all__ = ["add_tradeoff_parser", "run_tradeoff", "tradeoff_to_dict"]

PROG = "elastic-coded tradeoff"


def add_tradeoff_parser(subparsers) -> argparse.ArgumentParser:
    """Add the ``tradeoff`` subcommand to ``subparsers`` (from ``add_subparsers``); its
    ``func`` default is :func:`run_tradeoff`."""
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
    p.set_defaults(func=run_tradeoff)
    return p


def _parse_mu(text: str, K: int) -> Fraction:
    """``"1/3"`` exactly; a decimal such as ``"0.333"`` as a float, snapped to ``p/d``
    (``d <= K``) when within ``5e-4`` (:func:`~elastic_coded.schemes.unified.as_mu`)."""
    text = str(text).strip()
    if "/" in text:
        return as_mu(text, K)
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"mu: {text!r} is not a number or fraction such as '1/3'") from None
    return as_mu(value, K)


def tradeoff_to_dict(t: Tradeoff) -> dict:
    """The tradeoff as plain JSON types: floats, with the exact fractions as strings."""
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


def _error(msg: str) -> None:
    print(f"{PROG}: error: {msg}", file=sys.stderr)


def run_tradeoff(args: argparse.Namespace) -> int:
    """Print the tradeoff table for ``args.K``, ``args.mu``, ``args.N``; write ``args.json`` and
    draw ``args.plot`` when given.  Returns the exit status."""
    try:
        K = args.K
        if isinstance(K, bool) or not isinstance(K, int) or K < 1:
            raise ValueError(f"K: {K!r} must be an int >= 1 (the number of servers)")
        mu = _parse_mu(args.mu, K)
        t = tradeoff(K, mu, args.N)
        for opt in ("json", "plot"):
            path = getattr(args, opt, None)
            if path:
                folder = os.path.dirname(os.path.abspath(path))
                if not os.path.isdir(folder):
                    raise ValueError(f"--{opt}: cannot write {path!r}: no folder {folder!r}")
    except (ValueError, TypeError) as exc:
        _error(str(exc))
        return 2
    print(t.table())
    json_path = getattr(args, "json", None)
    if json_path:
        try:
            with open(json_path, "w") as fh:
                json.dump(tradeoff_to_dict(t), fh, indent=2)
                fh.write("\n")
        except OSError as exc:
            _error(f"--json: cannot write {json_path!r}: {exc.strerror or exc}")
            return 2
        print(f"wrote {json_path}")
    plot_path = getattr(args, "plot", None)
    if plot_path:
        try:
            plot_tradeoff(t, plot_path)
        except ImportError as exc:
            _error(str(exc))
            return 1
        except (OSError, ValueError) as exc:  # unwritable path, unknown image format
            _error(f"--plot: cannot write {plot_path!r}: {exc}")
            return 2
        print(f"wrote {plot_path}")
    return 0


def main(argv=None) -> int:
    """Run the subcommand on its own: ``python -m elastic_coded.cli_unified --K 18 ...``."""
    parser = argparse.ArgumentParser(prog=PROG)
    sub = parser.add_subparsers(dest="command", required=True)
    add_tradeoff_parser(sub)
    args = parser.parse_args(["tradeoff", *(sys.argv[1:] if argv is None else argv)])
    return args.func(args)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
