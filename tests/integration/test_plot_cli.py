"""``elastic-coded run --trace`` and ``elastic-coded plot``: every example config runs a few
steps with a trace and its reports, and the plot command draws a PNG of each (with the Gantt
chart from the trace); two runs side by side; clear errors for bad paths."""

import glob
import os

import pytest

from elastic_coded.cli import main
from elastic_coded.runtime.trace import check_trace, load_trace

pytestmark = pytest.mark.ray

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
CONFIGS = sorted(p for p in glob.glob(os.path.join(ROOT, "examples", "*.yaml"))
                 if not p.endswith("churn.yaml"))  # a churn script, not a run


def _png(path) -> bool:
    with open(path, "rb") as fh:
        return fh.read(8) == b"\x89PNG\r\n\x1a\n" and os.path.getsize(path) > 10_000


@pytest.mark.parametrize("config", CONFIGS, ids=os.path.basename)
def test_every_example_runs_traced_and_plots(ray_session, tmp_path, config):
    reports, trace, png = tmp_path / "r.json", tmp_path / "r.trace.json", tmp_path / "r.png"
    rc = main(["run", config, "--steps", "3", "--json", str(reports), "--trace", str(trace),
               "--progress", "none"])
    assert rc == (1 if config.endswith("pagerank.yaml") else 0)  # 3 steps do not converge
    assert check_trace(load_trace(trace)) == []
    assert main(["plot", str(reports), "--trace", str(trace), "-o", str(png)]) == 0
    assert _png(png)


def test_compare_two_runs_and_clear_errors(ray_session, tmp_path, capsys):
    config = os.path.join(ROOT, "examples", "quickstart.yaml")
    runs = []
    for policy in ("a", "b"):
        path = tmp_path / f"{policy}.json"
        assert main(["run", config, "--steps", "2", "--json", str(path), "--quiet"]) == 0
        runs.append(str(path))
    png = tmp_path / "both.png"
    assert main(["plot", "--compare", *runs, "-o", str(png)]) == 0 and _png(png)
    capsys.readouterr()
    assert main(["plot", str(tmp_path / "none.json"), "-o", str(png)]) == 2
    assert "reports: cannot read" in capsys.readouterr().err
    assert main(["plot", runs[0], "-o", str(tmp_path / "no" / "x.png")]) == 2
    assert "--output: cannot write" in capsys.readouterr().err
    assert main(["plot", "-o", str(png)]) == 2
    assert "give one reports file" in capsys.readouterr().err
    assert main(["run", config, "--trace", str(tmp_path / "no" / "t.json")]) == 2
    assert "--trace: cannot write" in capsys.readouterr().err
