"""No module of the package reaches into another object's private attributes: ``x._name`` only
on ``self``, ``cls`` or ``super()``, or on a module imported by ``import`` (the exceptions
below, each with its reason)."""

import ast
import pathlib

import elastic_coded

ROOT = pathlib.Path(elastic_coded.__file__).parent

ATTRIBUTES = {
    "_actor_id": "a Ray actor handle's id has no public accessor; the hosting and gather code "
                 "compare handles by it",
}
"""Private names allowed on any object, and why."""

ACCESSES = {
    ("runtime/operator.py", "cluster._fam"): "A^T's cluster is built from the cluster's own "
                                             "family setup and loaded A (module of its own)",
    ("runtime/operator.py", "cluster._loaded"): "as above",
    ("runtime/tracing.py", "cluster._tracer"): "the handle ElasticCluster.trace returns ends "
                                               "the cluster's trace",
    ("runtime/tracing.py", "self._cluster._tracer"): "as above",
}
"""``(module, expression)`` accesses allowed, and why."""


def _imported_modules(tree: ast.Module) -> set:
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
    return names


def _exempt(value: ast.expr, modules: set) -> bool:
    if isinstance(value, ast.Name):
        return value.id in ("self", "cls") or value.id in modules
    return (isinstance(value, ast.Call) and isinstance(value.func, ast.Name)
            and value.func.id == "super")


def private_accesses(source: str) -> list:
    """``(line, expression)`` of every ``x._name`` in ``source`` on anything but ``self``,
    ``cls``, ``super()`` or an imported module (dunders are not private)."""
    tree = ast.parse(source)
    modules = _imported_modules(tree)
    out = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute) or not node.attr.startswith("_"):
            continue
        if node.attr.startswith("__") and node.attr.endswith("__"):
            continue
        if node.attr in ATTRIBUTES or _exempt(node.value, modules):
            continue
        out.append((node.lineno, ast.unparse(node)))
    return sorted(out)


def test_the_scan_finds_what_it_should():
    src = ("import ray\n"
           "class A:\n"
           "    def f(self, other):\n"
           "        return self._x, other._y, ray._private, super()._z, other.__class__, "
           "self._c._d\n")
    assert private_accesses(src) == [(4, "other._y"), (4, "self._c._d")]


def test_no_module_touches_another_objects_private_attributes():
    found = []
    for path in sorted(ROOT.rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        for line, expr in private_accesses(path.read_text()):
            if (rel, expr) not in ACCESSES:
                found.append(f"{rel}:{line}: {expr}")
    assert not found, "private attributes of other objects: " + "; ".join(found)


def test_every_exception_is_still_needed():
    used = set()
    for path in sorted(ROOT.rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        used.update((rel, expr) for _, expr in private_accesses(path.read_text()))
    assert not set(ACCESSES) - used, f"exceptions no longer needed: {set(ACCESSES) - used}"
