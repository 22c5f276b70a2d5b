"""Writing a benchmark's results: ``NAME.json`` (the data) and ``NAME.md`` (its table)."""

from __future__ import annotations

import json
import os


def write_results(out_dir: str, name: str, res: dict, markdown: str) -> None:
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, name + ".json"), "w") as fh:
        json.dump(res, fh, indent=1, default=float)
    with open(os.path.join(out_dir, name + ".md"), "w") as fh:
        fh.write(markdown)


def publish(out_dir: str, name: str, res: dict, markdown: str, plot=None) -> dict:
    """A benchmark's last act: its results written (:func:`write_results`), its plot drawn
    when ``plot(res, out_dir)`` is given and matplotlib is installed, its table printed.
    Returns ``res``."""
    write_results(out_dir, name, res, markdown)
    if plot is not None:
        try:
            plot(res, out_dir)
        except ImportError:
            pass
    print(markdown)
    return res
