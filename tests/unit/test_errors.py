"""The package's exceptions: one base, the built-in bases they always had, pickling with their
fields, and a storage shortfall told by its type (the repair's S fallback reads no message)."""

import pickle

import pytest

import elastic_coded as ec
from elastic_coded import errors
from elastic_coded.families.usctec import cyclic_placement
from elastic_coded.families.usctec._repair import repair_placement

BUILTIN = {"ConfigError": ValueError, "PlanError": ValueError, "BudgetError": ValueError,
           "ShortOfMachines": ValueError, "StepFailed": RuntimeError,
           "VerificationError": RuntimeError, "ToleranceExceeded": RuntimeError}


@pytest.mark.parametrize("name", sorted(BUILTIN))
def test_every_error_is_exported_under_one_base_and_keeps_its_builtin_base(name):
    cls = getattr(errors, name)
    if name in ec.__all__:  # the top level exports the ones a user catches
        assert getattr(ec, name) is cls
    assert issubclass(cls, ec.ElasticCodedError) and issubclass(cls, BUILTIN[name])


def test_old_import_paths_give_the_same_classes():
    from elastic_coded.config import ConfigError
    from elastic_coded.runtime.verifying import ToleranceExceeded, VerificationError
    from elastic_coded.schemes.plan import PlanError, ShortOfMachines

    assert (ConfigError, PlanError, ShortOfMachines, VerificationError, ToleranceExceeded) == (
        ec.ConfigError, ec.PlanError, ec.ShortOfMachines, ec.VerificationError,
        ec.ToleranceExceeded)


@pytest.mark.parametrize("exc, fields", [
    (errors.ShortOfMachines("machines: 2 present", 1), {"S_max": 1}),
    (errors.VerificationError("step 3: failed", ("m1", "m2")), {"caught": ("m1", "m2")}),
    (errors.ToleranceExceeded("step 4: too far", 1e12, 3e-6),
     {"condition": 1e12, "estimate": 3e-6}),
    (errors.StepFailed("step: results ran out"), {}),
])
def test_errors_pickle_with_their_fields(exc, fields):
    back = pickle.loads(pickle.dumps(exc))
    assert type(back) is type(exc) and str(back) == str(exc)
    for k, v in fields.items():
        assert getattr(back, k) == v


def test_a_storage_shortfall_is_a_budget_error():
    """Four machines at 0.9 hold every row three times; once one leaves, the three left (36 rows
    each of 40) cannot: L+S = 3 is a BudgetError (the controller then tries a lower S), and
    L+S = 2 fits."""
    pl = cyclic_placement(40, ["a", "b", "c", "d"], 2, 1, budgets=0.9)
    with pytest.raises(errors.BudgetError, match="budgets"):
        repair_placement(pl, ["a", "b", "c"], 2, 1)
    with pytest.raises(errors.BudgetError):
        cyclic_placement(40, ["a", "b", "c", "d"], 2, 1, budgets=0.5)
    new, _ = repair_placement(pl, ["a", "b", "c"], 2, 0)
    assert all(len(b.holders) >= 2 for b in new.blocks)


def test_bad_budget_input_is_not_a_budget_error():
    """A malformed budget is a plain input error, not a shortfall a lower S could fix."""
    with pytest.raises(ValueError, match=r"must lie in \[0, 1\]") as info:
        cyclic_placement(40, ["a", "b", "c", "d"], 2, 1, budgets=[0.9, 0.9, 0.9, 1.5])
    assert not isinstance(info.value, errors.BudgetError)
