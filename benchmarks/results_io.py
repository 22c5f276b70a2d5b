"""The benchmarks' shared parts: the command line, Ray, the results files (``NAME.json``, the
data, and ``NAME.md``, its table), markdown tables and plots.

Importing it puts the library's root on ``sys.path`` (a benchmark puts this folder there first,
so that it runs as ``python benchmarks/bench_<name>.py`` as well as from ``python -m
benchmarks``).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
RESULTS = os.path.join(HERE, "results")
for _p in (ROOT, HERE):
    if _p not in sys.path:
        sys.path.insert(0, _p)


# -- the command line, the host, Ray ---------------------------------------------------------------
def parser(doc: str | None, out: str | None = None, quick_help: str | None = None,
           out_help: str | None = None) -> argparse.ArgumentParser:
    """A benchmark's command line: ``--quick`` and ``--out`` (default ``out``); a benchmark adds
    its own flags."""
    ap = argparse.ArgumentParser(description=doc,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help=quick_help)
    ap.add_argument("--out", default=out, help=out_help)
    return ap


def ints(v: str | None) -> tuple | None:
    """``"12,96"`` -> ``(12, 96)``; ``None`` stays ``None``."""
    return tuple(int(x) for x in v.split(",")) if v else None


def machine(*libs: str) -> dict:
    """The host's CPUs and Python, and each of ``libs``' version."""
    out = {"cpus": os.cpu_count(), "python": platform.python_version()}
    for lib in libs:
        out[lib] = __import__(lib).__version__
    return out


def start_ray(num_cpus: int | None = None, fresh: bool = False):
    """An embedded Ray (``num_cpus`` or every CPU); ``fresh``: a new one even if one runs (else
    the one running is kept).  Returns the ``ray`` module."""
    import ray

    if ray.is_initialized():
        if not fresh:
            return ray
        ray.shutdown()
    ray.init(address="local", num_cpus=num_cpus or os.cpu_count(), include_dashboard=False,
             log_to_driver=False)
    return ray


def check_product(Y, A, B) -> None:
    """``Y`` is ``A @ B`` to a relative error of 1e-9 (Frobenius), else AssertionError."""
    err = np.linalg.norm(Y - A @ B) / np.linalg.norm(A @ B)
    if err > 1e-9:
        raise AssertionError(f"wrong product: relative error {err:.2e}")


def stats(t) -> dict:
    """The steps, median, mean and p95 of the step times ``t`` (seconds)."""
    t = np.asarray(t)
    return {"steps": len(t), "median_s": float(np.median(t)), "mean_s": float(t.mean()),
            "p95_s": float(np.percentile(t, 95))}


# -- results files ---------------------------------------------------------------------------------
def write_results(out_dir: str | None, name: str, res: dict, markdown: str) -> None:
    """``NAME.json`` and ``NAME.md`` in ``out_dir`` (default ``benchmarks/results``)."""
    out_dir = out_dir or RESULTS
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, name + ".json"), "w") as fh:
        json.dump(res, fh, indent=1, default=float)
    with open(os.path.join(out_dir, name + ".md"), "w") as fh:
        fh.write(markdown)


def publish(out_dir: str | None, name: str, res: dict, markdown: str, plot=None) -> dict:
    """A benchmark's last act: its results written (:func:`write_results`), its plot drawn
    when ``plot(res, out_dir)`` is given and matplotlib is installed, its table printed.
    Returns ``res``."""
    out_dir = out_dir or RESULTS
    write_results(out_dir, name, res, markdown)
    if plot is not None:
        try:
            plot(res, out_dir)
        except ImportError:
            pass
    print(markdown)
    return res


# -- markdown and plots ----------------------------------------------------------------------------
_ALIGN = {"l": "---", "r": "---:", "c": ":---:"}


def row(cells) -> str:
    """One markdown table row."""
    return "| " + " | ".join(str(c) for c in cells) + " |"


def table(headers, align: str, rows=()) -> list[str]:
    """A markdown table's lines: ``headers`` (a list, or one string of them joined by
    ``" | "``), ``align`` one letter per column (``l``, ``r``, ``c``) or one for every column,
    and ``rows``, each a list of cells."""
    if isinstance(headers, str):
        headers = headers.split(" | ")
    if len(align) == 1:
        align *= len(headers)
    return [row(headers), "|" + "".join(_ALIGN[a] + "|" for a in align)] + [row(r) for r in rows]


def yes(ok) -> str:
    return "yes" if ok else "no"


def pyplot():
    """matplotlib's pyplot on the Agg backend (ImportError without matplotlib)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save(fig, path: str, dpi: int) -> str:
    """``fig`` laid out, written to ``path`` and closed; returns ``path``."""
    import matplotlib.pyplot as plt

    fig.tight_layout()
    fig.savefig(path, dpi=dpi)
    plt.close(fig)
    return path
