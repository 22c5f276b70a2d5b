"""Jobs a user runs on an :class:`~elastic_coded.runtime.ElasticCluster`: a stream of products,
power iteration, linear regression by gradient descent, and PageRank on a sparse graph
(:mod:`elastic_coded.pagerank`).  Used by the CLI, the examples and ``ray job submit``."""

from __future__ import annotations

import logging
import math
import os
import shutil
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.sparse as sp

from .algebra.fields import field as make_field
from .algebra.fields import relative_error
from .checkpoint import EVERY, Checkpoint, config_key
from .config import RunConfig
from .errors import ArgumentError
from .schemes.policies import family_spec

__all__ = ["JobResult", "JobInterrupted", "run_job", "make_problem", "Progress"]

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
    to the least-squares solution; pagerank: L1 distance to scipy's power iteration's ranks."""
    extra: dict = field(default_factory=dict)
    """pagerank: ``iterations``, ``converged``, ``reference_iterations``, ``reference_s``."""
    wall_s: float = 0.0
    steps_done: int = 0
    answer: Any = None
    """The job's final iterate (the vector, block or ranks; ``None`` for ``matmul``)."""
    resumed_from: int | None = None
    """The steps a checkpoint had done when the job resumed from it (``None``: from 0)."""
    """Steps that returned a product (``config.steps`` unless interrupted)."""


def make_problem(cfg: RunConfig) -> dict:
    """Seeded data for the job: ``A`` (or its path) and what the job needs besides."""
    rng = np.random.default_rng(cfg.seed)
    F = make_field(cfg.field)
    if cfg.job == "pagerank":
        from . import pagerank as pr

        if cfg.path is not None:
            M, dangling = pr.load_graph(cfg.path)
        else:
            M, dangling = pr.google_matrix(pr.power_law_graph(cfg.rows, cfg.edges, cfg.seed))
        return {"A": M, "A_local": M, "rng": rng, "F": F, "dangling": dangling}
    if cfg.path is not None:
        if cfg.path.endswith(".npz"):
            import scipy.sparse as sp

            return {"A": cfg.path, "A_local": sp.load_npz(cfg.path), "rng": rng, "F": F}
        A = np.load(cfg.path, mmap_mode="r")
        return {"A": cfg.path, "A_local": A, "rng": rng, "F": F}
    if family_spec(cfg.policy).masters:
        As = [F.random(shape, rng) for shape in cfg.masters]
        return {"A": As, "A_local": As, "rng": rng, "F": F}
    if cfg.job == "matmul":
        A = F.random((cfg.rows, cfg.cols), rng)
        return {"A": A, "A_local": A, "rng": rng, "F": F}
    if cfg.job in ("power_iteration", "subspace_iteration"):
        n = cfg.rows
        Q, _ = np.linalg.qr(rng.standard_normal((n, n)))
        lam = 0.7 ** np.arange(n)
        A = (Q * lam) @ Q.T
        return {"A": A, "A_local": A, "rng": rng, "F": F, "top": Q[:, 0],
                "top_k": Q[:, :cfg.input_cols]}
    # regression: A = X^T X, gradient A w - X^T y
    X = rng.standard_normal((cfg.rows, cfg.cols))
    w_true = rng.standard_normal(cfg.cols)
    y = X @ w_true + 0.01 * rng.standard_normal(cfg.rows)
    A = X.T @ X
    return {"A": A, "A_local": A, "rng": rng, "F": F, "Xty": X.T @ y,
            "w_star": np.linalg.lstsq(X, y, rcond=None)[0]}


class Progress:
    """Progress on stderr, one call per step (the CLI's; library code never prints).

    On a terminal: one line redrawn in place, cut to the terminal's width.  Elsewhere (a log
    file, a pipe): one line every ``every`` steps (default: a tenth of the steps) and at the
    last, so a log holds a few short lines rather than one long redrawn one.  ``close()`` ends a
    redrawn line early (before an error or a summary is printed)."""

    def __init__(self, total: int, stream=None, width: int | None = None,
                 every: int | None = None, tty: bool | None = None):
        self.total, self.width = total, width
        self.stream = sys.stderr if stream is None else stream
        self.tty = _isatty(self.stream) if tty is None else tty
        self.every = every or max(1, math.ceil(total / 10))
        self.t0 = time.perf_counter()
        self.stragglers = self.failed = self.restarted = 0
        self._drawn = 0  # length of the redrawn line on screen (0: none open)

    def __call__(self, step: int, report) -> None:
        done = step + 1
        if report is not None:
            self.stragglers += len(report.stragglers)
            self.failed += len(report.failed)
            self.restarted += len(getattr(report, "restarted", ()))
        elapsed = time.perf_counter() - self.t0
        parts = [f"{done}/{self.total} {done * 100 // self.total:3d}%"]
        if self.tty:
            eta = elapsed / done * (self.total - done)
            parts.append(f"eta {eta:.0f} s" if done < self.total else f"{elapsed:.1f} s")
        if report is not None:
            parts += [f"{report.t_total * 1000:.0f} ms/step", f"{len(report.available)} machines",
                      f"{self.stragglers} stragglers", f"{self.failed} failed"]
            if self.restarted:
                parts.append(f"{self.restarted} restarted")
        if not self.tty:
            if done % self.every == 0 or done == self.total:
                self.stream.write("step " + "  ".join(parts) + f"  {elapsed:.1f} s\n")
                self.stream.flush()
            return
        self._draw(parts, done)
        if done == self.total:
            self.close()
        self.stream.flush()

    def _draw(self, parts: list[str], done: int) -> None:
        """Redraw the line: a bar a quarter of the width (10 to 30 characters; none below 30
        columns) and as many ``parts`` as fit after it, the last ones dropped first."""
        cols = max((self.width or _columns(self.stream)) - 1, 1)
        bar_w = 0 if cols < 30 else min(30, cols // 4)
        room = cols - (bar_w + 3 if bar_w else 0)
        while len(parts) > 1 and len("  ".join(parts)) > room:
            parts = parts[:-1]
        bar = ""
        if bar_w:
            fill = bar_w * done // self.total
            bar = "[" + "#" * fill + "." * (bar_w - fill) + "] "
        line = (bar + "  ".join(parts))[:cols]
        self.stream.write("\r" + line.ljust(self._drawn))
        self._drawn = len(line)

    def close(self) -> None:
        """End the redrawn line, if one is open."""
        if self._drawn:
            self.stream.write("\n")
            self.stream.flush()
            self._drawn = 0


def _isatty(stream) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # no isatty, or closed
        return False


def _columns(stream) -> int:
    """The terminal's width for ``stream`` (its own terminal, else ``$COLUMNS`` or 80)."""
    try:
        cols = os.get_terminal_size(stream.fileno()).columns
    except (AttributeError, ValueError, OSError):
        cols = 0
    return cols or shutil.get_terminal_size().columns


def cluster_kwargs(cfg: RunConfig, F) -> dict:
    """The :class:`~elastic_coded.runtime.ElasticCluster` arguments of a configuration."""
    kw = dict(machines=cfg.machines, field=F, churn=cfg.churn, options=cfg.options,
              run=cfg.run, verify=cfg.verify, ray=cfg.ray, report=cfg.report)
    if cfg.L is not None and cfg.S is not None and family_spec(cfg.policy).coded_LS:
        kw.update(L=cfg.L, S=cfg.S)
    return kw


def _check_product(F, A, B, Y) -> tuple[bool, float]:
    """Whether ``Y`` is ``A @ B`` (exactly, or to 1e-9 in the reals), and the error."""
    want = F.matmul(A if sp.issparse(A) else np.asarray(A), B)
    if F.exact:
        return bool(np.array_equal(Y, want)), 0.0
    err = relative_error(Y, want)
    return err <= 1e-9, err


class JobInterrupted(KeyboardInterrupt):
    """Ctrl-C during :func:`run_job`.  ``result`` is the partial :class:`JobResult` (the steps
    done, their reports and summary); the cluster :func:`run_job` made was shut down.  A
    ``KeyboardInterrupt``, so callers that do not look for it still stop as on Ctrl-C."""

    def __init__(self, result: JobResult):
        super().__init__(f"interrupted after {result.steps_done} of {result.config.steps} steps")
        self.result = result


def run_job(cfg: RunConfig, on_step: Callable | None = None, cluster=None,
            on_ready: Callable | None = None, trace=None, checkpoint=None,
            checkpoint_every: int = EVERY) -> JobResult:
    """Run ``cfg``'s job for ``cfg.steps`` steps and check every step against the direct
    product.  ``cluster``: an existing cluster to use (else one is made and shut down).
    ``on_step(step, report)`` follows each step; ``on_ready(cluster)`` once the cluster is up.
    ``trace``: a file for the trace of every step (:mod:`.runtime.trace`).  ``checkpoint``: a
    folder where an iterative job saves its iterate every ``checkpoint_every`` steps and, run
    again with the same config, resumes from it (:mod:`.checkpoint`).
    Ctrl-C raises :class:`JobInterrupted` with the steps done, after the shutdown."""
    import ray

    from .runtime.cluster import ElasticCluster

    ckpt = _checkpoint(cfg, checkpoint, checkpoint_every)
    prob = make_problem(cfg)
    F = prob["F"]
    res = JobResult(cfg)
    prob["checkpoint"] = ckpt
    t0 = time.perf_counter()
    own, ray_was_up, interrupted = cluster is None, ray.is_initialized(), False
    try:
        if own:
            cluster = ElasticCluster(prob["A"], cfg.policy, trace=trace,
                                     **cluster_kwargs(cfg, F))
        elif trace is not None:
            cluster.trace(trace)
        if on_ready is not None:
            on_ready(cluster)
        x: np.ndarray | None
        if cfg.job == "pagerank":
            x = _pagerank(cfg, prob, cluster, res, on_step)
        else:
            x = _steps(cfg, prob, cluster, res, on_step)
        res.answer = x
        if ckpt is not None:
            ckpt.clear()
        if cfg.job == "power_iteration" and "top" in prob:
            res.answer_error = float(1 - abs(x @ prob["top"]))
        elif cfg.job == "subspace_iteration" and "top_k" in prob:
            # 1 - cos of the largest principal angle to the top-k eigenvectors
            cosines = np.linalg.svd(prob["top_k"].T @ x, compute_uv=False)
            res.answer_error = float(1 - cosines.min())
        elif cfg.job == "regression":
            w_star = prob["w_star"]
            res.answer_error = float(np.linalg.norm(x - w_star) / np.linalg.norm(w_star))
    except KeyboardInterrupt:
        interrupted = True
    finally:
        if cluster is not None:
            res.reports = list(cluster.reports)
            res.summary = cluster.summary()
            if own:
                cluster.shutdown()
        elif own and not ray_was_up:  # stopped while Ray was starting
            ray.shutdown()
        res.wall_s = time.perf_counter() - t0
    if interrupted:
        raise JobInterrupted(res)
    return res


def _checkpoint(cfg: RunConfig, folder, every: int) -> Checkpoint | None:
    if folder is None:
        return None
    if cfg.job == "matmul" or family_spec(cfg.policy).masters:
        raise ArgumentError(f"checkpoint: job {cfg.job!r} (policy {cfg.policy!r}) keeps no "
                            f"iterate to resume from; checkpoints are for iterative jobs")
    return Checkpoint(folder, config_key(cfg), every)


_COUNTS = ("steps_done", "exact_steps", "max_step_error")


def _resume(prob: dict, res: JobResult):
    """``(step, iterate)`` of the checkpoint to resume from (its counts put back into
    ``res``), or ``(0, None)``."""
    ckpt: Checkpoint | None = prob.get("checkpoint")
    saved = ckpt.load() if ckpt is not None else None
    if ckpt is None or saved is None:
        return 0, None
    for k in _COUNTS:
        setattr(res, k, saved.counts.get(k, getattr(res, k)))
    res.resumed_from = saved.step
    log.warning("resuming from the checkpoint of step %d (%s)", saved.step, ckpt.path)
    return saved.step, saved.x


def _save(prob: dict, res: JobResult, step: int, x) -> None:
    ckpt = prob.get("checkpoint")
    if ckpt is not None and x is not None and ckpt.due(step):
        ckpt.save(step, x, {k: getattr(res, k) for k in _COUNTS})


def _steps(cfg: RunConfig, prob: dict, cluster, res: JobResult, on_step) -> np.ndarray | None:
    """The job's steps on ``cluster``, each checked into ``res``; returns the final vector
    (power iteration, regression)."""
    F, rng = prob["F"], prob["rng"]
    hetero = family_spec(cfg.policy).masters
    A_local = prob["A_local"]
    if not hetero and not sp.issparse(A_local):
        A_local = np.asarray(A_local)
    n = None if hetero else A_local.shape[1]
    x = rng.standard_normal(n) if cfg.job != "matmul" else None
    if cfg.job == "subspace_iteration":  # block power iteration on input_cols vectors
        x = np.linalg.qr(rng.standard_normal((n, cfg.input_cols)))[0]
    if cfg.job == "regression":
        x = np.zeros(n)
        lr = 1.0 / np.linalg.eigvalsh(A_local)[-1]
    first, saved = _resume(prob, res)
    x = x if saved is None else saved
    for step in range(first, cfg.steps):
        B: Any
        if hetero:
            B = [F.random((a.shape[1], cfg.input_cols), rng) for a in A_local]
        elif cfg.job == "matmul":
            B = F.random((n, cfg.input_cols), rng)
        else:
            assert x is not None  # a matvec job starts from a vector
            B = x if x.ndim == 2 else x[:, None]
        Y = cluster.multiply(B)
        res.steps_done += 1
        if cfg.check:
            ok = True
            for Am, Bm, Ym in (zip(A_local, B, Y) if hetero else [(A_local, B, Y)]):
                good, err = _check_product(F, Am, Bm, Ym)
                ok &= good
                res.max_step_error = max(res.max_step_error, err)
            res.exact_steps += ok
            if not ok:
                log.error("step %d: product differs from the direct one", step)
        if cfg.job == "power_iteration":
            x = Y[:, 0] / np.linalg.norm(Y[:, 0])
        elif cfg.job == "subspace_iteration":
            x = np.linalg.qr(Y)[0]
        elif cfg.job == "regression":
            x = x - lr * (Y[:, 0] - prob["Xty"])
        _save(prob, res, step + 1, x)
        if on_step is not None:
            on_step(step, cluster.reports[-1] if cluster.reports else None)
    return x


def _pagerank(cfg: RunConfig, prob: dict, cluster, res: JobResult, on_step) -> np.ndarray:
    """PageRank (:func:`elastic_coded.pagerank.pagerank`): each iteration's ``M r`` is a step of
    the cluster, checked against scipy's ``M @ r``; the ranks are compared with scipy's own
    power iteration on the same matrix (``res.answer_error``, L1)."""
    from . import pagerank as pr

    M, dangling, F = prob["A_local"], prob["dangling"], prob["F"]

    def matvec(r):
        y = cluster.multiply(r)
        res.steps_done += 1
        if cfg.check:
            good, err = _check_product(F, M, r[:, None], y[:, None])
            res.exact_steps += good
            res.max_step_error = max(res.max_step_error, err)
        if on_step is not None:
            on_step(res.steps_done - 1, cluster.reports[-1] if cluster.reports else None)
        return y

    start, r0 = _resume(prob, res)
    out = pr.pagerank(matvec, M.shape[0], dangling, cfg.damping, cfg.tol, cfg.steps,
                      callback=lambda it, r, _: _save(prob, res, it, r), r0=r0, start=start)
    t0 = time.perf_counter()
    ref = pr.reference_pagerank(M, dangling, cfg.damping, cfg.tol, cfg.steps)
    res.answer_error = float(np.abs(out.ranks - ref.ranks).sum())
    res.extra = {"iterations": out.iterations, "converged": out.converged,
                 "reference_iterations": ref.iterations,
                 "reference_s": time.perf_counter() - t0, "nodes": M.shape[0], "edges": M.nnz,
                 "dangling": int(np.sum(dangling))}
    return out.ranks
