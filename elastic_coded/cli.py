"""Command line.  The CLI prints; the library logs.

* ``elastic-coded run CONFIG.yaml``: run a job from a YAML config (:mod:`elastic_coded.config`).
* ``elastic-coded tradeoff --K 18 --mu 1/3 --N 180 [--json FILE] [--plot FILE.png]``: the
  latency-load tradeoff of the unified coding framework (MATH.md §2) for every ``q``, as a table,
  optionally as JSON and a plot.  Exit status 0; 2 for bad input, with the message on stderr; 1
  when the optional ``matplotlib`` is missing for ``--plot``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from fractions import Fraction

__all__ = ["main"]

TRADEOFF_PROG = "elastic-coded tradeoff"


def _table(rows: list[tuple[str, str]]) -> str:
    w = max(len(k) for k, _ in rows)
    line = "+" + "-" * (w + 2) + "+" + "-" * 24 + "+"
    out = [line]
    for k, v in rows:
        out.append(f"| {k:<{w}} | {v:>22} |")
    out.append(line)
    return "\n".join(out)


def _run(args) -> int:
    from .config import ConfigError, load_config
    from .jobs import Progress, run_job

    try:
        cfg = load_config(args.config)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.steps is not None:
        if args.steps < 1:
            print(f"error: --steps: {args.steps} must be >= 1", file=sys.stderr)
            return 2
        from dataclasses import replace
        cfg = replace(cfg, steps=args.steps)
    code = (f"L={cfg.L}, S={cfg.S}" if cfg.options is None else
            ", ".join(f"{k}={v}" for k, v in vars(cfg.options).items() if v is not None))
    print(f"elastic-coded: {cfg.job}, {cfg.steps} steps, policy {cfg.policy} ({code}), "
          f"field {cfg.field}", file=sys.stderr)
    try:
        res = run_job(cfg, on_step=None if args.quiet else Progress(cfg.steps))
    except ValueError as exc:
        print(f"\nerror: {exc}", file=sys.stderr)
        return 2
    s = res.summary
    rows = [
        ("job", cfg.job), ("steps", str(s.get("steps", 0))),
        ("steps exact (vs numpy)", f"{res.exact_steps}/{cfg.steps}" if cfg.check else "not checked"),
        ("max relative error", f"{res.max_step_error:.2e}"),
        ("median step", f"{s.get('median_step_s', 0) * 1000:.1f} ms"),
        ("p95 step", f"{s.get('p95_step_s', 0) * 1000:.1f} ms"),
        ("median overhead", f"{s.get('median_overhead_s', 0) * 1000:.1f} ms"),
        ("stragglers (cancelled)", str(s.get("stragglers", 0))),
        ("failures mid-step", str(s.get("failures", 0))),
        ("joins / leaves", f"{s.get('joins', 0)} / {s.get('leaves', 0)}"),
        ("pieces re-planned", str(s.get("recovered_pieces", 0))),
        ("rows moved", str(s.get("rows_moved", 0))),
        ("wasted work", f"{100 * s.get('wasted_fraction', 0):.1f} %"),
        ("wall time", f"{res.wall_s:.1f} s"),
    ]
    if res.answer_error is not None:
        label = "1 - |cos| to top eigvec" if cfg.job == "power_iteration" else "rel. dist. to lstsq"
        rows.insert(4, (label, f"{res.answer_error:.2e}"))
    print(_table(rows))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"summary": s, "exact_steps": res.exact_steps,
                       "max_step_error": res.max_step_error, "answer_error": res.answer_error,
                       "reports": [r.to_dict() for r in res.reports]}, fh, indent=1, default=str)
        print(f"reports written to {args.json}", file=sys.stderr)
    ok = (not cfg.check) or res.exact_steps == cfg.steps
    return 0 if ok else 1


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
    (``d <= K``) when within ``5e-4`` (:func:`~elastic_coded.schemes.unified.as_mu`)."""
    from .schemes.unified import as_mu

    text = str(text).strip()
    if "/" in text:
        return as_mu(text, K)
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"mu: {text!r} is not a number or fraction such as '1/3'") from None
    return as_mu(value, K)


def _tradeoff_to_dict(t) -> dict:
    """A :class:`~elastic_coded.schemes.unified.Tradeoff` as plain JSON types: floats, with the
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
    from .schemes.unified import tradeoff

    K = args.K
    if isinstance(K, bool) or not isinstance(K, int) or K < 1:
        raise ValueError(f"K: {K!r} must be an int >= 1 (the number of servers)")
    t = tradeoff(K, _parse_mu(args.mu, K), args.N)
    for opt in ("json", "plot"):
        path = getattr(args, opt, None)
        if path:
            folder = os.path.dirname(os.path.abspath(path))
            if not os.path.isdir(folder):
                raise ValueError(f"--{opt}: cannot write {path!r}: no folder {folder!r}")
    return t


def _tradeoff(args: argparse.Namespace) -> int:
    """Print the tradeoff table; write ``args.json`` and draw ``args.plot`` when given.
    Returns the exit status."""
    from .schemes.unified import plot_tradeoff

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
# entry point
# ------------------------------------------------------------------------------------------------

def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="elastic-coded",
                                     description="Coded, elastic distributed matrix computation")
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run a job from a YAML config")
    run.add_argument("config", help="YAML run configuration (see elastic_coded.config)")
    run.add_argument("--json", help="write the step reports to this file")
    run.add_argument("--steps", type=int, help="override the number of steps")
    run.add_argument("--quiet", action="store_true", help="no progress bar")
    run.set_defaults(func=_run)
    _add_tradeoff_parser(sub)
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
