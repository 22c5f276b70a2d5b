"""``simulate`` takes ElasticCluster's option groups (``run=``, ``options=``): the same runs as
the flat parameters they set, the runtime's meaning of each field, and clear refusals of what
only a Ray cluster has and of a setting given twice."""

import numpy as np
import pytest

from elastic_coded.errors import ElasticCodedError
from elastic_coded.families.unified.policy import UnifiedOptions
from elastic_coded.families.usctec.pull import PullOptions
from elastic_coded.options import OptionError, RunOptions
from elastic_coded.sim import IIDStragglers, simulate

POLICIES = ("usctec", "usctec-pull", "dynamic")


def _sim(**kw):
    return simulate(12, 4, L=2, S=1, policies=POLICIES, baseline=None, design_samples=2,
                    delays=IIDStragglers(p=0.2, factor=4), **kw)


def _same(a, b) -> None:
    for p in POLICIES:
        assert np.array_equal(a.times[p], b.times[p]), p


def test_run_options_set_the_same_run_as_the_flat_parameters():
    run = RunOptions(time_scale=2.0, seed=5, storage=0.5, learn_speeds=True, deadline=3.0)
    flat = _sim(time_scale=2.0, seed=5, storage=0.5, learn_speeds=True, deadline=3.0)
    _same(_sim(run=run), flat)
    _same(_sim(run={"time_scale": 2.0, "seed": 5, "storage": 0.5}), flat)  # a mapping: the
    # runtime's defaults for the rest (speeds learnt, deadline 3.0)
    other = _sim(time_scale=2.0, seed=6, storage=0.5, learn_speeds=True, deadline=3.0)
    assert any(not np.array_equal(other.times[p], flat.times[p]) for p in POLICIES)


def test_policy_options_are_routed_by_their_type():
    opts = PullOptions(units=3, depth=1)
    _same(_sim(options=opts), _sim(pull_options=opts))
    _same(_sim(options=[opts]), _sim(pull_options=opts))
    with pytest.raises(ElasticCodedError, match=r"^unified_options: given, but 'unified' is not"):
        _sim(options=[opts, UnifiedOptions()])  # as if given flat: checked the same way
    assert not np.array_equal(_sim(options=opts).times["usctec-pull"],
                              _sim().times["usctec-pull"])


@pytest.mark.parametrize("kw, match", [
    ({"run": RunOptions()}, r"^run\.time_scale: 0\.0 must be > 0 in the simulator"),
    ({"run": RunOptions(time_scale=1.0, allow_lower_S=True)}, r"^run\.allow_lower_S: True is"),
    ({"run": RunOptions(time_scale=1.0, transpose=True)}, r"^run\.transpose: True is"),
    ({"run": RunOptions(time_scale=1.0, placement="cyclic")}, r"^run\.placement: 'cyclic'"),
    ({"run": {"time_scale": 1.0, "speed": 2}}, r"^run: .* has unknown keys \['speed'\]"),
    ({"run": RunOptions(time_scale=1.0), "seed": 4}, r"^seed: 4 is set twice: also by run="),
    ({"run": RunOptions(time_scale=1.0), "time_scale": 2.0}, r"^time_scale: 2\.0 is set twice"),
    ({"options": PullOptions(), "pull_options": PullOptions(depth=1)},
     r"^options: its PullOptions is set twice"),
    ({"options": [PullOptions(), PullOptions()]}, r"^options: two PullOptions values"),
    ({"options": 3}, r"^options: 3 is not a policy's options"),
    ({"options": {"unified": UnifiedOptions()}, "family_options": {"hetero": None}},
     r"^options: a mapping by family name is family_options="),
])
def test_bad_groups_are_refused_naming_the_setting(kw, match):
    with pytest.raises(ElasticCodedError, match=match):
        _sim(**kw)


def test_a_run_option_refusal_is_an_option_error_as_the_clusters_is():
    with pytest.raises(OptionError) as exc:
        _sim(run=RunOptions(time_scale=1.0, chunk_rows=10))
    assert exc.value.key == "run.chunk_rows" and exc.value.value == 10
