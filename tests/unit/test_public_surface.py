"""The top level exports what a user calls, at most 20 names; the planner stays importable from
its module, and a name the top level exported before still works, with a warning."""

import warnings

import pytest

import elastic_coded

USER_NAMES = {"ElasticCluster", "RunOptions", "VerifyOptions", "RayOptions", "ReportOptions",
              "simulate", "StepReport", "register_policy", "load_churn", "ElasticCodedError"}


def test_the_top_level_is_small_and_holds_what_a_user_calls():
    names = set(elastic_coded.__all__) - {"__version__"}
    assert len(names) <= 20, sorted(names)
    assert USER_NAMES <= names
    assert set(dir(elastic_coded)) == set(elastic_coded.__all__)
    for name in names:
        assert getattr(elastic_coded, name).__name__ == name


def test_every_exported_error_is_an_elastic_coded_error():
    for name in elastic_coded.__all__:
        obj = getattr(elastic_coded, name)
        if isinstance(obj, type) and issubclass(obj, BaseException):
            assert issubclass(obj, elastic_coded.ElasticCodedError), name


@pytest.mark.parametrize("name,module", [("plan_step", "elastic_coded.families.usctec"),
                                         ("Placement", "elastic_coded.schemes.plan"),
                                         ("OptionError", "elastic_coded.options")])
def test_a_moved_name_warns_with_its_module_and_is_the_same_object(name, module):
    import importlib

    elastic_coded.__dict__.pop(name, None)  # as on first use
    with pytest.warns(DeprecationWarning, match=f"import it from {module}"):
        value = getattr(elastic_coded, name)
    assert value is getattr(importlib.import_module(module), name)
    assert name not in dir(elastic_coded)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert getattr(elastic_coded, name) is value  # kept: no second warning


def test_an_unknown_name_is_an_attribute_error():
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        elastic_coded.nope  # noqa: B018


def test_a_flat_keyword_warns_once_with_its_new_spelling(monkeypatch):
    from elastic_coded import options

    monkeypatch.setattr(options, "_WARNED", set())
    with pytest.warns(DeprecationWarning) as seen:
        groups, rest = options.split_flat({}, {"time_scale": 0.25, "mode": "x"})
        options.split_flat({}, {"time_scale": 0.5})
    assert [str(w.message) for w in seen] == [
        "time_scale=: a flat keyword, kept for old code; give it as "
        "run=RunOptions(time_scale=...) or run={'time_scale': ...}"]
    assert groups["run"].time_scale == 0.25 and rest == {"mode": "x"}
