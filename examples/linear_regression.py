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
import sys

import numpy as np
from power_iteration import (
    L,
    S,
    add_cluster_options,
    lowered_steps,
    make_cluster,
    shortfall_rule,
    stopped,
)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--samples", type=int, default=2000)
    ap.add_argument("--features", type=int, default=120)
    ap.add_argument("--steps", type=int, default=150)
    add_cluster_options(ap, time_scale=0.05)
    a = ap.parse_args()

    rng = np.random.default_rng(1)
    X = rng.standard_normal((a.samples, a.features))
    y = X @ rng.standard_normal(a.features) + 0.01 * rng.standard_normal(a.samples)
    A, Xty = X.T @ X, X.T @ y
    lr = 1.0 / np.linalg.eigvalsh(A)[-1]
    w_star = np.linalg.lstsq(X, y, rcond=None)[0]
    print(f"linear regression, {a.samples} x {a.features}, {a.steps} steps, L={L}, S={S}, "
          f"machines {a.machines}; {shortfall_rule(a)}", flush=True)
    w = np.zeros(a.features)
    try:
        with make_cluster(A, a, speeds=3) as cluster:
            for _step in range(a.steps):
                w -= lr * (cluster.multiply(w) - Xty)
            summary = cluster.summary()
            lowered = lowered_steps(cluster)
    except ValueError as exc:  # too few machines or too little storage for L+S
        return stopped(exc)
    err = np.linalg.norm(w - w_star) / np.linalg.norm(w_star)
    print(f"steps {a.steps}, relative distance to the least-squares solution {err:.2e}, "
          f"median step {1000 * summary['median_step_s']:.1f} ms, failures {summary['failures']}, "
          f"steps with a lower S {lowered}")
    print("converged" if err < 1e-6 else "FAILED")
    return 0 if err < 1e-6 else 1


if __name__ == "__main__":
    sys.exit(main())
