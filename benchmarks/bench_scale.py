"""Scale: how a step's time and the processes' CPU grow as machines join, against Ray's floor.

    python benchmarks/bench_scale.py [--quick] [--sizes 12,24,48,96,192] [--out DIR]

For each ``M``: ``A`` of ``100 M`` x 64 rows, 8-column inputs, speeds 1..4 (cycled),
``time_scale = 0.5``, ``L = 4, S = 2``, ``machines_per_process`` 8 (16 from 192 machines), one
embedded Ray.  Side by side in one run and on the same inputs:

* the default policy (``usctec-auto``), ``usctec`` and ``dynamic`` on the runtime: the median
  wall time of ``multiply`` over the measured steps (after warm-up steps), and the reports'
  ``t_plan`` and ``t_compute``;
* **Ray's floor**: plain Ray, none of this project's runtime, makes the same ``M`` calls, each
  a row block (its share in proportion to its speed, the ideal split) times a shared ``B``
  put once, from ``M/8`` actor processes hosting 8 machines each with the same emulation rule
  (a call takes ``work / speed * time_scale`` s), gathered one by one as they finish;
* **the process floor**: the same plain Ray with one call per actor process a step, carrying
  its machines' blocks (each paced as above, together), and one result back per process: what
  "one call per worker process" costs at best (issue 47's goals at 96 and 192 machines: the
  default's step and its driver's CPU within 1.25x of it);
* the CPU seconds per step of the driver, the controller and the worker processes (every
  thread's ``/proc/<pid>/task/<tid>/schedstat``, in nanoseconds), divided by ``M``: the
  driver's and the controller's are what does not shrink on a real cluster, so they are
  reported apart.  The driver's is counted over the steps alone (``multiply``, or Ray's
  floor's calls and gathering), not the benchmark's own check of each product against
  ``A @ B`` between steps; the others' over the whole run of measured steps.

The whole run caps numpy's BLAS threads in the driver at one, as a step does
(``ray.driver_blas_threads``): Ray's floor and the correctness checks between steps run under the
same cap, so idle BLAS threads spinning after a check load neither side.

Writes ``scale.json``, ``scale.md`` and ``scale.png`` (with matplotlib).  The goals (issue
"Scale"): the default's step <= 1.5x Ray's floor at every ``M``; driver plus controller CPU
<= 0.3 ms per machine per step at ``M = 96``.
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import results_io as rio  # noqa: E402
from real_faults import pid_of as _pid_of  # noqa: E402
from results_io import machine, parser, publish, row, table, yes  # noqa: E402

POLICIES = ("usctec-auto", "usctec", "dynamic")
TIME_SCALE = 0.5
L, S = 4, 2
COLS, INPUT_COLS, ROWS_PER_MACHINE = 64, 8, 100
TICK = os.sysconf("SC_CLK_TCK")


def _speeds(M: int) -> list:
    return [1.0 + (i % 4) for i in range(M)]


def per_process(M: int) -> int:
    return 16 if M >= 192 else 8


# -- CPU of a process, from /proc --------------------------------------------------------------
def cpu_s(pid: int) -> float:
    """CPU seconds of process ``pid`` so far, all its threads (0 if it is gone): from each
    thread's ``/proc/<pid>/task/<tid>/schedstat`` (nanoseconds), else from ``/proc/<pid>/stat``
    (user plus system, in clock ticks: 10 ms, which over the 9 measured steps of 96 machines
    is 0.012 ms per machine and step, the size of the differences measured)."""
    try:
        total = 0
        for tid in os.listdir(f"/proc/{pid}/task"):
            try:
                with open(f"/proc/{pid}/task/{tid}/schedstat") as fh:
                    total += int(fh.read().split()[0])
            except (OSError, ValueError, IndexError):  # the thread ended meanwhile
                continue
        if total:
            return total / 1e9
    except OSError:
        pass
    try:
        with open(f"/proc/{pid}/stat") as fh:
            parts = fh.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(parts[11]) + int(parts[12])) / TICK


# -- Ray's floor ---------------------------------------------------------------------------------
def _floor_actor():
    import ray

    @ray.remote(num_cpus=0)
    class FloorHost:
        """Plain Ray: a process hosting machines, each a row block and a speed."""

        def __init__(self, blocks: dict, speeds: dict, time_scale: float):
            self.blocks, self.speeds, self.ts = blocks, speeds, time_scale

        async def run(self, m: int, x, total: int):
            t0 = time.perf_counter()
            rows = self.blocks[m]
            y = rows @ x
            target = rows.shape[0] * x.shape[1] / total / self.speeds[m] * self.ts
            await asyncio.sleep(max(0.0, target - (time.perf_counter() - t0)))
            return m, y

        async def run_all(self, x, total: int):
            """Every machine of the process, each at its own pace, in one call."""
            return await asyncio.gather(*(self.run(m, x, total) for m in self.blocks))

    return FloorHost


def ray_floor(A: np.ndarray, speeds: list, Bs: list, per: int, batched: bool = False) -> dict:
    """Median seconds per step of Ray's floor (see the module docstring) and its CPU;
    ``batched``: one call per process, carrying its machines' blocks (the process floor)."""
    import ray

    M = len(speeds)
    cuts = np.concatenate([[0], np.cumsum(np.asarray(speeds) / sum(speeds) * A.shape[0])])
    cuts = np.round(cuts).astype(int)
    Host = _floor_actor()
    hosts, where = [], {}
    for h0 in range(0, M, per):
        ms = range(h0, min(M, h0 + per))
        hosts.append(Host.remote({m: A[cuts[m]:cuts[m + 1]] for m in ms},
                                 {m: speeds[m] for m in ms}, TIME_SCALE))
        where.update({m: hosts[-1] for m in ms})
    pids = [_pid_of(h) for h in hosts]
    total = A.shape[0] * Bs[0].shape[1]
    times = []
    me = os.getpid()
    c0, driver = sum(cpu_s(p) for p in pids), 0.0
    for i, B in enumerate(Bs):
        d0 = cpu_s(me)
        t0 = time.perf_counter()
        ref = ray.put(B)
        pending = ([h.run_all.remote(ref, total) for h in hosts] if batched else
                   [where[m].run.remote(m, ref, total) for m in range(M)])
        Y = np.empty((A.shape[0], B.shape[1]))
        while pending:
            ready, pending = ray.wait(pending, num_returns=1)
            got = ray.get(ready[0])
            for m, y in (got if batched else [got]):
                Y[cuts[m]:cuts[m + 1]] = y
        times.append(time.perf_counter() - t0)
        driver += cpu_s(me) - d0  # the step alone: the check below is the benchmark's
        if not np.allclose(Y, A @ B):
            raise AssertionError("Ray's floor computed a wrong product")
        if i == 0:  # the first step warms the actors up
            times.clear()
            c0, driver = sum(cpu_s(p) for p in pids), 0.0
    steps = len(times)
    c1 = sum(cpu_s(p) for p in pids)
    for h in hosts:
        ray.kill(h)
    return {"median_s": float(np.median(times)), "steps": steps,
            "driver_cpu_ms_per_machine": 1000 * driver / steps / M,
            "worker_cpu_ms_per_machine": 1000 * (c1 - c0) / steps / M}


# -- the runtime ---------------------------------------------------------------------------------
def runtime(A: np.ndarray, speeds: list, Bs: list, per: int, warm: int) -> dict:
    """Each policy's median step and the processes' CPU per step and machine."""
    from elastic_coded.runtime import ElasticCluster

    M = len(speeds)
    machines = [{"id": f"m{i}", "speed": s} for i, s in enumerate(speeds)]
    out = {}
    with ElasticCluster(A, "usctec-auto", machines, L=L, S=S,
                        run={"time_scale": TIME_SCALE},
                        ray={"machines_per_process": per},
                        report={"window": 100}) as c:
        ctrl_pid = _pid_of(c.controller)
        hosts = {h.host._actor_id.hex(): h.host for h in c._handles.values()}
        worker_pids = [_pid_of(h) for h in hosts.values()]
        me = os.getpid()
        for policy in POLICIES:
            times, reports, driver = [], [], 0.0
            for i, B in enumerate(Bs):
                if i == warm:
                    c0 = (cpu_s(ctrl_pid), sum(cpu_s(p) for p in worker_pids))
                d0 = cpu_s(me)
                t0 = time.perf_counter()
                Y = c.multiply(B, policy=policy)
                dt = time.perf_counter() - t0
                d1 = cpu_s(me)  # the step alone: the check below is the benchmark's
                if not np.allclose(Y, A @ B, rtol=1e-9, atol=1e-9 * np.abs(A @ B).max()):
                    raise AssertionError(f"{policy}: wrong product at M={M}")
                if i >= warm:
                    times.append(dt)
                    reports.append(c.reports[-1])
                    driver += d1 - d0
            c1 = (cpu_s(ctrl_pid), sum(cpu_s(p) for p in worker_pids))
            n = len(times)
            out[policy] = {
                "median_s": float(np.median(times)),
                "t_plan_ms": 1000 * float(np.median([r.t_plan for r in reports])),
                "t_compute_ms": 1000 * float(np.median([r.t_compute for r in reports])),
                "slowest_needed_ms": 1000 * float(np.median([r.slowest_needed_s
                                                             for r in reports])),
                "modes": sorted({r.extra.get("mode", "whole") for r in reports}),
                "driver_cpu_ms_per_machine": 1000 * driver / n / M,
                "controller_cpu_ms_per_machine": 1000 * (c1[0] - c0[0]) / n / M,
                "worker_cpu_ms_per_machine": 1000 * (c1[1] - c0[1]) / n / M,
                "steps": n,
            }
        out["traced"] = traced(c, A, Bs, warm)
    return out


def traced(c, A: np.ndarray, Bs: list, warm: int) -> dict:
    """The default policy's steps again with the trace on (written to a temporary file): its
    median step, and the trace's own cost per measured step (building and writing its events;
    the warm-up steps, which also name every track, are left out as the untraced steps' are)."""
    times = []
    with tempfile.TemporaryDirectory() as tmp, c.trace(os.path.join(tmp, "s.json")) as t:
        trace = t._tracer.trace
        for i, B in enumerate(Bs):
            if i == warm:  # the warm-up steps' tracks and names are not a step's cost
                trace.flush()
                at = (trace.cost_s, trace.handed_s, trace.events, trace.steps)
            t0 = time.perf_counter()
            Y = c.multiply(B)
            times.append(time.perf_counter() - t0)
            if not np.allclose(Y, A @ B, rtol=1e-9, atol=1e-9 * np.abs(A @ B).max()):
                raise AssertionError("traced: wrong product")
        trace.flush()
        cost, handed, events, steps = (trace.cost_s - at[0], trace.handed_s - at[1],
                                       trace.events - at[2], trace.steps - at[3])
    return {"median_s": float(np.median(times[warm:])), "cost_ms_per_step": 1000 * cost / steps,
            "handed_ms_per_step": 1000 * handed / steps,
            "events_per_step": events / steps, "steps": len(times) - warm}


# -- the pure planner ----------------------------------------------------------------------------
def planner_ms(M: int, reps: int = 5, seed: int = 0) -> dict:
    """What the controller plans per step for the default policy, without Ray: the plan for
    the machines present with speeds that changed since the last step (so no plan is reused),
    and its validation.  The driver asks only for the plan of the execution it will run
    (``StepRequest.modes``), so a step costs one of the three; ``plan_ms_median`` is the
    costliest of them, ``all_modes_ms`` the three together (a first step, before any speed is
    known, or a prediction missed).  Median milliseconds."""
    from elastic_coded.algebra import field
    from elastic_coded.families.usctec.store import UsctecFamily
    from elastic_coded.machines import MachineSpec
    from elastic_coded.schemes.families import Present
    from elastic_coded.schemes.wire import StepRequest

    rng = np.random.default_rng(seed)
    fam = UsctecFamily(ROWS_PER_MACHINE * M, L, S, field("real"), seed=seed)
    speeds = _speeds(M)
    specs = [MachineSpec(f"m{i}", s, 0.6) for i, s in enumerate(speeds)]
    t0 = time.perf_counter()
    fam.start(specs)
    place_ms = 1000 * (time.perf_counter() - t0)
    ids = tuple(s.id for s in specs)
    per_mode = {}
    for modes in (("pull",), ("eager",), ("lean",), ()):
        times = []
        for k in range(reps):
            sp = {m: s * float(rng.uniform(0.9, 1.1)) for m, s in zip(ids, speeds)}  # learnt
            present = Present(ids, {m: 0.6 for m in ids}, sp)
            req = StepRequest(k, "usctec-auto", None, INPUT_COLS, (), modes=modes)
            t0 = time.perf_counter()
            fam.plan("usctec-auto", present, S, req)
            times.append(1000 * (time.perf_counter() - t0))
        per_mode[modes[0] if modes else "all"] = float(np.median(times))
    return {"M": M, "plan_ms_median": max(per_mode[m] for m in ("pull", "eager", "lean")),
            "per_mode_ms": {m: per_mode[m] for m in ("pull", "eager", "lean")},
            "all_modes_ms": per_mode["all"], "placement_ms": place_ms}


def run_size(M: int, steps: int, warm: int, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed + M)
    A = rng.standard_normal((ROWS_PER_MACHINE * M, COLS))
    Bs = [rng.standard_normal((COLS, INPUT_COLS)) for _ in range(steps + warm)]
    speeds = _speeds(M)
    per = per_process(M)
    ideal = TIME_SCALE / sum(speeds)
    from elastic_coded.runtime import blas

    with blas.limited(1):  # Ray's floor and the checks in the driver: numpy's BLAS as in a step
        floor = ray_floor(A, speeds, Bs[warm - 1:], per)
        pfloor = ray_floor(A, speeds, Bs[warm - 1:], per, batched=True)
        res = {"M": M, "machines_per_process": per, "ideal_s": ideal, "ray_floor": floor,
               "process_floor": pfloor, "policies": runtime(A, speeds, Bs, per, warm)}
    d = res["policies"]["usctec-auto"]
    res["default_over_floor"] = d["median_s"] / floor["median_s"]
    res["default_over_process_floor"] = d["median_s"] / pfloor["median_s"]
    res["driver_cpu_over_process_floor"] = (d["driver_cpu_ms_per_machine"]
                                            / pfloor["driver_cpu_ms_per_machine"])
    tr = res["policies"].pop("traced")
    res["trace"] = {**tr, "cost_fraction": tr["cost_ms_per_step"] / 1000 / d["median_s"],
                    "traced_over_untraced": tr["median_s"] / d["median_s"]}
    res["default_driver_plus_controller_ms_per_machine"] = (
        d["driver_cpu_ms_per_machine"] + d["controller_cpu_ms_per_machine"])
    return res


def to_markdown(res: dict) -> str:
    lines = ["# Scale: a step as machines join, against Ray's floor\n",
             f"`{res['command']}`; {res['steps']} measured steps per policy after "
             f"{res['warm']} warm-up steps; A of 100 M x {COLS}, inputs of {INPUT_COLS} columns, "
             f"speeds 1..4, time_scale {TIME_SCALE}, L={L}, S={S}; machine: "
             f"{res['machine']['cpus']} CPUs, Ray {res['machine']['ray']}.\n",
             *table(["M", "ideal", "Ray's floor", *POLICIES, "default / floor",
                     "goal <= 1.5x"], "rrr" + "r" * len(POLICIES) + "rc")]
    for r in res["sizes"]:
        ratio = r["default_over_floor"]
        lines.append(row([r["M"], f"{1000 * r['ideal_s']:.1f} ms",
                          f"{1000 * r['ray_floor']['median_s']:.0f} ms",
                          *(f"{1000 * r['policies'][p]['median_s']:.0f} ms" for p in POLICIES),
                          f"{ratio:.2f}x", yes(ratio <= 1.5)]))
    lines += ["", "Against the process floor (plain Ray, one paced call per worker process "
              "carrying its machines' blocks, one result back per process; goals at M=96 and "
              "192: the default's step and its driver's CPU <= 1.25x the floor's):", "",
              *table("M | process floor | default | step ratio | driver CPU per machine "
                     "(floor's) | CPU ratio | met (step / CPU)", "rrrrrrc")]
    for r in res["sizes"]:
        pf = r.get("process_floor")
        if pf is None:
            continue
        d = r["policies"]["usctec-auto"]
        sr, cr = r["default_over_process_floor"], r["driver_cpu_over_process_floor"]
        met = f"{yes(sr <= 1.25)} / {yes(cr <= 1.25)}" if r["M"] in (96, 192) else "-"
        lines.append(f"| {r['M']} | {1000 * pf['median_s']:.0f} ms | "
                     f"{1000 * d['median_s']:.0f} ms | {sr:.2f}x | "
                     f"{d['driver_cpu_ms_per_machine']:.2f} ms "
                     f"({pf['driver_cpu_ms_per_machine']:.2f} ms) | {cr:.2f}x | {met} |")
    lines += ["", "CPU per step and machine (ms), the default policy, and where its step goes:",
              "", *table("M | driver | controller | driver + controller | goal <= 0.3 at M=96 "
                         "| workers | floor's driver | floor's workers | t_plan | t_compute | "
                         "modes", "rrrrcrrrrrl")]
    for r in res["sizes"]:
        d, fl = r["policies"]["usctec-auto"], r["ray_floor"]
        dc = r["default_driver_plus_controller_ms_per_machine"]
        goal = yes(dc <= 0.3) if r["M"] == 96 else "-"
        lines.append(f"| {r['M']} | {d['driver_cpu_ms_per_machine']:.2f} | "
                     f"{d['controller_cpu_ms_per_machine']:.2f} | {dc:.2f} | {goal} | "
                     f"{d['worker_cpu_ms_per_machine']:.2f} | "
                     f"{fl['driver_cpu_ms_per_machine']:.2f} | "
                     f"{fl['worker_cpu_ms_per_machine']:.2f} | {d['t_plan_ms']:.1f} ms | "
                     f"{d['t_compute_ms']:.0f} ms | {', '.join(d['modes'])} |")
    lines += ["", "The pure planner (no Ray): what the controller plans per step for the "
              "default policy, with speeds changed since the last step: the plan of the "
              "execution the driver will run (pull, eager or lean; the costliest counts), and "
              "all three (a first step, or a missed prediction of the next step's execution; "
              "goals: <= 20 ms at M=96, <= 100 ms at 1,000 machines):", "",
              *table("M | pull | eager | lean | a step (costliest) | goal | met | all three",
                     "rrrrrrcr")]
    for p in res.get("planner", []):
        goal = 20 if p["M"] <= 96 else 100
        pm = p.get("per_mode_ms", {})
        cells = " | ".join(f"{pm[m]:.1f} ms" if m in pm else "-" for m in ("pull", "eager", "lean"))
        lines.append(f"| {p['M']} | {cells} | {p['plan_ms_median']:.1f} ms | <= {goal} ms | "
                     f"{yes(p['plan_ms_median'] <= goal)} | "
                     f"{p.get('all_modes_ms', float('nan')):.1f} ms |")
    lines += ["", "The trace (`trace=FILE`), the default policy's steps again with it on: the "
              "driver hands each step to a writer thread (the hand-over is what the step "
              "waits for); the thread's CPU time building and writing the events of a "
              "measured step (warm-up steps left out), over the untraced median step, is "
              "the cost counted against the goal (<= 2% at M=96) "
              "though it overlaps the driver's waits; and the traced median step over the "
              "untraced one (noise included):", "",
              *table("M | events per step | hand-over per step | writer per step | of the step "
                     "| goal | met | traced / untraced", "rrrrrrcr")]
    for r in res["sizes"]:
        t = r.get("trace")
        if t is None:
            continue
        met = yes(t["cost_fraction"] <= 0.02) if r["M"] == 96 else "-"
        lines.append(f"| {r['M']} | {t['events_per_step']:.0f} | "
                     f"{1000 * t.get('handed_ms_per_step', 0.0):.0f} us | "
                     f"{t['cost_ms_per_step']:.2f} ms | {100 * t['cost_fraction']:.2f}% | "
                     f"<= 2% | {met} | {t['traced_over_untraced']:.2f}x |")
    return "\n".join(lines) + "\n"


def plot(res: dict, out_dir: str) -> str | None:
    plt = rio.pyplot()
    Ms = [r["M"] for r in res["sizes"]]
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    ax.plot(Ms, [1000 * r["ideal_s"] for r in res["sizes"]], "k:", label="ideal compute")
    ax.plot(Ms, [1000 * r["ray_floor"]["median_s"] for r in res["sizes"]], "k-o",
            label="Ray's floor")
    for p in POLICIES:
        ax.plot(Ms, [1000 * r["policies"][p]["median_s"] for r in res["sizes"]], "-o", label=p)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("machines M")
    ax.set_ylabel("median step (ms)")
    ax.set_title("A step as machines join")
    ax.legend(fontsize=8)
    return rio.save(fig, os.path.join(out_dir, "scale.png"), 110)


def run(quick: bool = False, out_dir: str | None = None, sizes=None) -> dict:
    sizes = tuple(sizes or ((12, 24) if quick else (12, 24, 48, 96, 192)))
    steps, warm = (3, 1) if quick else (9, 2)
    rio.start_ray()
    cmd = "python benchmarks/bench_scale.py" + (" --quick" if quick else "")
    res = {"command": cmd, "quick": quick, "steps": steps, "warm": warm,
           "machine": machine("ray"), "sizes": []}
    t0 = time.time()
    for M in sizes:
        print(f"  scale: M={M}", flush=True)
        res["sizes"].append(run_size(M, steps, warm))
    res["planner"] = [planner_ms(M) for M in ((96, 1000) if not quick else (96,))]
    res["wall_s"] = time.time() - t0
    return publish(out_dir, "scale" + ("_quick" if quick else ""), res, to_markdown(res), plot)


if __name__ == "__main__":
    ap = parser(__doc__)
    ap.add_argument("--sizes", default=None, help="comma-separated M, e.g. 12,96")
    a = ap.parse_args()
    run(a.quick, a.out, rio.ints(a.sizes))
