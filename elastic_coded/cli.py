"""Command line.  The CLI prints; the library logs.

* ``elastic-coded run CONFIG.yaml [--json FILE] [--steps N] [--machines-per-process K]
  [--quiet]``: run a job from a YAML config (:mod:`elastic_coded.config`), with progress on
  stderr and a summary table on stdout.
  Exit status 0; 1 when a step's product was wrong; 2 for something the user fixes (the config,
  an unwritable ``--json`` path, an unreachable ``ray.address``, too few machines), said in one
  line on stderr; 130 on Ctrl-C, after shutting the cluster down and printing the steps done.
* ``elastic-coded tradeoff --K 18 --mu 1/3 --N 180 [--json FILE] [--plot FILE.png]``: the
  latency-load tradeoff of the unified coding framework (MATH.md §2) for every ``q``, as a table,
  optionally as JSON and a plot.  Exit status 0; 2 for bad input, with the message on stderr; 1
  when the optional ``matplotlib`` is missing for ``--plot``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time

from .cli_commands import _add_plot_parser, _add_tradeoff_parser, _check_output
from .errors import ArgumentError

__all__ = ["main"]


def _table(rows: list[tuple[str, str]]) -> str:
    w = max(len(k) for k, _ in rows)
    vw = max([22] + [len(v) for _, v in rows])
    line = "+" + "-" * (w + 2) + "+" + "-" * (vw + 2) + "+"
    out = [line]
    for k, v in rows:
        out.append(f"| {k:<{w}} | {v:>{vw}} |")
    out.append(line)
    return "\n".join(out)


def _one_line(msg: str) -> str:
    """An error message as one line; YAML's refusal of a ``!!python/...`` tag made plain."""
    msg = str(msg)
    tag = _YAML_TAG.search(msg)
    if tag:
        name = tag.group(1)
        name = "!!" + name[len(_YAML_STD):] if name.startswith(_YAML_STD) else name
        mark = _YAML_MARK.search(msg)
        where = f"{mark.group(1)}, line {mark.group(2)}" if mark else "a YAML file"
        return (f"{where}: the tag {name} is not allowed; configs and churn scripts are read "
                f"with yaml.safe_load, which takes plain mappings, lists, strings and numbers: "
                f"remove the tag")
    return " ".join(msg.split())


_YAML_STD = "tag:yaml.org,2002:"
_YAML_TAG = re.compile(r"could not determine a constructor for the tag '([^']*)'")
_YAML_MARK = re.compile(r'in "([^"]*)", line (\d+)')


def _run_config(args):
    """The run's configuration with ``--steps`` and ``--machines-per-process`` applied and its
    output path checked; raises
    ``ValueError`` with a one-line message."""
    import yaml

    from .config import load_config

    try:
        cfg = load_config(args.config)
    except yaml.YAMLError as exc:  # a YAML file the config names (its churn script)
        raise ArgumentError(_one_line(f"config key 'churn': {exc}")) from None
    except OSError as exc:
        raise ArgumentError(f"config: cannot read {args.config!r}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise ArgumentError(_one_line(str(exc))) from None
    if args.steps is not None:
        if args.steps < 1:
            raise ArgumentError(f"--steps: {args.steps} must be >= 1")
        from dataclasses import replace
        cfg = replace(cfg, steps=args.steps)
    per = getattr(args, "machines_per_process", None)
    if per is not None:
        if per < 1:
            raise ArgumentError(f"--machines-per-process: {per} must be >= 1")
        from dataclasses import replace
        cfg = replace(cfg, ray=replace(cfg.ray, machines_per_process=per))
    if args.json:
        _check_output("json", args.json)
    return cfg


def _starting(cfg) -> str:
    """What the run starts, said before Ray takes its few seconds to come up."""
    m = cfg.machines
    if m == "auto":
        what = "machines: auto, workers follow the cluster's nodes"
    else:
        from .machines import per_process

        n = m if isinstance(m, int) else len(m)
        procs = -(-n // per_process(cfg.ray.machines_per_process, cfg.run.time_scale))
        what = (f"{n} emulated machines" if cfg.run.time_scale > 0 else f"{n} machines") + \
            f" in {procs} worker process{'es' if procs > 1 else ''}"
    if cfg.ray.address is None:
        return (f"starting a local Ray ({what}, {cfg.ray.num_cpus or os.cpu_count()} CPUs); "
                f"this takes a few seconds...")
    return (f"connecting to the Ray cluster at {cfg.ray.address} ({what}); this takes a few "
            f"seconds...")


def _job_error(exc: Exception, cfg) -> str | None:
    """The one line for an error the user can fix, or ``None`` (a bug: let it raise)."""
    kind, msg = type(exc), _one_line(str(exc))
    if kind.__name__ == "AuthenticationError" and kind.__module__.startswith("ray"):
        return (f"config key 'ray.address': the Ray cluster at {cfg.ray.address!r} uses token "
                f"authentication; run with RAY_AUTH_MODE=token and the cluster's token (ray "
                f"get-auth-token on the head) in ~/.ray/auth_token or RAY_AUTH_TOKEN")
    if isinstance(exc, ConnectionError) or (isinstance(exc, ValueError)
                                            and msg.startswith("address: ")):
        return (f"config key 'ray.address': {msg.removeprefix('address: ')} (in the config, "
                f"ray.address: null runs a local Ray)")
    if isinstance(exc, ValueError):
        return msg + (" (in the config: allow_lower_S: true)" if "fewer than L+S" in msg else "")
    return None


def _run(args) -> int:
    from .jobs import JobInterrupted, run_job
    from .progress import make_progress

    try:
        cfg = _run_config(args)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    from .schemes.policies import family_spec

    code = (f"L={cfg.L}, S={cfg.S}" if family_spec(cfg.policy).coded_LS else
            ", ".join(f"{k}={v}" for k, v in vars(cfg.options).items() if v is not None))
    print(f"elastic-coded: {cfg.job}, {cfg.steps} steps, policy {cfg.policy} ({code}), "
          f"field {cfg.field}", file=sys.stderr)
    print(_starting(cfg), file=sys.stderr, flush=True)
    try:
        if args.trace:
            _check_output("trace", args.trace)
        if args.checkpoint:
            _resuming(cfg, args)
        progress = make_progress("none" if args.quiet else args.progress, cfg.steps)
    except (ValueError, ImportError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    t0 = time.perf_counter()

    def ready(cluster) -> None:
        print(f"Ray ready after {time.perf_counter() - t0:.1f} s; running {cfg.steps} steps",
              file=sys.stderr, flush=True)
        if progress is not None:
            progress.t0 = time.perf_counter()

    try:
        res = run_job(cfg, on_step=progress, on_ready=ready, trace=args.trace,
                      checkpoint=args.checkpoint, checkpoint_every=args.checkpoint_every)
    except JobInterrupted as exc:
        if progress is not None:
            progress.close()
        return _interrupted(exc.result, args)
    except KeyboardInterrupt:  # a second Ctrl-C, during the shutdown
        print("\ninterrupted", file=sys.stderr)
        return 130
    except Exception as exc:
        if progress is not None:
            progress.close()
        msg = _job_error(exc, cfg)
        if msg is None:
            raise
        print(f"error: {msg}", file=sys.stderr)
        return 2
    if progress is not None:
        progress.close()  # pagerank may converge before its last step
    print(_result_table(res))
    if args.json and not _write_reports(args.json, res):
        return 2
    ok = (not cfg.check) or res.exact_steps == res.steps_done
    return 0 if ok and res.extra.get("converged", True) else 1


def _resuming(cfg, args) -> None:
    """Say whether the run resumes from a checkpoint (refusals raise, before Ray starts)."""
    from .checkpoint import Checkpoint, config_key
    from .jobs import _checkpoint

    _checkpoint(cfg, args.checkpoint, args.checkpoint_every)
    saved = Checkpoint(args.checkpoint, config_key(cfg), args.checkpoint_every).load()
    if saved is not None:
        print(f"resuming from the checkpoint of step {saved.step} in {args.checkpoint}",
              file=sys.stderr)


def _interrupted(res, args) -> int:
    """Ctrl-C: the steps done (their table, and reports if asked for); exit status 130."""
    cfg = res.config
    if res.steps_done:
        print(_result_table(res))
    if args.json:
        _write_reports(args.json, res)
    done = (f"after {res.steps_done} of {cfg.steps} steps"
            + (f" ({res.exact_steps} exact)" if cfg.check else "")
            if res.steps_done else "before the first step")
    print(f"interrupted {done}, {res.wall_s:.1f} s; the cluster was shut down", file=sys.stderr)
    return 130


def _result_table(res) -> str:
    cfg, s = res.config, res.summary
    rows = [
        ("job", cfg.job), ("steps", str(s.get("steps", 0))),
        ("steps exact (vs numpy)",
         f"{res.exact_steps}/{res.steps_done}" if cfg.check else "not checked"),
        ("max relative error", f"{res.max_step_error:.2e}"),
        ("median step", f"{s.get('median_step_s', 0) * 1000:.1f} ms"),
        ("p95 step", f"{s.get('p95_step_s', 0) * 1000:.1f} ms"),
        ("median overhead", f"{s.get('median_overhead_s', 0) * 1000:.1f} ms"),
        ("stragglers (cancelled)", str(s.get("stragglers", 0))),
        ("failures mid-step", str(s.get("failures", 0))),
        ("joins / leaves", f"{s.get('joins', 0)} / {s.get('leaves', 0)}"),
        ("pieces re-planned", str(s.get("recovered_pieces", 0))),
        ("rows moved", str(s.get("rows_moved", 0))),
        ("products per step", f"{s.get('products', 0) // max(1, s.get('steps', 1))}"),
        ("redundancy (vs A @ B)", f"{s.get('redundancy', 0):.2f}x"),
        ("wasted work", f"{100 * s.get('wasted_fraction', 0):.1f} %"),
        ("wall time", f"{res.wall_s:.1f} s"),
    ]
    if res.answer_error is not None:
        label = {"power_iteration": "1 - |cos| to top eigvec",
                 "subspace_iteration": "1 - cos to top-k subspace",
                 "pagerank": "L1 distance to scipy's ranks"}.get(cfg.job, "rel. dist. to lstsq")
        rows.insert(4, (label, f"{res.answer_error:.2e}"))
    x = res.extra
    if cfg.job == "pagerank" and x:
        rows.insert(1, ("graph: nodes / edges / dangling",
                        f"{x['nodes']:,} / {x['edges']:,} / {x['dangling']:,}"))
        rows.insert(3, ("iterations (scipy's)", f"{x['iterations']} ({x['reference_iterations']})"
                        + ("" if x["converged"] else ", not converged")))
    return _table(rows)


def _write_reports(path: str, res) -> bool:
    """``--json``: the summary and every step's report; ``False`` (said on stderr) if the
    path cannot be written after all."""
    try:
        with open(path, "w") as fh:
            json.dump({"summary": res.summary, "steps_done": res.steps_done,
                       "exact_steps": res.exact_steps, "max_step_error": res.max_step_error,
                       "answer_error": res.answer_error, "extra": res.extra,
                       "reports": [r.to_dict() for r in res.reports]}, fh, indent=1, default=str)
    except OSError as exc:
        print(f"error: --json: cannot write {path!r}: {exc.strerror or exc}", file=sys.stderr)
        return False
    print(f"reports written to {path}", file=sys.stderr)
    return True


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
    run.add_argument("--machines-per-process", type=int, metavar="K",
                     help="machines sharing one worker process (overrides the config's "
                          "machines_per_process)")
    run.add_argument("--quiet", action="store_true", help="no progress display")
    run.add_argument("--progress", choices=("auto", "rich", "plain", "none"), default="auto",
                     help="the progress display: rich (a live view), plain lines (for logs), "
                          "none; auto (the default): rich on a terminal, else plain")
    run.add_argument("--trace", metavar="FILE",
                     help="write a timeline of every step (Chrome trace format: open it in "
                          "ui.perfetto.dev or chrome://tracing)")
    run.add_argument("--checkpoint", metavar="DIR",
                     help="an iterative job saves its iterate here every --checkpoint-every "
                          "steps and, run again with the same config, resumes from it")
    run.add_argument("--checkpoint-every", type=int, default=10, metavar="N",
                     help="steps between checkpoints (default 10)")
    run.set_defaults(func=_run)
    _add_tradeoff_parser(sub)
    _add_plot_parser(sub)
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
