"""The Ray session and actor lifecycle shared by the three runtimes."""

from __future__ import annotations

import os

import ray

__all__ = ["ensure_ray", "stop"]


def ensure_ray(address: str | None, num_cpus: int | None) -> bool:
    """Connect to Ray unless already connected: ``address=None`` starts an embedded local Ray
    (``num_cpus``, default all), ``"auto"`` joins a running cluster.  Returns whether this call
    started a Ray session that the caller must shut down."""
    if ray.is_initialized():
        return False
    kw = {"include_dashboard": False, "log_to_driver": False}
    if address is not None:
        ray.init(address=address, **kw)
        return False
    # "local": always a fresh embedded instance, even if another Ray runs on this machine
    ray.init(address="local", num_cpus=num_cpus or os.cpu_count(), **kw)
    return True


def stop(actors, own_ray: bool) -> None:
    """Kill ``actors`` (those already gone are skipped) and end Ray if we started it."""
    for a in actors:
        try:
            ray.kill(a, no_restart=True)
        except Exception:  # already gone
            pass
    if own_ray:
        ray.shutdown()
