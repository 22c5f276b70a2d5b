"""Users' ways in: the cluster launcher config validates, and a job submitted to a running local
Ray head (`ray start --head`, then `ray job submit`) runs an example to an exact result."""

import os
import re
import signal
import socket
import subprocess
import sys
import time

import pytest
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _validate(cfg):
    from ray.autoscaler._private.util import prepare_config, validate_config

    validate_config(prepare_config(cfg))


def test_cluster_yaml_passes_rays_validation():
    with open(os.path.join(ROOT, "cluster.yaml")) as fh:
        cfg = yaml.safe_load(fh)
    _validate(cfg)
    assert cfg["available_node_types"]["spot_worker"]["node_config"]["InstanceMarketOptions"][
        "MarketType"] == "spot"


def test_commented_local_provider_passes_rays_validation():
    text = open(os.path.join(ROOT, "cluster.yaml")).read()
    block = text.split("# On-premise machines instead of a cloud:")[1]
    lines = [ln[2:] for ln in block.splitlines()[3:] if ln.startswith("# ")]
    local = yaml.safe_load("\n".join(lines))
    cfg = yaml.safe_load(text)
    cfg.update(provider=local["provider"], auth=local["auth"])
    del cfg["available_node_types"], cfg["head_node_type"]
    _validate(cfg)
    assert cfg["provider"]["type"] == "local"


def test_cluster_yaml_rejects_a_broken_config():
    with open(os.path.join(ROOT, "cluster.yaml")) as fh:
        cfg = yaml.safe_load(fh)
    cfg["max_workers"] = "many"
    with pytest.raises(Exception):  # Ray's schema check (its message varies across versions)
        _validate(cfg)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.ray
def test_ray_job_submit_runs_an_example():
    import ray

    if ray.is_initialized():
        ray.shutdown()
    gcs, dash = _free_port(), _free_port()
    # token authentication: head and client run in the same auth mode and share the token file
    env = dict(os.environ, RAY_USAGE_STATS_ENABLED="0", RAY_AUTH_MODE="token")
    env.pop("RAY_ADDRESS", None)
    subprocess.run(["ray", "get-auth-token", "--generate"], env=env, check=True,
                   capture_output=True, timeout=60)
    head = subprocess.Popen(
        ["ray", "start", "--head", "--block", f"--port={gcs}", "--num-cpus=2",
         "--include-dashboard=true", f"--dashboard-port={dash}", "--dashboard-host=127.0.0.1"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    try:
        address = f"http://127.0.0.1:{dash}"
        deadline = time.time() + 90
        while time.time() < deadline:  # wait for the job server
            try:
                with socket.create_connection(("127.0.0.1", dash), timeout=1):
                    break
            except OSError:
                time.sleep(1)
        else:
            pytest.fail("the Ray head's job server did not come up")
        job = subprocess.run(
            ["ray", "job", "submit", "--address", address, "--working-dir", ROOT, "--",
             sys.executable, "examples/power_iteration.py", "--address", "auto", "--steps", "40",
             "--n", "60", "--machines", "6", "--time-scale", "0.01"],
            capture_output=True, text=True, timeout=240, env=env)
        out = job.stdout + job.stderr
        assert job.returncode == 0, out[-3000:]
        assert re.search(r"wrong steps 0", out) and "exact" in out, out[-3000:]
    finally:
        os.killpg(head.pid, signal.SIGTERM)
        try:
            head.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(head.pid, signal.SIGKILL)
