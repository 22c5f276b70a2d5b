"""Power iteration for the top eigenvector on an elastic, coded cluster (L=3, S=2).

    python examples/power_iteration.py                      # embedded local Ray, 8 machines
    python examples/power_iteration.py --machines auto --address auto   # a running cluster
    python examples/power_iteration.py --churn examples/churn.yaml

Every step's A @ x is checked against numpy; at the end the vector is compared with numpy's top
eigenvector.  Exits 1 if any step was wrong or it did not converge.

When fewer than L+S = 5 machines are left (departures, crashes, preempted nodes), a step stops
with an error naming the machines present; with --allow-lower-S it runs with a lower S instead
(fewer stragglers tolerated, still exact) and the summary counts those steps.
"""

import argparse
import re
import sys

import numpy as np

import elastic_coded

L, S = 3, 2  # examples/linear_regression.py uses these and the helpers below


def add_cluster_options(ap: argparse.ArgumentParser, time_scale: float) -> None:
    """The options both examples take: where the machines come from, and what a step does
    when fewer than L+S of them are left."""
    ap.add_argument("--machines", default="8",
                    help="a count of emulated machines, or 'auto': workers on the Ray "
                         "cluster's nodes, following nodes that join and leave")
    ap.add_argument("--churn", default=None, help="churn script (YAML)")
    ap.add_argument("--address", default=None,
                    help="Ray address: none starts a local Ray; 'auto' joins a running cluster")
    ap.add_argument("--time-scale", type=float, default=time_scale,
                    help="seconds per unit of emulated work (0: real speed)")
    ap.add_argument("--allow-lower-S", action="store_true",
                    help=f"when fewer than L+S = {L + S} machines are left, run the step with a "
                         f"lower S instead of stopping with an error")


def shortfall_rule(a: argparse.Namespace) -> str:
    """What the run does when fewer than L+S machines are left, said at its start."""
    return ("fewer than L+S machines: lower S" if a.allow_lower_S else
            "fewer than L+S machines: the step stops with an error (--allow-lower-S lowers S)")


def make_cluster(A, a: argparse.Namespace, speeds: int) -> "elastic_coded.ElasticCluster":
    """The cluster both examples run on: ``--machines`` (emulated ones with speeds 1, 2, ...
    cycling through ``speeds`` values), ``--churn``, ``--time-scale``, ``--address`` and
    ``--allow-lower-S``; says which machines are there."""
    machines = a.machines if a.machines == "auto" else [
        {"id": f"m{i}", "speed": 1.0 + i % speeds, "storage": 0.9}
        for i in range(int(a.machines))]
    cluster = elastic_coded.ElasticCluster(A, L=L, S=S, machines=machines, churn=a.churn,
                                           time_scale=a.time_scale, address=a.address,
                                           allow_lower_S=a.allow_lower_S)
    ids = cluster.machines()
    print(f"{len(ids)} machines: {', '.join(ids)}", flush=True)
    return cluster


def lowered_steps(cluster) -> int:
    """Steps run with a lower S (fewer than L+S machines, --allow-lower-S)."""
    return sum(r.plan.K < L + S for r in cluster.reports)


def stopped(exc: ValueError) -> int:
    """Too few machines, or too little storage, for L+S: the reason in one line; exit 1."""
    print("stopped: " + re.sub(r"^(?:\w+\.)*[A-Z]\w*: ", "", str(exc).strip().splitlines()[-1]))
    return 1


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=400, help="matrix size (n x n)")
    ap.add_argument("--steps", type=int, default=40)
    add_cluster_options(ap, time_scale=0.1)
    a = ap.parse_args()

    rng = np.random.default_rng(0)
    Q, _ = np.linalg.qr(rng.standard_normal((a.n, a.n)))
    A = (Q * 0.7 ** np.arange(a.n)) @ Q.T           # known spectrum, top eigenvector Q[:, 0]
    print(f"power iteration, n={a.n}, {a.steps} steps, L={L}, S={S}, machines {a.machines}; "
          f"{shortfall_rule(a)}", flush=True)
    x = rng.standard_normal(a.n)
    wrong = 0
    try:
        with make_cluster(A, a, speeds=4) as cluster:
            for _step in range(a.steps):
                y = cluster.multiply(x)
                wrong += np.linalg.norm(y - A @ x) > 1e-9 * np.linalg.norm(A @ x)
                x = y / np.linalg.norm(y)
            summary = cluster.summary()
            lowered = lowered_steps(cluster)
    except ValueError as exc:  # too few machines or too little storage for L+S
        return stopped(exc)
    err = 1 - abs(x @ Q[:, 0])
    print(f"steps {a.steps}, wrong steps {wrong}, 1 - |cos(x, top eigenvector)| = {err:.2e}")
    print(f"median step {1000 * summary['median_step_s']:.1f} ms, stragglers "
          f"{summary['stragglers']}, failures {summary['failures']}, joins {summary['joins']}, "
          f"leaves {summary['leaves']}, steps with a lower S {lowered}")
    print("exact" if wrong == 0 and err < 1e-6 else "FAILED")
    return 0 if wrong == 0 and err < 1e-6 else 1


if __name__ == "__main__":
    sys.exit(main())
