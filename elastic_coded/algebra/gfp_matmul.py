"""Exact matrix multiplication over GF(p), ``2 <= p <= 2^31 - 1``, on float64 BLAS.

The approach is the classical one of BLAS-based finite-field linear algebra (FFLAS-FFPACK:
Dumas, Giorgi & Pernet, "Dense linear algebra over word-size prime fields: the FFLAS and FFPACK
packages", ACM TOMS 35(3), 2008): a float64 ``dgemm`` over integers is *exact* while every
partial sum stays below ``2^53``, so the inner dimension is cut into chunks short enough for
that, each chunk is one ``dgemm``, and the modular reduction is delayed to once per chunk.

**One-limb path** (small ``p``).  A chunk of ``kc`` inner indices sums at most ``kc (p-1)^2``;
with the running residue added, the value handed to the reduction must stay below ``2^51`` (see
:func:`_mod`), so ``kc = (2^51 - p) // (p-1)^2``: 2048 or more for ``p < 2^20``, about ``2^19``
for ``p = 65521``.  When the inner dimension fits in one chunk the product is one ``dgemm`` and
one reduction pass.

**Two-limb path** (large ``p``).  Split ``a = a1 2^16 + a0`` (``a0 < 2^16``, ``a1 < 2^15``) and
likewise ``b``.  Karatsuba needs three limb products ``P0 = A0 B0``, ``P2 = A1 B1`` and
``P1 = (A0 + A1)(B0 + B1)``; ``A0 B1 + A1 B0 = P1 - P0 - P2`` exactly.  The result
``P2 2^32 + (P1 - P0 - P2) 2^16 + P0`` is folded Horner-style, reducing after each step, so no
value exceeds ``2^51`` (chunks of 218462 for ``p = 2^31 - 1``) and no integer arithmetic can
overflow.

**Cut-over** (measured by ``benchmarks/bench_gfp_matmul.py``).  One limb when it needs at most
four chunks or its chunks hold at least ``_MIN_CHUNK = 64`` indices (``p`` up to about
``2^22.5``); otherwise three ``dgemm`` calls beat a ``dgemm`` plus a reduction pass every few
inner indices (at 32-index chunks, ``p ~ 2^23``, the two are even).  Products of at most
``_TINY`` multiply-adds whose sums fit in int64 skip BLAS (one int64 ``matmul`` and one ``%``
cost less than the calls around a ``dgemm``), and small one-chunk products skip the row blocks
and the ``2^52`` encoding below.

**Reduction.**  For an integer-valued float ``0 <= x < 2^51``,
``x mod p = x - p floor((x + 1/2) fl(1/p))`` exactly (no correction step; see :func:`_mod`).  It
runs over cache-sized blocks, five ufunc calls per block.  Inner index 0 of every product carries
the constant ``2^52`` (a column of ones in ``A``, a row of ``2^52`` in ``B``), so sums arrive as
``x + 2^52`` and the residue as ``r + 2^52``, whose bit pattern is the int64
``0x4330000000000000 + r``: the float-to-int conversion is one integer subtraction, in place.

**Memory.**  ``A`` is converted (and split) a row block at a time; the float copies of ``B``,
the row block, the limb products and the scratch space share one workspace, kept per thread
between calls (up to 64 MiB), and the result is written into the output array itself (a float
view of it).  Fresh pages cost a page fault each, which on a virtual machine is as slow as several
passes over the data.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import cast

import numpy as np

from ..errors import ArgumentError

__all__ = ["MAX_PRIME", "matmul_mod", "max_chunk"]

MAX_PRIME = 2**31 - 1
_F32_EXACT = 2**24  # float32 holds every integer up to 2^24 exactly

_LIMIT = 2**51              # _mod is exact for integer-valued 0 <= x < _LIMIT
_MAGIC = float(2**52)       # the float r + 2^52 has the int64 bit pattern _MAGIC_BITS + r
_MAGIC_BITS = 0x4330000000000000
_SHIFT = 16                 # limb width of the two-limb path
_BLOCK = 1 << 16            # elements per block of the reduction (512 KiB of float64)
_ROW_ELEMS = 1 << 21        # elements of converted rows of ``a`` per block (16 MiB)
_MIN_CHUNK = 64             # one-limb chunks shorter than this lose to the two-limb path
_TINY = 1 << 14             # at most this many multiply-adds: plain int64 matmul
_KEEP = 1 << 23             # workspaces up to this many elements (64 MiB) are kept per thread
_CACHE = threading.local()


def _workspace(size: int) -> np.ndarray:
    """A float64 scratch vector of ``size`` elements, reused across calls in the same thread.

    Fresh pages cost a page fault each on first touch, which would otherwise be paid on every
    call whenever the allocator hands the memory back to the OS between calls.
    """
    ws = getattr(_CACHE, "ws", None)
    if ws is None or ws.size < size:
        ws = np.empty(size)
        if size <= _KEEP:
            _CACHE.ws = ws
    return ws[:size]


def max_chunk(p: int, limbs: bool) -> int:
    """Longest exact inner-dimension chunk for ``p`` on the one- or two-limb path (0: none).

    One limb: the reduced value is at most ``kc (p-1)^2 + (p-1)`` (chunk sum + running residue).
    Two limbs: at most ``(p-1) 2^16 + kc t + (p-1)``, where ``t = (a0max + a1max)^2`` bounds
    every limb-product term (and also ``P1``'s, so ``P1 < 2^51`` too).
    """
    if not limbs:
        return (_LIMIT - p) // (p - 1) ** 2
    lo = min(p - 1, (1 << _SHIFT) - 1)
    hi = (p - 1) >> _SHIFT
    return (_LIMIT - 1 - (p - 1) * ((1 << _SHIFT) + 1)) // (lo + hi) ** 2


def _mod(y: np.ndarray, t: np.ndarray, p: int, offset: float) -> None:
    """``t <- (x mod p) + offset``, where ``y = x + offset`` and ``x`` is an integer in [0, 2^51).

    ``q = floor(fl((x + 1/2) fl(1/p)))`` equals ``floor(x / p)``: ``(x + 1/2) / p`` lies at least
    ``1/(2p)`` away from every integer, and the two roundings (of ``1/p`` and of the product)
    move it by less than ``(x + 1/2) / p 2^-52 (1 + 2^-54) < 1/(2p)`` for ``x <= 2^51 - 1``.
    ``x + 1/2``, ``q p <= x`` and ``y - q p`` are exact.  ``offset`` is 0 or 2^52.
    """
    np.subtract(y, offset - 0.5, out=t)      # x + 1/2
    t *= 1.0 / p
    np.floor(t, out=t)                       # q
    t *= -p
    t += y                                   # x - q p + offset


def _kernel_one(x: np.ndarray, acc: np.ndarray | None, t: np.ndarray, p: int) -> None:
    """One limb: residue of the chunk sum plus the running residue (both carry 2^52)."""
    if acc is not None:
        x += acc
    _mod(x, t, p, _MAGIC)


def _kernel_limbs(p0: np.ndarray, p1: np.ndarray, p2: np.ndarray, acc: np.ndarray | None,
                  t: np.ndarray, p: int) -> None:
    """Two limbs: ``(P2 2^16 + (P1 - P0 - P2)) 2^16 + P0 + acc``, reducing after each step.

    In the first chunk ``P0`` and ``P1`` both carry 2^52, which cancels in ``P1 - P0``; in later
    chunks they are raw and ``acc`` brings the 2^52.
    """
    p1 -= p0
    p1 -= p2                                 # A0 B1 + A1 B0
    _mod(p2, t, p, 0.0)
    t *= float(1 << _SHIFT)
    p1 += t
    _mod(p1, t, p, 0.0)
    t *= float(1 << _SHIFT)
    p0 += t
    if acc is not None:
        p0 += acc
    _mod(p0, t, p, _MAGIC)


def _reduce(kernel: Callable[..., None], parts: Sequence[np.ndarray], acc: np.ndarray | None,
            out: np.ndarray, tmp: np.ndarray, p: int) -> None:
    """Apply ``kernel`` to row slices of the C-contiguous ``parts`` (``tmp.shape[0]`` rows each).

    ``acc`` (running residue + 2^52) may be None.  ``out`` is float64 (gets ``r + 2^52``) or
    int64 (gets ``r``); it may alias ``acc`` or ``parts[0]``: each slice is read before written.
    """
    step = tmp.shape[0]
    for i in range(0, out.shape[0], step):
        j = i + step
        t = tmp[:out.shape[0] - i] if j > out.shape[0] else tmp
        kernel(*[x[i:j] for x in parts], None if acc is None else acc[i:j], t, p)
        if out.dtype == np.int64:
            np.subtract(t.view(np.int64), _MAGIC_BITS, out=out[i:j])
        else:
            out[i:j] = t


def _split(d: Sequence[np.ndarray]) -> None:
    """In place: ``d = [x, ., .]`` (float64, integer-valued, C-contiguous) becomes the limb
    operands ``[x0, x0 + x1, x1]`` of ``x = x1 2^16 + x0``; every step is exact."""
    d0, d01, d1 = d
    np.multiply(d0, 2.0**-_SHIFT, out=d1)
    np.floor(d1, out=d1)                          # x1
    np.multiply(d1, -float(1 << _SHIFT), out=d01)
    d0 += d01                                     # x0
    np.add(d0, d1, out=d01)                       # x0 + x1


def matmul_mod(a: np.ndarray, b: np.ndarray, p: int, *, chunk: int | None = None,
               limbs: bool | None = None, rows: int | None = None) -> np.ndarray:
    """``(a @ b) mod p`` exactly, for prime ``p <= 2^31 - 1`` and integer operands in ``[0, p)``.

    The operand range is not checked (``PrimeField.asarray`` does).  Returns a C-contiguous int64
    array of shape ``(a.shape[0], b.shape[1])``.  Tuning knobs (the result never depends on them):
    ``chunk`` caps the inner-dimension chunk (default and maximum: :func:`max_chunk`); ``limbs``
    forces the one-limb (False) or two-limb (True) BLAS path; ``rows`` caps the row-block height.
    Any of them also turns off the shortcuts for tiny and small products.
    """
    a = np.asarray(a, dtype=np.int64)
    b = np.asarray(b, dtype=np.int64)
    p = int(p)
    if a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[0]:
        raise ArgumentError(f"matmul_mod: cannot multiply shapes {a.shape} @ {b.shape}")
    if not 2 <= p <= MAX_PRIME:
        raise ArgumentError(f"matmul_mod: p must lie in [2, {MAX_PRIME}], got {p}")
    (m, k), n = a.shape, b.shape[1]
    if m == 0 or n == 0 or k == 0:
        return np.zeros((m, n), dtype=np.int64)
    if (m * k * n <= _TINY and k * (p - 1) ** 2 < 2**63
            and chunk is None and limbs is None and rows is None):
        out: np.ndarray = a @ b
        out %= p
        return out

    if (k * (p - 1) ** 2 <= _F32_EXACT and chunk is None and limbs is None and rows is None):
        # Tiny p: every partial sum stays below 2^24, so float32 sgemm (twice dgemm's rate) is
        # exact; one reduction at the end.
        out = np.matmul(a.astype(np.float32), b.astype(np.float32)).astype(np.int64)
        out %= p
        return out
    if limbs is None:
        kc = max_chunk(p, False)
        limbs = k > 4 * kc and kc < _MIN_CHUNK
    kc = max_chunk(p, limbs)
    if chunk is not None:
        kc = min(kc, int(chunk))
    if kc < 1:
        raise ArgumentError(f"matmul_mod: p = {p} needs the two-limb path (limbs=True)")
    if not limbs and k <= kc and max(m * k, k * n, m * n) <= _BLOCK and rows is None:
        # Small, cache-resident: one dgemm, one reduction, one cast.
        ws = _workspace(m * k + k * n + 2 * m * n)
        af, bf, x, t = (ws[i:j].reshape(r, c) for i, j, r, c in (
            (0, m * k, m, k), (m * k, m * k + k * n, k, n),
            (m * k + k * n, m * k + k * n + m * n, m, n), (m * k + k * n + m * n, None, m, n)))
        af[...] = a
        bf[...] = b
        np.matmul(af, bf, out=x)
        _mod(x, t, p, 0.0)
        return t.astype(np.int64)
    return _blocked(a, b, p, kc, limbs, rows)


def _blocked(a: np.ndarray, b: np.ndarray, p: int, kc: int, limbs: bool,
             rows: int | None) -> np.ndarray:
    """The general path of :func:`matmul_mod`: row blocks of ``a``, inner chunks of ``kc``,
    one or two limbs, all in one reused workspace."""
    (m, k), n = a.shape, b.shape[1]
    # Inner index 0 (prepended) carries 2^52 into P0, P1 and the one-limb product, 0 into P2.
    firsts = (_MAGIC, _MAGIC, 0.0) if limbs else (_MAGIC,)
    kernel = _kernel_limbs if limbs else _kernel_one
    nl = len(firsts)
    # Row blocks: converted rows of ``a`` bounded by _ROW_ELEMS, unless ``b`` is as large anyway
    # (then few, large dgemm calls); heights balanced.
    rb = min(m, rows or max(_ROW_ELEMS // (k + 1), n // nl, 1))
    rb = -(-m // -(-m // rb))
    step = min(rb, max(1, _BLOCK // n))

    # One workspace: float B limbs, A row-block limbs, P1/P2 (+ P0 of later chunks), scratch.
    shapes = ([(k + 1, n)] * nl + [(rb, k + 1)] * nl + [(rb, n)] * (nl - 1 + (kc < k))
              + [(step, n)])
    ws = _workspace(sum(r * c for r, c in shapes))
    bufs, i = [], 0
    for r, c in shapes:
        bufs.append(ws[i:i + r * c].reshape(r, c))
        i += r * c
    bs, abufs, pbufs, tmp = bufs[:nl], bufs[nl:2 * nl], bufs[2 * nl:-1], bufs[-1]
    bs[0][1:] = b
    if limbs:
        _split([x[1:] for x in bs])
    for x, c in zip(bs, firsts):
        x[0] = c
    extra = pbufs.pop() if kc < k else None

    out = np.empty((m, n), dtype=np.int64)
    of = out.view(np.float64)
    for r0 in range(0, m, rb):
        r1 = min(r0 + rb, m)
        h = r1 - r0
        abufs[0][:h, 0] = 1.0                     # split below gives limbs 1, 1, 0 here
        abufs[0][:h, 1:] = a[r0:r1]
        if limbs:
            _split([x[:h] for x in abufs])
        for k0 in range(0, k, kc):
            # Original inner index i is index i + 1 here; the first chunk also takes index 0.
            sl = slice(0 if k0 == 0 else k0 + 1, k0 + kc + 1)
            # extra is made whenever there is a later chunk (kc < k)
            dests = [of[r0:r1] if k0 == 0 else cast(np.ndarray, extra)[:h]] + [x[:h] for x in pbufs]
            parts = [np.matmul(x[:h, sl], y[sl], out=d) for x, y, d in zip(abufs, bs, dests)]
            _reduce(kernel, parts, None if k0 == 0 else of[r0:r1],
                    out[r0:r1] if k0 + kc >= k else of[r0:r1], tmp, p)
    return out
