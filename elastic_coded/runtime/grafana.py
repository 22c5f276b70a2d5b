"""A Grafana dashboard of the metrics that :func:`.health.step_metrics` reports to Ray.

Pure: builds the dashboard's JSON model without Ray. ``python -m elastic_coded.runtime.grafana
[OUT]`` writes it to OUT (``docs/grafana-dashboard.json`` by default).

Ray exports an application metric ``NAME`` to Prometheus as ``ray_NAME``. A histogram comes as
``ray_NAME_bucket``, ``_sum`` and ``_count``; a counter as ``ray_NAME_total`` (Ray 2.10 and
later; the OpenCensus exporter also keeps a ``ray_NAME`` gauge for compatibility, which
the OpenTelemetry exporter, the default in recent releases, does not), so the queries use
``_total``; a gauge keeps its name."""

from __future__ import annotations

import json
import sys
from pathlib import Path

__all__ = ["METRICS", "TAGS", "dashboard", "render", "main"]

DEFAULT_OUT = "docs/grafana-dashboard.json"
PREFIX = "ray_"  # the Prometheus namespace Ray gives every metric

#: (name, kind, description, unit) of each metric :func:`.health.step_metrics` creates
METRICS: tuple[tuple[str, str, str, str], ...] = (
    ("elastic_coded_step_seconds", "histogram", "Step time", "seconds"),
    ("elastic_coded_decode_seconds", "histogram", "Decode time", "seconds"),
    ("elastic_coded_stragglers", "counter", "Straggling results", "results"),
    ("elastic_coded_machines", "gauge", "Machines present", "machines"),
)

#: the tag keys of each metric
TAGS: dict[str, tuple[str, ...]] = {
    "elastic_coded_step_seconds": ("policy",),
    "elastic_coded_decode_seconds": ("policy",),
    "elastic_coded_stragglers": ("policy",),
    "elastic_coded_machines": (),
}

_DS = {"type": "prometheus", "uid": "${datasource}"}


def _quantile(q: float, metric: str) -> str:
    return (f"histogram_quantile({q}, sum(rate({PREFIX}{metric}_bucket[1m])) "
            f"by (le, policy))")


# title, description, Grafana unit, [(expr, legend)]
_PANELS: tuple[tuple[str, str, str, list[tuple[str, str]]], ...] = (
    ("Step time", "Step time per policy, p50 and p95 over 1m", "s",
     [(_quantile(0.5, "elastic_coded_step_seconds"), "p50 {{policy}}"),
      (_quantile(0.95, "elastic_coded_step_seconds"), "p95 {{policy}}")]),
    ("Decode time", "Decode time per policy, p95 over 1m", "s",
     [(_quantile(0.95, "elastic_coded_decode_seconds"), "p95 {{policy}}")]),
    ("Straggling results", "Straggling results per second, per policy", "cps",
     [(f"sum(rate({PREFIX}elastic_coded_stragglers_total[1m])) by (policy)", "{{policy}}")]),
    ("Machines present", "Machines in the cluster", "short",
     [(f"{PREFIX}elastic_coded_machines", "machines")]),
)


def _panel(i: int, title: str, description: str, unit: str,
           targets: list[tuple[str, str]]) -> dict:
    return {
        "id": i + 1,
        "type": "timeseries",
        "title": title,
        "description": description,
        "datasource": _DS,
        "gridPos": {"h": 8, "w": 12, "x": 12 * (i % 2), "y": 8 * (i // 2)},
        "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
        "options": {"legend": {"displayMode": "list", "placement": "bottom", "showLegend": True},
                    "tooltip": {"mode": "multi", "sort": "none"}},
        "targets": [{"datasource": _DS, "expr": expr, "legendFormat": legend,
                     "refId": chr(ord("A") + j)}
                    for j, (expr, legend) in enumerate(targets)],
    }


def dashboard() -> dict:
    """The Grafana dashboard JSON model: one time series panel per quantity."""
    return {
        "title": "elastic_coded",
        "uid": "elastic-coded",
        "schemaVersion": 39,
        "version": 1,
        "editable": True,
        "tags": ["elastic_coded", "ray"],
        "time": {"from": "now-30m", "to": "now"},
        "refresh": "10s",
        "timezone": "browser",
        "annotations": {"list": []},
        "templating": {"list": [{
            "name": "datasource", "label": "Datasource", "type": "datasource",
            "query": "prometheus", "current": {}, "hide": 0, "refresh": 1, "regex": "",
            "options": [],
        }]},
        "panels": [_panel(i, *p) for i, p in enumerate(_PANELS)],
    }


def render() -> str:
    """:func:`dashboard` as the text written to the file: indent 2, sorted keys."""
    return json.dumps(dashboard(), indent=2, sort_keys=True) + "\n"


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) > 1 or any(a.startswith("-") for a in args):
        print("usage: python -m elastic_coded.runtime.grafana [OUT]", file=sys.stderr)
        return 2
    out = Path(args[0] if args else DEFAULT_OUT)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(render())
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
