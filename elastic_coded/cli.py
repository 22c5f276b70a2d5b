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
from fractions import Fraction
from pathlib import Path

from .errors import ArgumentError

__all__ = ["main"]

TRADEOFF_PROG = "elastic-coded tradeoff"


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
    from .schemes.policies import family_of

    code = (f"L={cfg.L}, S={cfg.S}" if family_of(cfg.policy) == "usctec" else
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
