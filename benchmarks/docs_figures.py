"""``python -m benchmarks docs``: the docs' figures from the results files, not typed.

A doc marks where a results table goes::

    <!-- results: two_level.md -->
    (what the command writes here)
    <!-- /results -->

and the command fills every such block with that results file (``benchmarks/results/NAME``)
less its title line.  ``--check`` changes nothing and fails (exit 1) naming the docs whose
blocks differ from their results files (a test runs it, so a rerun benchmark whose docs were
not regenerated is caught).
"""

from __future__ import annotations

import os
import re

BLOCK = re.compile(r"(<!-- results: (?P<name>[\w.-]+\.md) -->\n)(?P<body>.*?)(<!-- /results -->)",
                   re.S)


def _table(results: str, name: str) -> str:
    path = os.path.join(results, name)
    if not os.path.exists(path):
        raise FileNotFoundError(f"results: {name} is not in {results} (run its benchmark)")
    with open(path) as fh:
        lines = fh.read().splitlines()
    if lines and lines[0].startswith("# "):   # the results file's own title
        lines = lines[1:]
    return "\n".join(lines).strip("\n") + "\n"


def render(text: str, results: str) -> str:
    """``text`` with every results block filled from ``results``."""
    return BLOCK.sub(lambda m: m.group(1) + _table(results, m.group("name")) + m.group(4), text)


def update(root: str, results: str, check: bool = False) -> list[str]:
    """Fill the results blocks of ``README.md`` and ``docs/*.md`` under ``root``; returns the
    docs that changed (with ``check``: that would change, none written)."""
    docs = [os.path.join(root, "README.md")] + sorted(
        os.path.join(root, "docs", n) for n in os.listdir(os.path.join(root, "docs"))
        if n.endswith(".md"))
    changed = []
    for path in docs:
        with open(path) as fh:
            text = fh.read()
        new = render(text, results)
        if new != text:
            changed.append(os.path.relpath(path, root))
            if not check:
                with open(path, "w") as fh:
                    fh.write(new)
    return changed
