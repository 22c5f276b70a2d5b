"""Command line: ``elastic-coded run CONFIG.yaml`` and friends.  The CLI prints; the library logs."""

from __future__ import annotations

import argparse
import json
import sys

__all__ = ["main"]


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
    print(f"elastic-coded: {cfg.job}, {cfg.steps} steps, policy {cfg.policy}, L={cfg.L}, "
          f"S={cfg.S}, field {cfg.field}", file=sys.stderr)
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
    try:
        from .cli_unified import add_tradeoff_parser
    except ImportError:  # pragma: no cover
        add_tradeoff_parser = None
    if add_tradeoff_parser is not None:
        add_tradeoff_parser(sub)
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
