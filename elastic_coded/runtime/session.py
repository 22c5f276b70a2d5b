"""The Ray session and actor lifecycle of a cluster."""

from __future__ import annotations

import os
import socket

import ray

__all__ = ["ensure_ray", "stop", "check_reachable"]


def ensure_ray(address: str | None, num_cpus: int | None) -> bool:
    """Connect to Ray unless already connected: ``address=None`` starts an embedded local Ray
    (``num_cpus``, default all), ``"auto"`` joins a running cluster.  Returns whether this call
    started a Ray session that the caller must shut down."""
    if ray.is_initialized():
        return False
    kw = {"include_dashboard": False, "log_to_driver": False}
    if address is not None:
        check_reachable(address)
        ray.init(address=address, **kw)
        return False
    # "local": always a fresh embedded instance, even if another Ray runs on this machine
    ray.init(address="local", num_cpus=num_cpus or os.cpu_count(), **kw)
    return True


def check_reachable(address: str, timeout: float = 5.0) -> None:
    """A ``host:port`` address must answer a TCP connection within ``timeout`` seconds (Ray
    itself retries for minutes); ``"auto"``, ``"local"`` and ``ray://`` addresses are left to
    Ray."""
    if not isinstance(address, str):
        raise ValueError(f"address: {address!r} must be None, 'auto' or 'host:port'")
    if address in ("auto", "local") or "://" in address:
        return
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise ValueError(f"address: {address!r} must be None, 'auto' or 'host:port'")
    try:
        socket.create_connection((host, int(port)), timeout=timeout).close()
    except OSError as exc:
        raise ConnectionError(f"address: no Ray cluster answers at {address!r} within "
                              f"{timeout:.0f} s ({exc}); start one with 'ray start --head' or "
                              f"use address=None for an embedded local Ray") from None


def stop(actors, own_ray: bool) -> None:
    """Kill ``actors`` (those already gone are skipped) and end Ray if we started it."""
    for a in actors:
        try:
            ray.kill(a, no_restart=True)
        except Exception:  # already gone
            pass
    if own_ray:
        ray.shutdown()
