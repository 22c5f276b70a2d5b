"""The field interface: parsing, validation, arithmetic against galois."""

import numpy as np
import pytest

from elastic_coded.algebra import BinaryExtField, PrimeField, RealField, field, is_prime


@pytest.mark.parametrize("spec, expected", [
    ("real", RealField()),
    ("gf(65521)", PrimeField(65521)),
    ("GF(7)", PrimeField(7)),
    ("gfp:13", PrimeField(13)),
    (65521, PrimeField(65521)),
    ("gf(p)", PrimeField(2**31 - 1)),
    ("gf(2^8)", BinaryExtField(8)),
    ("gf2^4", BinaryExtField(4)),
])
def test_field_specs(spec, expected):
    assert field(spec) == expected


def test_is_prime_matches_trial_division():
    def slow(n):
        return n >= 2 and all(n % d for d in range(2, int(n**0.5) + 1))
    assert [n for n in range(2000) if is_prime(n)] == [n for n in range(2000) if slow(n)]
    assert is_prime(2**31 - 1) and not is_prime(2**31 + 1)


@pytest.mark.parametrize("spec, match", [
    ("gf(65520)", "not prime"),
    (2**31 + 11, "above the supported bound"),
    ("complex", "unknown field"),
    ("gf(2^40)", "T"),
])
def test_bad_field_specs(spec, match):
    with pytest.raises(ValueError, match=match):
        field(spec)


def test_values_out_of_range_and_shape_mismatch():
    F = field("gf(7)")
    with pytest.raises(ValueError, match=r"A: values must lie in \[0, 7\)"):
        F.asarray([[1, 7]], "A")
    with pytest.raises(ValueError, match="-1"):
        F.asarray([-1], "B")
    with pytest.raises(TypeError, match="integer"):
        F.asarray([0.5])
    with pytest.raises(ValueError, match="shape mismatch"):
        F.matmul(np.zeros((2, 3), np.int64), np.zeros((2, 3), np.int64))
    with pytest.raises(ValueError, match="finite"):
        field("real").asarray([np.nan], "B")
    with pytest.raises(ValueError, match=r"\[0, 16\)"):
        field("gf(2^4)").asarray([16])


@pytest.mark.parametrize("spec", ["gf(65521)", "gf(2^8)", "gf(2147483647)"])
def test_arithmetic_matches_galois(spec):
    import galois
    F = field(spec)
    G = galois.GF(F.order)
    rng = np.random.default_rng(0)
    a = F.random((6, 5), rng)
    b = F.random((6, 5), rng)
    b[b == 0] = 1
    assert np.array_equal(F.add(a, b), np.asarray(G(a) + G(b)))
    assert np.array_equal(F.sub(a, b), np.asarray(G(a) - G(b)))
    assert np.array_equal(F.mul(a, b), np.asarray(G(a) * G(b)))
    assert np.array_equal(F.div(a, b), np.asarray(G(a) / G(b)))
    assert np.array_equal(F.matmul(a, b.T), np.asarray(G(a) @ G(b).T))
    m = F.random((4, 4), rng) + np.eye(4, dtype=np.int64)
    m %= F.order
    x = F.random((4, 2), rng)
    rhs = F.matmul(m, x)
    if np.linalg.matrix_rank(G(m)) == 4:
        assert np.array_equal(F.solve(m, rhs), x)


def test_inverse_of_zero_raises():
    with pytest.raises(ZeroDivisionError):
        field("gf(7)").inv(np.array([0]))
    with pytest.raises(ZeroDivisionError):
        field("gf(2^4)").inv(np.array([0]))


def test_real_equal_uses_relative_tolerance():
    F = field("real")
    a = np.ones((3, 3))
    assert F.equal(a, a * (1 + 1e-12))
    assert not F.equal(a, a * (1 + 1e-6))
