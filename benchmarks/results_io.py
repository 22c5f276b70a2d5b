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
