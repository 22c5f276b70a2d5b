"""Every exception the package raises on purpose is an ElasticCodedError (read from the source:
each ``raise`` statement of every module, resolved in that module's namespace)."""

import ast
import builtins
import importlib
import pathlib

import numpy as np
import pytest

import elastic_coded
from elastic_coded import errors
from elastic_coded.errors import ElasticCodedError

PKG = pathlib.Path(elastic_coded.__file__).parent

ALLOWED = {
    # a module's or a proxy's __getattr__ must raise AttributeError for Python's protocol
    ("_lazy.py", "AttributeError"), ("runtime/hosting.py", "AttributeError"),
    # reads as Ray's own actor death, so that a dead machine's call is handled as one
    ("runtime/hosting.py", "MachineDied"),
    # Ctrl-C during a job: a KeyboardInterrupt carrying the results so far
    ("jobs.py", "JobInterrupted"),
}


def _raised(tree: ast.AST):
    """``(line, dotted name)`` of each ``raise X`` / ``raise X(...)`` naming a class."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Raise) and node.exc is not None:
            exc = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
            parts = []
            while isinstance(exc, ast.Attribute):
                parts.append(exc.attr)
                exc = exc.value
            if isinstance(exc, ast.Name):
                yield node.lineno, ".".join([exc.id, *reversed(parts)])


def _resolve(module, dotted: str):
    head = dotted.split(".")[0]
    obj = vars(module).get(head, getattr(builtins, head, None))
    for part in dotted.split(".")[1:]:
        obj = getattr(obj, part, None)
    return obj


def _modules():
    for path in sorted(PKG.rglob("*.py")):
        rel = path.relative_to(PKG).as_posix()
        name = "elastic_coded." + rel[:-3].replace("/", ".").removesuffix(".__init__")
        yield rel, name, path


@pytest.mark.parametrize("rel,name,path", list(_modules()), ids=lambda v: str(v))
def test_every_raise_is_an_elastic_coded_error(rel, name, path):
    module = importlib.import_module(name.removesuffix(".__init__"))
    bad = []
    for line, dotted in _raised(ast.parse(path.read_text())):
        if not dotted.split(".")[-1][:1].isupper():
            continue  # a variable holding a caught exception, raised again
        obj = _resolve(module, dotted)
        if (rel, dotted) in ALLOWED:
            continue
        if not (isinstance(obj, type) and issubclass(obj, ElasticCodedError)):
            bad.append(f"{rel}:{line}: raise {dotted}")
    assert not bad, "raised on purpose, not an ElasticCodedError:\n" + "\n".join(bad)


def test_the_contract_test_sees_a_builtin_raise():
    """The check above fails on a module that raises a builtin."""
    tree = ast.parse("def f(x):\n    if x:\n        raise ValueError('x')\n    raise err\n")
    assert sorted(d for _, d in _raised(tree)) == ["ValueError", "err"]
    assert not issubclass(_resolve(errors, "ValueError"), ElasticCodedError)


def test_each_error_keeps_its_builtin_base():
    """``except ValueError`` (and the other builtins) still catch what they caught before."""
    for cls, base in ((errors.ArgumentError, ValueError), (errors.ArgumentTypeError, TypeError),
                      (errors.Unsupported, NotImplementedError),
                      (errors.InternalError, RuntimeError), (errors.ClusterError, RuntimeError),
                      (errors.Unreachable, ConnectionError),
                      (errors.MissingDependency, ImportError),
                      (errors.NotInvertible, ZeroDivisionError), (errors.NotStored, KeyError),
                      (errors.SingularMatrix, np.linalg.LinAlgError),
                      (errors.ConfigError, ValueError), (errors.PlanError, ValueError),
                      (errors.StepFailed, RuntimeError)):
        assert issubclass(cls, ElasticCodedError) and issubclass(cls, base), cls
    assert str(errors.NotStored("machine m0 does not store rows 0:4 of A")) == \
        "machine m0 does not store rows 0:4 of A"


def test_every_exception_class_of_the_package_is_an_elastic_coded_error():
    bad = []
    for _rel, name, _ in _modules():
        module = importlib.import_module(name)
        for attr, obj in vars(module).items():
            if (isinstance(obj, type) and issubclass(obj, BaseException)
                    and obj.__module__ == module.__name__
                    and not issubclass(obj, ElasticCodedError)
                    and attr not in ("MachineDied", "JobInterrupted")):  # see ALLOWED
                bad.append(f"{name}.{attr}")
    assert not bad, bad
