"""Linear regression by gradient descent on an elastic, coded cluster (L=3, S=2).

The cluster holds A = X^T X; each step computes the gradient A w - X^T y through the coded
cluster.  Converges to numpy's least-squares solution under stragglers and churn.

    python examples/linear_regression.py [--churn examples/churn.yaml]
    python examples/linear_regression.py --machines auto --address auto   # a running cluster

When fewer than L+S = 5 machines are left (departures, crashes, preempted nodes), a step stops
with an error naming the machines present; with --allow-lower-S it runs with a lower S instead
(fewer stragglers tolerated, still exact) and the summary counts those steps.
"""

import argparse
import re
import sys

import numpy as np

import elastic_coded

L, S = 3, 2


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--samples", type=int, default=2000)
    ap.add_argument("--features", type=int, default=120)
    ap.add_argument("--steps", type=int, default=150)
    ap.add_argument("--machines", default="8",
                    help="a count of emulated machines, or 'auto': workers on the Ray "
                         "cluster's nodes, following nodes that join and leave")
    ap.add_argument("--churn", default=None, help="churn script (YAML)")
    ap.add_argument("--address", default=None,
                    help="Ray address: none starts a local Ray; 'auto' joins a running cluster")
    ap.add_argument("--time-scale", type=float, default=0.05,
                    help="seconds per unit of emulated work (0: real speed)")
    ap.add_argument("--allow-lower-S", action="store_true",
                    help=f"when fewer than L+S = {L + S} machines are left, run the step with a "
                         f"lower S instead of stopping with an error")
    a = ap.parse_args()

    rng = np.random.default_rng(1)
    X = rng.standard_normal((a.samples, a.features))
    y = X @ rng.standard_normal(a.features) + 0.01 * rng.standard_normal(a.samples)
    A, Xty = X.T @ X, X.T @ y
    lr = 1.0 / np.linalg.eigvalsh(A)[-1]
    w_star = np.linalg.lstsq(X, y, rcond=None)[0]
    machines = a.machines if a.machines == "auto" else [
        {"id": f"m{i}", "speed": 1.0 + i % 3, "storage": 0.9} for i in range(int(a.machines))]
    print(f"linear regression, {a.samples} x {a.features}, {a.steps} steps, L={L}, S={S}, "
          f"machines {a.machines}; "
          + ("fewer than L+S machines: lower S" if a.allow_lower_S else
             "fewer than L+S machines: the step stops with an error (--allow-lower-S lowers S)"),
          flush=True)
    w = np.zeros(a.features)
    try:
        with elastic_coded.ElasticCluster(A, L=L, S=S, machines=machines, churn=a.churn,
                                          time_scale=a.time_scale, address=a.address,
                                          allow_lower_S=a.allow_lower_S) as cluster:
            ids = cluster.machines()
            print(f"{len(ids)} machines: {', '.join(ids)}", flush=True)
            for step in range(a.steps):
                w -= lr * (cluster.multiply(w) - Xty)
            summary = cluster.summary()
            lowered = sum(r.plan.K < L + S for r in cluster.reports)
    except ValueError as exc:  # too few machines or too little storage for L+S
        print("stopped: " + re.sub(r"^[\w.]+: ", "", str(exc).strip().splitlines()[-1]))
        return 1
    err = np.linalg.norm(w - w_star) / np.linalg.norm(w_star)
    print(f"steps {a.steps}, relative distance to the least-squares solution {err:.2e}, "
          f"median step {1000 * summary['median_step_s']:.1f} ms, failures {summary['failures']}, "
          f"steps with a lower S {lowered}")
    print("converged" if err < 1e-6 else "FAILED")
    return 0 if err < 1e-6 else 1


if __name__ == "__main__":
    sys.exit(main())
