"""A fuzz of the public API on live clusters: random shapes, dtypes (strings, complex, objects,
NaN, inf, huge integers), policies, events and option values.  Each call either returns the right
product or raises an ElasticCodedError whose message names the argument; never a builtin or
Ray's own error, and the cluster stays usable (a good call right after is exact)."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from elastic_coded import ElasticCluster, ElasticCodedError
from elastic_coded.algebra.fields import field

pytestmark = pytest.mark.ray

P = 65521
ROWS, COLS = 24, 5
FUZZ = settings(max_examples=40, deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture,
                                       HealthCheck.too_slow])


@pytest.fixture(scope="module")
def clusters(ray_session):
    rng = np.random.default_rng(0)
    A_gf = rng.integers(0, P, (ROWS, COLS))
    A_re = rng.standard_normal((ROWS, COLS))
    gf = ElasticCluster(A_gf, "usctec", 6, L=2, S=1, field=P, run={"storage": 0.75})
    re = ElasticCluster(A_re, "usctec-auto", 6, L=2, S=1, run={"storage": 0.75})
    yield {"gf": (gf, A_gf), "real": (re, A_re)}
    gf.shutdown()
    re.shutdown()


def _want(kind, A, B):
    if kind == "gf":
        F = field(P)
        B = np.asarray(B)
        want = F.matmul(F.asarray(A), F.asarray(B.reshape(B.shape[0], -1)))  # x: one column
        return want.reshape(-1) if B.ndim == 1 else want
    return A @ B


def _exact(kind, Y, want):
    Y = np.asarray(Y).reshape(want.shape)
    if kind == "gf":
        return np.array_equal(Y, want)
    return np.allclose(Y, want, rtol=1e-8, atol=1e-8 * max(1.0, float(np.abs(want).max())))


def _good_after(kind, c, A):
    B = np.random.default_rng(9).integers(0, 50, (COLS, 2))
    assert _exact(kind, c.multiply(B), _want(kind, A, B))


SPECIALS = [np.nan, np.inf, -np.inf, 2.0 ** 70, -(2 ** 65), 1e308]


@st.composite
def inputs(draw):
    rows = draw(st.sampled_from([COLS, COLS, COLS, 0, 1, COLS - 1, COLS + 1]))
    ndim = draw(st.sampled_from([1, 2, 2, 2, 3]))
    shape = (rows,) if ndim == 1 else (rows, draw(st.integers(1, 3))) if ndim == 2 else \
        (rows, 2, 2)
    kind = draw(st.sampled_from(["int", "float", "special", "str", "complex", "object",
                                 "bool", "list", "huge"]))
    rng = np.random.default_rng(draw(st.integers(0, 2 ** 16)))
    n = int(np.prod(shape))
    if kind == "int":
        return rng.integers(-100, 100, shape)
    if kind == "float":
        return rng.standard_normal(shape)
    if kind == "special":
        x = rng.standard_normal(n)
        if n:
            x[rng.integers(0, n)] = draw(st.sampled_from(SPECIALS))
        return x.reshape(shape)
    if kind == "str":
        return np.array(["x"] * n, dtype=object if draw(st.booleans()) else str).reshape(shape)
    if kind == "complex":
        return (rng.standard_normal(n) + 1j).reshape(shape)
    if kind == "object":
        return np.array([object()] * n, dtype=object).reshape(shape)
    if kind == "bool":
        return rng.integers(0, 2, shape).astype(bool)
    if kind == "huge":
        return np.array([2 ** 80] * n, dtype=object).reshape(shape)
    return rng.integers(0, 9, shape).tolist()


def _is_valid(kind, B, A=None) -> bool:
    """What the contract accepts: a 1-D or 2-D array of COLS rows, with at least one column, of
    integers in [0, p) (GF) or finite real numbers (reals) whose product with ``A`` does not
    overflow float64 (that is refused by name: "the product overflows")."""
    try:
        arr = np.asarray(B)
    except Exception:
        return False
    if arr.ndim not in (1, 2) or arr.shape[0] != COLS or (arr.ndim == 2 and arr.shape[1] == 0):
        return False
    if kind == "gf":  # the field's elements: integers in [0, p)
        return arr.dtype.kind in "iu" and bool(((arr >= 0) & (arr < P)).all())
    if not (arr.dtype.kind in "iuf" and bool(np.isfinite(arr).all())):
        return False
    with np.errstate(all="ignore"):
        return A is None or bool(np.isfinite(np.asarray(A) @ arr.astype(np.float64)).all())


@FUZZ
@given(which=st.sampled_from(["gf", "real"]), B=inputs(), policy=st.sampled_from(
    [None, None, "usctec", "usctec-auto", "dynamic", "nope", "unified", 3]))
def test_any_input_gives_the_product_or_a_named_refusal(clusters, which, B, policy):
    c, A = clusters[which]
    valid_policy = policy in (None, "usctec", "usctec-auto", "dynamic")
    try:
        Y = c.multiply(B, policy=policy)
    except ElasticCodedError as exc:
        msg = str(exc)
        assert not (valid_policy and _is_valid(which, B, A)), msg  # a good call was refused
        assert ("policy" in msg) if not valid_policy else ("B" in msg), msg
    else:
        assert valid_policy, f"policy {policy!r} was accepted"
        arr = np.asarray(B)
        if arr.dtype.kind == "b":  # booleans read as 0/1
            arr = arr.astype(np.int64)
        assert _exact(which, Y, _want(which, A, arr)), (which, B)
    _good_after(which, c, A)


EVENT = st.one_of(
    st.fixed_dictionaries({"leave": st.sampled_from(["m99", "", 3, ["m0", "m0"]])}),
    st.fixed_dictionaries({"crash": st.sampled_from(["m98", None, ["m97"]])}),
    st.fixed_dictionaries({"join": st.sampled_from([[{"id": "j"}, {"id": "j"}], [{"id": "m1"}],
                                                    [{"id": "k", "speed": -2}], "x"])}),
    st.fixed_dictionaries({"slow": st.sampled_from([["m1"], "m1"]),
                           "factor": st.sampled_from([-1, 0, "x", float("nan")])}),
    st.fixed_dictionaries({"nonsense": st.just(1)}),
    st.sampled_from([3, "leave", ["m1"]]),
)


@FUZZ
@given(ev=EVENT)
def test_a_bad_event_is_refused_and_changes_nothing(clusters, ev):
    c, A = clusters["gf"]
    present = c.machines()
    B = np.random.default_rng(3).integers(0, P, (COLS, 1))
    try:
        Y = c.multiply(B, events=ev)
    except ElasticCodedError as exc:
        assert c.machines() == present, str(exc)
    else:  # an event that was in fact valid: the product is exact anyway
        assert _exact("gf", Y, _want("gf", A, B))
        c.add_machines([{"id": m, "speed": 1.0, "storage": 0.75}
                        for m in present if m not in c.machines()])
    _good_after("gf", c, A)


OPTION = st.sampled_from([
    ("L", 0), ("L", -1), ("L", 2.5), ("L", "2"), ("S", -1), ("S", None), ("machines", 0),
    ("machines", -3), ("machines", "six"), ("field", 4), ("field", "gf(x)"), ("field", 2.0),
    ("policy", "nope"), ("policy", None), ("run", {"time_scale": -1}), ("run", {"nope": 1}),
    ("run", 5), ("verify", "yes"), ("verify", {"tolerance": -1}), ("ray", {"num_cpus": -2}),
    ("report", {"window": 0}), ("run", {"storage": 2.0}), ("run", {"storage": 0.0}),
])


@settings(max_examples=23, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(option=OPTION)
def test_a_bad_option_is_refused_at_construction_by_name(ray_session, option):
    key, value = option
    args = {"policy": "usctec", "machines": 4, "L": 2, "S": 1, key: value}
    A = np.ones((12, 3))
    with pytest.raises(ElasticCodedError) as info:
        ElasticCluster(A, args.pop("policy"), args.pop("machines"), **args).shutdown()
    named = {"run": "storage" if "storage" in str(value) else "run"}.get(key, key)
    msg = str(info.value)
    assert named in msg or (isinstance(value, dict) and any(k in msg for k in value)), msg
