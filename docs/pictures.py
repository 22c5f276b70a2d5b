"""The README's pictures of a run, made from a real run of the quickstart (not drawn by hand):

    python docs/pictures.py [--steps 12] [--out docs/img]

runs ``examples/quickstart.yaml`` on an embedded local Ray with ``--json`` and ``--trace``, then
draws ``quickstart-run.png`` (``elastic-coded plot``: step times, machines, redundancy, the
slowest step's Gantt chart) and ``quickstart-trace.png`` (the trace's last steps, one row per
track, as Perfetto lays them out; open ``quickstart.trace.json`` in ui.perfetto.dev for the
interactive view).
"""

from __future__ import annotations

import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def main(argv=None) -> int:
    from elastic_coded.cli import main as cli

    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--out", default=os.path.join(HERE, "img"))
    a = ap.parse_args(argv)
    os.makedirs(a.out, exist_ok=True)
    config = os.path.join(HERE, "..", "examples", "quickstart.yaml")
    reports = os.path.join(a.out, "quickstart.json")
    trace = os.path.join(a.out, "quickstart.trace.json")
    rc = cli(["run", config, "--steps", str(a.steps), "--json", reports, "--trace", trace,
              "--progress", "plain"])
    if rc != 0:
        return rc
    rc = cli(["plot", reports, "--trace", trace, "-o", os.path.join(a.out, "quickstart-run.png")])
    return rc or cli(["plot", "--trace", trace, "-o", os.path.join(a.out, "quickstart-trace.png")])


if __name__ == "__main__":
    sys.exit(main())
