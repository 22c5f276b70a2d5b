"""Power iteration for the top eigenvector on an elastic, coded cluster.

    python examples/power_iteration.py                      # embedded local Ray
    python examples/power_iteration.py --address auto       # an existing cluster (ray job submit)
    python examples/power_iteration.py --churn examples/churn.yaml

Every step's A @ x is checked against numpy; at the end the vector is compared with numpy's top
eigenvector.  Exits 1 if any step was wrong or it did not converge.
"""

import argparse
import sys

import numpy as np

import elastic_coded


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=400)
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--machines", default="8", help="a count, or 'auto' (one per Ray node)")
    ap.add_argument("--churn", default=None, help="churn script (YAML)")
    ap.add_argument("--address", default=None)
    ap.add_argument("--time-scale", type=float, default=0.1)
    a = ap.parse_args()

    rng = np.random.default_rng(0)
    Q, _ = np.linalg.qr(rng.standard_normal((a.n, a.n)))
    A = (Q * 0.7 ** np.arange(a.n)) @ Q.T           # known spectrum, top eigenvector Q[:, 0]
    machines = a.machines if a.machines == "auto" else [
        {"id": f"m{i}", "speed": 1.0 + i % 4, "storage": 0.9} for i in range(int(a.machines))]
    x = rng.standard_normal(a.n)
    wrong = 0
    with elastic_coded.ElasticCluster(A, L=3, S=2, machines=machines, churn=a.churn,
                                      time_scale=a.time_scale, address=a.address) as cluster:
        for step in range(a.steps):
            y = cluster.multiply(x)
            wrong += np.linalg.norm(y - A @ x) > 1e-9 * np.linalg.norm(A @ x)
            x = y / np.linalg.norm(y)
        summary = cluster.summary()
    err = 1 - abs(x @ Q[:, 0])
    print(f"steps {a.steps}, wrong steps {wrong}, 1 - |cos(x, top eigenvector)| = {err:.2e}")
    print(f"median step {1000 * summary['median_step_s']:.1f} ms, stragglers "
          f"{summary['stragglers']}, failures {summary['failures']}, joins {summary['joins']}, "
          f"leaves {summary['leaves']}")
    print("exact" if wrong == 0 and err < 1e-6 else "FAILED")
    return 0 if wrong == 0 and err < 1e-6 else 1


if __name__ == "__main__":
    sys.exit(main())
