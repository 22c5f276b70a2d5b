"""The Ray session and actor lifecycle of a cluster."""

from __future__ import annotations

import logging
import os
import socket
from typing import Any

import ray

from ..errors import ArgumentError, Unreachable

__all__ = ["ensure_ray", "stop", "check_reachable"]


def ensure_ray(address: str | None, num_cpus: int | None) -> bool:
    """Connect to Ray unless already connected: ``address=None`` starts an embedded local Ray
    (``num_cpus``, default all), ``"auto"`` joins a running cluster.  Returns whether this call
    started a Ray session that the caller must shut down.

    Ray's start-up lines on the driver ("Started a local Ray instance", "Connecting to
    existing Ray cluster", the token-authentication notes of an embedded instance) are left
    out; Ray's warnings and errors after it started still show (the ``ray`` logger at
    WARNING)."""
    if ray.is_initialized():
        return False
    kw: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False}
    if address is not None:
        check_reachable(address)
        ray.init(address=address, logging_level=logging.WARNING, **kw)
        return False
    # "local": always a fresh embedded instance, even if another Ray runs on this machine.
    # Ray 2.60 turns token authentication on for it (a token in ~/.ray/auth_token, made on the
    # first run) and says so at WARNING: that is how it should be, so it goes unsaid.
    ray.init(address="local", num_cpus=num_cpus or os.cpu_count(), logging_level=logging.ERROR,
             **kw)
    logging.getLogger("ray").setLevel(logging.WARNING)
    return True


def check_reachable(address: str, timeout: float = 5.0) -> None:
    """A ``host:port`` address must answer a TCP connection within ``timeout`` seconds (Ray
    itself retries for minutes); ``"auto"``, ``"local"`` and ``ray://`` addresses are left to
    Ray."""
    if not isinstance(address, str):
        raise ArgumentError(f"address: {address!r} must be None, 'auto' or 'host:port'")
    if address in ("auto", "local") or "://" in address:
        return
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise ArgumentError(f"address: {address!r} must be None, 'auto' or 'host:port'")
    try:
        socket.create_connection((host, int(port)), timeout=timeout).close()
    except OSError as exc:
        raise Unreachable(f"address: no Ray cluster answers at {address!r} within "
                          f"{timeout:.0f} s ({exc}); start one with 'ray start --head' or "
                          f"use address=None for an embedded local Ray") from None


def stop(actors, own_ray: bool) -> None:
    """Kill ``actors`` (those already gone are skipped) and end Ray if we started it."""
    from .hosting import kill_process

    for a in actors:
        kill_process(a)
    if own_ray:
        ray.shutdown()
