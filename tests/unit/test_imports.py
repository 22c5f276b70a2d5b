"""The package's import graph: no cycles (counting imports inside functions too), and the
step executors and the verifier never reach the cluster."""

import ast
import pathlib

import elastic_coded

ROOT = pathlib.Path(elastic_coded.__file__).parent
PKG = "elastic_coded"


def _modules() -> dict:
    out = {}
    for p in ROOT.rglob("*.py"):
        parts = [PKG, *p.relative_to(ROOT).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = p
    return out


def _graph() -> dict:
    mods = _modules()
    G = {m: set() for m in mods}
    for m, p in mods.items():
        base = m.split(".") if p.name == "__init__.py" else m.split(".")[:-1]
        for n in ast.walk(ast.parse(p.read_text())):
            if isinstance(n, ast.ImportFrom):
                pre = base[:len(base) - n.level + 1] if n.level else []
                mod = ".".join(pre + ([n.module] if n.module else []))
                for a in n.names:
                    sub = f"{mod}.{a.name}"
                    G[m].add(sub if sub in mods else mod)
            elif isinstance(n, ast.Import):
                G[m].update(a.name for a in n.names)
        G[m] = {t for t in G[m] if t in mods and t != m}
    return G


def _cycles(G: dict) -> list:
    """Strongly connected components of more than one module (Tarjan's algorithm)."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(G[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(G):
        if v not in index:
            visit(v)
    return out


def _reach(G: dict, start: str) -> set:
    seen, todo = set(), [start]
    while todo:
        for w in G[todo.pop()] - seen:
            seen.add(w)
            todo.append(w)
    return seen


def test_the_package_has_no_import_cycles():
    assert _cycles(_graph()) == []


def test_the_cycle_finder_finds_a_cycle():
    G = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _cycles(G) == [["a", "b", "c"]]


def test_executors_and_verifier_never_reach_the_cluster():
    G = _graph()
    fam = f"{PKG}.families."
    steps = [m for m in G if m.startswith(f"{PKG}.runtime.executors") or
             m.startswith(f"{PKG}.runtime.verif") or m == f"{PKG}.runtime.context" or
             (m.startswith(fam) and m.rpartition(".")[2].startswith(("executor", "verify",
                                                                      "repair")))]
    assert len(steps) >= 12
    for m in steps:
        assert f"{PKG}.runtime.cluster" not in _reach(G, m), m
