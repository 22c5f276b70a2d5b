"""Verified decoding without Ray: a USCTEC step's results filed into its collector (some
perturbed), then the driver's verifier checks, locates and repairs; corrupt churn events."""

from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from elastic_coded.algebra import field
from elastic_coded.algebra.lagrange import lagrange_code
from elastic_coded.churn import parse_churn
from elastic_coded.families.usctec import cyclic_placement, plan_step
from elastic_coded.runtime.context import ControllerClient, StepContext
from elastic_coded.runtime.verifying import ToleranceExceeded, VerificationError, Verifier
from elastic_coded.schemes.policies.collect import LagrangeCollector
from elastic_coded.schemes.reference import assemble
from elastic_coded.schemes.wire import TaskSpec

F = field("gf(65537)")
L, S, N = 2, 2, 6


def _step(F, A, B, liars: dict, late: bool = True):
    """Run a step in-process: ``liars[(piece, position)]`` perturbs that result; every result
    is filed (``late``: those after the decode too).  Returns ``(Y, outcome, cluster)``."""
    pl = cyclic_placement(A.shape[0], [f"m{i}" for i in range(N)], L, S)
    plan = plan_step(pl, pl.machines, [1.0] * N, L, S)
    code = lagrange_code(F, L, S)
    coded = code.encode(B)
    col = LagrangeCollector(plan, code)
    for pi, piece, grp in plan.iter_pieces():
        for pos, m in enumerate(piece.machines):
            if not late and pi in col.decoded:
                break
            a, b = grp.rows
            H = F.matmul(A[a:b], coded[pos] if piece.cols is None else
                         coded[pos][:, piece.cols[0]:piece.cols[1]])
            if (pi, pos) in liars:
                lie = liars[(pi, pos)]
                H = F.add(H, lie(H.shape)) if F.exact else H + lie(H.shape)
            col.add(m, TaskSpec("A", grp.rows, pos, piece.cols, pi, pos), H)
    Y = assemble(plan, col.decoded, B.shape[1] // L, F.dtype)
    out = SimpleNamespace(collector=col, gather=SimpleNamespace(failed=()), prep=None)
    cl = StepContext(step=0, F=F, ctrl=ControllerClient(lambda *args: {}))
    return Y, out, cl


def _bump(F, rng):
    def perturb(shape):
        E = np.zeros(shape, dtype=F.dtype)
        E[tuple(int(rng.integers(n)) for n in shape)] = 1 if F.exact else 1e-6
        return E
    return perturb


@settings(max_examples=25)
@given(seed=st.integers(0, 2**16), n_liars=st.integers(0, S))
def test_gfp_exact_while_up_to_S_positions_per_piece_lie(seed, n_liars):
    rng = np.random.default_rng(seed)
    A, B = F.random((24, 5), rng), F.random((5, 2 * L), rng)
    ver = Verifier(F, "usctec", A, seed=seed)
    pl = cyclic_placement(24, [f"m{i}" for i in range(N)], L, S)
    pieces = len(plan_step(pl, pl.machines, [1.0] * N, L, S).pieces)
    liars = {(pi, int(p)): _bump(F, rng) for pi in range(pieces)
             for p in rng.choice(L + S, size=n_liars, replace=False)}
    Y, out, cl = _step(F, A, B, liars)
    Yv = ver.verify(cl, B, Y, out)
    assert np.array_equal(Yv, F.matmul(A, B))
    wrong_used = {(pi, p) for (pi, p) in liars if p < L}  # the first L positions decode
    assert (len(ver.last.repaired) > 0) == bool(wrong_used)
    assert ver.last.verified is True and ver.last.recomputed == 0


def test_more_liars_than_S_in_a_piece_is_an_error_never_a_wrong_product():
    rng = np.random.default_rng(1)
    A, B = F.random((24, 5), rng), F.random((5, 2 * L), rng)
    ver = Verifier(F, "usctec", A)
    liars = {(0, p): _bump(F, rng) for p in range(S + 1)}
    Y, out, cl = _step(F, A, B, liars)
    with pytest.raises(VerificationError, match=r"piece 0 failed verification and only 1 of the "
                                                r"L = 2 results it needs check") as exc:
        ver.verify(cl, B, Y, out)
    assert exc.value.caught  # the liars are named
    assert not ver.counts  # a failed step's catches never count towards exclude_after


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**16), size=st.sampled_from([1e-15, 1e-13, 1e-11, 1e-9, 1e-6]))
def test_real_field_lies_of_any_size_stay_within_the_verified_bound(seed, size):
    """A lie too small for the check to see passes, and may exceed ``error_bound`` (which
    assumes honest machines); the product is still within ``verified_error_bound``, which is
    never below ``error_bound``."""
    rng = np.random.default_rng(seed)
    A, B = rng.standard_normal((24, 5)), rng.standard_normal((5, 2 * L))
    R = field("real")
    ver = Verifier(R, "usctec", A, seed=seed)

    def lie(shape):
        E = np.zeros(shape)
        E[tuple(int(rng.integers(n)) for n in shape)] = size * float(np.linalg.norm(A @ B))
        return E

    Y, out, cl = _step(R, A, B, {(0, 0): lie, (1, 1): lie})
    Yv = ver.verify(cl, B, Y, out)
    v = ver.last
    assert v.verified and v.verified_error_bound >= v.error_bound > 0
    assert np.linalg.norm(Yv - A @ B) <= v.verified_error_bound
    assert v.relative_verified_error_bound == pytest.approx(
        v.verified_error_bound / np.linalg.norm(Yv))


def test_real_field_repaired_within_its_bound_and_tolerance():
    rng = np.random.default_rng(2)
    A, B = rng.standard_normal((24, 5)), rng.standard_normal((5, 2 * L))
    R = field("real")
    ver = Verifier(R, "usctec", A)
    Y, out, cl = _step(R, A, B, {(0, 0): _bump(R, rng), (1, 1): _bump(R, rng)})
    Yv = ver.verify(cl, B, Y, out)
    v = ver.last
    assert v.repaired == (0, 1) and v.condition >= 1
    assert np.linalg.norm(Yv - A @ B) <= v.error_bound
    assert v.relative_error_bound == pytest.approx(v.error_bound / np.linalg.norm(Yv))
    strict = Verifier(R, "usctec", A, tolerance=1e-14, strict=True)  # estimate ~1e-16
    Y, out, cl = _step(R, A, B, {})
    with pytest.raises(ToleranceExceeded, match=r"relative error bound .* exceeds the tolerance"):
        strict.verify(cl, B, Y, out)
    loose = Verifier(R, "usctec", A, tolerance=1e-30)  # no estimate can meet it
    with pytest.raises(ToleranceExceeded, match=r"estimated relative error .* exceeds the "
                                                r"tolerance 1e-30") as exc:
        loose.verify(cl, B, Y, out)
    assert exc.value.condition >= 1 and exc.value.estimate > 1e-30


def test_without_verification_a_lie_goes_through():
    """What the check buys: with ``verify=False`` the decoded product is simply returned."""
    rng = np.random.default_rng(3)
    A, B = F.random((24, 5), rng), F.random((5, 2 * L), rng)
    Y, out, cl = _step(F, A, B, {(0, 0): _bump(F, rng)})
    Yv = Verifier(F, "usctec", A, verify=False).verify(cl, B, Y, out)
    assert not np.array_equal(Yv, F.matmul(A, B))


@pytest.mark.parametrize("kwargs, match", [
    ({"tolerance": 0}, r"^tolerance: 0 must be a relative error bound > 0"),
    ({"strict": True, "tolerance": None}, r"^strict: True needs verify.tolerance"),
    ({"verify": 1}, r"^verify: 1 must be True or False"),
    ({"exclude_after": 0}, r"^exclude_after: 0 must be an int >= 1"),
])
def test_bad_options(kwargs, match):
    with pytest.raises(ValueError, match=match):
        Verifier(F, "usctec", F.zeros((4, 2)), **kwargs)


def test_corrupt_events_for_a_step_some_steps_or_for_good():
    s = parse_churn({"events": [{"step": 1, "corrupt": "m1"},
                                {"step": 2, "corrupt": ["m2", "m3"], "steps": 2},
                                {"step": 3, "corrupt": "m4", "forever": True}]})
    g = s.generator()
    got = [g.events(t, ["m1", "m2", "m3", "m4"], 3).corrupt for t in range(6)]
    assert got == [(), ("m1",), ("m2", "m3"), ("m2", "m3", "m4"), ("m4",), ("m4",)]
    assert not parse_churn({"events": [{"step": 0, "corrupt": "m1"}]}).events[0].is_empty()


@pytest.mark.parametrize("event, match", [
    ({"step": 1, "corrupt": "m1", "forever": 1}, r"forever: true or false"),
    ({"step": 1, "corrupt": "m1", "forever": True, "steps": 2}, r"'steps' or 'forever: true'"),
    ({"step": 1, "corrupt": "m1", "steps": 0}, r"steps: an int >= 1"),
    ({"step": 1, "corrupt": "m1", "factor": 2}, r"unknown keys \['factor'\]"),
    ({"step": 1, "slow": "m1", "forever": True}, r"unknown keys \['forever'\]"),
])
def test_bad_corrupt_events_name_the_key(event, match):
    with pytest.raises(ValueError, match=match):
        parse_churn({"events": [event]})


def test_simulator_costs_lies_and_excludes_a_repeat_liar():
    from elastic_coded.sim import make_trace, simulate

    churn = {"events": [{"step": 2, "corrupt": "m1"},
                        {"step": 4, "corrupt": "m3", "forever": True}]}
    tr = make_trace(10, 8, 2, 1, churn=churn)
    assert tr.corrupt[2] == ("m1",) and tr.corrupt[4] == tr.corrupt[5] == ("m3",)
    assert tr.left[6] == ("m3",) and "m3" not in tr.present(6) and "m1" in tr.present(7)
    assert tr.counts()["corrupt"] == 3
    lying = simulate(trace=tr, L=2, S=1, policies=("uncoded", "usctec"))
    honest = simulate(10, 8, L=2, S=1, policies=("uncoded", "usctec"))
    # a lie is paid after the decode, as the runtime's check finds and repairs it
    # (sim/lagrange_lies.py): pieces repaired, liars caught; an honest run records neither
    got = lying.details["usctec"]
    assert got["repairs"].sum() > 0 and got["caught"].sum() == 3
    assert "repairs" not in honest.details["usctec"]
    assert lying.summary["usctec"]["mean"] >= honest.summary["usctec"]["mean"]


def _unified_run(R, A, X, K, mu, q, fastest):
    """An honest unified step in-process, and the :class:`UnifiedRun` the runtime records."""
    from elastic_coded.families.unified import run_in_process
    from elastic_coded.families.unified.policy import UnifiedStorage
    from elastic_coded.families.unified.verify import UnifiedRun

    res = run_in_process(A, X, K, mu, q, R, fastest=fastest)
    st_ = UnifiedStorage(res.design, tuple(f"m{k}" for k in range(K)), 0, A.shape[0],
                         X.shape[1])
    return res.outputs, UnifiedRun(st_, res.plan, tuple(sorted(fastest)))


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 10 ** 6), fastest=st.sampled_from([(0, 1, 2, 3), (2, 3, 4, 5),
                                                              (0, 2, 3, 5)]))
def test_unified_real_steps_carry_the_reduce_condition_and_a_bound_they_meet(seed, fastest):
    """The bound comes from the Reduce's decodes (the largest solve condition over the row
    sets the servers of Q decode from): an honest step is accepted and its true error is
    within the bound; a product wrong by far more than the bound fails the check."""
    from elastic_coded.algebra.verify import check
    from elastic_coded.families.unified import decode_condition, reduce_groups

    rng = np.random.default_rng(seed)
    R = field("real")
    A = rng.standard_normal((60, 12))
    X = rng.standard_normal((12, 4))
    Y, run = _unified_run(R, A, X, 6, "1/2", 4, fastest)
    d = run.storage.design
    want = max(decode_condition(d, rows)
               for k in fastest for rows in reduce_groups(d, run.plan, k))
    ver = Verifier(R, "unified", A, seed=seed)
    out = SimpleNamespace(collector=run, prep=None)
    got = ver.verify(StepContext(step=0, F=R), X, Y, out)
    v = ver.last
    assert got is Y and v.verified and not v.caught
    assert v.condition == pytest.approx(want) and v.condition >= 1
    assert np.linalg.norm(Y - A @ X) <= v.error_bound
    assert v.relative_error_bound == pytest.approx(v.error_bound / np.linalg.norm(Y))
    bad = Y.copy()
    bad[0, 0] += 1e3 * v.error_bound
    assert not check(ver.sketches[0], X, bad, condition=v.condition,
                     extra_terms=10 * d.decode_size)


def test_unified_real_condition_does_not_grow_with_m():
    """The real storage code is one small code per lane: the Reduce's decodes are lane solves
    of q C(K, r) / K rows whatever m, so the condition over every set Q of fastest servers is
    the same at m = 20 and m = 240, and small (the Reed-Solomon code over all rows reached a
    median of 6.5e7 at m = 240)."""
    import itertools

    from elastic_coded.families.unified.verify import UnifiedChecks

    R = field("real")
    rng = np.random.default_rng(1)
    conds = {}
    for m in (20, 240):
        A = rng.standard_normal((m, 6))
        X = rng.standard_normal((6, 4))
        checks = UnifiedChecks(Verifier(R, "unified", A, seed=0))
        conds[m] = [checks.condition(_unified_run(R, A, X, 6, "1/2", 4, Q)[1])
                    for Q in itertools.combinations(range(6), 4)]
    assert conds[20] == pytest.approx(conds[240]) and max(conds[240]) < 1e3
