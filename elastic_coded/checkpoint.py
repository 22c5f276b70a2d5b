"""Checkpoints of an iterative job (``elastic-coded run --checkpoint DIR``, ``run_job(...,
checkpoint=DIR)``): the iterate, the step index and the job's counts, every ``every`` steps, so
that a job whose driver died resumes where it stopped rather than from step 0.

One file per configuration, ``DIR/<key>.npz``, the key a hash of the configuration (another
configuration never resumes from it). Each write goes to a temporary file in ``DIR`` first,
then is renamed over the last one (``os.replace``, atomic on one file system), so a driver
killed mid-write leaves the previous checkpoint whole. A finished job removes its checkpoint.

No Ray here: the job runner calls :meth:`Checkpoint.save` and :meth:`Checkpoint.load`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .errors import ArgumentError

__all__ = ["Checkpoint", "Saved", "config_key"]

EVERY = 10
"""Steps between checkpoints unless told."""


def config_key(cfg) -> str:
    """A hash of a run configuration (a dataclass): the same config, the same key."""
    doc = dataclasses.asdict(cfg) if dataclasses.is_dataclass(cfg) \
        and not isinstance(cfg, type) else cfg
    text = json.dumps(doc, sort_keys=True, default=repr)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class Saved:
    """A checkpoint read back: the steps done, the iterate, and the job's counters."""

    step: int
    x: np.ndarray
    counts: dict


class Checkpoint:
    """Checkpoints of one configuration in folder ``folder`` (created if missing)."""

    def __init__(self, folder, key: str, every: int = EVERY):
        if isinstance(every, bool) or not isinstance(every, int) or every < 1:
            raise ArgumentError(f"checkpoint_every: {every!r} must be an int >= 1")
        self.folder = Path(folder)
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ArgumentError(f"checkpoint: cannot use folder {str(folder)!r}: "
                                f"{exc.strerror or exc}") from None
        if not os.access(self.folder, os.W_OK):
            raise ArgumentError(f"checkpoint: cannot write in {str(folder)!r}: permission denied")
        self.path = self.folder / f"{key}.npz"
        self.every = every

    def due(self, step: int) -> bool:
        """Whether a checkpoint is written after ``step`` steps."""
        return step > 0 and step % self.every == 0

    def save(self, step: int, x: np.ndarray, counts: dict) -> None:
        """Write ``step``, ``x`` and ``counts`` (JSON values) atomically."""
        fd, tmp = tempfile.mkstemp(dir=self.folder, prefix=".ckpt-", suffix=".npz")
        try:
            with os.fdopen(fd, "wb") as fh:
                np.savez(fh, step=np.int64(step), x=np.asarray(x),
                         counts=np.array(json.dumps(counts)))
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, self.path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    def load(self) -> Saved | None:
        """The last checkpoint, or ``None`` when there is none."""
        if not self.path.exists():
            return None
        try:
            with np.load(self.path, allow_pickle=False) as f:
                return Saved(int(f["step"]), np.array(f["x"]), json.loads(str(f["counts"])))
        except (OSError, ValueError, KeyError) as exc:
            raise ArgumentError(f"checkpoint: {str(self.path)!r} cannot be read ({exc}); "
                                f"remove it to start over") from None

    def clear(self) -> None:
        """The job finished: its checkpoint goes."""
        self.path.unlink(missing_ok=True)
