"""Users' ways in: the cluster launcher config validates (and pins the driver's Ray, shares the
token, leaves a margin above L+S), and README's cloud recipe, run as written against a local Ray
head with token authentication, runs an example to an exact result."""

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
CLOUD_ONLY = ("ray up", "ray submit", "ray dashboard", "ray down")
"""Recipe commands that need the cloud cluster itself; the rest run against a local head."""


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
    # Ray's schema check: its exception class and message vary across versions
    with pytest.raises(Exception):  # noqa: B017
        _validate(cfg)


def _cluster_yaml() -> dict:
    with open(os.path.join(ROOT, "cluster.yaml")) as fh:
        return yaml.safe_load(fh)


def test_cluster_yaml_pins_the_drivers_ray_version():
    import ray

    setup = " ".join(_cluster_yaml()["setup_commands"])
    installs = re.findall(r"\bray(?:\[[\w,]+\])?(?:[=<>!~]=?[\w.]+)?", setup)
    assert installs == [f"ray[default]=={ray.__version__}"], (installs, ray.__version__)


def test_cluster_yaml_leaves_a_margin_above_L_plus_S():
    with open(os.path.join(ROOT, "examples", "power_iteration.py")) as fh:
        L, S = map(int, re.search(r"^L, S = (\d+), (\d+)\b", fh.read(), re.M).groups())
    worker = _cluster_yaml()["available_node_types"]["spot_worker"]
    assert worker["min_workers"] >= L + S + 2 and worker["max_workers"] >= worker["min_workers"]


def test_cluster_yaml_shares_the_token_and_starts_ray_in_token_mode():
    cfg = _cluster_yaml()
    assert any(remote.endswith("/.ray/auth_token") and local == "~/.ray/auth_token"
               for remote, local in cfg["file_mounts"].items()), cfg["file_mounts"]
    starts = [c for key in ("head_start_ray_commands", "worker_start_ray_commands")
              for c in cfg[key] if "ray start" in c]
    assert len(starts) == 2 and all(c.startswith("RAY_AUTH_MODE=token ray start") for c in starts)


def _recipe() -> list[str]:
    """README's cloud recipe: the commands between its cloud-recipe markers, a command
    continued by a trailing backslash joined into one line, comments dropped."""
    with open(os.path.join(ROOT, "README.md")) as fh:
        text = fh.read()
    m = re.search(r"<!-- cloud-recipe:start -->\n```bash\n(.*?)```\n<!-- cloud-recipe:end -->",
                  text, re.S)
    assert m, "README.md: no cloud-recipe block"
    lines = m.group(1).replace("\\\n", " ").splitlines()
    return [ln.strip() for ln in lines if ln.strip() and not ln.strip().startswith("#")]


def test_readme_recipe_has_the_token_steps_and_both_submissions():
    cmds = _recipe()
    local = [c.split()[:2] for c in cmds if not c.startswith(CLOUD_ONLY)]
    assert local == [["ray", "get-auth-token"], ["export", "RAY_AUTH_MODE=token"], ["ray", "job"]]
    runs = [c for c in cmds if c.startswith(("ray submit", "ray job submit"))]
    assert len(runs) == 2
    for c in runs:
        args = [a for a in c.split("examples/power_iteration.py")[1].split() if a != "--"]
        assert args == ["--machines", "auto", "--address", "auto"], c


def _free_ports(n: int) -> list:
    """``n`` distinct free ports (held open together while they are picked)."""
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def _wait_for_jobs(address: str, env: dict, timeout: float = 150) -> None:
    """Until the head accepts a job: its job server answers before its agent is up (Ray then
    refuses jobs with "No available agent"), which takes tens of seconds on a busy machine."""
    deadline, out = time.time() + timeout, ""
    while time.time() < deadline:
        probe = subprocess.run(["ray", "job", "submit", "--address", address, "--no-wait", "--",
                                "true"], capture_output=True, text=True, timeout=60, env=env)
        if probe.returncode == 0:
            return
        out = probe.stdout + probe.stderr
        time.sleep(2)
    pytest.fail(f"the Ray head did not accept a job within {timeout:.0f} s: {out[-1500:]}")


@pytest.mark.ray
@pytest.mark.slow  # a Ray head of its own for a minute: with the slow tests, not beside others
def test_readme_recipe_runs_against_a_local_head():
    """The recipe's commands that need no cloud (the token lines and ``ray job submit``), as
    README writes them (only the dashboard port, 8265, moved to a free one), against a head
    started with token authentication and 6 CPUs: ``machines: auto`` must find at least
    L+S = 5 workers there, and the client must be in token mode by the recipe's own lines."""
    import ray

    if ray.is_initialized():
        ray.shutdown()
    gcs, dash, agent, client = _free_ports(4)
    # the head keeps the job's working-dir package an hour, not 10 minutes: on a host whose
    # clock jumps, or a busy one, Ray otherwise deletes it while the job's workers still start
    env = dict(os.environ, RAY_USAGE_STATS_ENABLED="0",
               RAY_RUNTIME_ENV_TEMPORARY_REFERENCE_EXPIRATION_S="3600",
               PATH=os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""))
    for key in ("RAY_ADDRESS", "RAY_AUTH_MODE"):
        env.pop(key, None)
    subprocess.run(["ray", "get-auth-token", "--generate"], env=env, check=True,
                   capture_output=True, timeout=60)
    head = subprocess.Popen(
        ["ray", "start", "--head", "--block", f"--port={gcs}", "--num-cpus=6",
         "--include-dashboard=true", f"--dashboard-port={dash}", "--dashboard-host=127.0.0.1",
         # ports of their own: another Ray on this machine may hold the fixed defaults
         f"--dashboard-agent-listen-port={agent}", f"--ray-client-server-port={client}"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=dict(env, RAY_AUTH_MODE="token"),
        start_new_session=True)
    try:
        _wait_for_jobs(f"http://127.0.0.1:{dash}", dict(env, RAY_AUTH_MODE="token"))
        script = "\n".join(c.replace("127.0.0.1:8265", f"127.0.0.1:{dash}") for c in _recipe()
                           if not c.startswith(CLOUD_ONLY))
        job = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=ROOT,
                             capture_output=True, text=True, timeout=400, env=env)
        out = job.stdout + job.stderr
        assert job.returncode == 0, out[-3000:]
        assert re.search(r"wrong steps 0", out) and "exact" in out, out[-3000:]
        machines = int(re.search(r"^(\d+) machines: ", out, re.M).group(1))
        assert machines == 6, out[-3000:]  # one worker per CPU of the head
    finally:
        os.killpg(head.pid, signal.SIGTERM)
        try:
            head.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(head.pid, signal.SIGKILL)
