"""The Grafana dashboard: the file in docs/ is current, and its queries name only the metrics
that health.step_metrics() creates (read from its source, so no Ray is needed)."""

import ast
import json
import re
import subprocess
import sys
from pathlib import Path

from elastic_coded.runtime import grafana

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "grafana-dashboard.json"
HEALTH = ROOT / "elastic_coded" / "runtime" / "health.py"
KINDS = {"Histogram": "histogram", "Counter": "counter", "Gauge": "gauge"}


def created_metrics() -> dict:
    """``{name: (kind, description, tag keys)}`` of the metrics.X(...) calls in health.py."""
    found = {}
    for node in ast.walk(ast.parse(HEALTH.read_text())):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr in KINDS and node.args):
            continue
        first = node.args[0]
        if isinstance(first, ast.Constant) and str(first.value).startswith("elastic_coded_"):
            desc = ast.literal_eval(node.args[1]) if len(node.args) > 1 else ""
            tags = next((ast.literal_eval(k.value) for k in node.keywords
                         if k.arg == "tag_keys"), ())
            found[first.value] = (KINDS[node.func.attr], desc, tuple(tags))
    return found


def exprs(dash: dict) -> list:
    return [t["expr"] for p in dash["panels"] for t in p["targets"]]


def test_doc_file_is_current():
    text = DOC.read_text()
    assert text == grafana.render(), "regenerate: python -m elastic_coded.runtime.grafana"
    assert json.loads(text) == grafana.dashboard()


def test_metrics_match_step_metrics():
    made = created_metrics()
    assert made, "no metrics found in health.py"
    assert {m[0]: (m[1], m[2]) for m in grafana.METRICS} == {n: v[:2] for n, v in made.items()}
    assert grafana.TAGS == {n: v[2] for n, v in made.items()}


def test_exprs_name_only_existing_metrics():
    names = {m[0] for m in grafana.METRICS}
    used = set()
    for expr in exprs(grafana.dashboard()):
        found = re.findall(r"\b(?:ray_)?elastic_coded_[a-z_]+", expr)
        assert found, expr
        for raw in found:
            assert raw.startswith("ray_"), f"{raw}: Ray exports with the ray_ prefix"
            base = re.sub(r"_(bucket|total|sum|count)$", "", raw[len("ray_"):])
            assert base in names, f"{raw} in {expr!r}"
            kind = dict((m[0], m[1]) for m in grafana.METRICS)[base]
            suffix = raw[len("ray_") + len(base):]
            allowed = {"histogram": {"_bucket", "_sum", "_count"}, "counter": {"_total"},
                       "gauge": {""}}[kind]
            assert suffix in allowed, f"{raw}: a {kind} is not exported as {suffix!r}"
            used.add(base)
    assert used == names, "every metric has a panel"


def test_panels_are_well_formed():
    dash = grafana.dashboard()
    assert dash["uid"] == "elastic-coded" and dash["title"] == "elastic_coded"
    assert dash["schemaVersion"] >= 36
    (var,) = dash["templating"]["list"]
    assert (var["name"], var["type"], var["query"]) == ("datasource", "datasource", "prometheus")
    ids = [p["id"] for p in dash["panels"]]
    assert len(ids) == len(set(ids))
    for p in dash["panels"]:
        assert p["type"] == "timeseries"
        assert {"x", "y", "w", "h"} <= set(p["gridPos"])
        assert p["fieldConfig"]["defaults"]["unit"]
        assert p["datasource"]["uid"] == "${datasource}"
        refs = [t["refId"] for t in p["targets"]]
        assert refs and len(refs) == len(set(refs))


def test_main_writes_the_file(tmp_path):
    out = tmp_path / "sub" / "dash.json"
    assert grafana.main([str(out)]) == 0
    assert out.read_text() == grafana.render()
    assert grafana.main(["a", "b"]) == 2


def test_doc_lists_every_metric():
    text = (ROOT / "docs" / "metrics.md").read_text()
    for name, kind, *_ in grafana.METRICS:
        assert f"`{name}` | {kind} |" in text, name


def test_does_not_import_ray():
    code = "import sys, elastic_coded.runtime.grafana; sys.exit(1 if 'ray' in sys.modules else 0)"
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0
