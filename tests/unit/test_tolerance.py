"""Never a wrong number in the reals, without Ray: the rotation-embedded codes, decoding by
conditioning, and the default tolerance held to the check's a posteriori estimate."""

import itertools
import math
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from elastic_coded.algebra import field
from elastic_coded.algebra.conditioning import best_subset, matrix_conditions
from elastic_coded.algebra.lagrange import UNIT_ROUNDOFF, lagrange_code
from elastic_coded.algebra.verify import DEFAULT_TOLERANCE, check, make_sketch
from elastic_coded.families.usctec import cyclic_placement, plan_step
from elastic_coded.runtime.context import ControllerClient, StepContext
from elastic_coded.runtime.verifying import ToleranceExceeded, Verifier
from elastic_coded.schemes.policies.collect import LagrangeCollector
from elastic_coded.schemes.reference import assemble
from elastic_coded.schemes.registry import step_code
from elastic_coded.schemes.wire import TaskSpec

R = field("real")


# -- the codes ---------------------------------------------------------------------------------
@settings(max_examples=40, deadline=None)
@given(L=st.integers(2, 12), S=st.integers(1, 8), seed=st.integers(0, 2**31),
       points=st.sampled_from(["rotation", "roots-of-unity"]))
def test_every_decode_set_of_the_complex_codes_meets_its_bound(L, S, seed, points):
    """Any L positions decode (MDS) to within the rounding bound, in real arithmetic."""
    rng = np.random.default_rng(seed)
    code = lagrange_code(R, L, S, points)
    assert code.width == 2
    P = tuple(sorted(rng.permutation(L + S)[:L].tolist()))
    A, B = rng.standard_normal((16, 30)), rng.standard_normal((30, 2 * L * 2))
    coded = code.encode(B)
    assert coded.dtype == np.float64 and coded.shape == (L + S, 30, 4)
    Y = np.concatenate(list(code.decode({p: A @ coded[p] for p in P})), axis=1)
    err = float(np.linalg.norm(Y - A @ B))
    assert err <= code.error_bound(P, 30, np.linalg.norm(A), np.linalg.norm(B))
    assert math.isfinite(code.decode_condition(P))


def test_rotation_code_every_pattern_of_a_small_code_decodes():
    """Exhaustively: every one of the C(12, 8) decode sets of the (8, 4) rotation code."""
    code = lagrange_code(R, 8, 4, "rotation")
    rng = np.random.default_rng(0)
    A, B = rng.standard_normal((10, 20)), rng.standard_normal((20, 16))
    coded = code.encode(B)
    H = {p: A @ coded[p] for p in range(12)}
    for P in itertools.combinations(range(12), 8):
        Y = np.concatenate(list(code.decode({p: H[p] for p in P})), axis=1)
        assert np.linalg.norm(Y - A @ B) <= code.error_bound(
            P, 20, np.linalg.norm(A), np.linalg.norm(B)), P


def test_rotation_code_is_the_same_in_every_process():
    """Fixed by (L, S): two builds (the cache cleared between) give the same generator."""
    from elastic_coded.algebra import lagrange

    a = lagrange_code(R, 6, 3, "rotation").encode_matrix.copy()
    lagrange._cached_code.cache_clear()
    assert np.array_equal(lagrange_code(R, 6, 3, "rotation").encode_matrix, a)


def test_complex_code_refuses_odd_column_counts():
    code = lagrange_code(R, 4, 2, "rotation")
    with pytest.raises(ValueError, match=r"B: its 12 columns must be divisible by L=4 times 2"):
        code.encode(np.zeros((3, 12)))


@settings(max_examples=30, deadline=None)
@given(K=st.integers(3, 10), seed=st.integers(0, 2**31), data=st.data())
def test_best_subset_is_the_minimum_and_descent_never_worsens(K, seed, data):
    rng = np.random.default_rng(seed)
    L = data.draw(st.integers(1, K - 1))
    have = sorted(rng.permutation(K)[:data.draw(st.integers(L, K))].tolist())
    E = rng.standard_normal((K, L)) + 1j * rng.standard_normal((K, L))
    cond = lambda P: matrix_conditions(E, P)  # noqa: E731
    val, P = best_subset(cond, have, L)
    every = {c: float(cond(np.asarray([c]))[0]) for c in itertools.combinations(have, L)}
    assert val == pytest.approx(min(every.values()))
    assert set(P) <= set(have) and len(P) == L
    start = tuple(have[:L])
    v2, P2 = best_subset(cond, have, L, start, exhaustive=0)
    assert v2 <= every[start] * (1 + 1e-12) and v2 == pytest.approx(every[P2])


@pytest.mark.parametrize("L, S, r", [(4, 2, 4), (4, 2, 1), (8, 4, 8), (8, 4, 16), (20, 12, 40),
                                     (20, 12, 7), (6, 6, 13)])
def test_step_code_counts_the_width_in_the_reals(L, S, r):
    """The step's code dispatches the fewest products given that a complex code's blocks
    take even column counts; its pad makes the columns fit."""
    Ls, Ss, pad = step_code("usctec", L, S, r, R)
    w = lagrange_code(R, Ls, S).width
    assert (r + pad) % (Ls * w) == 0 and Ss == S

    def cost(l):
        wl = lagrange_code(R, l, S).width
        return (l + S) * wl * -(-r // (wl * l))

    assert cost(Ls) == min(cost(l) for l in range(1, L + 1))
    assert step_code("usctec", L, S, r, "gf(65521)") == step_code("usctec", L, S, r)


# -- a step in-process -------------------------------------------------------------------------
N = 26


def _plan(L, S, rows=28):
    pl = cyclic_placement(rows, [f"m{i}" for i in range(N)], L, S)
    return plan_step(pl, pl.machines, [1.0] * N, L, S)


def _results(plan, code, A, B):
    coded = code.encode(B)
    out = {}
    for pi, piece, grp in plan.iter_pieces():
        a, b = grp.rows
        for pos, m in enumerate(piece.machines):
            out[pi, pos] = (m, TaskSpec("A", grp.rows, pos, None, pi, pos), A[a:b] @ coded[pos])
    return out


def _worst_first(code):
    """Positions in an arrival order whose first L are the code's worst decode."""
    _, P = code.worst_decode_condition(samples=300)
    return list(P) + [p for p in range(code.K) if p not in P]


def _fake(col):
    out = SimpleNamespace(collector=col, gather=SimpleNamespace(failed=()), prep=None)
    cl = StepContext(step=0, F=col.code.field, ctrl=ControllerClient(lambda *args: {}))
    return out, cl


def _ill_conditioned_step(late: bool, patience=None, seed=0):
    """A (12, 12) Chebyshev code (worst decode ~1e10): every piece's first L results are its
    worst pattern; ``late``: the others arrive afterwards too."""
    L, S = 12, 12
    code = lagrange_code(R, L, S, "chebyshev")
    plan = _plan(L, S)
    rng = np.random.default_rng(seed)
    A, B = rng.standard_normal((28, 30)), rng.standard_normal((30, L * 2))
    res = _results(plan, code, A, B)
    col = LagrangeCollector(plan, code, patience)
    order = _worst_first(code)
    for pi in range(len(plan.pieces)):
        for pos in (order if late else order[:L]):
            m, task, H = res[pi, pos]
            col.add(m, task, H)
    return A, B, code, plan, col


def test_the_first_L_of_an_ill_conditioned_code_are_a_wrong_product():
    """What the tolerance guards against: a decode from the worst pattern is far off."""
    A, B, code, plan, col = _ill_conditioned_step(late=False)
    Y = assemble(plan, col.decoded, B.shape[1] // code.L, np.float64)
    assert np.linalg.norm(Y - A @ B) / np.linalg.norm(A @ B) > 1e-8


def test_tolerance_decodes_again_from_the_late_results():
    A, B, code, plan, col = _ill_conditioned_step(late=True)
    Y = assemble(plan, col.decoded, B.shape[1] // code.L, np.float64)
    ver = Verifier(R, "usctec", A, seed=1)
    assert ver.tolerance == DEFAULT_TOLERANCE == 1e-9
    out, cl = _fake(col)
    Yv = ver.verify(cl, B, Y, out)
    v = ver.last
    rel = np.linalg.norm(Yv - A @ B) / np.linalg.norm(A @ B)
    assert rel <= 1e-9 and v.relative_estimated_error <= 1e-9
    assert v.improved and v.verified and v.recomputed == 0
    assert v.condition < 1e6  # the product's condition is now the better sets'


def test_tolerance_raises_when_no_better_results_are_had():
    A, B, code, plan, col = _ill_conditioned_step(late=False)
    Y = assemble(plan, col.decoded, B.shape[1] // code.L, np.float64)
    out, cl = _fake(col)
    ver = Verifier(R, "usctec", A, seed=1)
    with pytest.raises(ToleranceExceeded, match=r"estimated relative error .* \(decode condition "
                                                r".*\) exceeds the tolerance 1e-09") as exc:
        ver.verify(cl, B, Y, out)
    assert exc.value.condition > 1e8 and exc.value.estimate > 1e-9
    # the explicit opt-out returns the product, its estimate reported and close to the truth
    loose = Verifier(R, "usctec", A, seed=1, tolerance=None)
    Yl = loose.verify(cl, B, Y, out)
    true = np.linalg.norm(Yl - A @ B) / np.linalg.norm(Yl)
    assert 0.1 <= loose.last.relative_estimated_error / true <= 10


def test_collector_waits_for_better_results_under_patience():
    """With a patience, a piece whose first L are ill-conditioned does not decode on the L-th
    result; it decodes once a set within the patience is in, or all K are."""
    A, B, code, plan, col = _ill_conditioned_step(late=True, patience=1e5)
    assert col.done and col.waited > 0
    for pi in range(len(plan.pieces)):
        assert code.decode_condition(col.positions[pi]) <= 1e5
    Y = assemble(plan, col.decoded, B.shape[1] // code.L, np.float64)
    assert np.linalg.norm(Y - A @ B) / np.linalg.norm(A @ B) <= 1e-10


def test_collector_settles_on_what_it_has_when_no_more_come():
    A, B, code, plan, col = _ill_conditioned_step(late=False, patience=1e5)
    assert not col.done and not col.decoded  # every piece waits
    col.settle()
    assert col.done


def test_patience_follows_the_tolerance():
    A = np.ones((4, 3))
    assert Verifier(R, "usctec", A).patience == pytest.approx(1e-9 / (100 * UNIT_ROUNDOFF))
    assert Verifier(R, "usctec", A, tolerance=None).patience is None
    assert Verifier(field("gf(65521)"), "usctec", A.astype(np.int64)).patience is None


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**31), rank=st.integers(1, 4),
       size=st.sampled_from([1e-12, 1e-9, 1e-6, 1e-3]))
def test_estimated_error_tracks_the_actual_error(seed, rank, size):
    """residual / sqrt(t) estimates ||E||: within 4x either way (a chi^2_8 tail of ~1e-4)."""
    rng = np.random.default_rng(seed)
    A, B = rng.standard_normal((40, 20)), rng.standard_normal((20, 6))
    Y = A @ B
    E = rng.standard_normal((40, rank)) @ rng.standard_normal((rank, 6))
    E *= size * np.linalg.norm(Y) / np.linalg.norm(E)
    res = check(make_sketch(R, A, seed=seed), B, Y + E)
    assert 0.25 <= res.estimated_error() / np.linalg.norm(E) <= 4
