"""Memory of the quickstart: every process of the run (the driver, Ray's own processes and its
worker processes), sampled while it runs.

    python benchmarks/bench_memory.py [--quick] [--config examples/quickstart.yaml] [--out DIR]

Runs ``elastic-coded run CONFIG --quiet`` (``--quick``: 10 steps) twice, as configured (emulated
machines share worker processes, ``machines_per_process``) and with ``--machines-per-process 1``
(a process per machine), and, every 0.2 s, reads the
memory of that process and all its descendants from ``/proc``: PSS (``smaps_rollup``: shared
pages split among the processes that map them, so the sum is what the run costs the machine)
and RSS (the sum counts shared pages once per process).  Reports the peak of each sum, the
anonymous memory at the PSS peak (private to the run: library pages shared with processes
outside it, such as another Ray on the machine, lower the PSS sum but not this), the processes
at the peak and their breakdown by kind (driver, gcs_server, raylet, worker actors, the
controller, Ray's agents and monitors).  Linux only.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from results_io import RESULTS, ROOT, parser, publish, row, table  # noqa: E402

_KB = 1024


def _children() -> dict:
    """``{ppid: [pid, ...]}`` over every process."""
    out: dict = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as fh:
                stat = fh.read()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        out.setdefault(ppid, []).append(int(name))
    return out


def _tree(root: int) -> list:
    kids, out, todo = _children(), [], [root]
    while todo:
        p = todo.pop()
        out.append(p)
        todo += kids.get(p, [])
    return out


def _memory(pid: int) -> tuple | None:
    """``(pss_bytes, rss_bytes, kind, anon_bytes)`` of a process, or ``None`` if it is gone."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as fh:
            rows = dict(line.split(":", 1) for line in fh if ":" in line)
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            cmd = fh.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return None
    pss = int(rows.get("Pss", "0 kB").split()[0]) * _KB
    rss = int(rows.get("Rss", "0 kB").split()[0]) * _KB
    anon = int(rows.get("Pss_Anon", "0 kB").split()[0]) * _KB
    return pss, rss, _kind(cmd), anon


def _kind(cmd: str) -> str:
    for key, kind in (("ray::Worker", "worker actor"), ("ray::Controller", "controller"),
                      ("ray::IDLE", "idle Ray worker"), ("gcs_server", "gcs_server"),
                      ("raylet/raylet", "raylet"), ("ray::DashboardAgent", "dashboard agent"),
                      ("ray::RuntimeEnvAgent", "runtime env agent"),
                      ("dashboard/dashboard.py", "dashboard head (minimal: job and state API)"),
                      ("autoscaler/_private/monitor.py", "autoscaler monitor"),
                      ("log_monitor", "log monitor"), ("elastic_coded.cli", "driver"),
                      ("default_worker", "Ray worker (starting)")):
        if key in cmd:
            return kind
    return "other"


def measure(config: str, steps: int | None, interval: float = 0.2,
            per_process: int | None = None) -> dict:
    cmd = [sys.executable, "-m", "elastic_coded.cli", "run", config, "--quiet"]
    if steps is not None:
        cmd += ["--steps", str(steps)]
    if per_process is not None:
        cmd += ["--machines-per-process", str(per_process)]
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    peak = {"pss": 0, "rss": 0, "anon": 0, "procs": 0, "by_kind": {}}
    peak_rss, samples = 0, 0
    while proc.poll() is None:
        mem = [m for m in map(_memory, _tree(proc.pid)) if m is not None]
        samples += 1
        pss, rss = sum(m[0] for m in mem), sum(m[1] for m in mem)
        peak_rss = max(peak_rss, rss)
        if pss > peak["pss"]:
            by: dict = {}
            for p, r, kind, _ in mem:
                n, tp, tr = by.get(kind, (0, 0, 0))
                by[kind] = (n + 1, tp + p, tr + r)
            peak = {"pss": pss, "rss": rss, "anon": sum(m[3] for m in mem), "procs": len(mem),
                    "by_kind": by}
        time.sleep(interval)
    err = proc.stderr.read()
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {proc.returncode}:\n{err[-2000:]}")
    mib = 1 / 2 ** 20
    return {
        "config": config, "steps": steps, "samples": samples, "machines_per_process": per_process,
        "wall_s": time.perf_counter() - t0,
        "peak_pss_mib": peak["pss"] * mib, "peak_rss_sum_mib": peak_rss * mib,
        "private_anon_at_peak_mib": peak["anon"] * mib,
        "processes_at_peak": peak["procs"],
        "by_kind": {k: {"processes": n, "pss_mib": p * mib, "rss_mib": r * mib}
                    for k, (n, p, r) in sorted(peak["by_kind"].items(),
                                               key=lambda kv: -kv[1][1])},
    }


def _section(res: dict, title: str) -> list:
    lines = [f"## {title}", "",
             f"Peak total PSS **{res['peak_pss_mib']:.0f} MiB** over "
             f"{res['processes_at_peak']} processes (sum of RSS, shared pages counted once per "
             f"process: {res['peak_rss_sum_mib']:.0f} MiB; anonymous memory, which no other "
             f"process shares: {res['private_anon_at_peak_mib']:.0f} MiB); "
             f"{res['samples']} samples, {res['wall_s']:.1f} s.",
             "",
             *table("processes at the PSS peak | count | PSS MiB | RSS MiB", "l")]
    for kind, v in res["by_kind"].items():
        lines.append(row([kind, v["processes"], f"{v['pss_mib']:.0f}", f"{v['rss_mib']:.0f}"]))
    return lines + [""]


def markdown(res: dict) -> str:
    shared, alone = res["shared"], res["one_per_process"]
    saved = alone["peak_pss_mib"] - shared["peak_pss_mib"]
    lines = [f"# Memory of `elastic-coded run {res['config']}`", "",
             *table("worker processes | peak PSS, summed (MiB) | processes at the peak | sum of "
                    "RSS (MiB)", "l", ([what, f"{r['peak_pss_mib']:.0f}", r["processes_at_peak"],
                                        f"{r['peak_rss_sum_mib']:.0f}"] for what, r in (
                        ("shared (as configured)", shared),
                        ("one per machine (`--machines-per-process 1`)", alone)))), "",
             f"Sharing saves {saved:.0f} MiB ({100 * saved / alone['peak_pss_mib']:.0f}%).", ""]
    lines += _section(shared, "Shared worker processes (as configured)")
    lines += _section(alone, "One worker process per machine")
    lines += ["`python benchmarks/bench_memory.py` (PSS from /proc/PID/smaps_rollup of the "
              "CLI process and all its descendants, every 0.2 s; both runs one after the other)."]
    return "\n".join(lines) + "\n"


def run(quick: bool, out: str, config: str = "examples/quickstart.yaml") -> dict:
    steps = 10 if quick else None
    res = {"config": config, "steps": steps, "shared": measure(config, steps),
           "one_per_process": measure(config, steps, per_process=1)}
    return publish(out, "memory", res, markdown(res))


def main(argv=None) -> int:
    ap = parser(__doc__)
    ap.add_argument("--config", default="examples/quickstart.yaml")
    a = ap.parse_args(argv)
    out = a.out or os.path.join(RESULTS, "quick" if a.quick else "")
    run(a.quick, out.rstrip(os.sep), a.config)
    return 0


if __name__ == "__main__":
    sys.exit(main())
