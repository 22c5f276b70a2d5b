"""Linear regression by gradient descent on an elastic, coded cluster.

The cluster holds A = X^T X; each step computes the gradient A w - X^T y through the coded
cluster.  Converges to numpy's least-squares solution under stragglers and churn.

    python examples/linear_regression.py [--churn examples/churn.yaml] [--address auto]
"""

import argparse
import sys

import numpy as np

import elastic_coded


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--samples", type=int, default=2000)
    ap.add_argument("--features", type=int, default=120)
    ap.add_argument("--steps", type=int, default=150)
    ap.add_argument("--machines", type=int, default=8)
    ap.add_argument("--churn", default=None)
    ap.add_argument("--address", default=None)
    ap.add_argument("--time-scale", type=float, default=0.05)
    a = ap.parse_args()

    rng = np.random.default_rng(1)
    X = rng.standard_normal((a.samples, a.features))
    y = X @ rng.standard_normal(a.features) + 0.01 * rng.standard_normal(a.samples)
    A, Xty = X.T @ X, X.T @ y
    lr = 1.0 / np.linalg.eigvalsh(A)[-1]
    w_star = np.linalg.lstsq(X, y, rcond=None)[0]
    machines = [{"id": f"m{i}", "speed": 1.0 + i % 3, "storage": 0.9} for i in range(a.machines)]
    w = np.zeros(a.features)
    with elastic_coded.ElasticCluster(A, L=3, S=2, machines=machines, churn=a.churn,
                                      time_scale=a.time_scale, address=a.address) as cluster:
        for step in range(a.steps):
            w -= lr * (cluster.multiply(w) - Xty)
        summary = cluster.summary()
    err = np.linalg.norm(w - w_star) / np.linalg.norm(w_star)
    print(f"steps {a.steps}, relative distance to the least-squares solution {err:.2e}, "
          f"median step {1000 * summary['median_step_s']:.1f} ms, failures {summary['failures']}")
    print("converged" if err < 1e-6 else "FAILED")
    return 0 if err < 1e-6 else 1


if __name__ == "__main__":
    sys.exit(main())
