"""No module of the library or the benchmarks runs over 450 lines (the issue "Architecture
round 2"): a longer one is split by what its parts do."""

import pathlib

MAX_LINES = 450
ROOT = pathlib.Path(__file__).resolve().parents[2]


def _lines(path: pathlib.Path) -> int:
    with open(path, encoding="utf-8") as fh:
        return sum(1 for _ in fh)


def test_no_module_over_the_limit():
    files = [p for d in ("elastic_coded", "benchmarks") for p in sorted((ROOT / d).rglob("*.py"))]
    assert files
    over = {rel: n for p in files
            if (n := _lines(p)) > MAX_LINES and (rel := p.relative_to(ROOT).as_posix())}
    assert not over, f"modules over {MAX_LINES} lines (split them): " + ", ".join(
        f"{rel} ({n})" for rel, n in sorted(over.items()))
