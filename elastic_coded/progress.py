"""The CLI's live view of a run: a rich progress display on a terminal (step time, machines
present, stragglers, failures, restarts and caught liars, redrawn in place), plain lines in
logs (:class:`~elastic_coded.jobs.Progress`).  Library code never prints."""

from __future__ import annotations

import sys

from .errors import ArgumentError, MissingDependency
from .jobs import Progress, _isatty

__all__ = ["RichProgress", "make_progress", "KINDS"]

KINDS = ("auto", "rich", "plain", "none")


class RichProgress:
    """:class:`~elastic_coded.jobs.Progress`'s calls (one per step, ``close()``), drawn with
    ``rich``: a bar with the step count and the time left, then the last step's time and the
    run's counts."""

    def __init__(self, total: int, stream=None):
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeRemainingColumn
        from rich.progress import Progress as Bar

        self.total = total
        self.stragglers = self.failed = self.restarted = self.caught = 0
        console = Console(file=sys.stderr if stream is None else stream)
        self._bar = Bar(TextColumn("step"), MofNCompleteColumn(), BarColumn(),
                        TimeRemainingColumn(), TextColumn("{task.fields[info]}"),
                        console=console, transient=False)
        self._task = self._bar.add_task("run", total=total, info="starting")
        self._bar.start()

    @property
    def t0(self) -> float:
        return 0.0

    @t0.setter
    def t0(self, value: float) -> None:  # the CLI restarts the clock once Ray is up
        self._bar.reset(self._task, total=self.total, info="running")

    def __call__(self, step: int, report) -> None:
        info = ""
        if report is not None:
            self.stragglers += len(report.stragglers)
            self.failed += len(report.failed)
            self.restarted += len(getattr(report, "restarted", ()))
            self.caught += len(getattr(report, "caught", ()))
            info = (f"{report.t_total * 1000:.0f} ms/step  {len(report.available)} machines  "
                    f"{self.stragglers} stragglers  {self.failed} failed")
            if self.restarted:
                info += f"  {self.restarted} restarted"
            if self.caught:
                info += f"  {self.caught} liars caught"
        self._bar.update(self._task, completed=step + 1, info=info)

    def close(self) -> None:
        self._bar.stop()


def make_progress(kind: str, total: int, stream=None):
    """The progress display ``kind`` (one of :data:`KINDS`; ``auto``: rich on a terminal when
    rich is installed, else plain lines), or ``None`` for ``none``."""
    if kind not in KINDS:
        raise ArgumentError(f"--progress: {kind!r} is not one of {', '.join(KINDS)}")
    if kind == "none":
        return None
    stream = sys.stderr if stream is None else stream
    if kind == "auto":
        kind = "rich" if _isatty(stream) and _has_rich() else "plain"
    if kind == "rich":
        if not _has_rich():
            raise MissingDependency("--progress rich: the rich package is needed; "
                                    "pip install rich")
        return RichProgress(total, stream)
    return Progress(total, stream)


def _has_rich() -> bool:
    try:
        import rich  # noqa: F401
    except ImportError:
        return False
    return True
