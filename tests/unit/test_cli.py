"""The command line (no Ray): ``elastic-coded tradeoff`` (MATH.md §2) and the argument checks of
``elastic-coded run``."""

from __future__ import annotations

import json
import re
import sys
from fractions import Fraction

import pytest

from elastic_coded.cli import main
from elastic_coded.schemes.unified import tradeoff


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
])
def test_run_bad_input(argv, match, capsys, monkeypatch, request):
    monkeypatch.chdir(request.config.rootpath)
    assert main(argv) == 2
    assert re.search(match, capsys.readouterr().err.strip())
