"""An iterative job resumes after its driver dies: `elastic-coded run --checkpoint` on a
PageRank, the driver killed (SIGKILL) once a checkpoint is written, then the same config run
again from the checkpoint gives the ranks of a run never stopped (to 1e-12)."""

import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import yaml

from elastic_coded.checkpoint import Checkpoint, config_key
from elastic_coded.config import load_config
from elastic_coded.jobs import run_job

pytestmark = pytest.mark.ray

CONFIG = {"job": "pagerank", "steps": 60, "seed": 1, "field": "real", "policy": "usctec",
          "matrix": {"nodes": 3000, "edges": 30000}, "pagerank": {"damping": 0.85,
                                                                  "tol": 1.0e-12},
          "L": 2, "S": 1, "machines": 5, "time_scale": 0.2, "ray": {"num_cpus": 2}}


def _wait_for_checkpoint(proc, ckpt: Checkpoint, at_least: int, timeout: float = 120) -> int:
    deadline = time.time() + timeout
    while time.time() < deadline:
        assert proc.poll() is None, "the run ended before it could be killed"
        saved = ckpt.load() if ckpt.path.exists() else None
        if saved is not None and saved.step >= at_least:
            return saved.step
        time.sleep(0.1)
    raise AssertionError("no checkpoint written in time")


def test_pagerank_resumes_after_the_driver_is_killed(ray_session, tmp_path):
    path = tmp_path / "pr.yaml"
    path.write_text(yaml.safe_dump(CONFIG))
    cfg = load_config(str(path))
    folder = tmp_path / "ckpt"
    ckpt = Checkpoint(folder, config_key(cfg), every=4)
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0"}
    proc = subprocess.Popen([sys.executable, "-m", "elastic_coded.cli", "run", str(path),
                             "--checkpoint", str(folder), "--checkpoint-every", "4",
                             "--quiet"], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        step = _wait_for_checkpoint(proc, ckpt, at_least=8)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the driver and the Ray it started
        proc.wait(timeout=30)
    assert ckpt.load().step >= step  # whole after the kill
    resumed = run_job(cfg, checkpoint=folder, checkpoint_every=4)
    assert resumed.resumed_from is not None and resumed.resumed_from >= 8
    assert not ckpt.path.exists()  # a finished job clears its checkpoint
    whole = run_job(cfg)
    assert resumed.extra["iterations"] == whole.extra["iterations"]
    assert np.abs(resumed.answer - whole.answer).max() <= 1e-12
    assert resumed.extra["converged"] and resumed.exact_steps == resumed.steps_done
    assert resumed.steps_done == whole.steps_done  # the counts carried over the stop
