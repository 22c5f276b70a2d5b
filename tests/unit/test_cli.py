"""The command line (no Ray): ``elastic-coded tradeoff`` (MATH.md §2), and ``elastic-coded run``
with a stand-in ``run_job``: what it says before Ray starts, its progress display, Ctrl-C (exit
130 with the steps done) and the user errors it reports in one line (exit 2)."""

from __future__ import annotations

import json
import re
import sys
from fractions import Fraction

import pytest

from elastic_coded.cli import main
from elastic_coded.families.unified import tradeoff


def _tradeoff(*argv: str) -> int:
    return main(["tradeoff", *argv])


def test_tradeoff_table_and_json(tmp_path, capsys):
    out = tmp_path / "t.json"
    assert _tradeoff("--K", "18", "--mu", "0.333", "--N", "180", "--json", str(out)) == 0
    text = capsys.readouterr().out
    t = tradeoff(18, Fraction(1, 3), 180)
    assert t.table() in text and "K=18, mu=1/3, N=180" in text
    rows = [line.split() for line in text.splitlines() if line[:2].strip().isdigit()]
    assert [int(r[0]) for r in rows] == list(range(3, 19))
    data = json.loads(out.read_text())
    assert (data["K"], data["mu"], data["N"]) == (18, "1/3", 180)
    assert [p["q"] for p in data["points"]] == list(range(3, 19))
    for p, tp in zip(data["points"], t.points):
        assert Fraction(p["exact"]["D"]) == tp.D and Fraction(p["exact"]["L"]) == tp.L
        assert Fraction(p["exact"]["lower_bound"]) == tp.lower_bound
        assert p["L"] == pytest.approx(float(tp.L)) and p["on_envelope"] == tp.on_envelope
    assert [Fraction(e["exact"]["D"]) for e in data["envelope"]] == [d for d, _ in t.envelope]


def test_tradeoff_seed_example(capsys):
    """MATH.md §2: K=4, mu=1/2, N=4 gives (19/6, 2) at q=2 and (37/6, 1) at q=4."""
    assert _tradeoff("--K", "4", "--mu", "1/2", "--N", "4") == 0
    rows = {r[0]: r[1:3] for r in (line.split() for line in capsys.readouterr().out.splitlines())
            if r and r[0].isdigit()}
    assert rows["2"] == ["3.1667", "2.0000"] and rows["4"] == ["6.1667", "1.0000"]


def test_tradeoff_plot(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    png = tmp_path / "t.png"
    assert _tradeoff("--K", "18", "--mu", "1/3", "--N", "180", "--plot", str(png)) == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert f"wrote {png}" in capsys.readouterr().out


def test_tradeoff_plot_without_matplotlib(tmp_path, capsys, monkeypatch):
    for mod in ("matplotlib", "matplotlib.figure", "matplotlib.backends.backend_agg"):
        monkeypatch.setitem(sys.modules, mod, None)
    assert _tradeoff("--K", "4", "--mu", "1/2", "--N", "4", "--plot",
                     str(tmp_path / "t.png")) == 1
    assert "needs matplotlib" in capsys.readouterr().err
    assert not (tmp_path / "t.png").exists()


def test_tradeoff_plot_labels_do_not_overlap(tmp_path, monkeypatch):
    """K=18 crowds 16 points: each q label overlaps no other label, and most points get one."""
    pytest.importorskip("matplotlib")
    from matplotlib.figure import Figure

    figs = []
    save = Figure.savefig
    monkeypatch.setattr(Figure, "savefig", lambda self, *a, **k: (figs.append(self),
                                                                   save(self, *a, **k)))
    assert _tradeoff("--K", "18", "--mu", "1/3", "--N", "180", "--plot",
                     str(tmp_path / "t.png")) == 0
    fig = figs[0]
    ax = fig.axes[0]
    renderer = fig.canvas.get_renderer()
    labels = [t for t in ax.texts if t.get_text().startswith("q=")]
    boxes = [t.get_window_extent(renderer) for t in labels]
    assert len(labels) >= 12 and len({t.get_text() for t in labels}) == len(labels)
    assert not [(a.get_text(), b.get_text()) for i, (a, ba) in enumerate(zip(labels, boxes))
                for b, bb in zip(labels[i + 1:], boxes[i + 1:]) if ba.overlaps(bb)]


def test_benchmarks_plot_redraws_every_png_from_the_json(tmp_path, request):
    """``python -m benchmarks plot`` draws from the results files alone, no benchmark run."""
    pytest.importorskip("matplotlib")
    import shutil
    import subprocess

    root = request.config.rootpath
    for name in ("sweeps.json", "unified.json", "schedulers.json", "sim_fidelity.json"):
        shutil.copy(root / "benchmarks" / "results" / name, tmp_path / name)
    proc = subprocess.run([sys.executable, "-m", "benchmarks", "plot", "--out", str(tmp_path)],
                          cwd=root, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for png in ("sweep_slowdown", "sweep_heterogeneity", "sweep_churn", "sweep_scale",
                "unified_tradeoff", "schedulers", "sim_fidelity"):
        assert (tmp_path / f"{png}.png").read_bytes()[:4] == b"\x89PNG", png
    (tmp_path / "unified.json").unlink()
    proc = subprocess.run([sys.executable, "-m", "benchmarks", "plot", "--out", str(tmp_path)],
                          cwd=root, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1 and "no unified.json" in proc.stdout


def test_sweep_plots_name_the_curves_that_coincide():
    from benchmarks import bench_sweeps

    res = {"policies": ["a", "b", "c"],
           "s": [{"x": 1, "a": {"mean": 1.0}, "b": {"mean": 1.001}, "c": {"mean": 2.0}},
                 {"x": 2, "a": {"mean": 3.0}, "b": {"mean": 3.0}, "c": {"mean": 3.0}}]}
    assert bench_sweeps._coinciding(res, "s") == [["a", "b"]]
    assert set(bench_sweeps.STYLES) >= {"uncoded", "speculative", "cyclic", "usctec", "ideal"}
    styles = {(st["marker"], st["linestyle"]) for st in bench_sweeps.STYLES.values()}
    assert len(styles) == len(bench_sweeps.STYLES)  # no two policies drawn alike


@pytest.mark.parametrize("argv, match", [
    (["--K", "18", "--mu", "0.01", "--N", "180"], r"mu: 0.01 .* must satisfy 1/K = 1/18"),
    (["--K", "18", "--mu", "third", "--N", "180"], r"mu: 'third' is not a number"),
    (["--K", "18", "--mu", "1/0", "--N", "180"], r"mu: '1/0' is not a number"),
    (["--K", "0", "--mu", "1/2", "--N", "4"], r"K: 0 must be an int >= 1"),
    (["--K", "4", "--mu", "1/2", "--N", "0"], r"N: 0 must be >= 1"),
    (["--K", "4", "--mu", "1/2", "--N", "4", "--json", "/no/such/folder/t.json"],
     r"--json: cannot write '/no/such/folder/t.json': no folder"),
    (["--K", "4", "--mu", "1/2", "--N", "4", "--plot", "/no/such/folder/t.png"],
     r"--plot: cannot write '/no/such/folder/t.png': no folder"),
])
def test_tradeoff_bad_input(argv, match, capsys):
    assert _tradeoff(*argv) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    err = captured.err.strip()
    assert err.startswith("elastic-coded tradeoff: error: ") and "Traceback" not in err
    assert re.search(match, err), err


def test_tradeoff_parser_rejects_non_integers():
    with pytest.raises(SystemExit) as info:
        _tradeoff("--K", "four", "--mu", "1/2", "--N", "4")
    assert info.value.code == 2


def test_subcommands_are_required(capsys):
    with pytest.raises(SystemExit) as info:
        main([])
    assert info.value.code == 2
    assert "run" in capsys.readouterr().err


@pytest.mark.parametrize("argv, match", [
    (["run", "/no/such/config.yaml"], r"^error: config: no file at '/no/such/config.yaml'"),
    (["run", "examples/quickstart.yaml", "--steps", "0"], r"^error: --steps: 0 must be >= 1"),
    (["run", "examples/quickstart.yaml", "--machines-per-process", "0"],
     r"^error: --machines-per-process: 0 must be >= 1"),
])
def test_run_bad_input(argv, match, capsys, monkeypatch, request):
    monkeypatch.chdir(request.config.rootpath)
    assert main(argv) == 2
    assert re.search(match, capsys.readouterr().err.strip())


# ------------------------------------------------------------------------------------------------
# elastic-coded run, with a fake run_job (no Ray)
# ------------------------------------------------------------------------------------------------

QUICKSTART = "examples/quickstart.yaml"


def _report(stragglers=2, failed=0, machines=12, t=0.05):
    from types import SimpleNamespace

    return SimpleNamespace(t_total=t, available=[f"m{i}" for i in range(machines)],
                           stragglers=[f"m{i}" for i in range(stragglers)],
                           failed=[f"m{i}" for i in range(failed)], to_dict=lambda: {"t": t})


def _fake_job(steps_done, *, interrupt=False, calls=None):
    """A ``run_job`` that records what stderr held when it was called, reports
    ``steps_done`` steps, and returns, or raises :class:`JobInterrupted` (``interrupt``)."""
    from elastic_coded.jobs import JobInterrupted, JobResult

    def run_job(cfg, on_step=None, cluster=None, on_ready=None, **kw):  # trace, checkpoint
        if calls is not None:
            calls.append(cfg)
        if on_ready is not None:
            on_ready(None)
        res = JobResult(cfg, summary={"steps": steps_done}, wall_s=1.5)
        for step in range(steps_done):
            res.reports.append(_report())
            res.steps_done += 1
            res.exact_steps += 1
            if on_step is not None:
                on_step(step, res.reports[-1])
        if interrupt:
            raise JobInterrupted(res)
        return res

    return run_job


@pytest.fixture
def in_root(monkeypatch, request):
    monkeypatch.chdir(request.config.rootpath)


def test_run_says_what_it_starts_before_the_job(in_root, capsys, monkeypatch):
    import elastic_coded.jobs as jobs

    seen = []

    def run_job(cfg, **kw):
        seen.append(capsys.readouterr().err)  # what the user saw before Ray was asked for
        return _fake_job(cfg.steps)(cfg, **kw)

    monkeypatch.setattr(jobs, "run_job", run_job)
    assert main(["run", QUICKSTART]) == 0
    assert re.search(r"starting a local Ray \(12 emulated machines in 3 worker processes, "
                     r"2 CPUs\); this takes a "
                     r"few seconds", seen[0]), seen
    out, err = capsys.readouterr()
    assert "Ray ready after" in err and "running 30 steps" in err
    assert re.search(r"steps exact \(vs numpy\)\s*\|\s*30/30", out)


@pytest.mark.parametrize("doc, match", [
    ({"machines": "auto", "ray": {"address": "auto"}},
     r"connecting to the Ray cluster at auto \(machines: auto"),
    ({"machines": 6, "time_scale": 0},
     r"starting a local Ray \(6 machines in 6 worker processes, \d+ CPUs\)"),
    ({"machines": 6, "time_scale": 0, "machines_per_process": 4},
     r"starting a local Ray \(6 machines in 2 worker processes, \d+ CPUs\)"),
])
def test_run_start_line_names_the_cluster(doc, match, tmp_path, capsys, monkeypatch):
    import yaml

    import elastic_coded.jobs as jobs

    cfg = tmp_path / "c.yaml"
    cfg.write_text(yaml.safe_dump({"job": "matmul", "steps": 2, **doc}))
    monkeypatch.setattr(jobs, "run_job", _fake_job(2))
    assert main(["run", str(cfg), "--quiet"]) == 0
    assert re.search(match, capsys.readouterr().err)


def test_run_ctrl_c_shuts_down_and_summarises(in_root, capsys, monkeypatch, tmp_path):
    import elastic_coded.jobs as jobs

    monkeypatch.setattr(jobs, "run_job", _fake_job(7, interrupt=True))
    out_json = tmp_path / "r.json"
    assert main(["run", QUICKSTART, "--json", str(out_json)]) == 130
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    summary = [line for line in err.splitlines() if line.startswith("interrupted")]
    assert summary == ["interrupted after 7 of 30 steps (7 exact), 1.5 s; the cluster was "
                       "shut down"], err
    assert re.search(r"steps exact \(vs numpy\)\s*\|\s*7/7", out)
    assert json.loads(out_json.read_text())["steps_done"] == 7


def test_run_ctrl_c_before_the_first_step(in_root, capsys, monkeypatch):
    import elastic_coded.jobs as jobs

    monkeypatch.setattr(jobs, "run_job", _fake_job(0, interrupt=True))
    assert main(["run", QUICKSTART]) == 130
    out, err = capsys.readouterr()
    assert out == "" and "interrupted before the first step" in err


def test_run_second_ctrl_c_during_shutdown(in_root, capsys, monkeypatch):
    import elastic_coded.jobs as jobs

    def run_job(cfg, **kw):
        raise KeyboardInterrupt

    monkeypatch.setattr(jobs, "run_job", run_job)
    assert main(["run", QUICKSTART, "--quiet"]) == 130
    assert "interrupted" in capsys.readouterr().err


def _config(tmp_path, text: str, name="c.yaml"):
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def _refused_port() -> int:
    import socket

    with socket.socket() as s:  # bound, then closed: nothing listens there
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("files, argv, match", [
    ({"c.yaml": "job: !!python/object:os.system {}\n"}, [],
     r"c\.yaml, line 1: the tag !!python/object:os\.system is not allowed; .*yaml\.safe_load"),
    ({"c.yaml": "job: matmul\nchurn: churn.yaml\n",
      "churn.yaml": "seed: 1\nevents: !!python/object/apply:os.system [ls]\n"}, [],
     r"churn\.yaml, line 2: the tag !!python/object/apply:os\.system is not allowed"),
    ({"c.yaml": "job: matmul\nsteps: [\n"}, [], r"config: .* is not valid YAML"),
    ({"c.yaml": "job: matmul\nL: 0\n"}, [], r"config key 'L': 0 must be an int >= 1"),
    ({"c.yaml": "job: matmul\n"}, ["--json", "/no/such/folder/r.json"],
     r"--json: cannot write '/no/such/folder/r\.json': no folder"),
    ({"c.yaml": "job: matmul\n"}, ["--json", "{tmp}"], r"--json: cannot write .*: it is a folder"),
])
def test_run_user_errors_are_one_line_before_the_job(files, argv, match, tmp_path, capsys,
                                                      monkeypatch):
    import elastic_coded.jobs as jobs

    calls = []
    monkeypatch.setattr(jobs, "run_job", _fake_job(1, calls=calls))
    for name, text in files.items():
        _config(tmp_path, text, name)
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    assert main(["run", str(tmp_path / "c.yaml"), *argv]) == 2
    out, err = capsys.readouterr()
    assert calls == [] and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert re.search(match, lines[0]), lines[0]


@pytest.mark.parametrize("address, match", [
    ("127.0.0.1:{port}", r"no Ray cluster answers at '127\.0\.0\.1:\d+' .*ray start --head"),
    ("my-head", r"'my-head' must be None, 'auto' or 'host:port'"),
])
def test_run_unreachable_address_is_one_line(address, match, tmp_path, capsys):
    """The real run_job: the address is checked before Ray is asked to connect (Ray itself
    waits minutes where nothing listens), so no Ray session starts."""
    address = address.replace("{port}", str(_refused_port()))
    cfg = _config(tmp_path, f"job: matmul\nmachines: 6\nray: {{address: '{address}'}}\n")
    assert main(["run", cfg]) == 2
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert last.startswith("error: config key 'ray.address': ") and re.search(match, last), last
    assert last.endswith("(in the config, ray.address: null runs a local Ray)")
    import ray

    assert not ray.is_initialized()


class AuthenticationError(Exception):
    """Stands in for Ray's (matched by name and module, so the CLI need not import Ray)."""


AuthenticationError.__module__ = "ray.exceptions"


@pytest.mark.parametrize("exc, match", [
    (ValueError("machines: 4 present (['m0', 'm1', 'm2', 'm3']), fewer than L+S = 6; add "
                "machines, or pass allow_lower_S=True to run with S = 0"),
     r"fewer than L\+S = 6.*\(in the config: allow_lower_S: true\)$"),
    (ConnectionError("Could not find any running Ray instance.\nPlease start one."),
     r"^error: config key 'ray\.address': Could not find any running Ray instance\. Please "
     r"start one\. \(in the config, ray\.address: null runs a local Ray\)$"),
    (AuthenticationError("Authentication failed"), r"RAY_AUTH_MODE=token"),
])
def test_run_job_errors_the_user_fixes(exc, match, in_root, capsys, monkeypatch):
    import elastic_coded.jobs as jobs

    def run_job(cfg, on_step=None, **kw):
        on_step(0, _report())  # a redrawn progress line is open when the error comes
        raise exc

    monkeypatch.setattr(jobs, "run_job", run_job)
    monkeypatch.setattr(jobs, "_isatty", lambda stream: True)
    assert main(["run", QUICKSTART]) == 2
    err = capsys.readouterr().err
    last = err.splitlines()[-1]
    assert last.startswith("error: ") and re.search(match, last), err
    assert "Traceback" not in err


def test_run_bugs_are_not_hidden(in_root, monkeypatch):
    import elastic_coded.jobs as jobs

    def run_job(cfg, **kw):
        raise RuntimeError("a bug")

    monkeypatch.setattr(jobs, "run_job", run_job)
    with pytest.raises(RuntimeError, match="a bug"):
        main(["run", QUICKSTART, "--quiet"])


# ------------------------------------------------------------------------------------------------
# the progress display, and run_job's Ctrl-C
# ------------------------------------------------------------------------------------------------

def test_progress_in_a_log_is_a_line_per_tenth():
    import io

    from elastic_coded.jobs import Progress

    buf = io.StringIO()
    p = Progress(30, stream=buf)  # a StringIO is no terminal
    for step in range(30):
        p(step, _report(stragglers=1, failed=step == 4))
    lines = buf.getvalue().splitlines()
    assert "\r" not in buf.getvalue() and len(lines) == 10
    assert all(len(line) < 100 for line in lines)
    assert lines[0].startswith("step 3/30  10%") and "3 stragglers" in lines[0]
    assert lines[-1].startswith("step 30/30 100%") and "30 stragglers  1 failed" in lines[-1]
    buf = io.StringIO()
    p = Progress(7, stream=buf, every=3)
    for step in range(7):
        p(step, None)
    assert [line.split()[1] for line in buf.getvalue().splitlines()] == ["3/7", "6/7", "7/7"]


@pytest.mark.parametrize("width", [20, 40, 80, 200])
def test_progress_on_a_terminal_fits_its_width(width):
    import io

    from elastic_coded.jobs import Progress

    buf = io.StringIO()
    p = Progress(12, stream=buf, width=width, tty=True)
    for step in range(12):
        p(step, _report(stragglers=3))
    text = buf.getvalue()
    assert text.endswith("\n") and text.count("\n") == 1
    draws = text[:-1].split("\r")[1:]
    assert len(draws) == 12 and all(len(d.rstrip()) < width for d in draws)
    assert "12/12 100%" in draws[-1]
    if width >= 80:
        assert draws[-1].startswith("[" + "#" * min(30, (width - 1) // 4) + "]")
        assert "36 stragglers" in draws[-1]


def test_progress_close_ends_an_open_line():
    import io

    from elastic_coded.jobs import Progress

    buf = io.StringIO()
    p = Progress(10, stream=buf, width=80, tty=True)
    p(0, _report())
    assert not buf.getvalue().endswith("\n")
    p.close()
    p.close()
    assert buf.getvalue().endswith("\n") and buf.getvalue().count("\n") == 1


def test_run_job_ctrl_c_returns_the_steps_done_after_shutdown(monkeypatch):
    """run_job turns Ctrl-C mid-step into JobInterrupted with the partial result, after
    shutting down the cluster it made (a stand-in cluster; no Ray session)."""
    import elastic_coded.runtime.cluster as rc
    from elastic_coded.config import parse_config
    from elastic_coded.jobs import JobInterrupted, run_job

    events = []

    class Cluster:
        def __init__(self, A, policy, **kw):
            self.A, self.reports = np.asarray(A), []

        def multiply(self, B):
            if len(self.reports) == 3:
                raise KeyboardInterrupt
            self.reports.append(_report())
            return self.A @ B

        def summary(self):
            return {"steps": len(self.reports)}

        def shutdown(self):
            events.append("shutdown")

    np = pytest.importorskip("numpy")
    monkeypatch.setattr(rc, "ElasticCluster", Cluster)
    cfg = parse_config({"job": "power_iteration", "steps": 10, "matrix": {"rows": 20, "cols": 20},
                        "machines": 6})
    steps = []
    with pytest.raises(JobInterrupted) as info:
        run_job(cfg, on_step=lambda step, rep: steps.append(step))
    res = info.value.result
    assert events == ["shutdown"] and steps == [0, 1, 2]
    assert (res.steps_done, res.exact_steps, res.summary) == (3, 3, {"steps": 3})
    assert len(res.reports) == 3 and res.wall_s > 0
    assert isinstance(info.value, KeyboardInterrupt)
