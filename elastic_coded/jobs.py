"""Jobs a user runs on an :class:`~elastic_coded.runtime.ElasticCluster`: a stream of products,
power iteration, and linear regression by gradient descent.  Used by the CLI, the examples and
``ray job submit``."""

from __future__ import annotations

import logging
import sys
import time
from dataclasses import dataclass, field, fields
from typing import Callable

import numpy as np

from .algebra.fields import field as make_field, relative_error
from .config import RunConfig

__all__ = ["JobResult", "run_job", "make_problem", "Progress"]

log = logging.getLogger(__name__)


@dataclass
class JobResult:
    """Outcome of a job: reports, summary, and how the answer compares with numpy's."""

    config: RunConfig
    reports: list = field(default_factory=list)
    summary: dict = field(default_factory=dict)
    max_step_error: float = 0.0
    """Largest relative error of a step's product (0 exactly in finite fields)."""
    exact_steps: int = 0
    """Steps whose product matched the direct product (exactly, or to 1e-9 in the reals)."""
    answer_error: float | None = None
    """Power iteration: ``1 - |cos|`` to numpy's top eigenvector; regression: relative distance
    to the least-squares solution."""
    wall_s: float = 0.0


def make_problem(cfg: RunConfig) -> dict:
    """Seeded data for the job: ``A`` (or its path) and what the job needs besides."""
    rng = np.random.default_rng(cfg.seed)
    F = make_field(cfg.field)
    if cfg.path is not None:
        A = np.load(cfg.path, mmap_mode="r")
        return {"A": cfg.path, "A_local": A, "rng": rng, "F": F}
    if cfg.policy == "hetero":
        As = [F.random(shape, rng) for shape in cfg.masters]
        return {"A": As, "A_local": As, "rng": rng, "F": F}
    if cfg.job == "matmul":
        A = F.random((cfg.rows, cfg.cols), rng)
        return {"A": A, "A_local": A, "rng": rng, "F": F}
    if cfg.job == "power_iteration":
        n = cfg.rows
        Q, _ = np.linalg.qr(rng.standard_normal((n, n)))
        lam = 0.7 ** np.arange(n)
        A = (Q * lam) @ Q.T
        return {"A": A, "A_local": A, "rng": rng, "F": F, "top": Q[:, 0]}
    # regression: A = X^T X, gradient A w - X^T y
    X = rng.standard_normal((cfg.rows, cfg.cols))
    w_true = rng.standard_normal(cfg.cols)
    y = X @ w_true + 0.01 * rng.standard_normal(cfg.rows)
    A = X.T @ X
    return {"A": A, "A_local": A, "rng": rng, "F": F, "Xty": X.T @ y,
            "w_star": np.linalg.lstsq(X, y, rcond=None)[0]}


class Progress:
    """A one-line progress bar on stderr (the CLI's; library code never prints)."""

    def __init__(self, total: int, stream=sys.stderr, width: int = 30):
        self.total, self.stream, self.width = total, stream, width
        self.t0 = time.perf_counter()

    def __call__(self, step: int, report) -> None:
        done = step + 1
        fill = int(self.width * done / self.total)
        bar = "#" * fill + "." * (self.width - fill)
        extra = ""
        if report is not None:
            extra = (f" {report.t_total * 1000:7.1f} ms  machines {len(report.available):3d}"
                     f"  stragglers {len(report.stragglers)}  failed {len(report.failed)}")
        self.stream.write(f"\r[{bar}] {done}/{self.total}{extra}")
        if done == self.total:
            self.stream.write(f"  ({time.perf_counter() - self.t0:.1f} s)\n")
        self.stream.flush()


def cluster_kwargs(cfg: RunConfig, F) -> dict:
    """The :class:`~elastic_coded.runtime.ElasticCluster` arguments of a configuration."""
    kw = dict(machines=cfg.machines, field=F, storage=cfg.storage, placement=cfg.placement,
              time_scale=cfg.time_scale, churn=cfg.churn, seed=cfg.seed,
              allow_lower_S=cfg.allow_lower_S, address=cfg.address, num_cpus=cfg.num_cpus)
    if cfg.options is None:
        kw.update(L=cfg.L, S=cfg.S)
    else:
        kw.update({f.name: getattr(cfg.options, f.name) for f in fields(cfg.options)})
    return kw


def _check_product(F, A, B, Y) -> tuple[bool, float]:
    """Whether ``Y`` is ``A @ B`` (exactly, or to 1e-9 in the reals), and the error."""
    want = F.matmul(np.asarray(A), B)
    if F.exact:
        return bool(np.array_equal(Y, want)), 0.0
    err = relative_error(Y, want)
    return err <= 1e-9, err


def run_job(cfg: RunConfig, on_step: Callable | None = None, cluster=None) -> JobResult:
    """Run ``cfg``'s job for ``cfg.steps`` steps and check every step against the direct
    product.  ``cluster``: an existing cluster to use (else one is made and shut down)."""
    from .runtime.cluster import ElasticCluster

    prob = make_problem(cfg)
    F = prob["F"]
    hetero = cfg.policy == "hetero"
    A_local = prob["A_local"] if hetero else np.asarray(prob["A_local"])
    res = JobResult(cfg)
    t0 = time.perf_counter()
    own = cluster is None
    if own:
        cluster = ElasticCluster(prob["A"], cfg.policy, **cluster_kwargs(cfg, F))
    try:
        rng = prob["rng"]
        n = None if hetero else A_local.shape[1]
        x = rng.standard_normal(n) if cfg.job != "matmul" else None
        if cfg.job == "regression":
            x = np.zeros(n)
            lr = 1.0 / np.linalg.eigvalsh(A_local)[-1]
        for step in range(cfg.steps):
            if hetero:
                B = [F.random((a.shape[1], cfg.input_cols), rng) for a in A_local]
            elif cfg.job == "matmul":
                B = F.random((n, cfg.input_cols), rng)
            else:
                B = x[:, None]
            Y = cluster.multiply(B)
            if cfg.check:
                pairs = zip(A_local, B, Y) if hetero else [(A_local, B, Y)]
                ok = True
                for Am, Bm, Ym in pairs:
                    good, err = _check_product(F, Am, Bm, Ym)
                    ok &= good
                    res.max_step_error = max(res.max_step_error, err)
                res.exact_steps += ok
                if not ok:
                    log.error("step %d: product differs from the direct one", step)
            if cfg.job == "power_iteration":
                y = Y[:, 0]
                x = y / np.linalg.norm(y)
            elif cfg.job == "regression":
                x = x - lr * (Y[:, 0] - prob["Xty"])
            if on_step is not None:
                on_step(step, cluster.reports[-1] if cluster.reports else None)
        if cfg.job == "power_iteration" and "top" in prob:
            res.answer_error = float(1 - abs(x @ prob["top"]))
        elif cfg.job == "regression":
            res.answer_error = float(np.linalg.norm(x - prob["w_star"]) / np.linalg.norm(prob["w_star"]))
        res.reports = list(cluster.reports)
        res.summary = cluster.summary()
    finally:
        if own:
            cluster.shutdown()
    res.wall_s = time.perf_counter() - t0
    return res
